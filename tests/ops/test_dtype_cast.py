"""npu_dtype_cast and _npu_dtype_cast: always a new tensor, float -> int truncation, NaN ->
0, complex casts both ways (torch_npu's documented contract beyond A2 / A3), the backward
from a complex output, and the Ascend 950 formats (float8, HiFloat8, float4, int4 targets;
input_dtype relabelling the input's storage), checked against brute-force nearest-value
searches over every code of each format."""

import itertools

import pytest
import torch

from tests.ops._helpers import T, bf16, fp16, fp32, i8, i32, npu, rand

SCHEMAS = [
    "npu_dtype_cast(Tensor input, int dtype, int? input_dtype=None) -> Tensor",
    "_npu_dtype_cast(Tensor input, ScalarType dtype) -> Tensor",
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_dtype_cast": "Cast", "npu::_npu_dtype_cast": "Cast"}
# sample calls the converter refuses, by words of the error: forms it does not write
# float4 / int4 (two values per byte): TorchAir bitcasts and reshapes around Cast; op_sdk's
# converter does not yet
GE_REFUSED = {"npu::npu_dtype_cast": ("is not a dtype the converter knows",)}



def samples():
    return [
        ("npu_dtype_cast", (rand(5, 7), torch.complex64), {}),
        ("npu_dtype_cast", (rand(5, 7), torch.int8), {}),
        ("npu_dtype_cast", (rand(5, 7, dtype=bf16), torch.float32), {"input_dtype": bf16}),
        ("_npu_dtype_cast", (rand(5, 7, grad=True), torch.float16), {}),
        ("npu_dtype_cast", (rand(5, 8), 296), {}),
        ("npu_dtype_cast", (torch.randint(0, 256, (5, 4), dtype=torch.uint8), 6), {"input_dtype": 290}),
        ("npu_dtype_cast", (rand(5, 7), torch.float8_e4m3fn), {}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real): complex casts, every float input to every
    output dtype, 2-D and 3-D inputs."""
    cases = []
    for src, dst in itertools.product((fp32, torch.complex64), (torch.complex64, torch.complex128, fp32)):
        cases.append(("npu_dtype_cast", (rand(3, 5).to(src), dst), {}))
    for src, dst in itertools.product((fp32, fp16, bf16), (torch.int8, torch.int32, fp16, bf16, fp32)):
        cases.append(("npu_dtype_cast", (rand(5, 7, dtype=src), dst), {}))
        cases.append(("_npu_dtype_cast", (rand(2, 3, 7, dtype=src), dst), {}))
    # the Ascend 950 formats: float8 / hifloat8 / float4 / int4 targets (float4 / int4: the
    # last dim halves), input_dtype relabelling uint8 storage (float4: the last dim doubles)
    for src, dst in itertools.product((fp32, fp16, bf16), (23, 24, 290, 291, 292, 296, 297)):
        cases.append(("npu_dtype_cast", (rand(5, 8, dtype=src), dst), {}))
        cases.append(("npu_dtype_cast", (rand(2, 3, 6, dtype=src), dst), {}))
    for shape in ((5, 8), (2, 3, 6)):
        cases.append(("npu_dtype_cast", (torch.randint(-8, 8, shape, dtype=i32), 285), {"input_dtype": 3}))
        codes = torch.randint(0, 256, shape, dtype=torch.uint8)
        for src, dst in [(290, 6), (290, 5), (290, 15), (290, 296), (291, 6), (292, 15), (292, 297),
                         (296, 6), (296, 5), (297, 15), (296, 290), (297, 292), (296, 23)]:
            cases.append(("npu_dtype_cast", (codes, dst), {"input_dtype": src}))
    for src in (torch.float8_e5m2, torch.float8_e4m3fn):
        cases.append(("npu_dtype_cast", (rand(5, 8).to(src), 6), {}))
        cases.append(("npu_dtype_cast", (rand(5, 8).to(src), 296), {}))
        cases.append(("_npu_dtype_cast", (rand(5, 7).to(src), bf16), {}))
        cases.append(("_npu_dtype_cast", (rand(2, 3, 7), src), {}))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("cast/dtype", "npu_dtype_cast", (T(4), 12), {}, "dtype", RuntimeError),
    ("cast/input-dtype", "npu_dtype_cast", (T(4), 5), {"input_dtype": 5}, "input_dtype", RuntimeError),
    ("_cast/dtype", "_npu_dtype_cast", (T(4), torch.qint8), {}, "dtype", RuntimeError),
    ("cast/int4-odd-last-dim", "npu_dtype_cast", (T(3, 5, dtype=i32), 285), {}, "input", RuntimeError),
    ("cast/fp4-odd-last-dim", "npu_dtype_cast", (T(3, 5), 296), {}, "input", RuntimeError),
    ("cast/fp4-0-dim", "npu_dtype_cast", (T(), 297), {}, "input", RuntimeError),
    ("cast/int4-from-float", "npu_dtype_cast", (T(4), 285), {}, "dtype", RuntimeError),
    ("cast/hif8-from-int8", "npu_dtype_cast", (T(4, dtype=i8), 290), {}, "dtype", RuntimeError),
    ("cast/fp8-to-int", "npu_dtype_cast", (T(4, dtype=torch.float8_e4m3fn), 3), {}, "dtype", RuntimeError),
    ("cast/fp8-to-fp8", "npu_dtype_cast", (T(4, dtype=torch.float8_e4m3fn), 23), {}, "dtype", RuntimeError),
    ("cast/int4-input", "npu_dtype_cast", (T(4, dtype=torch.uint8), 6), {"input_dtype": 285}, "input_dtype", RuntimeError),  # noqa: E501
    ("cast/hif8-input-size", "npu_dtype_cast", (T(4), 6), {"input_dtype": 290}, "input_dtype", RuntimeError),
    ("cast/fp4-input-0-dim", "npu_dtype_cast", (T(dtype=torch.uint8), 6), {"input_dtype": 296}, "input_dtype", RuntimeError),  # noqa: E501
    ("cast/unknown-code", "npu_dtype_cast", (T(4), 293), {}, "dtype", RuntimeError),
    ("cast/unknown-input-code", "npu_dtype_cast", (T(4), 6), {"input_dtype": 298}, "input_dtype", RuntimeError),
    ("_cast/fp8-to-int", "_npu_dtype_cast", (T(4, dtype=torch.float8_e5m2), i32), {}, "dtype", RuntimeError),
]


# ---- semantics on hand-built cases ----------------------------------------------------------

def test_dtype_cast_is_a_new_tensor_and_truncates():
    x = torch.tensor([-1.7, -0.5, 0.5, 1.7, 2.9])
    y = npu.npu_dtype_cast(x, torch.int32)
    assert y.tolist() == [-1, 0, 0, 1, 2]
    same = npu.npu_dtype_cast(x, torch.float32)
    assert same.data_ptr() != x.data_ptr() and torch.equal(same, x)
    same2 = npu._npu_dtype_cast(x, torch.float32)
    assert same2.data_ptr() != x.data_ptr()


# ---- complex casts (the documented contract beyond A2 / A3) -----------------------------------

@pytest.mark.parametrize("src,dst", list(itertools.product(
    [fp32, fp16, torch.complex64, torch.complex128],
    [torch.complex64, torch.complex128, fp32, torch.int32])))
def test_dtype_cast_complex(src, dst):
    torch.manual_seed(0)
    x = torch.randn(4, 5, dtype=src) * 3
    for out in (npu.npu_dtype_cast(x, dst), npu._npu_dtype_cast(x, dst)):
        assert out.dtype == dst and out.data_ptr() != x.data_ptr()
        real = torch.real(x) if x.is_complex() else x
        if dst.is_complex:
            expect = x.to(dst)
        else:
            expect = real.to(dst)
        assert torch.equal(out, expect)


def test_dtype_cast_complex32_and_nan_to_zero():
    x = torch.tensor([1.5, -2.0, 0.25])
    c = npu.npu_dtype_cast(x, 8)
    assert c.dtype == torch.complex32 and torch.equal(npu.npu_dtype_cast(c, 9).real, x)
    assert npu.npu_dtype_cast(torch.tensor([float("nan"), 2.9, -2.9]), torch.int8).tolist() == [0, 2, -2]


def test_dtype_cast_backward_from_complex_is_the_real_part():
    x = torch.randn(3, requires_grad=True)
    npu.npu_dtype_cast(x, torch.complex64).abs().sum().backward()
    torch.testing.assert_close(x.grad, torch.sign(x.detach()))


# ---- the Ascend 950 formats: float8, HiFloat8, float4, int4 ---------------------------------

from tests.conformance._golden import hifloat8_to_float as hif8_golden  # noqa: E402

F8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
E1M2 = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]


def _edge_values():
    torch.manual_seed(1)
    v = torch.cat([torch.randn(400) * s for s in (1e-6, 1e-3, 0.1, 1.0, 30.0, 3000.0, 1e5)])
    special = torch.tensor([0.0, -0.0, 1.0, -1.0, 0.5, 2.5, 3.5, 5.0, 7.0, 15.5, 1.0625, 1.1875,
                            448.0, 464.0, 480.0, 500.0, 57344.0, 61440.0, 1e9, 32768.0, 40959.0,
                            40960.0, 2.0 ** -23, 2.0 ** -22, 2.0 ** -24, 1e-30,
                            float("inf"), float("-inf"), float("nan")])
    return torch.cat([v, special, -special])


def _nearest(x, values, codes, ties):
    """Brute force: for each x (float64) the code of the nearest of `values`; equal
    distances go to the even code (ties="even") or to the larger magnitude ("away")."""
    d = (x[:, None] - values[None, :]).abs()
    best = d.min(dim=1, keepdim=True).values
    cand = d == best
    if ties == "even":
        idx = (cand.long() * (1 + (codes % 2 == 0).long())[None, :]).argmax(dim=1)
    else:
        idx = torch.where(cand, values.abs()[None, :], -1.0).argmax(dim=1)
    return codes[idx]


@pytest.mark.parametrize("dst", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("src", [fp32, fp16, bf16])
def test_float8_target_is_nearest_even_saturating(src, dst):
    x = _edge_values().to(src)
    out = npu.npu_dtype_cast(x, dst)
    assert out.dtype == dst and out.shape == x.shape
    all_codes = torch.arange(256, dtype=torch.uint8)
    vals = all_codes.view(dst).double()
    finite = torch.isfinite(vals) & ~((all_codes == 128))  # -0 (0x80) duplicates +0
    vals, codes = vals[finite], all_codes[finite].long()
    xd = x.double().clamp(-F8_MAX[dst], F8_MAX[dst])
    ok = ~torch.isnan(xd)
    expect = all_codes.view(dst).double()[_nearest(xd[ok], vals, codes, "even")]
    # the nearest value, ties to the even code (0x80, -0, is left out of the search: a
    # negative value that rounds to zero gives -0, equal to 0 here, its sign checked below)
    assert torch.equal(out.double()[ok], expect)
    assert torch.equal(torch.signbit(out.double()[ok]), torch.signbit(xd[ok]))
    assert torch.isnan(out.float()[~ok]).all()
    assert npu.npu_dtype_cast(torch.tensor([float("inf"), float("-inf")]), dst).float().tolist() == \
        [F8_MAX[dst], -F8_MAX[dst]]


@pytest.mark.parametrize("src", [fp32, fp16, bf16])
def test_hifloat8_target_is_nearest_away_saturating(src):
    x = _edge_values().to(src)
    out = npu.npu_dtype_cast(x, 290)
    assert out.dtype == torch.uint8 and out.shape == x.shape
    all_codes = torch.arange(256, dtype=torch.uint8)
    vals = hif8_golden(all_codes).double()
    keep = torch.isfinite(vals)
    vals, codes = vals[keep], all_codes[keep].long()
    xd = x.double()
    ok = ~torch.isnan(xd)
    expect = _nearest(xd[ok].clamp(-32768.0, 32768.0), vals, codes, "away")
    assert torch.equal(out.long()[ok], expect)
    assert (out[~ok] == 0).all()  # NaN -> 0
    assert npu.npu_dtype_cast(torch.tensor([float("inf"), float("-inf")]), 290).tolist() == [0x6E, 0xEE]


@pytest.mark.parametrize("code,grid", [(296, E2M1), (297, E1M2)])
@pytest.mark.parametrize("src", [fp32, fp16, bf16])
def test_float4_target_goes_through_bf16_and_packs_two_per_byte(src, code, grid):
    x = _edge_values().to(src)
    x = x[: x.numel() // 4 * 4].reshape(2, -1)
    out = npu.npu_dtype_cast(x, code)
    assert out.dtype == torch.uint8 and out.shape == (2, x.shape[1] // 2)
    nib = torch.stack((out.long() & 15, out.long() >> 4), dim=-1).reshape(x.shape)
    mags = torch.tensor(grid, dtype=torch.float64)
    b = x.to(bf16).double().reshape(-1)
    ok = ~torch.isnan(b)
    a = b[ok].abs().clamp(max=grid[-1])
    mag = _nearest(a, mags, torch.arange(8), "even")
    expect = torch.where(torch.signbit(b[ok]), mag + 8, mag)
    assert torch.equal(nib.reshape(-1)[ok], expect)
    assert (nib.reshape(-1)[~ok] == 0).all()  # NaN -> +0


def test_float4_double_rounding_through_bf16():
    # 2.5 + 2^-20 rounds to 3 directly, but bf16 makes it 2.5, a tie that goes to the even 2
    x = torch.tensor([2.5 + 2.0 ** -20, 2.5, 3.5, -5.0, 0.25, 0.75, 7.0, 100.0])
    out = npu.npu_dtype_cast(x, 296)
    back = npu.npu_dtype_cast(out, 6, input_dtype=296)
    assert back.tolist() == [2.0, 2.0, 4.0, -4.0, 0.0, 1.0, 6.0, 6.0]
    e1m2 = npu.npu_dtype_cast(torch.tensor([0.125, 0.375, 1.125, 1.875, -9.0, 0.1]), 297)
    assert npu.npu_dtype_cast(e1m2, 6, input_dtype=297).tolist() == [0.0, 0.5, 1.0, 1.75, -1.75, 0.0]


def test_int4_target_packs_the_low_four_bits():
    x = torch.tensor([[1, 2, 3, 4, -1, -8, 7, 8], [17, -9, 0, 15, 16, -16, 5, -5]], dtype=i32)
    out = npu.npu_dtype_cast(x, 285)
    assert out.dtype == torch.uint8 and out.shape == (2, 4)
    nib = (x & 15).reshape(2, 4, 2)
    assert torch.equal(out.long(), (nib[..., 0] | (nib[..., 1] << 4)).long())
    assert out[0].tolist() == [0x21, 0x43, 0x8F, 0x87]


def test_every_code_round_trips():
    codes = torch.arange(256, dtype=torch.uint8)
    # HiFloat8: decode is exact; re-encoding gives the code back (NaN -> 0, +-inf saturate)
    for dst in (fp32, fp16, bf16):
        v = npu.npu_dtype_cast(codes, dst, input_dtype=290)
        torch.testing.assert_close(v.double(), hif8_golden(codes).double(), equal_nan=True,
                                   atol=0, rtol=0)
        back = npu.npu_dtype_cast(v, 290)
        expect = codes.clone()
        expect[128], expect[0x6F], expect[0xEF] = 0, 0x6E, 0xEE
        assert torch.equal(back, expect)
    # float8 stored as uint8, relabelled by input_dtype (23 / 24 and 291 / 292 alike)
    for code, f8 in ((23, torch.float8_e5m2), (291, torch.float8_e5m2), (24, torch.float8_e4m3fn),
                     (292, torch.float8_e4m3fn)):
        v = npu.npu_dtype_cast(codes, 6, input_dtype=code)
        torch.testing.assert_close(v, codes.view(f8).float(), equal_nan=True, atol=0, rtol=0)
        back = npu.npu_dtype_cast(v, code).view(torch.uint8)
        fin = torch.isfinite(v)
        assert torch.equal(back[fin], codes[fin])
    # float4: every byte (two values) decodes exactly and re-encodes to itself, also through
    # float8 / hifloat8
    for code, grid in ((296, E2M1), (297, E1M2)):
        v = npu.npu_dtype_cast(codes.reshape(16, 16), 6, input_dtype=code)
        assert v.shape == (16, 32)
        g = torch.tensor(grid)
        lo, hi = codes.long() & 15, codes.long() >> 4
        dec = lambda n: torch.where(n >= 8, -g[n & 7], g[n & 7])  # noqa: E731
        assert torch.equal(v.reshape(-1), torch.stack((dec(lo), dec(hi)), -1).reshape(-1))
        assert torch.equal(npu.npu_dtype_cast(v, code), codes.reshape(16, 16))
        for mid in (290, 291, 292):
            m = npu.npu_dtype_cast(codes.reshape(16, 16), mid, input_dtype=code)
            assert m.shape == (16, 32)
            r = npu.npu_dtype_cast(m, code, input_dtype=mid)
            if mid == 290:  # hifloat8 has one zero: -0 comes back as +0, the same value
                assert torch.equal(npu.npu_dtype_cast(r, 6, input_dtype=code), v)
            else:
                assert torch.equal(r, codes.reshape(16, 16))


def test_input_dtype_relabels_storage():
    x = torch.randn(3, 4)
    bits = x.view(i32)
    assert torch.equal(npu.npu_dtype_cast(bits, torch.float16, input_dtype=6), x.half())
    # a float8 tensor and its uint8 bits relabelled by input_dtype give the same cast
    f = x.to(torch.float8_e4m3fn)
    assert torch.equal(npu.npu_dtype_cast(f, bf16),
                       npu.npu_dtype_cast(f.view(torch.uint8), bf16, input_dtype=24))
    # float4 storage: the last dim doubles
    y = npu.npu_dtype_cast(torch.zeros(2, 3, 5, dtype=torch.uint8), 5, input_dtype=297)
    assert y.shape == (2, 3, 10) and y.dtype == fp16


def test_same_format_copies():
    u = torch.randint(0, 256, (4, 6), dtype=torch.uint8)
    for code in (290, 296, 297):
        out = npu.npu_dtype_cast(u, code, input_dtype=code)
        assert torch.equal(out, u) and out.data_ptr() != u.data_ptr()
    f = torch.randn(4, 6).to(torch.float8_e5m2)
    out = npu.npu_dtype_cast(f, torch.float8_e5m2)
    assert out.dtype == torch.float8_e5m2 and out.data_ptr() != f.data_ptr()
    assert torch.equal(out.view(torch.uint8), f.view(torch.uint8))


def test_950_formats_fake_matches_reference():
    from torch._subclasses.fake_tensor import FakeTensorMode

    for name, args, kwargs in meta_grid():
        real = getattr(npu, name)(*args, **kwargs)
        with FakeTensorMode() as mode:
            fargs = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
            fake = getattr(npu, name)(*fargs, **kwargs)
        assert (fake.shape, fake.dtype) == (real.shape, real.dtype), (name, kwargs)


def test_950_format_outputs_and_autograd():
    x = torch.randn(4, 6, requires_grad=True)
    # uint8-stored formats are not differentiable; a float8 output passes its gradient back
    assert not npu.npu_dtype_cast(x, 290).requires_grad
    assert not npu.npu_dtype_cast(x, 296).requires_grad
    y = npu.npu_dtype_cast(x, torch.float8_e4m3fn)
    assert y.requires_grad
    y.float().sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))
