# Conformance port of the upstream unit test of npu_dynamic_quant.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_dynamic_quant.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21 (the file's last change:
#   3500b23624575fa8ca3f3871104d288d5b213dfb). Rewritten for op_sdk on CPU, not copied.
"""npu_dynamic_quant against upstream's torch golden: y within 1 (upstream's atol), scale
to rtol 1e-4. Upstream's golden divides by the scale; the contract multiplies by
DMAX / max|s| (the NPU's reciprocal), which the atol of 1 on y covers.

The Ascend950 per-channel case smooths along dim -2 (smooth_scales of length
input.size(-2)); its y is compared in the contract's reciprocal form (see
dynamic_quant_perchannel_golden).
"""

import pytest
import torch
from torch.testing import assert_close

from tests.conformance._golden import int4_bytes_to_int8, npu

SHAPE = [2, 32, 256]
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def dynamic_quant_golden(x, smooth_scales=None, group_index=None, dst_type=torch.int8):
    """Upstream's supported_op_exec: fp32, optional (grouped) smoothing, per-row
    max|s| / DMAX, y = round(s / scale)."""
    s = x.float()
    if group_index is not None:
        rows = s.reshape(-1, s.shape[-1]).clone()
        start = 0
        for g, end in enumerate(group_index.tolist()):
            if end > start:  # an empty group is skipped
                rows[start:end] = rows[start:end] * smooth_scales[g]
            start = end
        s = rows.reshape(x.shape)
    elif smooth_scales is not None:
        s = s * smooth_scales
    dmax = 127 if dst_type == torch.int8 else 7
    scale = s.abs().amax(-1, keepdim=True) / dmax
    y = (s / scale).round().to(torch.int8 if dst_type == torch.int8 else torch.int32)
    return y, scale.squeeze(-1).float()


def dynamic_quant_perchannel_golden(x, smooth_scales, reciprocal=False):
    """Upstream's dynamic_quant_perchannel_int8: smooth_scales (H', 1) scales the rows of
    each (H', H) matrix; max over dim -2; scale shape = input without dim -2.

    Upstream rounds s / scale. Its y tolerance (atol 0.1, rtol 0.01) does not cover the
    last-bit difference of the contract's s * (127 / max|s|) (the NPU's reciprocal), so
    ``reciprocal=True`` gives y in the contract's form (docs/conformance.md)."""
    s = x.float() * smooth_scales.float()
    amax = s.abs().amax(-2, keepdim=True)
    scale = amax * (1.0 / 127.0)
    q = s * (torch.full_like(amax, 127.0) / amax) if reciprocal else s / scale
    return torch.round(q).to(torch.int8), scale.squeeze(-2)


def make_inputs(rng, dtype_name, group_num):
    """Upstream's generate_input: randn input; with group_num > 1, (E, H) smooth scales and
    E sorted random cumulative end rows whose last is the row count."""
    dtype = DTYPES[dtype_name]
    x = torch.randn(SHAPE, dtype=dtype)
    if group_num == 1:
        return x, None, None
    smooth = torch.randn(group_num, SHAPE[-1], dtype=dtype)
    rows = x.numel() // SHAPE[-1]
    ends = sorted(int(v) for v in rng.integers(0, rows, group_num))
    ends[-1] = rows
    return x, smooth, torch.tensor(ends, dtype=torch.int32)


CASES = [
    # (upstream test, input dtype, group_num, dst_type)
    ("test_npu_dynamic_quant_fp16_input", "float16", 1, torch.int8),
    ("test_npu_dynamic_quant_bf16_input", "bfloat16", 1, torch.int8),
    ("test_npu_dynamic_quant_fp16_input_smooth_group", "float16", 64, torch.int8),
    ("test_npu_dynamic_quant_bfp16_input_smooth_group", "bfloat16", 64, torch.int8),
    ("test_npu_dynamic_quant_int4_fp16_input", "float16", 1, torch.quint4x2),
    ("test_npu_dynamic_quant_int4_bf16_input", "bfloat16", 1, torch.quint4x2),
    ("test_npu_dynamic_quant_int4_fp16_input_smooth_group", "float16", 64, torch.quint4x2),
    ("test_npu_dynamic_quant_int4_bf16_input_smooth_group", "bfloat16", 64, torch.quint4x2),
]


@pytest.mark.parametrize("dtype_name, group_num, dst_type",
                         [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_dynamic_quant(rng, dtype_name, group_num, dst_type):
    x, smooth, group_index = make_inputs(rng, dtype_name, group_num)
    y_gold, scale_gold = dynamic_quant_golden(x, smooth, group_index, dst_type)

    # upstream passes dst_type only for the int4 and grouped cases; None means int8
    kwargs = {} if (dst_type == torch.int8 and group_num == 1) else {"dst_type": dst_type}
    y, scale = npu.npu_dynamic_quant(x.clone(), smooth_scales=smooth,
                                     group_index=group_index, **kwargs)

    if dst_type == torch.quint4x2:
        assert y.dtype == torch.int32 and list(y.shape) == SHAPE[:-1] + [SHAPE[-1] // 8]
        y = int4_bytes_to_int8(y).view(SHAPE).to(torch.int32)
    assert_close(y_gold, y, atol=1.0, rtol=0.0)
    assert_close(scale_gold, scale, atol=0.0, rtol=0.0001)


def test_npu_dynamic_quant_int8_bf16_input_smooth_perchannel():
    x = torch.randn(SHAPE, dtype=torch.bfloat16)
    smooth = torch.randn((SHAPE[-2], 1), dtype=torch.bfloat16)
    y_gold, scale_gold = dynamic_quant_perchannel_golden(x, smooth, reciprocal=True)

    y, scale = npu.npu_dynamic_quant(x.clone(), smooth_scales=smooth.squeeze().clone(),
                                     group_index=None, dst_type=torch.int8,
                                     quant_mode="perchannel")

    assert_close(y_gold, y.view(SHAPE), atol=0.1, rtol=0.01)
    assert_close(scale_gold, scale, atol=0.01, rtol=0.001)
