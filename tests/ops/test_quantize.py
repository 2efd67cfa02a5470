"""npu_quantize: the native CPU kernel against the reference (div and mul modes, every
output dtype, the axis rules, int4, saturation and rounding, strided, threaded and empty
inputs); values on hand-built cases; the int4 packing; per-head (multi-dimensional) scales
(torch_npu's documented contract beyond A2 / A3)."""

import pytest
import torch

from op_sdk.ops._common import pack_int4, unpack_int4
from op_sdk.ops.quantize import quantize_reference
from tests.ops._helpers import (
    T,
    assert_int_close,
    bad,
    bf16,
    fp16,
    fp32,
    i32,
    npu,
    rand,
    strided,
    zeros,
)

SCHEMAS = [
    "npu_quantize(Tensor input, Tensor scales, Tensor? zero_points, int dtype, int axis=1, bool div_mode=True) -> Tensor",  # noqa: E501
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_quantize": ("Quantize", "AscendQuantV2")}
# sample calls the converter refuses, by words of the error: forms it does not write
GE_REFUSED = {"npu::npu_quantize": ("torch.quint4x2 (int4 packed in int32)",)}



def samples():
    h = 24
    return [
        ("npu_quantize", (rand(5, h), torch.rand(h) + 0.1, torch.randint(-3, 3, (h,), dtype=torch.int32),
                          torch.qint8, -1, True), {}),
        ("npu_quantize", (rand(4, 6, h, dtype=bf16), torch.rand(6).to(bf16) + 0.1, None, torch.quint8,
                          1, True), {}),
        ("npu_quantize", (rand(5, 16, dtype=fp16), rand(16, dtype=fp16), rand(16, dtype=fp16),
                          torch.quint4x2, 1, False), {}),
        ("npu_quantize", (rand(2, 3, 4, 16), torch.rand(1, 1, 4, 1) + 0.1, torch.zeros(1, 1, 4, 1),
                          torch.qint8, -2, False), {}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real): 2-D and 3-D inputs, every input dtype,
    per-tensor and per-channel scales, offsets, every output dtype, axis -2."""
    def pos(*shape, dtype=fp32):
        return (torch.rand(*shape) + 0.05).to(dtype)

    h = 24
    cases = []
    for lead in [(5,), (2, 3)]:
        for dt in (fp16, bf16, fp32):
            x = rand(*lead, h, dtype=dt)
            cases.append(("npu_quantize", (x, pos(h), None, torch.qint8, -1, True), {}))
            cases.append(("npu_quantize", (x, pos(1), None, torch.quint8, -1, True), {}))
            cases.append(("npu_quantize", (x, pos(h), torch.randint(-3, 3, (h,), dtype=i32), torch.qint32,
                                           -1, True), {}))
            cases.append(("npu_quantize", (x, pos(h, dtype=dt), rand(h, dtype=dt), torch.qint8, 1, False), {}))
            cases.append(("npu_quantize", (x, pos(h, dtype=dt), None, torch.quint4x2, -1, False), {}))
        ones = [1] * len(lead)
        cases.append(("npu_quantize", (rand(*lead, 4, h), pos(*ones, 4, 1), rand(*ones, 4, 1), torch.qint8,
                                       -2, False), {}))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("q/dtype", "npu_quantize", (T(4, 8), T(8), None, torch.float16, -1), {}, "dtype", RuntimeError),
    # float8 / HiFloat8 targets: no consistent documented behaviour (docs/operators.md,
    # "Answered differently"); torch's codes 23 / 24, torch_npu's 290 / 291 / 292, both modes
    ("q/dtype-float8-e4m3fn", "npu_quantize", (T(4, 8), T(8), None, torch.float8_e4m3fn, -1, True),
     {}, "dtype", RuntimeError),
    ("q/dtype-float8-e5m2-mul-mode", "npu_quantize",
     (T(4, 8), T(8), None, torch.float8_e5m2, -1, False), {}, "dtype", RuntimeError),
    ("q/dtype-hifloat8", "npu_quantize", (T(4, 8), T(8), None, 290, -1, True), {}, "dtype",
     RuntimeError),
    ("q/dtype-npu-float8-e4m3fn-mul-mode", "npu_quantize", (T(4, 8), T(8), None, 292, -1, False),
     {}, "dtype", RuntimeError),
    ("q/scales-size", "npu_quantize", (T(4, 8), T(5), None, 1, -1), {}, "scales", RuntimeError),
    ("q/scales-along-axis", "npu_quantize", (T(4, 8), T(8), None, 1, 0), {}, "scales", RuntimeError),
    ("q/axis-range", "npu_quantize", (T(4, 8), T(8), None, 1, 2), {}, "axis", RuntimeError),
    ("q/zp-size", "npu_quantize", (T(4, 8), T(8), T(3, dtype=i32), 1, -1), {}, "zero_points", RuntimeError),
    ("q/int4-needs-mul-mode", "npu_quantize", (T(4, 8), T(8), None, torch.quint4x2, -1, True), {},
     "dtype", RuntimeError),
    ("q/int4-last-dim", "npu_quantize", (T(4, 12), T(12), None, torch.quint4x2, -1, False), {},
     "input", RuntimeError),
    ("q/mul-mode-scales-dtype", "npu_quantize", (T(4, 8, dtype=fp16), T(8), None, 1, -1, False), {},
     "scales", RuntimeError),
    ("q/mul-mode-zp-dtype", "npu_quantize", (T(4, 8), T(8), T(8, dtype=i32), 1, -1, False), {},
     "zero_points", RuntimeError),
]

BAD_CALLS = [
    bad("npu_quantize", "input",
        zeros(4, 8, dtype=torch.int32), torch.ones(8), None, torch.int8, -1, True),
    bad("npu_quantize", "dtype", zeros(4, 8), torch.ones(8), None, torch.float16, -1, True),
    bad("npu_quantize", "axis", zeros(4, 8), torch.ones(8), None, torch.int8, 2, True),
    bad("npu_quantize", "axis", zeros(4, 8), torch.ones(8), None, torch.int8, -3, False),
    bad("npu_quantize", "dtype", zeros(4, 8), torch.ones(8), None, torch.quint4x2, -1, True),
    bad("npu_quantize", "scales", zeros(4, 8), torch.ones(8), None, torch.int8, -1, False),
    bad("npu_quantize", "zero_points", zeros(4, 8), zeros(8), torch.ones(8), torch.int8, -1, False),
    bad("npu_quantize", "input", zeros(4, 12), zeros(12), None, torch.quint4x2, -1, False),
    bad("npu_quantize", "scales", zeros(4, 8), torch.ones(5), None, torch.int8, -1, True),
    bad("npu_quantize", "scales",
        zeros(4, 8), torch.ones(8, dtype=torch.int32), None, torch.int8, -1, True),
    bad("npu_quantize", "zero_points",
        zeros(4, 8), torch.ones(8), torch.ones(8, dtype=torch.bool), torch.int8, -1, True),
    bad("npu_quantize", "zero_points",
        zeros(4, 8), torch.ones(8), torch.ones(3), torch.int8, -1, True),
]


# ---- the native kernel against the reference ------------------------------------------

QUANTIZE_OUT = [(torch.qint8, torch.int8), (torch.int8, torch.int8), (torch.quint8, torch.uint8),
                (torch.uint8, torch.uint8), (torch.qint32, torch.int32), (torch.int32, torch.int32)]


@pytest.mark.parametrize("dtype", [fp16, bf16, fp32])
@pytest.mark.parametrize("code,out_dtype", QUANTIZE_OUT)
@pytest.mark.parametrize("axis,nscale", [(-1, "n"), (1, "n"), (0, "n"), (-1, 1)])
def test_quantize_div_mode(dtype, code, out_dtype, axis, nscale):
    torch.manual_seed(0)
    x = rand(6, 5, 24, dtype=dtype, scale=100.0)
    n = 1 if nscale == 1 else x.shape[axis]
    s = (torch.rand(n) + 0.05)
    zp = torch.randint(-5, 5, (n,), dtype=torch.int32)
    out = npu.npu_quantize(x, s, zp, code, axis, True)
    assert out.dtype == out_dtype
    assert_int_close(out, quantize_reference(x, s, zp, code, axis, True))
    out = npu.npu_quantize(x, s.to(bf16), None, code, axis, True)
    assert_int_close(out, quantize_reference(x, s.to(bf16), None, code, axis, True))


@pytest.mark.parametrize("dtype", [fp16, bf16, fp32])
@pytest.mark.parametrize("axis", [1, -1, 5, -2])
@pytest.mark.parametrize("code", [torch.int8, torch.quint4x2, torch.uint8])
def test_quantize_mul_mode_axis_coercion(dtype, axis, code):
    torch.manual_seed(0)
    x = rand(3, 4, 16, dtype=dtype, scale=5.0)
    ax = axis if axis == -2 else -1  # axis >= -1 means the last axis
    n = x.shape[ax]
    s = (torch.rand(n) + 0.5).to(dtype)
    zp = torch.randint(-2, 2, (n,)).to(dtype)
    out = npu.npu_quantize(x, s, zp, code, axis, False)
    ref = quantize_reference(x, s, zp, code, axis, False)
    assert_int_close(out, ref, int4=code == torch.quint4x2)
    if code == torch.quint4x2:
        assert out.shape == (3, 4, 2) and out.dtype == torch.int32


def test_quantize_saturates_and_rounds_half_to_even():
    x = torch.tensor([[0.5, 1.5, 2.5, -0.5, -2.5, 1e6, -1e6, 3e9, -3e9, 127.5, -128.5, 254.5]])
    one = torch.ones(1)
    assert npu.npu_quantize(x, one, None, torch.int8, -1, True).tolist() == \
        [[0, 2, 2, 0, -2, 127, -128, 127, -128, 127, -128, 127]]
    assert npu.npu_quantize(x, one, None, torch.uint8, -1, True).tolist() == \
        [[0, 2, 2, 0, 0, 255, 0, 255, 0, 128, 0, 254]]
    i32_out = npu.npu_quantize(x, one, None, torch.int32, -1, True)
    assert i32_out.tolist() == quantize_reference(x, one, None, torch.int32, -1, True).tolist()
    assert i32_out[0, 7] == 2**31 - 1 and i32_out[0, 8] == -2**31


def test_quantize_one_dim_non_contiguous_and_empty():
    torch.manual_seed(0)
    x = strided(rand(40, 16, dtype=bf16, scale=10.0))
    s = torch.rand(16, dtype=bf16) + 0.5
    assert_int_close(npu.npu_quantize(x, s, None, torch.int8, 1, False),
                     quantize_reference(x, s, None, torch.int8, 1, False))
    # 1-D input with the default axis=1 in mul mode: the last axis
    x1 = rand(16, dtype=bf16)
    assert_int_close(npu.npu_quantize(x1, s, None, torch.int8, 1, False),
                     quantize_reference(x1, s, None, torch.int8, 1, False))
    assert npu.npu_quantize(torch.empty(0, 16), torch.ones(16), None, torch.quint4x2, -1,
                            False).shape == (0, 2)


def test_quantize_large_single_scale_threaded():
    torch.manual_seed(0)
    x = rand(300, 1000, dtype=fp16, scale=50.0)
    s, zp = torch.tensor([0.7], dtype=fp16), torch.tensor([3.0], dtype=fp16)
    assert_int_close(npu.npu_quantize(x, s, zp, torch.quint4x2, -1, False),
                     quantize_reference(x, s, zp, torch.quint4x2, -1, False), int4=True)


# ---- semantics on hand-built cases: rounding, saturation, zero points, int4 ------------------

def test_quantize_rounds_half_to_even_and_saturates():
    x = torch.tensor([[0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0, 126.5]])
    out = npu.npu_quantize(x, torch.ones(1), None, torch.qint8, -1)
    assert out.tolist() == [[0, 2, 2, 0, -2, 127, -128, 126]]
    u = npu.npu_quantize(x, torch.ones(1), None, torch.quint8, -1)
    assert u.dtype == torch.uint8 and u.tolist() == [[0, 2, 2, 0, 0, 255, 0, 126]]


def test_quantize_adds_zero_point_before_rounding():
    x = torch.tensor([[0.5, 0.5]])
    out = npu.npu_quantize(x, torch.ones(2), torch.tensor([1, 2], dtype=torch.int32), 1, -1)
    # rint(0.5 + 1) = 2 (not rint(0.5) + 1 = 1); rint(0.5 + 2) = 2
    assert out.tolist() == [[2, 2]]


def test_quantize_int32_saturates_without_overflow():
    x = torch.tensor([[3e9, -3e9, 7.5]])
    out = npu.npu_quantize(x, torch.ones(1), None, torch.qint32, -1)
    assert out.tolist() == [[2**31 - 1, -2**31, 8]]


def test_quantize_div_mode_axis_broadcast():
    x = torch.randn(3, 4, 5)
    s = torch.tensor([0.5, 1.0, 2.0, 4.0])
    out = npu.npu_quantize(x, s, None, 1, 1, True)
    expect = torch.round(x / s[None, :, None]).clamp(-128, 127).to(torch.int8)
    assert torch.equal(out, expect)


def test_quantize_mul_mode_axis_coercion_formula():
    x = torch.randn(4, 6)
    s6 = torch.rand(6) + 0.5
    # any axis >= -1 (the default 1, 0 and -1) means the last axis when div_mode=False
    for axis in (1, 0, -1):
        out = npu.npu_quantize(x, s6, None, 1, axis, False)
        assert torch.equal(out, torch.round(x * s6).clamp(-128, 127).to(torch.int8))
    s4 = torch.rand(4) + 0.5
    out = npu.npu_quantize(x, s4, None, 1, -2, False)
    assert torch.equal(out, torch.round(x * s4[:, None]).clamp(-128, 127).to(torch.int8))


def test_quantize_int4_packing():
    x = torch.tensor([[1.0, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0, -8.0, 9.0, -9.0, 0, 0, 0, 0, 0, 0.4]])
    out = npu.npu_quantize(x, torch.ones(16), None, torch.quint4x2, -1, False)
    assert out.dtype == torch.int32 and out.shape == (1, 2)
    assert unpack_int4(out).tolist() == [[1, -2, 3, -4, 5, -6, 7, -8, 7, -8, 0, 0, 0, 0, 0, 0]]


def test_int4_pack_layout_lowest_nibble_first():
    q = torch.tensor([[1, 2, 3, 4, 5, 6, 7, -1]], dtype=torch.int8)
    w = pack_int4(q)
    assert w.item() == int.from_bytes(bytes([0x21, 0x43, 0x65, 0xF7]), "little", signed=True)
    assert torch.equal(unpack_int4(w), q)


# ---- per-head scales (the documented contract beyond A2 / A3) ---------------------------------

@pytest.mark.parametrize("dtype", [fp16, bf16, fp32])
@pytest.mark.parametrize("axis,sshape", [(-2, (1, 1, 6, 1)), (-1, (1, 1, 1, 16)), (3, (1, 1, 1, 16)),
                                         (-2, (1, 1, 1, 1))])
@pytest.mark.parametrize("code", [torch.qint8, torch.quint4x2])
def test_quantize_multi_dim_scales_broadcast_per_head(dtype, axis, sshape, code):
    torch.manual_seed(0)
    x = (torch.randn(2, 3, 6, 16) * 4).to(dtype)
    s = (torch.rand(sshape) + 0.5).to(dtype)
    z = torch.randint(-2, 2, sshape).to(dtype)
    out = npu.npu_quantize(x, s, z, code, axis, False)
    ref = quantize_reference(x, s, z, code, axis, False)
    assert torch.equal(out, ref)
    flat = npu.npu_quantize(x, s.reshape(-1), z.reshape(-1), code, axis, False)
    assert torch.equal(out, flat)
    if code == torch.qint8:
        expect = torch.round(x.float() * s.float() + z.float()).clamp(-128, 127).to(torch.int8)
        assert torch.equal(out, expect)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_quantize_scale_shape_and_axis_rules(device):
    x = torch.randn(2, 3, 6, 16, device=device)
    with pytest.raises(RuntimeError, match="npu_quantize: argument 'scales'"):
        npu.npu_quantize(x, torch.ones(1, 3, 6, 1, device=device), None, 1, -2, False)
    with pytest.raises(RuntimeError, match="npu_quantize: argument 'scales'"):
        npu.npu_quantize(x, torch.ones(1, 1, 6, 1, device=device), None, 1, 2, True)
    with pytest.raises(RuntimeError, match="npu_quantize: argument 'axis'"):
        npu.npu_quantize(x, torch.ones(3, device=device), None, 1, -3, False)
    with pytest.raises(RuntimeError, match="npu_quantize: argument 'zero_points'"):
        npu.npu_quantize(x, torch.ones(1, 1, 6, 1, device=device), torch.zeros(6, device=device),
                         1, -2, False)
