"""DynamicQuant Ascend C kernel (kernels/ascendc/dynamic_quant) on the CPU model vs
npu_dynamic_quant's reference: the kernel computes in the reference's order, so y and scale
are bit-exact."""

import pytest
import torch

import op_sdk
from tests.ascendc import _kernels as K
from tests.ascendc._cases import CASES, case_id, check_key

pytestmark = pytest.mark.ascendc

f16, bf16 = torch.float16, torch.bfloat16


def _ref(x, smooth):
    return op_sdk.get_op("npu_dynamic_quant").reference(x, smooth_scales=smooth)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("smooth", [False, True], ids=["plain", "smooth"])
@pytest.mark.parametrize("dt", [f16, bf16], ids=str)
def test_dynamic_quant_bit_exact(kernels, case, smooth, dt):
    rows, cols, cores, ub, want_key = case
    torch.manual_seed(rows * 1000 + cols)
    x = (torch.randn(rows, cols) * 4).to(dt)
    s = (torch.rand(cols) + 0.5).to(dt) if smooth else None
    (y, scale), key = K.dynamic_quant(kernels, x, s, cores=cores, ub=ub)
    check_key(key, case)
    y_ref, scale_ref = _ref(x, s)
    assert torch.equal(y, y_ref)
    assert torch.equal(scale.view(torch.int32), scale_ref.view(torch.int32))


def test_dynamic_quant_zero_rows_ties_and_saturation(kernels):
    x = torch.randn(6, 40).to(f16)
    x[1] = 0                          # all-zero row: scale 0, y 0
    x[3] = torch.arange(40) - 20.0    # amax 20: values * 127/20 land near .5 boundaries
    x[5, :] = 1e-4
    x[5, 7] = -65504.0                # a huge |x|: the rest rounds to 0
    (y, scale), _ = K.dynamic_quant(kernels, x, None, cores=3)
    y_ref, scale_ref = _ref(x, None)
    assert torch.equal(y, y_ref)
    assert torch.equal(scale, scale_ref)
    assert scale[1] == 0 and (y[1] == 0).all()
    assert y[5, 7] == -127


def test_dynamic_quant_leading_dims(kernels):
    x = torch.randn(2, 3, 5, 33).to(bf16)
    (y, scale), _ = K.dynamic_quant(kernels, x, None, cores=8)
    y_ref, scale_ref = _ref(x, None)
    assert y.shape == y_ref.shape and scale.shape == scale_ref.shape
    assert torch.equal(y, y_ref) and torch.equal(scale, scale_ref)
