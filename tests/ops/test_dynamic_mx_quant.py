"""npu_dynamic_mx_quant: the tables the registry-wide tests read (samples, constraint cases,
GE types, schema, the Meta grid) and the slice's own tests: the operator against an
independent float64 formula (ops-nn's golden's steps: floor(log2(amax)) less emax, or the
cuBLAS form, the value divided by 2^exp and rounded at its binade's step) over the input
dtypes, every destination, round mode and scale_alg, axes, block sizes, odd sizes, 3-D,
non-contiguous, stride-0, empty, all-zero and NaN / inf blocks and dynamic shapes; the scale
layout (pairs along the axis, padded with 0); the kernels' own rules where the golden
differs (a block of code 0 scaled by 0 under OCP); the argument rules; the GE converter.
ops-nn's golden and ST rows are ported in tests/conformance/test_npu_dynamic_mx_quant.py."""

import math

import pytest
import torch

from op_sdk.ops._formats import fp4_codes_to_float, unpack_nibbles

OP = torch.ops.npu.npu_dynamic_mx_quant
NAME = "npu_dynamic_mx_quant"

SCHEMAS = [
    "npu_dynamic_mx_quant(Tensor input, *, int axis=-1, str round_mode=\"rint\", "
    "int dst_type=296, int block_size=32, int? scale_alg=0, float dst_type_max=0., "
    "float max_low_bound=0.) -> (Tensor, Tensor)",
]

GE_TYPES = {"npu::npu_dynamic_mx_quant": "DynamicMxQuant"}
# calls the converter refuses, with the words its error carries (float4: TorchAir bitcasts)
GE_REFUSED = {"npu::npu_dynamic_mx_quant": ("float4",)}

E4M3, E5M2, E2M1, E1M2 = 292, 291, 296, 297
EMAX = {E4M3: 8, 24: 8, E5M2: 15, 23: 15, E2M1: 2, E1M2: 0}
MAXV = {E4M3: 448.0, 24: 448.0, E5M2: 57344.0, 23: 57344.0, E2M1: 6.0, E1M2: 1.75}
# (mantissa bits, smallest exponent of a value's step) of each element format
FMT = {E4M3: (3, -6), 24: (3, -6), E5M2: (2, -14), 23: (2, -14), E2M1: (1, 0), E1M2: (2, 0)}


