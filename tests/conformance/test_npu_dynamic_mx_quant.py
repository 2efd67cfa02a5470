# Conformance port of the upstream tests of npu_dynamic_mx_quant and the fused MX norms.
# Upstream: hicann/ops-nn, quant/dynamic_mx_quant/tests/assets/golden.py (the golden) and
#   tests/st/arch35/ttk_kernel_dynamic_mx_quant_st.csv (its ST rows), read at commit
#   e5c3fa9327ea95ba26d06227e746923580d10921; Ascend/op-plugin,
#   test/test_custom_ops/test_npu_rms_norm_dynamic_mx_quant.py and
#   test_npu_add_rms_norm_dynamic_mx_quant.py, read at commit
#   517f2e7d0f202f38b76310706cb977ca2388ad21. Rewritten for op_sdk on CPU, not copied.
"""npu_dynamic_mx_quant against ops-nn's golden (tests/ops/test_dynamic_mx_quant.py's
``_golden`` follows its steps: floor(log2(amax)) less log2(max)'s integer part, or the
cuBLAS exponent of amax / max rounded up; the values divided by 2^exp, rounded at their
binade's step, clipped, NaN to 0), bit for bit where upstream's ST compares within 0.001,
on its ST rows' shapes, axes, block sizes, dtypes and destinations (random data as its
generator's, seeded). Differs (docs/conformance.md): a block whose amax is below
2^(emax - 126) under OCP is 0 here (the kernels' reciprocal of code 0); the golden divides
by 2^-127. op-plugin's tests of the fused MX norms: one all-zero case each, bfloat16 (1, 2,
2), float32 gamma / beta zeros, dst_type 23: y and mxscale zeros, rstd 1000 (here within an
ulp: op_sdk's norm rounds 1 / sqrt twice)."""

import pytest
import torch

from tests.conformance._golden import npu
from tests.ops.test_dynamic_mx_quant import _check

# (shape, dtype, axis, block_size, dst_type, scale_alg, round_mode) of the ST table's kinds
ST_ROWS = [
    ((197, 2), torch.bfloat16, 0, 224, 291, 1, "rint"),
    ((6216, 64), torch.bfloat16, 0, 64, 292, 0, "rint"),
    ((2, 2, 78, 4, 222), torch.float16, -5, 32, 296, 0, "rint"),
    ((16, 2048), torch.bfloat16, -1, 32, 296, 0, "round"),
    ((7, 3, 256), torch.float16, -1, 32, 297, 0, "floor"),
    ((33, 96), torch.float32, -1, 32, 292, 1, "rint"),
    ((5, 130), torch.bfloat16, -1, 128, 291, 0, "rint"),
]


@pytest.mark.parametrize("shape,dtype,axis,block,dst,alg,mode", ST_ROWS)
def test_against_ops_nn_golden(shape, dtype, axis, block, dst, alg, mode):
    g = torch.Generator().manual_seed(sum(shape))
    x = (torch.rand(shape, generator=g) * 20 - 10).to(dtype)
    _check(x, axis=axis, block_size=block, dst_type=dst, scale_alg=alg, round_mode=mode)


@pytest.mark.parametrize("op", ["rms", "add"])
def test_op_plugin_zero_case(op):
    x = torch.zeros(1, 2, 2, dtype=torch.bfloat16, requires_grad=True)
    z = torch.zeros(2, dtype=torch.float32)
    with torch.no_grad():
        if op == "rms":
            y, s, r = npu.npu_rms_norm_dynamic_mx_quant(x, z, beta=z, dst_type=23)
        else:
            y, xo, s, r = npu.npu_add_rms_norm_dynamic_mx_quant(x, x, z, beta=z, dst_type=23)
            assert (xo.float() == 0).all() and xo.dtype == torch.bfloat16
    assert y.dtype == torch.float8_e5m2 and (y.view(torch.uint8) == 0).all()
    assert s.dtype == torch.uint8 and s.shape == (1, 2, 1, 2) and (s == 0).all()
    assert r.shape == (1, 2, 1)
    torch.testing.assert_close(r, torch.full((1, 2, 1), 1000.0), rtol=2e-7, atol=0)
