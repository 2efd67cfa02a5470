"""npu_add_rms_norm_quant: the native CPU kernel against the reference (one or two scale
sets, zero points, beta, div and mul modes, multi-dimensional gamma, strided and empty
inputs; the sum output `x` exact); values on hand-built cases; torch_npu's documented
contract beyond A2 / A3: the Ascend 950 dtype table and the float8 / HiFloat8 outputs (the
HiFloat8 and float8 encoders of op_sdk.ops._formats included) and their rules."""

import math

import pytest
import torch

from op_sdk.ops._formats import float_to_hif8, hif8_to_float, quantize_float8
from op_sdk.ops.add_rms_norm_quant import ARQ_DTYPES, add_rms_norm_quant_reference
from tests.ops._helpers import (
    T,
    assert_bits_equal,
    assert_int_close,
    assert_outputs_close,
    bad,
    bf16,
    fp16,
    fp32,
    i8,
    i32,
    npu,
    rand,
    rms_norm_fp64,
    strided,
    zeros,
)

SCHEMAS = [
    "npu_add_rms_norm_quant(Tensor x1, Tensor x2, Tensor gamma, Tensor scales1, Tensor? zero_points1, Tensor? beta=None, Tensor? scales2=None, Tensor? zero_points2=None, *, int axis=-1, float epsilon=1e-06, bool div_mode=True, int? dst_type=None) -> (Tensor, Tensor, Tensor)",  # noqa: E501
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_add_rms_norm_quant": "AddRmsNormQuant"}



def samples():
    h = 24
    return [
        ("npu_add_rms_norm_quant", (rand(5, h, dtype=fp16), rand(5, h, dtype=fp16), rand(h, dtype=fp16),
                                    torch.rand(h) + 0.01, torch.randint(-2, 2, (h,), dtype=torch.int32)),
         {}),
        ("npu_add_rms_norm_quant", (rand(2, 3, h, dtype=bf16), rand(2, 3, h, dtype=bf16), rand(h, dtype=bf16),
                                    (torch.rand(h) + 0.01).to(bf16), None, rand(h, dtype=bf16),
                                    (torch.rand(h) + 0.01).to(bf16)), {"div_mode": False}),
        # the 950 dtype table: HiFloat8 and float8 outputs
        ("npu_add_rms_norm_quant", (rand(5, h), rand(5, h), rand(h), torch.rand(h) + 0.01, None),
         {"dst_type": 290}),
        ("npu_add_rms_norm_quant", (rand(2, 3, h, dtype=bf16), rand(2, 3, h, dtype=bf16), rand(h, dtype=bf16),
                                    torch.rand(h) + 0.01, torch.randint(-2, 2, (h,), dtype=torch.int32)),
         {"dst_type": torch.float8_e4m3fn}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real): 2-D and 3-D inputs, the A2 / A3 dtypes with
    and without offsets, div_mode, the second scale set, beta; the 950 dtype table with every
    output (int8, float8, HiFloat8 codes 290-292)."""
    def pos(*shape, dtype=fp32):
        return (torch.rand(*shape) + 0.05).to(dtype)

    h = 24
    cases = []
    add = lambda *args, **kwargs: cases.append(("npu_add_rms_norm_quant", args, kwargs))  # noqa: E731
    for lead in [(5,), (2, 3)]:
        for dt, sdt, zdt in [(fp16, fp32, i32), (bf16, bf16, bf16)]:
            x1, x2, g = rand(*lead, h, dtype=dt), rand(*lead, h, dtype=dt), rand(h, dtype=dt)
            s, z = pos(h, dtype=sdt), torch.randint(-3, 3, (h,)).to(zdt)
            add(x1, x2, g, s, z)
            add(x1, x2, g, s, None, div_mode=False)
            add(x1, x2, g, s, z, None, pos(h, dtype=sdt), z)
            if dt == bf16:
                add(x1, x2, g, s, None, rand(h, dtype=dt))
    for lead in [(5,), (2, 3)]:
        for dt, sdt, zdt in [(fp16, fp32, i32), (bf16, fp32, i32), (fp32, fp32, fp32), (fp16, fp16, fp16),
                             (bf16, bf16, bf16), (fp16, fp32, fp32), (bf16, fp32, fp32)]:
            for dst in [None, torch.float8_e5m2, torch.float8_e4m3fn, 290, 291, 292]:
                x1, x2, g = rand(*lead, h, dtype=dt), rand(*lead, h, dtype=dt), rand(h, dtype=dt)
                s, z = pos(h, dtype=sdt), torch.randint(-3, 3, (h,)).to(zdt)
                add(x1, x2, g, s, z, None, s, z, dst_type=dst)
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("arq/axis", "npu_add_rms_norm_quant", (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16),
                                            T(16), None), {"axis": 0}, "axis", RuntimeError),
    ("arq/fp16-scales-dtype", "npu_add_rms_norm_quant", (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16),
                                                         T(16, dtype=fp16), T(16, dtype=bf16), None), {},
     "scales1", RuntimeError),
    ("arq/fp16-zp-dtype", "npu_add_rms_norm_quant", (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16),
                                                     T(16, dtype=fp16), T(16), T(16, dtype=i8)), {},
     "zero_points1", RuntimeError),
    ("arq/bf16-scales-dtype", "npu_add_rms_norm_quant", (T(4, 16, dtype=bf16), T(4, 16, dtype=bf16),
                                                         T(16, dtype=bf16), T(16, dtype=fp16), None), {},
     "scales1", RuntimeError),
    ("arq/scales-shape", "npu_add_rms_norm_quant", (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16),
                                                    T(16, dtype=fp16), T(8), None), {}, "scales1", RuntimeError),
    ("arq/fp64-x", "npu_add_rms_norm_quant", (T(4, 16, dtype=torch.float64), T(4, 16, dtype=torch.float64),
                                              T(16, dtype=torch.float64), T(16), None), {}, "x1", RuntimeError),
    ("arq/zp2-without-scales2", "npu_add_rms_norm_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16), T(16), None, None, None,
      T(16, dtype=i32)), {}, "zero_points2", RuntimeError),
    ("arq/dst-type", "npu_add_rms_norm_quant", (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16),
                                                T(16, dtype=fp16), T(16), None), {"dst_type": torch.int32},
     "dst_type", RuntimeError),
    ("arq/beta-shape", "npu_add_rms_norm_quant", (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16),
                                                  T(16, dtype=fp16), T(16), None, T(8, dtype=fp16)), {},
     "beta", RuntimeError),
]

BAD_CALLS = [
    bad("npu_add_rms_norm_quant", "axis", zeros(4, 8), zeros(4, 8), zeros(8), zeros(8), None, axis=0),
    bad("npu_add_rms_norm_quant", "x1", zeros(4, 8, dtype=torch.float64),
        zeros(4, 8, dtype=torch.float64), zeros(8, dtype=torch.float64), zeros(8, dtype=fp32), None),
    bad("npu_add_rms_norm_quant", "scales1", zeros(4, 8), zeros(4, 8), zeros(8), zeros(8, dtype=fp16), None),
    bad("npu_add_rms_norm_quant", "zero_points1",
        zeros(4, 8, dtype=fp16), zeros(4, 8, dtype=fp16), zeros(8, dtype=fp16), zeros(8, dtype=fp32),
        zeros(8, dtype=fp16)),
    bad("npu_add_rms_norm_quant", "scales1", zeros(4, 8), zeros(4, 8), zeros(8), zeros(7), None),
    bad("npu_add_rms_norm_quant", "zero_points2",
        zeros(4, 8), zeros(4, 8), zeros(8), zeros(8), None, None, None, zeros(8)),
    bad("npu_add_rms_norm_quant", "beta",
        zeros(4, 8), zeros(4, 8), zeros(8), zeros(8), None, zeros(8, dtype=fp16)),
    bad("npu_add_rms_norm_quant", "dst_type",
        zeros(4, 8), zeros(4, 8), zeros(8), zeros(8), None, dst_type=torch.quint4x2),
]


# ---- the native kernel against the reference ------------------------------------------

def _static_quant_args(dtype, n, two, zp):
    """(scales1, zero_points1, scales2, zero_points2) in the dtypes the contract pairs with x:
    fp32 scales and int32 zero points for fp16, bf16 for both with bf16."""
    def scales():
        s = torch.rand(n) * 0.05 + 0.01
        return s if dtype == fp16 else s.to(bf16)

    def zero_points():
        z = torch.randint(-3, 3, (n,), dtype=torch.int32)
        return z if dtype == fp16 else z.to(bf16)

    return (scales(), zero_points() if zp else None, scales() if two else None,
            zero_points() if two and zp else None)


@pytest.mark.parametrize("dtype", [fp16, bf16])
@pytest.mark.parametrize("shape", [(1, 96), (257, 96), (2, 3, 7), (2, 7168)])
@pytest.mark.parametrize("two,zp,beta,div", [(False, True, False, True),
                                             (True, True, True, True),
                                             (True, False, False, False),
                                             (False, False, True, False)])
def test_add_rms_norm_quant(dtype, shape, two, zp, beta, div):
    torch.manual_seed(0)
    h = shape[-1]
    x1, x2, g = rand(*shape, dtype=dtype), rand(*shape, dtype=dtype), rand(h, dtype=dtype)
    s1, z1, s2, z2 = _static_quant_args(dtype, h, two, zp)
    b = rand(h, dtype=dtype) if beta else None
    out = npu.npu_add_rms_norm_quant(x1, x2, g, s1, z1, b, s2, z2, div_mode=div)
    ref = add_rms_norm_quant_reference(x1, x2, g, s1, z1, b, s2, z2, div_mode=div)
    assert_outputs_close(out, ref, exact=(2,))
    if not two:
        assert (out[1] == 0).all()


def test_add_rms_norm_quant_non_contiguous_multi_dim_gamma_and_empty():
    torch.manual_seed(0)
    x1, x2 = strided(rand(4, 3, 16, dtype=bf16)), strided(rand(4, 3, 16, dtype=bf16))
    g = rand(3, 16, dtype=bf16)
    s = (torch.rand(3, 16) * 0.05 + 0.01).to(bf16)
    out = npu.npu_add_rms_norm_quant(x1, x2, g, s, None)
    assert_outputs_close(out, add_rms_norm_quant_reference(x1, x2, g, s, None), exact=(2,))
    e = torch.empty(0, 16, dtype=fp16)
    out = npu.npu_add_rms_norm_quant(e, e, torch.ones(16, dtype=fp16), torch.ones(16), None)
    assert [tuple(o.shape) for o in out] == [(0, 16)] * 3


# ---- semantics on hand-built cases ----------------------------------------------------------

def test_add_rms_norm_quant_y2_zero_without_scales2_and_beta():
    torch.manual_seed(5)
    x1, x2, g = torch.randn(4, 32, dtype=fp16), torch.randn(4, 32, dtype=fp16), torch.randn(32, dtype=fp16)
    beta = torch.randn(32, dtype=fp16)
    s1 = torch.rand(32) / 10 + 0.01
    zp = torch.randint(-3, 3, (32,), dtype=torch.int32)
    y1, y2, x = npu.npu_add_rms_norm_quant(x1, x2, g, s1, zp, beta)
    assert torch.equal(y2, torch.zeros_like(y1))
    y64, _ = rms_norm_fp64(x1.double() + x2.double(), g)
    expect = torch.round((y64 + beta.double()) / s1.double() + zp.double()).clamp(-128, 127)
    assert (y1.double() - expect).abs().max() <= 1


def test_add_rms_norm_quant_two_scale_sets_mul_mode():
    x1, x2 = torch.randn(3, 5, 32, dtype=bf16), torch.randn(3, 5, 32, dtype=bf16)
    g = torch.randn(32, dtype=bf16)
    s1, s2 = (torch.rand(32) * 20 + 1).to(bf16), (torch.rand(32) * 20 + 1).to(bf16)
    y1, y2, _ = npu.npu_add_rms_norm_quant(x1, x2, g, s1, None, None, s2, div_mode=False)
    y64, _ = rms_norm_fp64(x1.double() + x2.double(), g)
    for y, s in ((y1, s1), (y2, s2)):
        expect = torch.round(y64 * s.double()).clamp(-128, 127)
        assert (y.double() - expect).abs().max() <= 1


# ---- HiFloat8 and float8 encoders -------------------------------------------------------------

def _hif8_scalar(x: float) -> int:
    """The format's rules written out per value (independent of the vectorised encoder)."""
    if math.isnan(x):
        return 0
    a, s = abs(x), 128 if x < 0 else 0
    if a >= 40960:
        return s | 110
    if a < 2.0 ** -23:
        return 0
    if a < 2.0 ** -22:
        return s | 1
    e = math.floor(math.log2(a))
    fb = 0 if e < -15 else (3 if abs(e) <= 3 else (2 if abs(e) <= 7 else 1))
    q = math.floor((a / 2.0 ** e - 1) * 2 ** fb + 0.5)
    if q == 2 ** fb:
        e, q = e + 1, 0
    ae, en = abs(e), int(e < 0)
    if e < -15:
        c = e + 23
    elif e == 0:
        c = 8 + q
    elif ae == 1:
        c = 16 + 8 * en + q
    elif ae <= 3:
        c = 32 + 16 * en + 8 * (ae - 2) + q
    elif ae <= 7:
        c = 64 + 16 * en + 4 * (ae - 4) + q
    else:
        c = 96 + 16 * en + 2 * (ae - 8) + q
    return s | c


def test_hif8_encoder_matches_the_rules_value_by_value():
    torch.manual_seed(0)
    x = torch.randn(4000) * torch.pow(2.0, torch.randint(-26, 17, (4000,)).float())
    edge = torch.tensor([0.0, -0.0, 1.0, 1.0625, 1.1875, -2.5, 32768.0, 40959.0, 40960.0, 1e30,
                         float("inf"), -float("inf"), float("nan"), 2.0 ** -23, 2.0 ** -22,
                         1.5 * 2.0 ** -16, 2.0 ** -24])
    x = torch.cat([x, edge])
    assert float_to_hif8(x).tolist() == [_hif8_scalar(float(v)) for v in x]


def test_hif8_decoder_inverts_every_finite_code():
    codes = torch.arange(256, dtype=torch.uint8)
    values = hif8_to_float(codes)
    assert float(values[110]) == 32768.0 and float(values[238]) == -32768.0
    assert math.isnan(float(values[128])) and values[111] == float("inf")
    assert float(values[8]) == 1.0 and float(values[1]) == 2.0 ** -22
    finite = torch.isfinite(values) & (values != 0)
    assert torch.equal(float_to_hif8(values[finite]), codes[finite])
    # saturation and rounding half away from zero: 1 + 1/16 is halfway to 1.125
    assert float_to_hif8(torch.tensor([1.0625, -1.0625, 1e9])).tolist() == [9, 137, 110]


def test_float8_saturates_and_keeps_nan():
    v = torch.tensor([1e6, -1e6, float("nan"), 0.3])
    e4 = quantize_float8(v, 24)
    assert e4.dtype == torch.float8_e4m3fn
    assert e4.float()[:2].tolist() == [448.0, -448.0] and math.isnan(float(e4.float()[2]))
    assert quantize_float8(v, 291).float()[:2].tolist() == [57344.0, -57344.0]


# ---- the 950 dtype table (the documented contract beyond A2 / A3) -------------------------

DST = {"int8": None, "e5m2": torch.float8_e5m2, "e4m3fn": torch.float8_e4m3fn, "hif8": 290,
       "npu_e5m2": 291, "npu_e4m3fn": 292}
ROWS = [(x, s, z) for x, pairs in ARQ_DTYPES.items() for s, z in pairs]


def _scales(h, sdt, zdt, zp):
    s = (torch.rand(h) * 0.05 + 0.01).to(sdt)
    z = None
    if zp:
        z = torch.randint(-3, 3, (h,)).to(zdt) if zdt == torch.int32 else (torch.randn(h) * 2).to(zdt)
    return s, z


@pytest.mark.parametrize("x_dtype,s_dtype,z_dtype", ROWS, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("dst", list(DST), ids=str)
@pytest.mark.parametrize("shape", [(5, 48), (2, 3, 40)])
def test_add_rms_norm_quant_950_table(x_dtype, s_dtype, z_dtype, dst, shape):
    torch.manual_seed(0)
    h = shape[-1]
    x1, x2 = torch.randn(*shape).to(x_dtype), torch.randn(*shape).to(x_dtype)
    g, beta = torch.randn(h).to(x_dtype), torch.randn(h).to(x_dtype)
    s1, z1 = _scales(h, s_dtype, z_dtype, True)
    s2, z2 = _scales(h, s_dtype, z_dtype, True)
    for args, div in (((s1, z1, beta, s2, z2), True), ((s1, None, None, None, None), False)):
        out = npu.npu_add_rms_norm_quant(x1, x2, g, *args, div_mode=div, dst_type=DST[dst])
        ref = add_rms_norm_quant_reference(x1, x2, g, *args, div_mode=div, dst_type=DST[dst])
        assert_bits_equal(out[2], ref[2])
        for o, r in zip(out[:2], ref[:2]):
            if dst == "int8":
                assert_int_close(o, r, max_fraction=0.002)
            else:
                assert_bits_equal(o, r)
        want = {"hif8": torch.uint8, "int8": torch.int8}.get(dst)
        assert out[0].dtype == (want or out[0].dtype)
    if dst == "e4m3fn":  # the values the format holds: y / s rounded to float8
        y = torch.nn.functional.rms_norm(x1.float() + x2.float(), (h,), eps=1e-6) * g.float()
        expect = (y / s1.float()).clamp(-448, 448).to(torch.float8_e4m3fn).float()
        got = npu.npu_add_rms_norm_quant(x1, x2, g, s1, None, dst_type=torch.float8_e4m3fn)[0]
        assert (got.float() - expect).abs().le(expect.abs() * 0.07 + 1e-3).all()


def test_add_rms_norm_quant_float8_strided_input_and_zero_y2():
    x1 = torch.randn(6, 2, 32, dtype=bf16)[:, 0]
    x2 = torch.randn(6, 32, dtype=bf16)
    g, s = torch.randn(32, dtype=bf16), torch.rand(32) + 0.1
    out = npu.npu_add_rms_norm_quant(x1, x2, g, s, None, dst_type=290)
    ref = add_rms_norm_quant_reference(x1, x2, g, s, None, dst_type=290)
    for o, r in zip(out, ref):
        assert_bits_equal(o, r)
    assert out[1].dtype == torch.uint8 and (out[1] == 0).all()


# (case id, x dtype, scales dtype, zero points dtype, kwargs, argument named in the error)
BAD_ARQ = [
    ("fp32-x-bf16-scales", fp32, bf16, None, {}, "scales1"),
    ("bf16-x-fp16-scales", bf16, fp16, None, {}, "scales1"),
    ("fp16-x-fp16-scales-int32-zp", fp16, fp16, torch.int32, {}, "zero_points1"),
    ("bf16-x-fp32-scales-bf16-zp", bf16, fp32, bf16, {}, "zero_points1"),
    ("dst-int32", fp16, fp32, None, {"dst_type": torch.int32}, "dst_type"),
    ("dst-hif8-code-293", fp16, fp32, None, {"dst_type": 293}, "dst_type"),
]


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("case", BAD_ARQ, ids=[c[0] for c in BAD_ARQ])
def test_add_rms_norm_quant_table_violations_name_the_argument(case, device):
    _, xdt, sdt, zdt, kwargs, arg = case
    x = torch.randn(4, 16, device=device).to(xdt)
    g = torch.randn(16, device=device).to(xdt)
    s = torch.rand(16, device=device).to(sdt)
    z = torch.zeros(16, device=device).to(zdt) if zdt is not None else None
    with pytest.raises(RuntimeError, match=rf"npu_add_rms_norm_quant: argument '{arg}'"):
        npu.npu_add_rms_norm_quant(x, x, g, s, z, **kwargs)


def test_add_rms_norm_quant_second_set_dtypes_follow_the_first():
    x, g = torch.randn(4, 16, dtype=fp16), torch.randn(16, dtype=fp16)
    with pytest.raises(RuntimeError, match="argument 'scales2'"):
        npu.npu_add_rms_norm_quant(x, x, g, torch.rand(16), None, None, torch.rand(16).half())
    with pytest.raises(RuntimeError, match="argument 'zero_points2'"):
        npu.npu_add_rms_norm_quant(x, x, g, torch.rand(16), torch.zeros(16, dtype=torch.int32),
                                   None, torch.rand(16), torch.zeros(16))