def _x(*shape, dtype=torch.bfloat16, seed=0, scale=4.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(dtype)


def samples():
    return [(NAME, (_x(4, 70),), {"dst_type": E4M3}),
            (NAME, (_x(3, 64, dtype=torch.float16),), {"dst_type": E2M1, "round_mode": "round"}),
            (NAME, (_x(2, 96, 6),), {"dst_type": E5M2, "axis": 1, "block_size": 64,
                                     "scale_alg": 1}),
            (NAME, (_x(5, 40, dtype=torch.float32),), {"dst_type": E1M2, "round_mode": "floor"}),
            (NAME, (_x(2, 64),), {"dst_type": E2M1, "scale_alg": 2, "dst_type_max": 7.0})]


def meta_grid():
    """Calls on which the fake and torch_npu's Meta function must agree on output shapes and
    dtypes (tests/npu/real)."""
    out = []
    for shape in ((8, 64), (3, 70), (2, 5, 34), (1, 2, 3, 130)):
        x = _x(*shape)
        out += [(NAME, (x,), {"dst_type": E4M3}), (NAME, (x,), {"dst_type": 23}),
                (NAME, (x,), {"dst_type": E2M1}), (NAME, (x.half(),), {"dst_type": E1M2}),
                (NAME, (x,), {"dst_type": E5M2, "axis": 0, "block_size": 64})]
        if len(shape) > 2:
            out.append((NAME, (x,), {"dst_type": E4M3, "axis": -2, "scale_alg": 1}))
    return out


_X = torch.zeros(4, 64, dtype=torch.bfloat16)
# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("dynamic_mx_quant/dtype", NAME, (_X.double(),), {}, "input", RuntimeError),
    ("dynamic_mx_quant/dims", NAME, (torch.zeros([1] * 8),), {}, "input", RuntimeError),
    ("dynamic_mx_quant/axis", NAME, (_X,), {"axis": 2}, "axis", RuntimeError),
    ("dynamic_mx_quant/block", NAME, (_X,), {"block_size": 48}, "block_size", RuntimeError),
    ("dynamic_mx_quant/block-max", NAME, (_X,), {"block_size": 2048}, "block_size",
     RuntimeError),
    ("dynamic_mx_quant/block-fp32", NAME, (_X.float(),), {"block_size": 64}, "block_size",
     RuntimeError),
    ("dynamic_mx_quant/dst-type", NAME, (_X,), {"dst_type": 1}, "dst_type", RuntimeError),
    ("dynamic_mx_quant/hifloat8", NAME, (_X,), {"dst_type": 290}, "dst_type", RuntimeError),
    ("dynamic_mx_quant/round-fp8", NAME, (_X,), {"dst_type": E4M3, "round_mode": "floor"},
     "round_mode", RuntimeError),
    ("dynamic_mx_quant/round-name", NAME, (_X,), {"round_mode": "ceil"}, "round_mode",
     RuntimeError),
    ("dynamic_mx_quant/alg-fp8", NAME, (_X,), {"dst_type": E4M3, "scale_alg": 2}, "scale_alg",
     RuntimeError),
    ("dynamic_mx_quant/alg-e1m2", NAME, (_X,), {"dst_type": E1M2, "scale_alg": 2}, "scale_alg",
     RuntimeError),
    ("dynamic_mx_quant/alg-e2m1", NAME, (_X,), {"scale_alg": 1}, "scale_alg", RuntimeError),
    ("dynamic_mx_quant/alg2-block", NAME, (_X,), {"scale_alg": 2, "block_size": 64},
     "block_size", RuntimeError),
    ("dynamic_mx_quant/dst-type-max", NAME, (_X,), {"scale_alg": 2, "dst_type_max": 5.0},
     "dst_type_max", RuntimeError),
    ("dynamic_mx_quant/dst-type-max-alg", NAME, (_X,), {"dst_type_max": 6.0}, "dst_type_max",
     RuntimeError),
    ("dynamic_mx_quant/low-bound", NAME, (_X,), {"dst_type": E4M3, "scale_alg": 1,
                                                 "max_low_bound": -1.0}, "max_low_bound",
     RuntimeError),
    ("dynamic_mx_quant/low-bound-alg", NAME, (_X,), {"dst_type": E4M3, "max_low_bound": 1.0},
     "max_low_bound", RuntimeError),
    ("dynamic_mx_quant/fp4-odd", NAME, (torch.zeros(4, 33),), {}, "input", RuntimeError),
]


# ---- an independent formula (float64) --------------------------------------------------------

def _round(v, mode):
    if mode == "rint":
        return torch.round(v)
    if mode == "round":
        return torch.sign(v) * torch.floor(v.abs() + 0.5)
    return torch.floor(v)


def _golden(x, axis=-1, round_mode="rint", dst_type=E2M1, block_size=32, scale_alg=0,
            dst_type_max=0.0, max_low_bound=0.0):
    """(values after rounding (float64, x's shape), E8M0 codes (..., blocks) along the
    axis moved last), block by block: the exponent from amax (floor(log2) less emax; the
    cuBLAS form from amax / max in float32, its exponent rounded up), the values divided by
    2^(code - 127), rounded at their binade's step, clipped; a non-finite block 255 and 0."""
    v = x.double().movedim(axis, -1)
    n = v.shape[-1]
    nb = math.ceil(n / block_size)
    mbits, min_exp = FMT[dst_type]
    vals = torch.zeros_like(v)
    codes = torch.zeros(*v.shape[:-1], nb, dtype=torch.int64)
    for b in range(nb):
        blk = v[..., b * block_size:(b + 1) * block_size]
        amax = blk.abs().amax(-1)
        finite = torch.isfinite(blk).all(-1)
        if scale_alg == 0:
            e = torch.floor(torch.log2(torch.where(amax > 0, amax, torch.ones_like(amax))))
            c = torch.where(amax > 0, (e - EMAX[dst_type] + 127).clamp(min=0), 0).long()
        else:
            a32 = torch.maximum(amax.float(), torch.tensor(max_low_bound))
            s = a32 / torch.tensor(MAXV[dst_type], dtype=torch.float32)  # golden: a division
            bits = s.view(torch.int32).long()
            e, m = bits >> 23, bits & 0x7FFFFF
            up = ((e > 0) & (e < 254) & (m > 0)) | ((e == 0) & (m > 2 ** 22))
            c = torch.where(amax > 0, e + up.long(), 0)
        c = torch.where(finite, c, 255)
        codes[..., b] = c
        r = blk / torch.pow(2.0, (c - 127).double()).unsqueeze(-1)
        pe = torch.floor(torch.log2(r.abs() + (r == 0))).clamp(min=min_exp)
        q = _round(r / 2.0 ** pe * 2 ** mbits, round_mode) / 2 ** mbits * 2.0 ** pe
        q = q.clamp(-MAXV[dst_type], MAXV[dst_type])
        q = torch.where(finite.unsqueeze(-1), q, torch.zeros_like(q))
        vals[..., b * block_size:(b + 1) * block_size] = q
    return vals.movedim(-1, axis), codes


