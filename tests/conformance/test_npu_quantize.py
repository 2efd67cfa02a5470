# Conformance port of the upstream unit test of npu_quantize.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_quantize.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21 (the file's last change:
#   7634a584ca17b8ce54fc077749472a64a4c3a584). Rewritten for op_sdk on CPU, not copied.
"""npu_quantize against upstream's goldens: torch.quantize_per_channel for div_mode=True,
numpy round(x * scales + zero_points) for div_mode=False (AscendQuantV2); assertRtolEqual
(prec 1e-4: integer outputs must match exactly).

Differs (docs/conformance.md): the skipped NZ int4 case passes float16 scales with a
float32 input, which the contract rejects for div_mode=False, and CPU tensors have no NZ
layout; its int4 packing is checked on the ND layout with float32 scales instead.
"""

import numpy as np
import pytest
import torch

from tests.conformance._golden import (
    assert_rtol_equal,
    npu,
    pack_int4_lsb_first,
    quantize_per_channel_int_repr,
    uniform,
)


def make_data(rng, lo, hi, shape_x, shape_scale, shape_zp, dtype_x, dtype_scale, dtype_zp):
    """Upstream's generate_data_npu_quantize: all three drawn from uniform(lo, hi) and cast
    (integer zero points from uniform(-1, 1) are therefore 0)."""
    return (torch.from_numpy(uniform(rng, lo, hi, shape_x, dtype_x)),
            torch.from_numpy(uniform(rng, lo, hi, shape_scale, dtype_scale)),
            torch.from_numpy(uniform(rng, lo, hi, shape_zp, dtype_zp)))


def ascend_quant_v2_golden(x: np.ndarray, scales: np.ndarray, zero_points: np.ndarray):
    """Upstream's cpu_op_exec_ascend_quant_v2: fp32 x * scales + zero_points, rounded half
    to even, clipped to int8."""
    v = x.astype(np.float32) * scales.astype(np.float32) + zero_points.astype(np.float32)
    return np.clip(np.round(v, 0), -128, 127).astype(np.int8)


PER_CHANNEL = [
    # (upstream test, x shape, channels, x / scale / zp dtypes, axis, quantized dtype)
    ("test_npu_quantize_3_3_0_int32", (3, 3), 3,
     (np.float32, np.float32, np.int32), 0, torch.qint32),
    ("test_npu_quantize_3_3_3_3_1_int8", (3, 3), 3,
     (np.float32, np.float32, np.int8), 1, torch.qint8),
    ("test_npu_quantize_3_3_3_3_3_3_3_3_4_uint8", (3,) * 8, 3,
     (np.float32, np.float32, np.int32), 4, torch.quint8),
    ("test_npu_quantize_30_30_30_30_30_2_uint8", (30, 30, 30, 30), 30,
     (np.float16, np.float32, np.uint8), 2, torch.quint8),
]


@pytest.mark.parametrize("shape, n, dtypes, axis, qdtype",
                         [pytest.param(*c[1:], id=c[0]) for c in PER_CHANNEL])
def test_quantize_per_channel(rng, shape, n, dtypes, axis, qdtype):
    x, scales, zero_points = make_data(rng, -1, 1, shape, (n,), (n,), *dtypes)
    # the golden quantizes the fp32 value of a fp16 input
    gold = quantize_per_channel_int_repr(x.float(), scales, zero_points, axis, qdtype)

    out = npu.npu_quantize(x, scales, zero_points, qdtype, axis)

    assert_rtol_equal(gold, out)


@pytest.mark.parametrize("shape_scale, axis", [
    pytest.param((128,), 1, id="test_npu_quantize_ascend_quant_v2_perchannel"),
    pytest.param((1,), -1, id="test_npu_quantize_ascend_quant_v2_pertensor"),
    pytest.param((16, 1), -2, id="test_npu_quantize_ascend_quant_v2_perhead"),
])
def test_quantize_ascend_quant_v2(rng, shape_scale, axis):
    x, scales, zero_points = make_data(rng, -1, 1, (16, 128), shape_scale, shape_scale,
                                       np.float16, np.float16, np.float16)
    gold = ascend_quant_v2_golden(x.numpy(), scales.numpy(), zero_points.numpy())

    out = npu.npu_quantize(x, scales, zero_points, torch.qint8, axis, div_mode=False)

    assert_rtol_equal(gold, out)


# ---- test_npu_quantize_ascend_quant_v2_nz_pertensor (skipped upstream) ----------------------

def int4_pertensor_golden(x: np.ndarray, scales: np.ndarray) -> torch.Tensor:
    """Upstream's cpu_op_exec_ascend_quant_v2_int4 + int4s_to_int32: round(x * scales)
    clipped to [-8, 7], packed 8 per int32 (element 0 in the low nibble), flat."""
    q = np.clip(np.round(x * scales.astype(np.float32), 0), -8, 7).astype(np.int8)
    return pack_int4_lsb_first(torch.from_numpy(q).reshape(-1))


def test_npu_quantize_ascend_quant_v2_nz_pertensor_upstream_args():
    # upstream: float32 x (in NZ format on the NPU) with float16 scales; the contract wants
    # scales of x's dtype when div_mode=False
    x = torch.rand(1, 256, 128)
    scales = torch.ones(1, dtype=torch.float16)
    with pytest.raises(RuntimeError, match=r"npu_quantize: argument 'scales'"):
        npu.npu_quantize(x, scales, None, torch.quint4x2, -1, False)


def test_npu_quantize_ascend_quant_v2_nz_pertensor_nd_layout(rng):
    # the int4 packing of the same case on the ND layout (CPU tensors have no NZ format),
    # with float32 scales
    e, k, n = 1, 256, 128
    x = rng.random((e, k, n), dtype=np.float32)
    scales = np.ones((1,), dtype=np.float32)
    gold = int4_pertensor_golden(x, scales)

    out = npu.npu_quantize(torch.from_numpy(x), torch.from_numpy(scales), None,
                           torch.quint4x2, -1, False)

    assert out.dtype == torch.int32 and list(out.shape) == [e, k, n // 8]
    assert out.reshape(-1).tolist() == gold.tolist()
