"""npu_quantize's Ascend C kernels (kernels/ascendc/quantize: Quantize, div_mode=True;
kernels/ascendc/ascend_quant_v2: AscendQuantV2, div_mode=False) on the CPU model vs
npu_quantize's reference: the kernels compute x (/ or *) scales (+ zero points) in fp32, then
rint and saturation, the reference's order, so y is bit-exact."""

import ctypes

import pytest
import torch

import op_sdk
from tests.ascendc import _kernels as K
from tests.ascendc._cases import CASES, case_id, check_key

pytestmark = pytest.mark.ascendc

# Quantize's (x, scales, zero points) per build; AscendQuantV2's scale / offset take x's dtype
QUANTIZE_DTYPES = (("half", "float", "int32_t"), ("bfloat16_t", "bfloat16_t", "bfloat16_t"),
                   ("float", "float", "int32_t"))

# the driver builds these tests call (tests/ascendc/_kernels.py builds them together)
VARIANTS = [("quantize", (("DTYPE_X", x), ("DTYPE_SCALES", s), ("DTYPE_ZERO_POINTS", z)))
            for x, s, z in QUANTIZE_DTYPES]


# ---- the kernel's call wrappers (tests/ascendc/driver_quantize.cpp) ----

QUANT_ROUND = {"round": 0, "floor": 1, "ceil": 2, "trunc": 3}


# npu_quantize's dtype -> (QUANT_OUT_*, y's storage dtype)
QUANT_OUT = {torch.qint8: (0, torch.int8), torch.int8: (0, torch.int8), torch.quint8: (1, torch.uint8),
             torch.uint8: (1, torch.uint8), torch.qint32: (2, torch.int32), torch.int32: (2, torch.int32),
             torch.quint4x2: (3, torch.int32)}