def _values(y, dst_type):
    if dst_type in (E2M1, E1M2):
        return fp4_codes_to_float(unpack_nibbles(y), dst_type).double()
    return y.double()


def _codes(mxscale, axis, nd):
    """mxscale (..., ceil(nb / 2), ..., 2) -> codes (..., 2 * ceil(nb / 2)) along the axis
    moved last."""
    s = mxscale.long().movedim(axis % nd, -2)
    return s.reshape(*s.shape[:-2], -1)


def _check(x, **kw):
    y, scale = OP(x, **kw)
    want_v, want_c = _golden(x, **kw)
    axis = kw.get("axis", -1)
    nb = want_c.shape[-1]
    codes = _codes(scale, axis, x.dim())
    assert torch.equal(codes[..., :nb], want_c)
    assert (codes[..., nb:] == 0).all()  # the even padding
    got = _values(y, kw.get("dst_type", E2M1))
    assert torch.equal(got, want_v), (got - want_v).abs().max()
    # signed zeros: a value's sign survives its rounding to 0 (a non-finite block is +0)
    block = kw.get("block_size", 32)
    ok = (want_c != 255).repeat_interleave(block, -1)[..., :x.shape[axis]].movedim(-1, axis)
    nz = (want_v == 0) & ok & (x.double() != 0)
    assert torch.equal(torch.signbit(got[nz]), torch.signbit(x.double()[nz]))
    return y, scale


DSTS = [E4M3, E5M2, E2M1, E1M2, 23, 24]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("dst", DSTS)
@pytest.mark.parametrize("shape", [(3, 64), (5, 70), (2, 3, 130), (1, 34)])
def test_matches_formula(dtype, dst, shape):
    modes = ("rint", "round", "floor") if dst in (E2M1, E1M2) else ("rint",)
    for mode in modes:
        _check(_x(*shape, dtype=dtype, seed=len(shape)), dst_type=dst, round_mode=mode)


@pytest.mark.parametrize("dst", [E4M3, E5M2])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_cublas_scale(dst, dtype):
    x = _x(6, 96, dtype=dtype, seed=3, scale=100.0)
    _check(x, dst_type=dst, scale_alg=1)
    _check(x, dst_type=dst, scale_alg=1, max_low_bound=500.0)


def test_cublas_worked_example():
    """aclnnDynamicMxQuantV3's worked example: bf16 (0, 8, 64, 512), e4m3, scale_alg 1,
    max_low_bound 0.5: y bits (0, 72, 96, 120), mxscale (128, 0)."""
    x = torch.tensor([[0.0, 8.0, 64.0, 512.0]], dtype=torch.bfloat16)
    y, s = OP(x, dst_type=E4M3, scale_alg=1, max_low_bound=0.5)
    assert y.view(torch.uint8).tolist() == [[0, 72, 96, 120]]
    assert s.tolist() == [[[128, 0]]]


