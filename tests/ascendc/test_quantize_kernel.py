"""npu_quantize's Ascend C kernels (kernels/ascendc/quantize: Quantize, div_mode=True;
kernels/ascendc/ascend_quant_v2: AscendQuantV2, div_mode=False) on the CPU model vs
npu_quantize's reference: the kernels compute x (/ or *) scales (+ zero points) in fp32, then
rint and saturation, the reference's order, so y is bit-exact."""

import pytest
import torch

import op_sdk
from tests.ascendc import _kernels as K
from tests.ascendc._cases import CASES, case_id, check_key

pytestmark = pytest.mark.ascendc

f16, bf16, f32, i32 = torch.float16, torch.bfloat16, torch.float32, torch.int32
# x dtype -> (scales, zero points) of Quantize (div_mode=True); AscendQuantV2 takes x's dtype
DIV_PARAMS = {f16: (f32, i32), bf16: (bf16, bf16), f32: (f32, i32)}


def _params(n, x_dtype, div_mode, with_zero, seed):
    torch.manual_seed(seed)
    sdt, zdt = DIV_PARAMS[x_dtype] if div_mode else (x_dtype, x_dtype)
    s = torch.rand(n) * 0.04 + 0.02 if div_mode else torch.rand(n) * 40 + 5
    z = torch.randint(-6, 7, (n,)).to(zdt) if with_zero else None
    return s.to(sdt), z


def _ref(x, s, z, div_mode, axis=-1):
    return op_sdk.get_op("npu_quantize").reference(x, s, z, torch.qint8, axis, div_mode)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("mode", ["div-channel-zp", "mul-channel-zp", "div-tensor", "mul-tensor-zp"])
@pytest.mark.parametrize("dt", [f16, bf16, f32], ids=str)
def test_quantize_bit_exact(kernels, case, mode, dt):
    rows, cols, cores, ub, want_key = case
    div = mode.startswith("div")
    torch.manual_seed(rows * 1000 + cols)
    x = (torch.randn(rows, cols) * 4).to(dt)
    s, z = _params(cols if "channel" in mode else 1, dt, div, mode.endswith("zp"), cols)
    y, key = K.quantize(kernels, x, s, z, div_mode=div, cores=cores, ub=ub)
    check_key(key, case)
    y_ref = _ref(x, s, z, div)
    assert (y_ref == 127).any() or (y_ref == -128).any() or cols < 33, "the case should reach saturation"
    assert torch.equal(y, y_ref)


@pytest.mark.parametrize("div", [True, False], ids=["div", "mul"])
def test_quantize_ties_saturation_and_leading_dims(kernels, div):
    x = (torch.arange(-140, 140, dtype=torch.float32) + 0.5).reshape(2, 5, 28).to(bf16)  # .5 ties and |v| > 127
    s = torch.ones(28, dtype=bf16)
    y, key = K.quantize(kernels, x, s, None, div_mode=div, cores=3)
    y_ref = _ref(x, s, None, div)
    assert torch.equal(y, y_ref)
    assert y[0, 0, 0] == -128 and y[-1, -1, -1] == 127
    assert y.reshape(-1)[140] == 0 and y.reshape(-1)[141] == 2  # 0.5 -> 0, 1.5 -> 2: half to even


def test_quantize_axis_forms(kernels):
    x = torch.randn(4, 6, 33).to(f16)
    s, z = _params(33, f16, True, True, 7)
    for axis in (-1, 2):
        y, _ = K.quantize(kernels, x, s, z, div_mode=True, axis=axis, cores=5)
        assert torch.equal(y, _ref(x, s, z, True, axis))
    s1 = torch.tensor([0.03])
    y, _ = K.quantize(kernels, x, s1, None, div_mode=True, axis=0, cores=5)   # per tensor: any axis
    assert torch.equal(y, _ref(x, s1, None, True, 0))
    s6, _ = _params(6, f16, True, False, 8)
    with pytest.raises(K.KernelError, match="not supported"):                   # per channel along dim 1
        K.quantize(kernels, x, s6, None, div_mode=True, axis=1, cores=5)


@pytest.mark.parametrize("flags", [1, 2, 4], ids=["sqrt_mode", "round_mode", "non-int8"])
def test_quantize_rejects_unimplemented(kernels, flags):
    x = torch.randn(3, 64).to(f16)
    s = torch.ones(64, dtype=f16)
    with pytest.raises(K.KernelError, match="not supported"):
        K.quantize(kernels, x, s, None, div_mode=flags == 4, flags=flags, cores=2)
