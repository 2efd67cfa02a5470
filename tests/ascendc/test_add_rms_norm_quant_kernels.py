"""AddRmsNormDynamicQuant / AddRmsNormQuant Ascend C kernels (kernels/ascendc/
add_rms_norm_dynamic_quant, add_rms_norm_quant) on the CPU model vs the references of
npu_add_rms_norm_dynamic_quant / npu_add_rms_norm_quant.

Everything downstream of rstd is compared twice:
- bit for bit with the reference's formula evaluated with the model's rstd (its ReduceSum
  order, _kernels.model_rstd): the kernels compute y, the branches' v, max|v|, the scales and
  the int8 outputs in the reference's order, so any difference there is a kernel error; the
  formula itself is checked against the reference with the reference's own rstd;
- with the documented bounds against the plain reference (int8 at most one step apart in at
  most INT_FLIP_FRACTION of the elements, scales within SCALE_ULP ulps).
"""

import ctypes

import pytest
import torch

import op_sdk
from op_sdk.ops.add_rms_norm_quant import ARQ_DTYPES
from op_sdk.ops._common import pack_int4, unpack_int4
from op_sdk.ops._formats import FLOAT8_MAX, dynamic_quant_float8, hif8_to_float, quantize_float8, storage_dtype
from tests.ascendc import _kernels as K
from tests.ascendc._cases import CASES, SPLIT, case_id, check_key

pytestmark = pytest.mark.ascendc

# AddRmsNormQuant's dtype rows (x, scales, zero points) the kernel is built for
# (npu_add_rms_norm_quant's table: op_sdk/ops/add_rms_norm_quant.py ARQ_DTYPES)
ARNQ_DTYPES = (("half", "float", "int32_t"), ("half", "half", "half"), ("half", "float", "float"),
               ("bfloat16_t", "float", "int32_t"), ("bfloat16_t", "bfloat16_t", "bfloat16_t"),
               ("bfloat16_t", "float", "float"), ("float", "float", "float"))

# the driver builds these tests call (tests/ascendc/_kernels.py builds them together)
VARIANTS = ([("add_rms_norm_dynamic_quant", (("DTYPE_X1", x),)) for x in ("half", "bfloat16_t")]
            + [("add_rms_norm_quant", (("DTYPE_X1", x), ("DTYPE_SCALES1", s), ("DTYPE_ZERO_POINTS1", z)))
               for x, s, z in ARNQ_DTYPES])


# ---- the kernel's call wrappers (tests/ascendc/driver_add_rms_norm_dynamic_quant.cpp) ----

class AddRmsNormQuantTiling(ctypes.Structure):
    _fields_ = [("numRows", ctypes.c_uint64), ("numCols", ctypes.c_uint32), ("blockDim", ctypes.c_uint32),
                ("rowsPerBlock", ctypes.c_uint64), ("formerBlocks", ctypes.c_uint32),
                ("tilingKey", ctypes.c_uint32), ("rowsPerLoop", ctypes.c_uint32), ("chunkCols", ctypes.c_uint32),
                ("numChunks", ctypes.c_uint32), ("lastChunkCols", ctypes.c_uint32), ("epsilon", ctypes.c_float),
                ("avgFactor", ctypes.c_float)] + [
                (f, ctypes.c_uint32) for f in ("hasBeta", "run1", "run2", "hasScale1", "hasScale2", "hasZero1",
                                               "hasZero2", "divMode", "int4Out", "outType")]


def _mask_arg(output_mask, int4=False, out_type=0):
    if output_mask is None:
        return ctypes.c_int(255 | 256 * int4 | (out_type << 9) if int4 or out_type else -1)
    return ctypes.c_int((1 if output_mask[0] else 0) | (2 if output_mask[1] else 0) | (256 if int4 else 0)
                        | (out_type << 9))