@pytest.mark.parametrize("axis", [0, 1, -3])
@pytest.mark.parametrize("block", [32, 64, 96])
def test_axes_and_blocks(axis, block):
    x = _x(70, 40, 6, seed=axis + block) if axis != -3 else _x(100, 4, 8)
    y, s = _check(x, dst_type=E4M3, axis=axis, block_size=block)
    ax = axis % 3
    assert list(s.shape) == [*x.shape[:ax], math.ceil(math.ceil(x.shape[ax] / block) / 2),
                             *x.shape[ax + 1:], 2]


def test_float4_packs_along_the_last_dim_whatever_the_axis():
    x = _x(64, 6, seed=5)
    y, s = _check(x, dst_type=E2M1, axis=0)
    assert y.shape == (64, 3) and s.shape == (1, 6, 2)
    codes = unpack_nibbles(y)
    assert torch.equal(fp4_codes_to_float(codes[:, 0], E2M1).double(),
                       _golden(x, axis=0)[0][:, 0])  # element 2i in the low nibble


def test_scale_layout_pairs():
    """Block 2j + k's code at [..., j, k]; an odd count padded with code 0."""
    x = torch.zeros(1, 96, dtype=torch.bfloat16)
    x[0, 0], x[0, 32], x[0, 64] = 1.0, 2.0, 4.0
    _, s = OP(x, dst_type=E4M3)
    assert s.tolist() == [[[127 - 8, 128 - 8], [129 - 8, 0]]]


def test_alg2_rounds_exponent_up():
    """scale_alg 2 (e2m1, dst_type_max 0 / 6): from amax's bf16 bits, the exponent up
    when the mantissa is at least 65 / 128; 7: 97 / 128; 6 - 12 otherwise: amax / max's
    exponent rounded up."""
    def code(a, **kw):
        x = torch.zeros(1, 32, dtype=torch.bfloat16)
        x[0, 0] = a
        return OP(x, scale_alg=2, **kw)[1][0, 0, 0].item()
    assert code(1.5) == 127 - 2 and code(1.5078125) == 128 - 2
    assert code(1.5078125, dst_type_max=7.0) == 127 - 2
    assert code(1.7578125, dst_type_max=7.0) == 128 - 2
    # dst_type_max 10: S = 20 / 10 = 2 exactly -> 128; 21 / 10 -> rounded up to 129
    assert code(20.0, dst_type_max=10.0) == 128 and code(21.0, dst_type_max=10.0) == 129
    # float32 input: amax truncated to bf16 (1.5078 - ulp stays below the threshold)
    x = torch.zeros(1, 32)
    x[0, 0] = 1.5078124
    assert OP(x, scale_alg=2)[1][0, 0, 0].item() == 127 - 2


def test_ocp_code_zero_block_is_zero():
    """The kernels scale a code-0 block (amax below 2^(emax - 126)) by 0 under OCP (ops-nn's
    golden would divide by 2^-127); the cuBLAS form scales by 2^127."""
    x = torch.full((1, 32), 2.0 ** -120, dtype=torch.float32)
    x[0, 1] = -(2.0 ** -121)
    y, s = OP(x, dst_type=E4M3)
    assert s[0, 0, 0] == 0 and (y.float() == 0).all() and torch.signbit(y.float()[0, 1])
    y, s = OP(x, dst_type=E4M3, scale_alg=1)
    assert s[0, 0, 0] == 0 and y.float()[0, 0] == 128.0


@pytest.mark.parametrize("dst", [E4M3, E5M2])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_float8_normal_and_subnormal_blocks(dst, dtype):
    """Blocks whose scaled values all lie at or above the format's smallest normal (the
    native kernel's normal-only form), blocks holding subnormals, zeros or signed zeros and
    ties of each, and a partial block: bit for bit the formula."""
    x = torch.zeros(5, 70)
    x[0] = torch.linspace(200.0, 440.0, 70)
    x[1] = torch.logspace(-14, 2, 70) * torch.tensor([1.0, -1.0]).repeat(35)
    x[2, ::2], x[2, 1::2] = 300.0, 300.0 * 2.0 ** -12  # subnormal ties after scaling
    x[3, :40], x[3, 40:] = -0.0, -(2.0 ** -20)
    x[4] = torch.randn(70) * torch.logspace(-6, 0, 70)
    _check(x.to(dtype), dst_type=dst)
    _check(x.to(dtype), dst_type=dst, scale_alg=1)


