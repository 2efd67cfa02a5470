"""DynamicQuant / DynamicQuantV2 Ascend C kernels (kernels/ascendc/dynamic_quant,
dynamic_quant_v2; body common/dynamic_quant_base.h) on the CPU model vs npu_dynamic_quant's
reference: the kernels compute in the reference's order, so y and scale are bit-exact, for
every quant_mode, with MoE group_index, and for int8 and int4 (quint4x2) outputs."""

import ctypes

import pytest
import torch

import op_sdk
from tests.ascendc import _kernels as K
from tests.ascendc._cases import CASES, SPLIT, WHOLE, case_id, check_key

pytestmark = pytest.mark.ascendc

# the driver builds these tests call (tests/ascendc/_kernels.py builds them together)
VARIANTS = [("dynamic_quant", (("DTYPE_X", x),)) for x in ("half", "bfloat16_t")]


# ---- the kernel's call wrappers (tests/ascendc/driver_dynamic_quant.cpp) ----

DQ_MODES = {"pertoken": 0, "pertensor": 1, "perchannel": 2}


def dynamic_quant(builder, x, smooth_scales=None, group_index=None, quant_mode="pertoken", int4=False, v2=None,
                  flags=0, dst_type=None, dst_type_max=0.0, cores=40, ub=K.UB_910B):
    """DynamicQuant (per token) or DynamicQuantV2 (v2; the default for per tensor / per
    channel). Returns ((y, scale), tiling key), or ((y, scale, offset), key) with v2; y is int8,
    or int4 packed 8 per int32 (int4, npu_dynamic_quant's quint4x2 layout), or an 8-bit float
    output (dst_type: npu_dynamic_quant's code, K.ARNQ_OUT; dst_type_max: DynamicQuantV2's)."""
    v2 = quant_mode != "pertoken" if v2 is None else v2
    lib = builder.lib("dynamic_quant", DTYPE_X=K.CTYPE[x.dtype])
    x = x.contiguous()
    cols = x.shape[-1]
    rows = x.numel() // cols
    m = x.shape[-2]
    out_type, ydt = K.ARNQ_OUT[dst_type] if not int4 else (0, torch.int32)
    y = torch.empty((*x.shape[:-1], cols // 8), dtype=torch.int32) if int4 else torch.empty(x.shape, dtype=torch.uint8)
    s_shape = {"pertoken": x.shape[:-1], "pertensor": (1,), "perchannel": (*x.shape[:-2], cols)}[quant_mode]
    scale = torch.full(s_shape, float("nan"), dtype=torch.float32)
    offset = torch.full(s_shape, float("nan"), dtype=torch.float32) if v2 else None
    sm = smooth_scales.contiguous() if smooth_scales is not None else None
    gi = group_index.contiguous() if group_index is not None else None
    key = K.call(lib.opsdk_run, ctypes.c_int(int(v2)), K.ptr(x), K.ptr(sm), K.ptr(gi), K.ptr(y), K.ptr(scale),
                 K.ptr(offset), ctypes.c_uint64(rows), ctypes.c_uint32(cols),
                 ctypes.c_uint32(gi.numel() if gi is not None else 0),
                 ctypes.c_uint32(DQ_MODES[quant_mode]), ctypes.c_uint64(m), ctypes.c_int(int(int4)),
                 ctypes.c_int(flags),
                 ctypes.c_uint32(out_type), ctypes.c_float(dst_type_max), ctypes.c_uint32(cores), ctypes.c_uint32(ub))
    y = y if int4 else y.view(ydt)
    return ((y, scale, offset) if v2 else (y, scale)), key


class DynamicQuantTiling(ctypes.Structure):
    _fields_ = [("numRows", ctypes.c_uint64), ("numCols", ctypes.c_uint32), ("blockDim", ctypes.c_uint32),
                ("rowsPerBlock", ctypes.c_uint64), ("formerBlocks", ctypes.c_uint32),
                ("tilingKey", ctypes.c_uint32), ("rowsPerLoop", ctypes.c_uint32), ("chunkCols", ctypes.c_uint32),
                ("numChunks", ctypes.c_uint32), ("lastChunkCols", ctypes.c_uint32)] + [
                (f, ctypes.c_uint32) for f in ("hasSmooth", "numGroups", "chanRows", "int4Out", "outType")] + [
                ("float8Max", ctypes.c_float)]


def dynamic_quant_tiling(builder, shape, quant_mode="pertoken", smooth=False, groups=0, int4=False, cores=40,
                         ub=K.UB_910B, x_dtype=torch.float16):
    """The plain tiling (DynamicQuantV2's) of an x of `shape`."""
    lib = builder.lib("dynamic_quant", DTYPE_X=K.CTYPE[x_dtype])
    cols = shape[-1]
    rows = 1
    for d in shape[:-1]:
        rows *= d
    t = DynamicQuantTiling()
    size = lib.opsdk_tiling(ctypes.c_uint64(rows), ctypes.c_uint32(cols), ctypes.c_int(int(smooth)),
                            ctypes.c_uint32(groups), ctypes.c_uint32(DQ_MODES[quant_mode]), ctypes.c_uint64(shape[-2]),
                            ctypes.c_int(int(int4)), ctypes.c_uint32(cores), ctypes.c_uint32(ub), ctypes.byref(t))
    assert size == ctypes.sizeof(DynamicQuantTiling)
    return t


f16, bf16 = torch.float16, torch.bfloat16
KEY_TOKEN = {WHOLE: 1, SPLIT: 2}
KEY_TENSOR = {WHOLE: 3, SPLIT: 4}
KEY_CHANNEL = 5


def _ref(x, smooth=None, group_index=None, quant_mode="pertoken", int4=False, dst_type=None, dst_type_max=0.0):
    return op_sdk.get_op("npu_dynamic_quant").reference(
        x, smooth_scales=smooth, group_index=group_index, quant_mode=quant_mode,
        dst_type=torch.quint4x2 if int4 else dst_type, dst_type_max=dst_type_max)


def _assert_same(out, ref):
    y, scale = out[0], out[1]
    y_ref, scale_ref = ref
    assert y.shape == y_ref.shape and y.dtype == y_ref.dtype
    if y.element_size() == 1:
        yb, rb = y.view(torch.uint8), y_ref.view(torch.uint8)
        assert torch.equal(yb, rb), f"{int((yb != rb).sum())} of {yb.numel()} bytes differ"
    else:
        assert torch.equal(y, y_ref)
    assert scale.shape == scale_ref.shape
    assert torch.equal(scale.view(torch.int32), scale_ref.view(torch.int32))
    if len(out) == 3:  # DynamicQuantV2's offset: zeros (symmetric)
        assert out[2].shape == scale.shape and bool((out[2] == 0).all())


def _groups(rows, n_groups, seed):
    """Cumulative end rows of n_groups groups (some empty), the last one == rows."""
    g = torch.Generator().manual_seed(seed)
    cuts = sorted(torch.randint(0, rows + 1, (n_groups - 1,), generator=g).tolist())
    return torch.tensor(cuts + [rows], dtype=torch.int32)


def _key_of(case, base):
    return base[case[4]]


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("smooth", ["plain", "smooth", "group"])
@pytest.mark.parametrize("dt", [f16, bf16], ids=str)
def test_dynamic_quant_bit_exact(kernels, case, smooth, dt):
    rows, cols, cores, ub, want_key = case
    torch.manual_seed(rows * 1000 + cols)
    x = (torch.randn(rows, cols) * 4).to(dt)
    gi = _groups(rows, 5, rows + cols) if smooth == "group" else None
    s = None
    if smooth == "smooth":
        s = (torch.rand(cols) + 0.5).to(dt)
    elif smooth == "group":
        s = (torch.rand(5, cols) * 2 + 0.25).to(dt)
    (y, scale), key = dynamic_quant(kernels, x, s, gi, cores=cores, ub=ub)
    check_key(key, case)
    _assert_same((y, scale), _ref(x, s, gi))


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("mode", ["pertoken", "pertensor", "perchannel"])
@pytest.mark.parametrize("int4", [False, True], ids=["int8", "int4"])
@pytest.mark.parametrize("dt", [f16, bf16], ids=str)
def test_dynamic_quant_v2_modes_bit_exact(kernels, case, mode, int4, dt):
    """DynamicQuantV2 over the shapes: per token / tensor / channel, int8 and int4 (the last
    dim rounded up to a multiple of 8 for int4), with smoothing."""
    rows, cols, cores, ub, want_key = case
    if int4:
        cols = (cols + 7) // 8 * 8
    torch.manual_seed(rows * 1000 + cols + int4)
    x = (torch.randn(rows, cols) * 4).to(dt)
    s = (torch.rand(rows if mode == "perchannel" else cols) + 0.5).to(dt)
    out, key = dynamic_quant(kernels, x, s, quant_mode=mode, int4=int4, v2=True, cores=cores, ub=ub)
    if mode == "pertoken":
        check_key(key, (rows, cols, cores, ub, want_key))
    elif mode == "pertensor":
        check_key(key - 2, (rows, cols, cores, ub, want_key))
    else:
        assert key == KEY_CHANNEL
    _assert_same(out, _ref(x, s, quant_mode=mode, int4=int4))


@pytest.mark.parametrize("case", [c for c in CASES if c[1] % 8 == 0], ids=case_id)
def test_dynamic_quant_int4_per_token_groups(kernels, case):
    """DynamicQuant (not V2) with int4 output and MoE groups."""
    rows, cols, cores, ub, _ = case
    torch.manual_seed(cols)
    x = (torch.randn(rows, cols) * 3).to(bf16)
    gi = _groups(rows, 3, cols)
    s = (torch.rand(3, cols) + 0.5).to(bf16)
    (y, scale), key = dynamic_quant(kernels, x, s, gi, int4=True, cores=cores, ub=ub)
    check_key(key, case)
    _assert_same((y, scale), _ref(x, s, gi, int4=True))


@pytest.mark.parametrize("shape,cores,ub", [
    ((2, 3, 5, 64), 8, K.UB_910B),      # 6 batches of 5 rows: whole columns, units over blocks
    ((3, 37, 304), 40, K.UB_910B),      # 3 batches, columns split so that 40 cores get work
    ((1, 300, 1000), 1, 16 * 1024) ,     # one block; columns in UB-sized chunks, rows in tiles
    ((4, 9, 7168), 5, 24 * 1024),       # chunks and tiles over several blocks
    ((2, 1, 96), 3, K.UB_910B),         # dim -2 of size 1
])
@pytest.mark.parametrize("int4", [False, True], ids=["int8", "int4"])
@pytest.mark.parametrize("smooth", [False, True], ids=["plain", "smooth"])
def test_dynamic_quant_per_channel_leading_dims_and_tiles(kernels, shape, cores, ub, int4, smooth):
    torch.manual_seed(sum(shape))
    x = (torch.randn(shape) * 5).to(f16)
    s = (torch.rand(shape[-2]) + 0.5).to(f16) if smooth else None
    t = dynamic_quant_tiling(kernels, shape, "perchannel", smooth=smooth, int4=int4, cores=cores, ub=ub)
    assert t.tilingKey == KEY_CHANNEL
    batches = x.numel() // (shape[-2] * shape[-1])
    assert t.blockDim == min(cores, batches * t.numChunks)
    if ub < K.UB_910B:
        assert t.numChunks > 1 and t.rowsPerLoop < shape[-2], "the case should take several chunks and tiles"
    out, key = dynamic_quant(kernels, x, s, quant_mode="perchannel", int4=int4, cores=cores, ub=ub)
    assert key == KEY_CHANNEL
    _assert_same(out, _ref(x, s, quant_mode="perchannel", int4=int4))


def test_dynamic_quant_per_channel_splits_columns_over_cores(kernels):
    t = dynamic_quant_tiling(kernels, (64, 1000), "perchannel", cores=40)
    assert t.chunkCols == 64 and t.numChunks == 16 and t.blockDim == 16
    t = dynamic_quant_tiling(kernels, (40, 64, 1000), "perchannel", cores=40)
    assert t.numChunks == 1 and t.blockDim == 40


def test_dynamic_quant_per_tensor_over_blocks(kernels):
    """Every block finds the tensor's amax: the result does not depend on the block count."""
    torch.manual_seed(3)
    x = (torch.randn(4, 11, 1000)).to(bf16)
    x[2, 7, 13] = 90.0  # the tensor's max sits in one block's rows only
    ref = _ref(x, quant_mode="pertensor")
    for cores, ub in ((1, K.UB_910B), (7, K.UB_910B), (40, K.UB_910B), (5, 8 * 1024)):
        out, key = dynamic_quant(kernels, x, quant_mode="pertensor", cores=cores, ub=ub)
        assert key == (4 if ub < K.UB_910B else 3)
        _assert_same(out, ref)
    assert ref[1].shape == (1,)


def test_dynamic_quant_zero_rows_ties_and_saturation(kernels):
    x = torch.randn(6, 40).to(f16)
    x[1] = 0                          # all-zero row: scale 0, y 0
    x[3] = torch.arange(40) - 20.0    # amax 20: values * 127/20 land near .5 boundaries
    x[5, :] = 1e-4
    x[5, 7] = -65504.0                # a huge |x|: the rest rounds to 0
    (y, scale), _ = dynamic_quant(kernels, x, None, cores=3)
    y_ref, scale_ref = _ref(x)
    assert torch.equal(y, y_ref)
    assert torch.equal(scale, scale_ref)
    assert scale[1] == 0 and (y[1] == 0).all()
    assert y[5, 7] == -127


@pytest.mark.parametrize("int4", [False, True], ids=["int8", "int4"])
def test_dynamic_quant_zero_columns_and_tensor(kernels, int4):
    """Per channel: an all-zero column gives scale 0 and y 0 (the vector select of the
    inverse); per tensor: an all-zero tensor likewise."""
    x = (torch.randn(3, 6, 64) * 2).to(bf16)
    x[:, :, 5] = 0
    x[1, :, 9] = 1e-30               # a tiny but non-zero column
    out, _ = dynamic_quant(kernels, x, quant_mode="perchannel", int4=int4, cores=4)
    ref = _ref(x, quant_mode="perchannel", int4=int4)
    _assert_same(out, ref)
    assert bool((out[1][:, 5] == 0).all()) and out[1][1, 9] > 0
    z = torch.zeros(4, 64, dtype=f16)
    out, _ = dynamic_quant(kernels, z, quant_mode="pertensor", int4=int4, cores=3)
    _assert_same(out, _ref(z, quant_mode="pertensor", int4=int4))
    assert out[1].item() == 0


def test_dynamic_quant_groups_edge_cases(kernels):
    """One group; empty groups at the start, middle and end; a group per row."""
    torch.manual_seed(5)
    x = (torch.randn(12, 96) * 3).to(f16)
    for gi in ([12], [0, 0, 5, 5, 12, 12], [3, 12, 12, 12], list(range(1, 13))):
        g = torch.tensor(gi, dtype=torch.int32)
        s = (torch.rand(len(gi), 96) + 0.5).to(f16)
        for cores, ub in ((1, K.UB_910B), (5, K.UB_910B), (4, 4 * 1024)):
            out, _ = dynamic_quant(kernels, x, s, g, cores=cores, ub=ub)
            _assert_same(out, _ref(x, s, g))


def test_dynamic_quant_leading_dims(kernels):
    x = torch.randn(2, 3, 5, 33).to(bf16)
    (y, scale), _ = dynamic_quant(kernels, x, None, cores=8)
    y_ref, scale_ref = _ref(x)
    assert y.shape == y_ref.shape and scale.shape == scale_ref.shape
    assert torch.equal(y, y_ref) and torch.equal(scale, scale_ref)


@pytest.mark.parametrize("what", ["group-pertensor", "group-perchannel", "group-no-smooth", "int4-odd-cols",
                                  "asymmetric", "dst_type_max", "too-many-groups"])
def test_dynamic_quant_rejects_unimplemented(kernels, what):
    x = torch.randn(4, 64).to(f16)
    s = torch.ones(64, dtype=f16)
    gi = torch.tensor([2, 4], dtype=torch.int32)
    s2 = torch.ones(2, 64, dtype=f16)
    kw = dict(cores=2)
    if what == "group-pertensor":
        call = lambda: dynamic_quant(kernels, x, s2, gi, quant_mode="pertensor", **kw)  # noqa: E731
    elif what == "group-perchannel":
        call = lambda: dynamic_quant(kernels, x, s2, gi, quant_mode="perchannel", **kw)  # noqa: E731
    elif what == "group-no-smooth":
        call = lambda: dynamic_quant(kernels, x, None, gi, **kw)  # noqa: E731
    elif what == "int4-odd-cols":
        call = lambda: dynamic_quant(kernels, torch.randn(4, 36).to(f16), None, int4=True, **kw)  # noqa: E731
    elif what == "asymmetric":
        call = lambda: dynamic_quant(kernels, x, s, v2=True, flags=1, **kw)  # noqa: E731
    elif what == "dst_type_max":
        call = lambda: dynamic_quant(kernels, x, s, v2=True, flags=2, **kw)  # noqa: E731
    else:
        t = dynamic_quant_tiling(kernels, (4, 64), smooth=True, groups=1025)
        assert t.tilingKey == 0
        assert dynamic_quant_tiling(kernels, (4, 64), smooth=True, groups=1024).tilingKey == 1
        return
    with pytest.raises(K.KernelError, match="not supported"):
        call()


# ---- 8-bit float outputs (Ascend 950: aclnnDynamicQuantV3 / V4's dst_types) ---------------------

FLOAT8_DST = (23, 24, 290)  # float8_e5m2, float8_e4m3fn, hifloat8


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("mode", ["pertoken", "pertensor", "perchannel"])
@pytest.mark.parametrize("dst_type", FLOAT8_DST, ids=["e5m2", "e4m3fn", "hif8"])
def test_dynamic_quant_float8_modes_bit_exact(kernels, case, mode, dst_type):
    """scale = amax * fp32(1 / DTYPE_MAX), y = cast(s / scale), for every mode over the shapes,
    tiling keys, tails and block counts, with smoothing (DynamicQuantV2)."""
    rows, cols, cores, ub, want_key = case
    dt = (f16, bf16)[(rows + cols) % 2]
    torch.manual_seed(rows * 1000 + cols + dst_type)
    x = (torch.randn(rows, cols) * 4).to(dt)
    s = (torch.rand(rows if mode == "perchannel" else cols) + 0.5).to(dt)
    out, key = dynamic_quant(kernels, x, s, quant_mode=mode, v2=True, dst_type=dst_type, cores=cores, ub=ub)
    if mode == "pertoken":
        check_key(key, case)
    elif mode == "pertensor":
        check_key(key - 2, case)
    else:
        assert key == KEY_CHANNEL
    _assert_same(out, _ref(x, s, quant_mode=mode, dst_type=dst_type))


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("dst_type", FLOAT8_DST, ids=["e5m2", "e4m3fn", "hif8"])
def test_dynamic_quant_float8_per_token_groups(kernels, case, dst_type):
    """DynamicQuant (not V2), per token with MoE groups, 8-bit float outputs."""
    rows, cols, cores, ub, _ = case
    torch.manual_seed(cols + dst_type)
    x = (torch.randn(rows, cols) * 3).to(bf16)
    gi = _groups(rows, 4, cols)
    s = (torch.rand(4, cols) + 0.5).to(bf16)
    (y, scale), key = dynamic_quant(kernels, x, s, gi, dst_type=dst_type, cores=cores, ub=ub)
    check_key(key, case)
    _assert_same((y, scale), _ref(x, s, gi, dst_type=dst_type))


@pytest.mark.parametrize("mode", ["pertoken", "pertensor", "perchannel"])
@pytest.mark.parametrize("dst_type_max", [0.0, 1e-7, 15.0, 1000.0, 32768.0])
def test_dynamic_quant_hifloat8_dst_type_max(kernels, mode, dst_type_max):
    """DynamicQuantV2's dst_type_max sets hifloat8's DTYPE_MAX (below 1e-6: 32768)."""
    torch.manual_seed(11)
    x = (torch.randn(2, 9, 300) * 3).to(f16)
    for cores, ub in ((3, K.UB_910B), (5, 8 * 1024)):
        out, _ = dynamic_quant(kernels, x, quant_mode=mode, v2=True, dst_type=290, dst_type_max=dst_type_max,
                                 cores=cores, ub=ub)
        _assert_same(out, _ref(x, quant_mode=mode, dst_type=290, dst_type_max=dst_type_max))


@pytest.mark.parametrize("dst_type", FLOAT8_DST, ids=["e5m2", "e4m3fn", "hif8"])
def test_dynamic_quant_float8_zero_rows_columns_and_signed_zeros(kernels, dst_type):
    """All-zero rows (per token), columns (per channel) and tensors give scale 0 and y +0 (zero
    bits), -0.0 inputs included; a -0.0 beside non-zero values keeps its sign as in the reference."""
    x = (torch.randn(3, 6, 64) * 2).to(bf16)
    x[:, :, 5] = -0.0                # an all-(-0) column
    x[:, 2, :] = 0.0                 # an all-zero row
    x[:, 2, 7] = -0.0
    x[0, 4, 9] = -0.0                # a -0 among non-zero values
    x[1, :, 11] = 1e-30              # a tiny but non-zero column
    for mode in ("pertoken", "perchannel"):
        out, _ = dynamic_quant(kernels, x, quant_mode=mode, v2=True, dst_type=dst_type, cores=4)
        _assert_same(out, _ref(x, quant_mode=mode, dst_type=dst_type))
    z = -torch.zeros(4, 64, dtype=f16)
    for mode in ("pertoken", "pertensor", "perchannel"):
        out, _ = dynamic_quant(kernels, z, quant_mode=mode, v2=True, dst_type=dst_type, cores=3)
        _assert_same(out, _ref(z, quant_mode=mode, dst_type=dst_type))
        assert bool((out[0].view(torch.uint8) == 0).all()) and bool((out[1] == 0).all())


@pytest.mark.parametrize("what", ["int4-and-float8", "dst_type_max-float8", "dst_type_max-range"])
def test_dynamic_quant_float8_rejects(kernels, what):
    x = torch.randn(4, 64).to(f16)
    if what == "int4-and-float8":
        lib = kernels.lib("dynamic_quant", DTYPE_X="half")  # int4Out with an 8-bit float outType
        with pytest.raises(K.KernelError, match="not supported"):
            K.call(lib.opsdk_run, ctypes.c_int(1), K.ptr(x), K.ptr(None), K.ptr(None),
                   K.ptr(torch.empty(4, 8, dtype=torch.int32)), K.ptr(torch.empty(4)), K.ptr(torch.empty(4)),
                   ctypes.c_uint64(4), ctypes.c_uint32(64), ctypes.c_uint32(0), ctypes.c_uint32(0),
                   ctypes.c_uint64(4), ctypes.c_int(1), ctypes.c_int(0), ctypes.c_uint32(2), ctypes.c_float(0.0),
                   ctypes.c_uint32(2), ctypes.c_uint32(K.UB_910B))
        return
    kw = dict(v2=True, cores=2)
    if what == "dst_type_max-float8":
        call = lambda: dynamic_quant(kernels, x, dst_type=24, dst_type_max=15.0, **kw)  # noqa: E731
    else:
        call = lambda: dynamic_quant(kernels, x, dst_type=290, dst_type_max=40000.0, **kw)  # noqa: E731
    with pytest.raises(K.KernelError, match="not supported"):
        call()