def add_rms_norm_dynamic_quant(builder, x1, x2, gamma, smooth_scale1=None, smooth_scale2=None, beta=None, eps=1e-6,
                               output_mask=None, int4=False, dst_type=None, cores=40, ub=K.UB_910B):
    """Returns ((y1, y2, x, scale1, scale2), tiling); outputs of a branch that does not run are
    (0,) tensors, as the reference returns them. int4: y1 / y2 int4 packed 8 per int32 (the
    reference's quint4x2 layout); dst_type: an 8-bit float output's code (K.ARNQ_OUT)."""
    out_type, f8dt = K.ARNQ_OUT[dst_type]
    lib = builder.lib("add_rms_norm_dynamic_quant", DTYPE_X1=K.CTYPE[x1.dtype])
    x1, x2, gamma = x1.contiguous(), x2.contiguous(), gamma.contiguous()
    sm1, sm2, b = (t.contiguous() if t is not None else None for t in (smooth_scale1, smooth_scale2, beta))
    cols, rows = gamma.numel(), x1.numel() // gamma.numel()
    t = AddRmsNormQuantTiling()
    lib.opsdk_tiling(ctypes.c_uint64(rows), ctypes.c_uint32(cols), ctypes.c_float(eps), K.ptr(sm1), K.ptr(sm2),
                     K.ptr(b), _mask_arg(output_mask, int4, out_type), ctypes.c_uint32(cores), ctypes.c_uint32(ub),
                     ctypes.byref(t))
    y_shape, y_dtype = ((*x1.shape[:-1], cols // 8), torch.int32) if int4 else (x1.shape, torch.int8)
    y1 = torch.empty(y_shape if t.run1 else (0,), dtype=y_dtype)
    y2 = torch.empty(y_shape if t.run2 else (0,), dtype=y_dtype)
    s1 = torch.empty(x1.shape[:-1] if t.run1 else (0,), dtype=torch.float32)
    s2 = torch.empty(x1.shape[:-1] if t.run2 else (0,), dtype=torch.float32)
    x = torch.empty_like(x1)
    outs = [(o if o.numel() else None) for o in (y1, y2, s1, s2)]
    K.call(lib.opsdk_run, K.ptr(x1), K.ptr(x2), K.ptr(gamma), K.ptr(sm1), K.ptr(sm2), K.ptr(b), K.ptr(outs[0]),
           K.ptr(outs[1]), K.ptr(x), K.ptr(outs[2]), K.ptr(outs[3]), ctypes.c_uint64(rows), ctypes.c_uint32(cols),
           ctypes.c_float(eps), _mask_arg(output_mask, int4, out_type), ctypes.c_uint32(cores), ctypes.c_uint32(ub))
    if out_type:
        y1, y2 = y1.view(f8dt), y2.view(f8dt)
    return (y1, y2, x, s1, s2), t


def add_rms_norm_quant(builder, x1, x2, gamma, scales1, zero_points1=None, beta=None, scales2=None,
                       zero_points2=None, eps=1e-6, div_mode=True, axis=-1, dst_type=None, out_type=None, cores=40,
                       ub=K.UB_910B):
    """Returns ((y1, y2, x), tiling). dst_type: npu_add_rms_norm_quant's code (K.ARNQ_OUT; y1 / y2
    in its storage dtype); out_type overrides the kernels' outType (an unknown one: key 0)."""
    zdt = (zero_points1 if zero_points1 is not None else zero_points2)
    xs, ss = K.CTYPE[x1.dtype], K.CTYPE[scales1.dtype]
    zname = K.CTYPE[zdt.dtype] if zdt is not None else next(z for x, s, z in ARNQ_DTYPES if (x, s) == (xs, ss))
    lib = builder.lib("add_rms_norm_quant", DTYPE_X1=xs, DTYPE_SCALES1=ss, DTYPE_ZERO_POINTS1=zname)
    x1, x2, gamma, scales1 = x1.contiguous(), x2.contiguous(), gamma.contiguous(), scales1.contiguous()
    s2, z1, z2, b = (t.contiguous() if t is not None else None for t in (scales2, zero_points1, zero_points2, beta))
    cols, rows = gamma.numel(), x1.numel() // gamma.numel()
    out, ydt = K.ARNQ_OUT[dst_type]
    out = out if out_type is None else out_type
    t = AddRmsNormQuantTiling()
    lib.opsdk_tiling(ctypes.c_uint64(rows), ctypes.c_uint32(cols), ctypes.c_float(eps), K.ptr(s2), K.ptr(z1), K.ptr(z2),
                     K.ptr(b), ctypes.c_int(int(div_mode)), ctypes.c_int64(axis), ctypes.c_uint32(out),
                     ctypes.c_uint32(cores), ctypes.c_uint32(ub), ctypes.byref(t))
    y1 = torch.empty(x1.shape, dtype=torch.uint8)
    y2 = torch.full(x1.shape, 0x5A, dtype=torch.uint8)  # the kernel must write y2, zeros included
    x = torch.empty_like(x1)
    K.call(lib.opsdk_run, K.ptr(x1), K.ptr(x2), K.ptr(gamma), K.ptr(scales1), K.ptr(s2), K.ptr(z1), K.ptr(z2), K.ptr(b),
           K.ptr(y1), K.ptr(y2), K.ptr(x), ctypes.c_uint64(rows), ctypes.c_uint32(cols), ctypes.c_float(eps),
           ctypes.c_int(int(div_mode)), ctypes.c_int64(axis), ctypes.c_uint32(out), ctypes.c_uint32(cores),
           ctypes.c_uint32(ub))
    return (y1.view(ydt), y2.view(ydt), x), t


f16, bf16, f32, i32 = torch.float16, torch.bfloat16, torch.float32, torch.int32
EPS = 1e-6


def _norm_inputs(rows, cols, dt):
    torch.manual_seed(rows * 1000 + cols)
    return (torch.randn(rows, cols) * 2).to(dt), torch.randn(rows, cols).to(dt), torch.randn(cols).to(dt)


def _torch_rstd(x):
    return 1.0 / torch.sqrt(x.square().mean((-1,), keepdim=True) + EPS)


def _y(x, rstd, gamma, beta):
    y = x * rstd * gamma.float()
    return y + beta.float() if beta is not None else y


def _assert_bits(out, ref, what):
    assert out.shape == ref.shape, (what, out.shape, ref.shape)
    if out.element_size() == 1:
        assert out.dtype == ref.dtype, (what, out.dtype, ref.dtype)
        o, r = out.view(torch.uint8), ref.view(torch.uint8)
        assert torch.equal(o, r), f"{what}: not bit-exact ({int((o != r).sum())} of {o.numel()} bytes differ)"
    elif out.dtype.is_floating_point:
        assert torch.equal(out.view(torch.int32 if out.dtype == f32 else torch.int16),
                           ref.view(torch.int32 if ref.dtype == f32 else torch.int16)), f"{what}: not bit-exact"
    else:
        d = (out.to(torch.int32) - ref.to(torch.int32)).abs()
        assert torch.equal(out, ref), f"{what}: not bit-exact ({int((d > 0).sum())} elements differ, max {int(d.max())})"  # noqa: E501


def _rstd_of(x, tiling):
    return K.model_rstd(x, EPS, tiling.chunkCols if tiling.tilingKey == SPLIT else None)


# ---- AddRmsNormDynamicQuant -------------------------------------------------------------------

def _dynamic_branch(y, smooth, int4=False, dst_type=None):
    dmax = 7.0 if int4 else 127.0
    v = y * smooth.float() if smooth is not None else y
    amax = v.abs().amax(-1, keepdim=True)
    if dst_type in FLOAT8_DST:
        q, scale = dynamic_quant_float8(v, amax, dst_type, FLOAT8_MAX[dst_type])
        return q, scale.squeeze(-1)
    inv = torch.where(amax > 0, torch.full_like(amax, dmax) / amax, torch.zeros_like(amax))
    q = torch.round(v * inv).clamp_(-dmax - 1, dmax).to(torch.int8)
    return (pack_int4(q) if int4 else q), (amax / dmax).squeeze(-1)


def _adrq_formula(x1, x2, gamma, rstd_fn, sm1, sm2, beta, run, int4=False, dst_type=None):
    x = x1.float() + x2.float()
    y = _y(x, rstd_fn(x), gamma, beta)
    return [_dynamic_branch(y, sm, int4, dst_type) if on else None for on, sm in zip(run, (sm1, sm2))]


def _check_adrq(kernels, x1, x2, g, sm1, sm2, beta, mask, cores, ub, int4=False, dst_type=None):
    (y1, y2, x, s1, s2), t = add_rms_norm_dynamic_quant(kernels, x1, x2, g, sm1, sm2, beta, EPS, mask, int4=int4,
                                                          dst_type=dst_type, cores=cores, ub=ub)
    ref = op_sdk.get_op("npu_add_rms_norm_dynamic_quant").reference(
        x1, x2, g, smooth_scale1=sm1, smooth_scale2=sm2, beta=beta, epsilon=EPS, output_mask=mask,
        y_dtype=torch.quint4x2 if int4 else dst_type)
    ry1, ry2, rx, rs1, rs2 = ref
    run = (bool(t.run1), bool(t.run2))
    assert run == (ry1.numel() > 0, ry2.numel() > 0), "the kernel's branches are not the reference's"
    _assert_bits(x, rx, "x = x1 + x2")
    # the formula is the reference's ...
    for got, want in zip(_adrq_formula(x1, x2, g, _torch_rstd, sm1, sm2, beta, run, int4, dst_type),
                         ((ry1, rs1), (ry2, rs2))):
        if got is not None:
            _assert_bits(got[0], want[0], "formula y"), _assert_bits(got[1], want[1], "formula scale")
    # ... and with the model's rstd it gives the kernel's outputs bit for bit
    rows = x1.numel() // g.numel()
    model = _adrq_formula(x1.reshape(rows, -1), x2.reshape(rows, -1), g, lambda v: _rstd_of(v, t), sm1, sm2, beta,
                          run, int4, dst_type)
    for i, (m, y, s, ry, rs) in enumerate(zip(model, (y1, y2), (s1, s2), (ry1, ry2), (rs1, rs2)), 1):
        if m is None:
            assert y.numel() == 0 and s.numel() == 0 and ry.numel() == 0 and rs.numel() == 0
            continue
        _assert_bits(y.reshape(rows, -1), m[0], f"y{i} (model rstd)")
        _assert_bits(s.reshape(-1), m[1], f"scale{i} (model rstd)")
        if dst_type in FLOAT8_DST:
            assert_float8_close(y, ry, dst_type, f"y{i}")
        else:
            K.assert_int_close(unpack_int4(y) if int4 else y, unpack_int4(ry) if int4 else ry, what=f"y{i}")
        K.assert_ulp(s, rs, K.SCALE_ULP, what=f"scale{i}")
    return t


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("config", ["plain", "smooth2-beta"])
@pytest.mark.parametrize("dt", [f16, bf16], ids=str)
def test_add_rms_norm_dynamic_quant(kernels, case, config, dt):
    rows, cols, cores, ub, want_key = case
    x1, x2, g = _norm_inputs(rows, cols, dt)
    sm1 = sm2 = beta = None
    if config != "plain":
        sm1, sm2 = (torch.rand(cols) + 0.5).to(dt), (torch.rand(cols) * 2 + 0.1).to(dt)
        beta = (torch.randn(cols) * 0.3).to(dt)
    t = _check_adrq(kernels, x1, x2, g, sm1, sm2, beta, None, cores, ub)
    check_key(t.tilingKey, case)
    assert (t.run1, t.run2) == ((1, 1) if config != "plain" else (1, 0))


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("config", ["plain", "smooth2-beta", "mask01-smooth2"])
def test_add_rms_norm_dynamic_quant_int4(kernels, case, config):
    """int4 outputs (quint4x2, DMAX 7, 8 per int32), the last dim rounded up to a multiple of 8."""
    rows, cols, cores, ub, want_key = case
    cols = (cols + 7) // 8 * 8
    dt = bf16 if cols % 16 else f16
    x1, x2, g = _norm_inputs(rows, cols, dt)
    sm1 = sm2 = beta = mask = None
    if config == "smooth2-beta":
        sm1, sm2 = (torch.rand(cols) + 0.5).to(dt), (torch.rand(cols) * 2 + 0.1).to(dt)
        beta = (torch.randn(cols) * 0.3).to(dt)
    elif config == "mask01-smooth2":
        sm2, mask = (torch.rand(cols) + 0.5).to(dt), (False, True)
    t = _check_adrq(kernels, x1, x2, g, sm1, sm2, beta, mask, cores, ub, int4=True)
    check_key(t.tilingKey, (rows, cols, cores, ub, want_key))
    assert t.int4Out == 1


def test_add_rms_norm_dynamic_quant_int4_needs_a_multiple_of_8(kernels):
    x1, x2, g = _norm_inputs(3, 36, f16)
    with pytest.raises(K.KernelError, match="no tiling fits"):
        add_rms_norm_dynamic_quant(kernels, x1, x2, g, int4=True, cores=2)


@pytest.mark.parametrize("ub", [K.UB_910B, 4 * 1024], ids=["whole", "split"])
@pytest.mark.parametrize("mask, smooth, beta", [
    ((False, True), (False, True), False),
    ((True, True), (False, False), True),
    ((True, False), (True, False), True),
    ((True, True), (True, False), False),
    (None, (True, False), False),
], ids=["mask01-s2", "mask11-beta", "mask10-s1-beta", "mask11-s1", "nomask-s1"])
def test_add_rms_norm_dynamic_quant_output_mask(kernels, mask, smooth, beta, ub):
    rows, cols = 9, 300
    x1, x2, g = _norm_inputs(rows, cols, bf16)
    sm1 = (torch.rand(cols) + 0.5).to(bf16) if smooth[0] else None
    sm2 = (torch.rand(cols) + 0.5).to(bf16) if smooth[1] else None
    b = (torch.randn(cols) * 0.3).to(bf16) if beta else None
    t = _check_adrq(kernels, x1, x2, g, sm1, sm2, b, mask, 3, ub)
    assert t.tilingKey == (1 if ub == K.UB_910B else SPLIT)


@pytest.mark.parametrize("mask, smooth", [((False, False), (False, False)), (None, (False, True)),
                                          ((False, True), (True, True))], ids=["mask00", "s2-only", "s1-mask01"])
def test_add_rms_norm_dynamic_quant_rejects(kernels, mask, smooth):
    x1, x2, g = _norm_inputs(4, 33, f16)
    sm = [torch.ones(33, dtype=f16) if s else None for s in smooth]
    with pytest.raises(Exception):
        op_sdk.get_op("npu_add_rms_norm_dynamic_quant").reference(
            x1, x2, g, smooth_scale1=sm[0], smooth_scale2=sm[1], output_mask=mask)
    with pytest.raises(K.KernelError, match="output_mask"):
        add_rms_norm_dynamic_quant(kernels, x1, x2, g, sm[0], sm[1], None, EPS, mask, cores=2)


def test_add_rms_norm_dynamic_quant_zero_rows_and_leading_dims(kernels):
    x1 = torch.randn(2, 3, 40).to(f16)
    x2 = -x1.clone()
    x2[0, 1] = torch.randn(40).to(f16)   # one row non-zero, the others sum to exactly 0
    g = torch.randn(40).to(f16)
    (y1, y2, x, s1, s2), t = add_rms_norm_dynamic_quant(kernels, x1, x2, g, cores=4)
    ry1, ry2, rx, rs1, rs2 = op_sdk.get_op("npu_add_rms_norm_dynamic_quant").reference(x1, x2, g)
    assert y1.shape == ry1.shape == (2, 3, 40) and s1.shape == rs1.shape == (2, 3)
    assert s1[0, 0] == 0 and (y1[0, 0] == 0).all()
    assert torch.equal(s1 == 0, rs1 == 0)
    K.assert_int_close(y1, ry1)


# ---- AddRmsNormQuant --------------------------------------------------------------------------

FLOAT8_DST = (23, 24, 290)  # float8_e5m2, float8_e4m3fn, hifloat8 (Ascend 950's dst_types)


def _static_branch(y, scales, zero_points, div_mode, dst_type=None):
    v = y / scales.float() if div_mode else y * scales.float()
    if zero_points is not None:
        v = v + zero_points.float()
    if dst_type in FLOAT8_DST:
        return quantize_float8(v, dst_type)
    return torch.round(v).clamp_(-128.0, 127.0).to(torch.int8)


def _arnq_formula(x1, x2, gamma, rstd_fn, s1, z1, beta, s2, z2, div_mode, dst_type=None):
    x = x1.float() + x2.float()
    y = _y(x, rstd_fn(x), gamma, beta)
    y1 = _static_branch(y, s1, z1, div_mode, dst_type)
    return y1, (_static_branch(y, s2, z2, div_mode, dst_type) if s2 is not None else torch.zeros_like(y1))


def _float8_values(t, dst_type):
    return hif8_to_float(t.view(torch.uint8)) if dst_type == 290 else t.float()


def assert_float8_close(out, ref, dst_type, what):
    """8-bit float outputs downstream of rstd vs the plain reference: at most one grid step
    apart (ranks in the format's sorted finite values), in at most INT_FLIP_FRACTION of the
    elements (as the int8 bound)."""
    grid = _float8_values(torch.arange(256, dtype=torch.int32).to(torch.uint8).view(
        torch.uint8 if dst_type == 290 else storage_dtype(dst_type)), dst_type)
    grid = grid[torch.isfinite(grid)].unique()
    rank = lambda t: torch.searchsorted(grid, _float8_values(t, dst_type).reshape(-1).contiguous())  # noqa: E731
    d = (rank(out) - rank(ref.reshape(out.shape))).abs()
    assert int(d.max()) <= 1, f"{what}: {int(d.max())} steps apart (bound 1)"
    frac = float((d > 0).float().mean())
    assert frac <= K.INT_FLIP_FRACTION, f"{what}: {frac:.4%} of the elements differ"


def _quant_params(cols, dt_row, div_mode, seed):
    torch.manual_seed(seed)
    sdt, zdt = dt_row
    s = torch.rand(cols) * 0.05 + 0.01 if div_mode else torch.rand(cols) * 40 + 5
    z = torch.randint(-4, 5, (cols,))
    return s.to(sdt), (z.to(i32) if zdt == i32 else z.to(zdt))


ARNQ_ROWS = {f16: (f32, i32), bf16: (bf16, bf16)}
# every (x, scales, zero points) row of npu_add_rms_norm_quant's table (ARQ_DTYPES)
ARNQ_ALL_ROWS = [(x, s, z) for x, rows in ARQ_DTYPES.items() for s, z in rows]


def _check_arnq(kernels, x1, x2, g, s1, z1, beta, s2, z2, div_mode, cores, ub, dst_type=None):
    (y1, y2, x), t = add_rms_norm_quant(kernels, x1, x2, g, s1, z1, beta, s2, z2, EPS, div_mode, dst_type=dst_type,
                                          cores=cores, ub=ub)
    ry1, ry2, rx = op_sdk.get_op("npu_add_rms_norm_quant").reference(
        x1, x2, g, s1, z1, beta, s2, z2, epsilon=EPS, div_mode=div_mode, dst_type=dst_type)
    _assert_bits(x, rx, "x = x1 + x2")
    f1, f2 = _arnq_formula(x1, x2, g, _torch_rstd, s1, z1, beta, s2, z2, div_mode, dst_type)
    _assert_bits(f1, ry1, "formula y1"), _assert_bits(f2, ry2, "formula y2")
    rows = x1.numel() // g.numel()
    m1, m2 = _arnq_formula(x1.reshape(rows, -1), x2.reshape(rows, -1), g, lambda v: _rstd_of(v, t), s1, z1, beta,
                           s2, z2, div_mode, dst_type)
    _assert_bits(y1.reshape(rows, -1), m1, "y1 (model rstd)")
    _assert_bits(y2.reshape(rows, -1), m2, "y2 (model rstd)")
    if dst_type in FLOAT8_DST:
        assert_float8_close(y1, ry1, dst_type, "y1")
        assert_float8_close(y2, ry2, dst_type, "y2")
    else:
        K.assert_int_close(y1, ry1, what="y1")
        K.assert_int_close(y2, ry2, what="y2")
    if s2 is None:
        assert (y2.view(torch.uint8) == 0).all()
    return t


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("config", ["s1-zp1-div", "s1s2-zp-beta-mul"])
@pytest.mark.parametrize("dt", [f16, bf16], ids=str)
def test_add_rms_norm_quant(kernels, case, config, dt):
    rows, cols, cores, ub, want_key = case
    x1, x2, g = _norm_inputs(rows, cols, dt)
    div = config.endswith("div")
    s1, z1 = _quant_params(cols, ARNQ_ROWS[dt], div, cols)
    s2 = z2 = beta = None
    if not div:
        s2, z2 = _quant_params(cols, ARNQ_ROWS[dt], div, cols + 1)
        beta = (torch.randn(cols) * 0.3).to(dt)
    t = _check_arnq(kernels, x1, x2, g, s1, z1, beta, s2, z2, div, cores, ub)
    check_key(t.tilingKey, case)


@pytest.mark.parametrize("ub", [K.UB_910B, 4 * 1024], ids=["whole", "split"])
@pytest.mark.parametrize("config", ["s1-only", "s1-s2-no-zp", "s1-s2-zp2-only-mul"])
@pytest.mark.parametrize("dt", [f16, bf16], ids=str)
def test_add_rms_norm_quant_optional_inputs(kernels, config, dt, ub):
    rows, cols = 11, 1000
    x1, x2, g = _norm_inputs(rows, cols, dt)
    div = not config.endswith("mul")
    s1, z1 = _quant_params(cols, ARNQ_ROWS[dt], div, 1)
    s2, z2 = _quant_params(cols, ARNQ_ROWS[dt], div, 2)
    if config == "s1-only":
        z1 = s2 = z2 = None
    elif config == "s1-s2-no-zp":
        z1 = z2 = None
    else:
        z1 = None
    t = _check_arnq(kernels, x1, x2, g, s1, z1, None, s2, z2, div, 3, ub)
    assert t.tilingKey == (1 if ub == K.UB_910B else SPLIT)


def test_add_rms_norm_quant_saturation_and_axis(kernels):
    x1, x2, g = _norm_inputs(6, 96, f16)
    s1 = torch.full((96,), 1e-3)             # |y| / 1e-3 far beyond int8: saturates both ways
    z1 = torch.randint(-4, 5, (96,), dtype=i32)
    (y1, y2, x), _ = add_rms_norm_quant(kernels, x1, x2, g, s1, z1, cores=2)
    ry1, ry2, _ = op_sdk.get_op("npu_add_rms_norm_quant").reference(x1, x2, g, s1, z1)
    assert (y1 == 127).any() and (y1 == -128).any()
    K.assert_int_close(y1, ry1)
    with pytest.raises(K.KernelError, match="axis"):
        add_rms_norm_quant(kernels, x1, x2, g, s1, z1, axis=0, cores=2)


def _params_of_row(cols, sdt, zdt, div_mode, seed, spread=1.0):
    torch.manual_seed(seed)
    s = (torch.rand(cols) * 0.05 + 0.01) / spread if div_mode else (torch.rand(cols) * 40 + 5) * spread
    z = torch.randint(-4, 5, (cols,))
    return s.to(sdt), (z.to(i32) if zdt == i32 else z.to(zdt))


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("config", ["s1-zp1-div", "s1s2-zp-beta-mul"])
@pytest.mark.parametrize("dst_type", FLOAT8_DST, ids=["e5m2", "e4m3fn", "hif8"])
def test_add_rms_norm_quant_float8(kernels, case, config, dst_type):
    """float8_e5m2 / float8_e4m3fn / hifloat8 outputs (Ascend 950's dst_types) over every
    shape, tiling key, tail and block count; the scales spread v over the format's range (and
    past it: some values saturate). Bit-exact against the formula with the model's rstd."""
    rows, cols, cores, ub, want_key = case
    dt = (f16, bf16, f32)[(cols + rows) % 3]
    sdt, zdt = ARQ_DTYPES[dt][(rows + dst_type) % len(ARQ_DTYPES[dt])]
    x1, x2, g = _norm_inputs(rows, cols, dt)
    div = config.endswith("div")
    spread = {23: 400.0, 24: 4.0, 290: 200.0}[dst_type]
    s1, z1 = _params_of_row(cols, sdt, zdt, div, cols, spread)
    s2 = z2 = beta = None
    if not div:
        s2, z2 = _params_of_row(cols, sdt, zdt, div, cols + 1, spread)
        beta = (torch.randn(cols) * 0.3).to(dt)
    t = _check_arnq(kernels, x1, x2, g, s1, z1, beta, s2, z2, div, cores, ub, dst_type)
    check_key(t.tilingKey, case)
    assert t.outType == {23: 1, 24: 2, 290: 3}[dst_type]


@pytest.mark.parametrize("ub", [K.UB_910B, 8 * 1024], ids=["whole", "split"])
@pytest.mark.parametrize("dst_type", [None] + list(FLOAT8_DST), ids=["int8", "e5m2", "e4m3fn", "hif8"])
@pytest.mark.parametrize("row", ARNQ_ALL_ROWS, ids=lambda r: "-".join(str(d).replace("torch.", "") for d in r))
def test_add_rms_norm_quant_dtype_rows(kernels, row, dst_type, ub):
    """Every (x, scales, zero points) row of npu_add_rms_norm_quant's dtype table, both keys,
    both scale sets with zero points and beta, div and multiply mode."""
    dt, sdt, zdt = row
    rows, cols = 13, 1000
    x1, x2, g = _norm_inputs(rows, cols, dt)
    spread = {None: 1.0, 23: 400.0, 24: 4.0, 290: 200.0}[dst_type]
    for div in (True, False):
        s1, z1 = _params_of_row(cols, sdt, zdt, div, 5, spread)
        s2, z2 = _params_of_row(cols, sdt, zdt, div, 6, spread)
        beta = (torch.randn(cols) * 0.3).to(dt)
        t = _check_arnq(kernels, x1, x2, g, s1, z1, beta, s2, z2, div, 4, ub, dst_type)
        assert t.tilingKey == (1 if ub == K.UB_910B else SPLIT)


@pytest.mark.parametrize("dst_type", FLOAT8_DST, ids=["e5m2", "e4m3fn", "hif8"])
def test_add_rms_norm_quant_float8_saturates(kernels, dst_type):
    x1, x2, g = _norm_inputs(6, 96, bf16)
    s1 = torch.full((96,), 1e-6)             # |y| / 1e-6 beyond every 8-bit float's range
    z1 = torch.randint(-4, 5, (96,), dtype=i32)
    (y1, _, _), _ = add_rms_norm_quant(kernels, x1, x2, g, s1, z1, dst_type=dst_type, cores=2)
    ry1, _, _ = op_sdk.get_op("npu_add_rms_norm_quant").reference(x1, x2, g, s1, z1, dst_type=dst_type)
    fmax = {23: 57344.0, 24: 448.0, 290: 32768.0}[dst_type]
    v = _float8_values(y1, dst_type)
    assert (v == fmax).any() and (v == -fmax).any() and torch.isfinite(v).all()
    assert_float8_close(y1, ry1, dst_type, "y1")


def test_add_rms_norm_quant_unknown_output_type(kernels):
    x1, x2, g = _norm_inputs(3, 33, f16)
    with pytest.raises(K.KernelError, match="output type"):
        add_rms_norm_quant(kernels, x1, x2, g, torch.ones(33), out_type=4, cores=2)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("config", ["plain", "smooth2-beta", "mask01-smooth2"])
@pytest.mark.parametrize("dst_type", FLOAT8_DST, ids=["e5m2", "e4m3fn", "hif8"])
def test_add_rms_norm_dynamic_quant_float8(kernels, case, config, dst_type):
    """8-bit float outputs (Ascend 950): scale_i = amax * fp32(1 / DTYPE_MAX), y_i = v / scale_i
    cast, bit-exact against the formula with the model's rstd over every shape / key / tail /
    block count, with and without smooth scales, beta and output_mask."""
    rows, cols, cores, ub, want_key = case
    dt = (f16, bf16)[(rows + cols + dst_type) % 2]
    x1, x2, g = _norm_inputs(rows, cols, dt)
    sm1 = sm2 = beta = mask = None
    if config == "smooth2-beta":
        sm1, sm2 = (torch.rand(cols) + 0.5).to(dt), (torch.rand(cols) * 2 + 0.1).to(dt)
        beta = (torch.randn(cols) * 0.3).to(dt)
    elif config == "mask01-smooth2":
        sm2, mask = (torch.rand(cols) + 0.5).to(dt), (False, True)
    t = _check_adrq(kernels, x1, x2, g, sm1, sm2, beta, mask, cores, ub, dst_type=dst_type)
    check_key(t.tilingKey, case)
    assert t.outType == {23: 1, 24: 2, 290: 3}[dst_type]


@pytest.mark.parametrize("dst_type", FLOAT8_DST, ids=["e5m2", "e4m3fn", "hif8"])
def test_add_rms_norm_dynamic_quant_float8_zero_rows(kernels, dst_type):
    x1 = torch.randn(2, 3, 40).to(f16)
    x2 = -x1.clone()
    x2[0, 1] = torch.randn(40).to(f16)   # one row non-zero, the others sum to exactly 0
    g = torch.randn(40).to(f16)
    for ub in (K.UB_910B, 4 * 1024):
        (y1, _, _, s1, _), _ = add_rms_norm_dynamic_quant(kernels, x1, x2, g, dst_type=dst_type, cores=4, ub=ub)
        ry1, _, _, rs1, _ = op_sdk.get_op("npu_add_rms_norm_dynamic_quant").reference(x1, x2, g, y_dtype=dst_type)
        assert torch.equal(s1 == 0, rs1 == 0) and (y1.view(torch.uint8)[s1 == 0] == 0).all()
        assert_float8_close(y1, ry1, dst_type, "y1")


def test_add_rms_norm_dynamic_quant_float8_not_with_int4(kernels):
    x1, x2, g = _norm_inputs(3, 64, f16)
    with pytest.raises(K.KernelError, match="no tiling fits"):
        add_rms_norm_dynamic_quant(kernels, x1, x2, g, int4=True, dst_type=24, cores=2)