def quantize(builder, x, scales, zero_points, div_mode=True, axis=-1, sqrt_mode=False, round_mode="round",
             dtype=torch.qint8, cores=40, ub=K.UB_910B):
    """npu_quantize's kernels: Quantize (div_mode) or AscendQuantV2 (with its sqrt_mode and
    round_mode attributes; an unknown round mode reaches the tiling as an unsupported one);
    returns (y, tiling key). The build is chosen by x's dtype (QUANTIZE_DTYPES). axis is passed
    as the IR attribute: Quantize's axis, or AscendQuantV2's (-1 or -2, as the converter gives).
    dtype: npu_quantize's (quint4x2: int4 packed 8 per int32); None: an unsupported output."""
    row = next(r for r in QUANTIZE_DTYPES if r[0] == K.CTYPE[x.dtype])
    lib = builder.lib("quantize", DTYPE_X=row[0], DTYPE_SCALES=row[1], DTYPE_ZERO_POINTS=row[2])
    x, scales = x.contiguous(), scales.contiguous()
    zp = zero_points.contiguous() if zero_points is not None else None
    cols = x.shape[-1] if x.dim() else 1
    rank = x.dim()
    ax = axis + rank if axis < 0 else axis
    ax_dim = x.shape[ax] if 0 <= ax < rank else 0
    inner = 1
    for d in x.shape[ax + 1:rank - 1] if 0 <= ax < rank else ():
        inner *= d
    out, ydt = QUANT_OUT.get(dtype, (4, torch.int8))
    y = torch.empty((*x.shape[:-1], cols // 8) if out == 3 else x.shape, dtype=ydt)
    key = K.call(lib.opsdk_run, ctypes.c_int(int(div_mode)), K.ptr(x), K.ptr(scales), K.ptr(zp), K.ptr(y),
                 K.nrows(x, cols), ctypes.c_uint32(cols), ctypes.c_uint64(scales.numel()), ctypes.c_int64(rank),
                 ctypes.c_int64(axis), ctypes.c_uint64(ax_dim), ctypes.c_uint64(inner), ctypes.c_int(int(sqrt_mode)),
                 ctypes.c_uint32(QUANT_ROUND.get(round_mode, 4)), ctypes.c_uint32(out), ctypes.c_uint32(cores),
                 ctypes.c_uint32(ub))
    return y, key


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
    y, key = quantize(kernels, x, s, z, div_mode=div, cores=cores, ub=ub)
    check_key(key, case)
    y_ref = _ref(x, s, z, div)
    assert (y_ref == 127).any() or (y_ref == -128).any() or cols < 33, "the case should reach saturation"
    assert torch.equal(y, y_ref)


@pytest.mark.parametrize("div", [True, False], ids=["div", "mul"])
def test_quantize_ties_saturation_and_leading_dims(kernels, div):
    x = (torch.arange(-140, 140, dtype=torch.float32) + 0.5).reshape(2, 5, 28).to(bf16)  # .5 ties and |v| > 127
    s = torch.ones(28, dtype=bf16)
    y, key = quantize(kernels, x, s, None, div_mode=div, cores=3)
    y_ref = _ref(x, s, None, div)
    assert torch.equal(y, y_ref)
    assert y[0, 0, 0] == -128 and y[-1, -1, -1] == 127
    assert y.reshape(-1)[140] == 0 and y.reshape(-1)[141] == 2  # 0.5 -> 0, 1.5 -> 2: half to even


def test_quantize_axis_forms(kernels):
    x = torch.randn(4, 6, 33).to(f16)
    s, z = _params(33, f16, True, True, 7)
    for axis in (-1, 2):
        y, _ = quantize(kernels, x, s, z, div_mode=True, axis=axis, cores=5)
        assert torch.equal(y, _ref(x, s, z, True, axis))
    s1 = torch.tensor([0.03])
    y, _ = quantize(kernels, x, s1, None, div_mode=True, axis=0, cores=5)   # per tensor: any axis
    assert torch.equal(y, _ref(x, s1, None, True, 0))


def _formula(x, s, o, sqrt_mode, round_mode, axis=-1):
    """AscendQuantV2 with its attributes: sat(round((x * s) (* s) + o)) in fp32, scale / offset
    along axis (-1 or -2). npu_quantize passes sqrt_mode=False and round_mode="round" only; the
    test below checks that this formula is npu_quantize's reference there."""
    shape = [1] * x.dim()
    ax = x.dim() - 2 if axis == -2 else x.dim() - 1
    shape[ax] = -1
    v = x.float() * s.float().reshape(shape)
    if sqrt_mode:
        v = v * s.float().reshape(shape)
    if o is not None:
        v = v + o.float().reshape(shape)
    fn = {"round": torch.round, "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc}[round_mode]
    return fn(v).clamp(-128, 127).to(torch.int8)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("mode", ["div-zp", "mul-zp", "mul-fullrank"])
@pytest.mark.parametrize("dt", [f16, bf16, f32], ids=str)
def test_quantize_per_row_bit_exact(kernels, case, mode, dt):
    """Scales along dim -2 (one per row): Quantize with axis rank - 2, AscendQuantV2 with axis
    -2 (npu_quantize's div_mode=False per-head scales, 1-D or of x's rank)."""
    rows, cols, cores, ub, want_key = case
    div = mode.startswith("div")
    torch.manual_seed(rows + cols)
    x = (torch.randn(2, rows, cols) * 4).to(dt)
    s, z = _params(rows, dt, div, True, rows * 7 + cols)
    if mode == "mul-fullrank":
        s, z = s.reshape(1, rows, 1), z.reshape(1, rows, 1)
    axis = 1 if div else -2
    y, key = quantize(kernels, x, s, z, div_mode=div, axis=axis, cores=cores, ub=ub)
    if ub == K.UB_910B or want_key == 2:
        check_key(key, (2 * rows, cols, cores, ub, want_key))
    assert torch.equal(y, _ref(x, s, z, div, axis))


@pytest.mark.parametrize("axis", [0, 1, 2, -3])
@pytest.mark.parametrize("ub", [K.UB_910B, 4 * 1024], ids=["whole", "split"])
def test_quantize_scales_along_any_dim(kernels, axis, ub):
    """Quantize (div_mode=True) with per-channel scales along a leading dim: row r takes the
    scale (r / inner) % size, inner the product of the dims between the axis and the last."""
    torch.manual_seed(axis + 10)
    x = (torch.randn(3, 4, 5, 300) * 3).to(bf16)
    n = x.shape[axis]
    s, z = _params(n, bf16, True, True, 40 + axis)
    for cores in (1, 7, 40):
        y, key = quantize(kernels, x, s, z, div_mode=True, axis=axis, cores=cores, ub=ub)
        assert key == (1 if ub == K.UB_910B else 2)
        assert torch.equal(y, _ref(x, s, z, True, axis))


@pytest.mark.parametrize("case", [c for c in CASES if c[1] >= 33], ids=case_id)
@pytest.mark.parametrize("round_mode", ["round", "floor", "ceil", "trunc"])
@pytest.mark.parametrize("sqrt_mode", [False, True], ids=["plain", "sqrt"])
@pytest.mark.parametrize("per", ["channel", "row", "tensor"])
def test_ascend_quant_v2_sqrt_and_round_modes(kernels, case, round_mode, sqrt_mode, per):
    rows, cols, cores, ub, want_key = case
    torch.manual_seed(rows * 3 + cols)
    dt = bf16 if cols % 2 else f16
    x = (torch.randn(rows, cols) * 12).to(dt)
    x[0, 0], x[-1, -1] = 1000.0, -1000.0  # saturation both ways
    n = {"channel": cols, "row": rows, "tensor": 1}[per]
    s = (torch.rand(n) * 2 + 1.2 if sqrt_mode else torch.rand(n) * 6 + 1.5).to(dt)
    o = torch.randint(-5, 6, (n,)).to(dt)
    axis = -2 if per == "row" else -1
    y, key = quantize(kernels, x, s, o, div_mode=False, axis=axis, sqrt_mode=sqrt_mode, round_mode=round_mode,
                        cores=cores, ub=ub)
    check_key(key, case)
    want = _formula(x, s, o, sqrt_mode, round_mode, axis)
    assert torch.equal(y, want)
    if not sqrt_mode and round_mode == "round":
        assert torch.equal(want, _ref(x, s, o, False, axis))  # the formula is npu_quantize's
    assert (want == 127).any() and (want == -128).any(), "the case should reach saturation"


def test_ascend_quant_v2_round_modes_on_ties_and_signs(kernels):
    x = torch.tensor([[-2.5, -1.5, -0.5, -0.25, 0.25, 0.5, 1.5, 2.5, 126.5, -128.5, 127.75, -129.0]]).to(f32)
    s = torch.ones(12, dtype=f32)
    want = {"round": [-2, -2, 0, 0, 0, 0, 2, 2, 126, -128, 127, -128],
            "floor": [-3, -2, -1, -1, 0, 0, 1, 2, 126, -128, 127, -128],
            "ceil": [-2, -1, 0, 0, 1, 1, 2, 3, 127, -128, 127, -128],
            "trunc": [-2, -1, 0, 0, 0, 0, 1, 2, 126, -128, 127, -128]}
    for mode, w in want.items():
        y, _ = quantize(kernels, x, s, None, div_mode=False, round_mode=mode, cores=1)
        assert y[0].tolist() == w, mode


@pytest.mark.parametrize("what", ["round_mode", "int4-div", "uint8-mul", "axis0-mul", "int4-odd"])
def test_quantize_rejects_unimplemented(kernels, what):
    x = torch.randn(3, 5, 64).to(f16)
    s = torch.ones(64, dtype=f16)
    if what == "round_mode":
        call = lambda: quantize(kernels, x, s, None, div_mode=False, round_mode="hybrid", cores=2)  # noqa: E731
    elif what == "int4-div":  # npu_quantize allows quint4x2 with div_mode=False only
        call = lambda: quantize(kernels, x, s.float(), None, div_mode=True, dtype=torch.quint4x2,  # noqa: E731
                                  cores=2)
    elif what == "uint8-mul":  # AscendQuantV2 lists int8 / int4 (and float8) outputs
        call = lambda: quantize(kernels, x, s, None, div_mode=False, dtype=torch.quint8, cores=2)  # noqa: E731
    elif what == "int4-odd":  # int4: the last dim a multiple of 8
        call = lambda: quantize(kernels, torch.randn(3, 36).to(f16), torch.ones(36, dtype=f16), None,  # noqa: E731
                                  div_mode=False, dtype=torch.quint4x2, cores=2)
    else:  # AscendQuantV2 takes per-channel scales along the last two dims only
        call = lambda: quantize(kernels, x, torch.ones(3, dtype=f16), None, div_mode=False, axis=0,  # noqa: E731
                                  cores=2)
    with pytest.raises(K.KernelError, match="not supported"):
        call()


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("out", ["uint8", "int32", "int4"])
@pytest.mark.parametrize("per", ["channel", "row", "tensor"])
def test_quantize_outputs_bit_exact(kernels, case, out, per):
    """npu_quantize's uint8 and int32 outputs (Quantize, div_mode=True) and quint4x2 (int4 packed
    8 per int32; AscendQuantV2, div_mode=False), saturating both ways."""
    rows, cols, cores, ub, want_key = case
    if out == "int4":
        cols = (cols + 7) // 8 * 8
    div = out != "int4"
    dt = (f16, bf16, f32)[(rows + cols) % 3]
    torch.manual_seed(rows * 31 + cols)
    x = (torch.randn(2, rows, cols) * 4).to(dt)
    x[0, 0, 0], x[-1, -1, -1] = 60000.0, -60000.0
    n = {"channel": cols, "row": rows, "tensor": 1}[per]
    axis = {"channel": -1, "row": 1 if div else -2, "tensor": -1}[per]
    if out == "int4":
        s = (torch.rand(n) + 0.5).to(dt)
        z = torch.randint(-2, 3, (n,)).to(dt)
    else:
        sdt, zdt = DIV_PARAMS[dt]
        s = (torch.rand(n) * 0.04 + 0.02 if out == "uint8" else torch.rand(n) * 1e-6 + 1e-7).to(sdt)
        z = (torch.randint(100, 156, (n,)) if out == "uint8" else torch.randint(-1000, 1000, (n,))).to(zdt)
    dtype = {"uint8": torch.quint8, "int32": torch.qint32, "int4": torch.quint4x2}[out]
    y, key = quantize(kernels, x, s, z, div_mode=div, axis=axis, dtype=dtype, cores=cores, ub=ub)
    if ub == K.UB_910B or want_key == 2:
        check_key(key, (2 * rows, cols, cores, ub, want_key))
    ref = op_sdk.get_op("npu_quantize").reference(x, s, z, dtype, axis, div)
    assert y.dtype == ref.dtype and y.shape == ref.shape
    assert torch.equal(y, ref)
    if out == "uint8":
        assert (ref == 0).any() and (ref == 255).any()
    elif out == "int32":
        assert (ref == 2 ** 31 - 1).any() and (ref == -2 ** 31).any()


@pytest.mark.parametrize("round_mode", ["round", "floor", "ceil", "trunc"])
def test_ascend_quant_v2_int4_round_modes(kernels, round_mode):
    from op_sdk.ops._common import pack_int4

    torch.manual_seed(9)
    x = (torch.randn(5, 7, 136) * 4).to(bf16)
    s = (torch.rand(7) + 0.5).to(bf16)
    y, _ = quantize(kernels, x, s, None, div_mode=False, axis=-2, round_mode=round_mode, sqrt_mode=True,
                      dtype=torch.quint4x2, cores=6, ub=4 * 1024)
    v = x.float() * s.float().reshape(7, 1) * s.float().reshape(7, 1)
    fn = {"round": torch.round, "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc}[round_mode]
    assert torch.equal(y, pack_int4(fn(v).clamp(-8, 7).to(torch.int8)))