@pytest.mark.parametrize("dst", [E4M3, E2M1])
def test_nan_inf_blocks(dst):
    x = _x(3, 96, seed=9)
    x[0, 5], x[1, 40], x[2, 95] = float("nan"), float("inf"), -float("inf")
    y, s = _check(x, dst_type=dst)
    assert s[0, 0, 0] == 255 and s[1, 0, 1] == 255 and s[2, 1, 0] == 255
    assert s[0, 0, 1] != 255


def test_all_zero_and_saturation():
    x = torch.zeros(2, 64, dtype=torch.bfloat16)
    y, s = OP(x, dst_type=E4M3)
    assert (s == 0).all() and (y.float() == 0).all()
    # e2m1 rint: 7.5 / 2^0 scaled values round to 8 -> saturated to 6
    x = torch.full((1, 32), 7.5, dtype=torch.bfloat16)
    x[0, 0] = 4.0
    y, s = _check(x, dst_type=E2M1)
    assert s[0, 0, 0] == 127


@pytest.mark.parametrize("dst", [E4M3, E2M1])
def test_layouts(dst):
    x = _x(8, 64, seed=4)
    want = OP(x, dst_type=dst)
    for v in (x.t().contiguous().t(), x[:, :].expand(8, 64), x.unsqueeze(0).expand(3, 8, 64)[1]):
        got = OP(v, dst_type=dst)
        assert torch.equal(got[0].view(torch.uint8), want[0].view(torch.uint8))
        assert torch.equal(got[1], want[1])
    # stride 0 along the blocks' axis
    b = x[:1].expand(5, 64)
    y, s = OP(b, dst_type=dst)
    assert (s == s[:1]).all()
    # float8 y keeps x's layout (torch_npu's Meta: empty_like)
    t = x.t()
    y, _ = OP(t, dst_type=E4M3, axis=0)
    assert y.stride() == t.stride()


def test_empty():
    for shape, axis in (((0, 64), -1), ((4, 0), -1), ((0, 64), 0)):
        x = torch.zeros(shape, dtype=torch.bfloat16)
        y, s = OP(x, dst_type=E4M3, axis=axis)
        assert y.shape == x.shape
        assert list(s.shape) == list(torch.ops.npu.npu_dynamic_mx_quant(
            x.to("meta"), dst_type=E4M3, axis=axis)[1].shape)


def test_fake_matches_reference_and_dynamic_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = _x(5, 3, 70)
    for kw in ({"dst_type": E4M3}, {"dst_type": E2M1, "axis": 1}, {"dst_type": E5M2, "axis": 0}):
        real = OP(x, **kw)
        with FakeTensorMode() as mode:
            fake = OP(mode.from_tensor(x), **kw)
        for r, f in zip(real, fake):
            assert r.shape == f.shape and r.dtype == f.dtype

    def f(t):
        return OP(t, dst_type=E4M3)

    cf = torch.compile(f, backend="eager", dynamic=True, fullgraph=True)
    for rows, cols in ((3, 64), (7, 100)):
        t = _x(rows, cols)
        for a, b in zip(cf(t), f(t)):
            assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def test_ge_converter():
    from op_sdk.converters import ConversionError, convert_fx
    from tests.test_converters import fx_of_call

    x = _x(4, 64)
    graph = convert_fx(fx_of_call(OP.default, (x,), {"dst_type": E4M3, "scale_alg": 1}), NAME)
    (op,) = [o for o in graph.ops if o.type == "DynamicMxQuant"]
    assert op.attr_values()["dst_type"] == 36 and op.attr_values()["scale_alg"] == 1
    assert [d.dtype for d in op.output_desc] == ["DT_FLOAT8_E4M3FN", "DT_FLOAT8_E8M0"]
    with pytest.raises(ConversionError, match="float4"):
        convert_fx(fx_of_call(OP.default, (x,), {"dst_type": E2M1}), NAME)
