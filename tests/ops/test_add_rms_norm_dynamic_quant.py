"""npu_add_rms_norm_dynamic_quant: the native CPU kernel against the reference over every
combination of smoothing scales, output_mask and beta (the sum output `x` exact; a branch
that does not run gives (0,) outputs), zero rows, strided and empty inputs; the branches
and values on hand-built cases; the int4 (quint4x2 / torch_npu.int4) and Ascend 950 float8 /
HiFloat8 y_dtypes."""

import pytest
import torch

from op_sdk.ops._common import unpack_int4
from op_sdk.ops._formats import float_to_hif8
from op_sdk.ops.add_rms_norm_dynamic_quant import add_rms_norm_dynamic_quant_reference
from tests.ops._helpers import (
    T,
    assert_bits_equal,
    assert_outputs_close,
    bad,
    bf16,
    fp16,
    npu,
    rand,
    rms_norm_fp64,
    strided,
    zeros,
)

SCHEMAS = [
    "npu_add_rms_norm_dynamic_quant(Tensor x1, Tensor x2, Tensor gamma, *, Tensor? smooth_scale1=None, Tensor? smooth_scale2=None, Tensor? beta=None, float epsilon=1e-06, bool[2]? output_mask=None, int? y_dtype=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",  # noqa: E501
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_add_rms_norm_dynamic_quant": "AddRmsNormDynamicQuant"}
# sample calls the converter refuses, by words of the error: forms it does not write
GE_REFUSED = {"npu::npu_add_rms_norm_dynamic_quant": ("torch.quint4x2 (int4 packed in int32)",)}



def samples():
    h = 24
    return [
        ("npu_add_rms_norm_dynamic_quant", (rand(5, h, dtype=bf16), rand(5, h, dtype=bf16), rand(h, dtype=bf16)),
         {"smooth_scale1": rand(h, dtype=bf16), "output_mask": [True, False]}),
        ("npu_add_rms_norm_dynamic_quant", (rand(2, 3, h, dtype=fp16), rand(2, 3, h, dtype=fp16),
                                            rand(h, dtype=fp16)),
         {"smooth_scale1": rand(h, dtype=fp16), "smooth_scale2": rand(h, dtype=fp16),
          "beta": rand(h, dtype=fp16)}),
        ("npu_add_rms_norm_dynamic_quant", (rand(5, h, dtype=bf16), rand(5, h, dtype=bf16), rand(h, dtype=bf16)),
         {}),
        # int4 packed 8 per int32; Ascend 950's float8 / HiFloat8 outputs
        ("npu_add_rms_norm_dynamic_quant", (rand(5, h, dtype=fp16), rand(5, h, dtype=fp16), rand(h, dtype=fp16)),
         {"y_dtype": torch.quint4x2, "smooth_scale1": rand(h, dtype=fp16),
          "smooth_scale2": rand(h, dtype=fp16)}),
        ("npu_add_rms_norm_dynamic_quant", (rand(2, 3, h, dtype=bf16), rand(2, 3, h, dtype=bf16),
                                            rand(h, dtype=bf16)),
         {"y_dtype": torch.float8_e4m3fn, "output_mask": [False, True]}),
        ("npu_add_rms_norm_dynamic_quant", (rand(5, h, dtype=bf16), rand(5, h, dtype=bf16), rand(h, dtype=bf16)),
         {"y_dtype": 290, "beta": rand(h, dtype=bf16)}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real): 2-D and 3-D inputs, every dtype, smoothing,
    beta, output masks."""
    h = 24
    cases = []
    for lead in [(5,), (2, 3)]:
        for dt in (fp16, bf16):
            x1, x2, g = rand(*lead, h, dtype=dt), rand(*lead, h, dtype=dt), rand(h, dtype=dt)
            s1, s2 = (torch.rand(h) + 0.05).to(dt), (torch.rand(h) + 0.05).to(dt)
            b = rand(h, dtype=dt)
            for kwargs in ({}, {"smooth_scale1": s1, "smooth_scale2": s2},
                           {"smooth_scale1": s1, "smooth_scale2": s2, "beta": b},
                           {"output_mask": [True, True]}, {"output_mask": [True, False]}):
                cases.append(("npu_add_rms_norm_dynamic_quant", (x1, x2, g), kwargs))
            # int4 (quint4x2, torch_npu.int4 = 285) and the 950 8-bit float outputs
            for y_dtype in (torch.quint4x2, 285, torch.float8_e5m2, torch.float8_e4m3fn, 290,
                            291, 292):
                for kwargs in ({"y_dtype": y_dtype},
                               {"y_dtype": y_dtype, "smooth_scale1": s1, "smooth_scale2": s2},
                               {"y_dtype": y_dtype, "output_mask": [False, True]}):
                    cases.append(("npu_add_rms_norm_dynamic_quant", (x1, x2, g), kwargs))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("ardq/1-dim", "npu_add_rms_norm_dynamic_quant", (T(16, dtype=fp16), T(16, dtype=fp16),
                                                      T(16, dtype=fp16)), {}, "x1", RuntimeError),
    ("ardq/fp32", "npu_add_rms_norm_dynamic_quant", (T(4, 16), T(4, 16), T(16)), {}, "x1", RuntimeError),
    ("ardq/mask-both-false", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)), {"output_mask": [False, False]},
     "output_mask", RuntimeError),
    ("ardq/mask-length", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)), {"output_mask": [True]},
     "output_mask", RuntimeError),
    ("ardq/smooth1-needs-mask0", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)),
     {"smooth_scale1": T(16, dtype=fp16), "output_mask": [False, True]}, "smooth_scale1", RuntimeError),
    ("ardq/smooth2-needs-mask1", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)),
     {"smooth_scale2": T(16, dtype=fp16), "output_mask": [True, False]}, "smooth_scale2", RuntimeError),
    ("ardq/smooth2-needs-smooth1", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)), {"smooth_scale2": T(16, dtype=fp16)},
     "smooth_scale2", RuntimeError),
    ("ardq/smooth-dtype", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)), {"smooth_scale1": T(16)},
     "smooth_scale1", RuntimeError),
    ("ardq/beta-len", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)), {"beta": T(8, dtype=fp16)},
     "beta", RuntimeError),
    ("ardq/y-dtype", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)), {"y_dtype": torch.int32},
     "y_dtype", RuntimeError),
    ("ardq/y-dtype-293", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)), {"y_dtype": 293},
     "y_dtype", RuntimeError),
    ("ardq/int4-last-dim", "npu_add_rms_norm_dynamic_quant",
     (T(4, 12, dtype=fp16), T(4, 12, dtype=fp16), T(12, dtype=fp16)), {"y_dtype": torch.quint4x2},
     "x1", RuntimeError),
]

BAD_CALLS = [
    bad("npu_add_rms_norm_dynamic_quant", "x1", zeros(8), zeros(8), zeros(8)),
    bad("npu_add_rms_norm_dynamic_quant", "gamma", zeros(4, 8), zeros(4, 8), zeros(2, 8)),
    bad("npu_add_rms_norm_dynamic_quant", "smooth_scale1",
        zeros(4, 8), zeros(4, 8), zeros(8), smooth_scale1=zeros(8, dtype=fp16)),
    bad("npu_add_rms_norm_dynamic_quant", "beta", zeros(4, 8), zeros(4, 8), zeros(8), beta=zeros(9)),
    bad("npu_add_rms_norm_dynamic_quant", "smooth_scale2",
        zeros(4, 8), zeros(4, 8), zeros(8), smooth_scale2=zeros(8)),
    bad("npu_add_rms_norm_dynamic_quant", "output_mask",
        zeros(4, 8), zeros(4, 8), zeros(8), output_mask=[False, False]),
    bad("npu_add_rms_norm_dynamic_quant", "smooth_scale1",
        zeros(4, 8), zeros(4, 8), zeros(8), smooth_scale1=zeros(8), output_mask=[False, True]),
    bad("npu_add_rms_norm_dynamic_quant", "smooth_scale2",
        zeros(4, 8), zeros(4, 8), zeros(8), smooth_scale2=zeros(8), output_mask=[True, False]),
    bad("npu_add_rms_norm_dynamic_quant", "output_mask", zeros(4, 8), zeros(4, 8), zeros(8),
        output_mask=[True, True, True]),
    bad("npu_add_rms_norm_dynamic_quant", "y_dtype",
        zeros(4, 8), zeros(4, 8), zeros(8), y_dtype=torch.int32),
    bad("npu_add_rms_norm_dynamic_quant", "x1",
        zeros(4, 12), zeros(4, 12), zeros(12), y_dtype=285),
]


# ---- the native kernel against the reference ------------------------------------------

BRANCHES = [  # (smooth1, smooth2, output_mask)
    (False, False, None), (True, False, None), (True, True, None), (False, False, [True, True]),
    (False, True, [False, True]), (True, False, [True, False]), (False, False, [False, True]),
]


@pytest.mark.parametrize("dtype", [fp16, bf16])
@pytest.mark.parametrize("shape", [(1, 96), (257, 96), (2, 3, 7), (3, 7168)])
@pytest.mark.parametrize("sm1,sm2,mask", BRANCHES)
@pytest.mark.parametrize("beta", [False, True])
def test_add_rms_norm_dynamic_quant(dtype, shape, sm1, sm2, mask, beta):
    torch.manual_seed(0)
    h = shape[-1]
    x1, x2, g = rand(*shape, dtype=dtype), rand(*shape, dtype=dtype), rand(h, dtype=dtype)
    kw = {"smooth_scale1": (torch.rand(h) + 0.5).to(dtype) if sm1 else None,
          "smooth_scale2": (torch.rand(h) + 0.5).to(dtype) if sm2 else None,
          "beta": rand(h, dtype=dtype) if beta else None, "output_mask": mask}
    out = npu.npu_add_rms_norm_dynamic_quant(x1, x2, g, **kw)
    ref = add_rms_norm_dynamic_quant_reference(x1, x2, g, **kw)
    assert_outputs_close(out, ref, exact=(2,))
    for y, s in ((out[0], out[3]), (out[1], out[4])):
        assert (y.shape == (0,)) == (s.shape == (0,))  # a branch that does not run: (0,)


def test_add_rms_norm_dynamic_quant_zero_rows_non_contiguous_and_empty():
    torch.manual_seed(0)
    x1 = strided(rand(9, 40, dtype=bf16))
    x2 = rand(9, 40, dtype=bf16)
    x2[3] = -x1[3]  # the sum is zero: scale 0, y 0, never NaN
    g = rand(40, dtype=bf16)
    sm = (torch.rand(40) + 0.5).to(bf16)
    out = npu.npu_add_rms_norm_dynamic_quant(x1, x2, g, smooth_scale1=sm, smooth_scale2=sm)
    assert_outputs_close(out, add_rms_norm_dynamic_quant_reference(
        x1, x2, g, smooth_scale1=sm, smooth_scale2=sm), exact=(2,))
    assert float(out[3][3]) == 0.0 and (out[0][3] == 0).all() and not out[3].isnan().any()
    e = torch.empty(0, 3, 16, dtype=fp16)
    out = npu.npu_add_rms_norm_dynamic_quant(e, e, torch.ones(16, dtype=fp16))
    assert [tuple(o.shape) for o in out] == [(0, 3, 16), (0,), (0, 3, 16), (0, 3), (0,)]


# ---- semantics on hand-built cases ----------------------------------------------------------

MASK_CASES = [
    # (smooth1, smooth2, mask) -> which branches run
    (False, False, None, (True, False)),
    (True, False, None, (True, False)),
    (True, True, None, (True, True)),
    (False, False, [True, True], (True, True)),
    (False, False, [False, True], (False, True)),
    (True, False, [True, False], (True, False)),
    (False, True, [False, True], (False, True)),
    (True, True, [True, True], (True, True)),
]


@pytest.mark.parametrize("sm1,sm2,mask,runs", MASK_CASES)
def test_add_rms_norm_dynamic_quant_output_mask(sm1, sm2, mask, runs):
    torch.manual_seed(6)
    x1, x2, g = torch.randn(2, 3, 32, dtype=fp16), torch.randn(2, 3, 32, dtype=fp16), torch.randn(32, dtype=fp16)
    s1 = torch.rand(32, dtype=fp16) + 0.5 if sm1 else None
    s2 = torch.rand(32, dtype=fp16) + 0.5 if sm2 else None
    y1, y2, x, sc1, sc2 = npu.npu_add_rms_norm_dynamic_quant(
        x1, x2, g, smooth_scale1=s1, smooth_scale2=s2, output_mask=mask)
    y64, _ = rms_norm_fp64(x1.double() + x2.double(), g)
    for on, y, sc, sm in zip(runs, (y1, y2), (sc1, sc2), (s1, s2)):
        if not on:
            assert y.shape == (0,) and sc.shape == (0,)
            continue
        assert y.shape == x1.shape and sc.shape == (2, 3)
        v = y64 * (sm.double() if sm is not None else 1)
        torch.testing.assert_close(sc.double(), v.abs().amax(-1) / 127, rtol=2e-3, atol=1e-6)
        expect = torch.round(v * 127 / v.abs().amax(-1, keepdim=True))
        assert (y.double() - expect).abs().max() <= 1
    assert torch.equal(x, (x1.float() + x2.float()).to(fp16))


def test_add_rms_norm_dynamic_quant_zero_rows():
    x1 = torch.zeros(3, 16, dtype=bf16)
    y1, _, _, s1, _ = npu.npu_add_rms_norm_dynamic_quant(x1, x1.clone(), torch.ones(16, dtype=bf16))
    assert (y1 == 0).all() and (s1 == 0).all()


# ---- int4 and the Ascend 950 float8 / HiFloat8 y_dtypes ---------------------------------------

Y_DTYPES = {"int4": torch.quint4x2, "npu-int4": 285, "e5m2": torch.float8_e5m2,
            "e4m3fn": torch.float8_e4m3fn, "hif8": 290, "npu-e5m2": 291, "npu-e4m3fn": 292}
Y_STORAGE = {"int4": torch.int32, "npu-int4": torch.int32, "e5m2": torch.float8_e5m2,
             "e4m3fn": torch.float8_e4m3fn, "hif8": torch.uint8, "npu-e5m2": torch.float8_e5m2,
             "npu-e4m3fn": torch.float8_e4m3fn}


@pytest.mark.parametrize("yd", list(Y_DTYPES))
@pytest.mark.parametrize("dtype", [fp16, bf16])
@pytest.mark.parametrize("shape", [(1, 96), (3, 5, 40), (7, 1024)])
@pytest.mark.parametrize("sm1,sm2,mask", BRANCHES)
def test_add_rms_norm_dynamic_quant_y_dtypes_native_matches_reference(yd, dtype, shape, sm1, sm2,
                                                                     mask):
    torch.manual_seed(0)
    h = shape[-1]
    x1, x2, g = rand(*shape, dtype=dtype), rand(*shape, dtype=dtype), rand(h, dtype=dtype)
    kw = {"smooth_scale1": (torch.rand(h) + 0.5).to(dtype) if sm1 else None,
          "smooth_scale2": (torch.rand(h) + 0.5).to(dtype) if sm2 else None,
          "beta": rand(h, dtype=dtype), "output_mask": mask, "y_dtype": Y_DTYPES[yd]}
    out = npu.npu_add_rms_norm_dynamic_quant(x1, x2, g, **kw)
    ref = add_rms_norm_dynamic_quant_reference(x1, x2, g, **kw)
    for a, e in zip(out, ref):
        assert_bits_equal(a, e)
    want = list(shape[:-1]) + [h // 8 if "int4" in yd else h]
    for y, s in ((out[0], out[3]), (out[1], out[4])):
        assert y.dtype == Y_STORAGE[yd]
        assert tuple(y.shape) in ((0,), tuple(want))  # a branch that does not run: (0,)
        assert (y.shape == (0,)) == (s.shape == (0,))


def _normed(x1, x2, g):
    x = x1.float() + x2.float()
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6) * g.float()


def test_add_rms_norm_dynamic_quant_int4_values_and_packing():
    torch.manual_seed(4)
    x1, x2, g = torch.randn(4, 32, dtype=fp16), torch.randn(4, 32, dtype=fp16), torch.randn(32, dtype=fp16)
    y1, y2, _, s1, s2 = npu.npu_add_rms_norm_dynamic_quant(x1, x2, g, y_dtype=torch.quint4x2)
    assert y1.dtype == torch.int32 and y1.shape == (4, 4) and y2.shape == (0,) and y2.dtype == torch.int32
    v = _normed(x1, x2, g)
    amax = v.abs().amax(-1)
    torch.testing.assert_close(s1, amax / 7, rtol=1e-5, atol=0)
    q = unpack_int4(y1)
    assert q.min() >= -8 and q.max() <= 7 and (q.abs().amax(-1) == 7).all()
    assert (q.float() - v * 7 / amax[:, None]).abs().max() <= 0.5 + 1e-3
    # element 0 in the lowest nibble
    assert torch.equal(y1[:, 0] & 0xF, q[:, 0].to(torch.int32) & 0xF)
    # torch_npu.int4 (285) is the same output
    y285 = npu.npu_add_rms_norm_dynamic_quant(x1, x2, g, y_dtype=285)[0]
    assert torch.equal(y285, y1)


@pytest.mark.parametrize("yd,dmax", [("e5m2", 57344.0), ("e4m3fn", 448.0), ("hif8", 32768.0)])
def test_add_rms_norm_dynamic_quant_float8_values(yd, dmax):
    # Ascend 950: scale = amax * fp32(1 / DTYPE_MAX), y = cast(v / scale)
    torch.manual_seed(5)
    x1, x2, g = torch.randn(3, 64, dtype=bf16), torch.randn(3, 64, dtype=bf16), torch.randn(64, dtype=bf16)
    sm = (torch.rand(64) + 0.5).to(bf16)
    y1, y2, _, s1, s2 = npu.npu_add_rms_norm_dynamic_quant(x1, x2, g, smooth_scale1=sm,
                                                            y_dtype=Y_DTYPES[yd])
    v = _normed(x1, x2, g) * sm.float()
    amax = v.abs().amax(-1)
    inv = torch.tensor(1.0) / torch.tensor(dmax)
    torch.testing.assert_close(s1, amax * inv, rtol=1e-5, atol=0)
    q = v / s1[:, None]
    if yd == "hif8":
        assert y1.dtype == torch.uint8
        # bit-exact but for a last-bit difference in the norm: compare against the encoder
        diff = (y1.int() - float_to_hif8(q).int()).abs()
        assert float((diff > 0).float().mean()) < 0.01 and int(diff.max()) <= 1
    else:
        fdt = Y_STORAGE[yd]
        assert y1.dtype == fdt
        close = (y1.float() - q.clamp(-dmax, dmax).to(fdt).float()).abs()
        assert float((close > 0).float().mean()) < 0.01
        assert y1.float().abs().amax(-1).eq(dmax).all()
    assert y2.shape == (0,) and y2.dtype == Y_STORAGE[yd]


def test_add_rms_norm_dynamic_quant_float8_zero_rows_strided_and_fake():
    from torch._subclasses.fake_tensor import FakeTensorMode

    torch.manual_seed(6)
    x1 = strided(rand(9, 40, dtype=fp16))
    x2 = rand(9, 40, dtype=fp16)
    x2[3] = -x1[3]
    g = rand(40, dtype=fp16)
    for yd in (torch.float8_e4m3fn, 290, torch.quint4x2):
        out = npu.npu_add_rms_norm_dynamic_quant(x1, x2, g, y_dtype=yd)
        ref = add_rms_norm_dynamic_quant_reference(x1.contiguous(), x2, g, y_dtype=yd)
        for a, e in zip(out, ref):
            assert_bits_equal(a, e)
        assert float(out[3][3]) == 0.0 and (out[0][3 if yd != torch.quint4x2 else 3] == 0).all()
    with FakeTensorMode():
        e = torch.empty(2, 3, 16, dtype=bf16)
        out = npu.npu_add_rms_norm_dynamic_quant(e, e, torch.empty(16, dtype=bf16),
                                                 y_dtype=torch.quint4x2, output_mask=[True, True])
        assert [tuple(o.shape) for o in out] == [(2, 3, 2), (2, 3, 2), (2, 3, 16), (2, 3), (2, 3)]
        assert out[0].dtype == torch.int32
        out = npu.npu_add_rms_norm_dynamic_quant(e, e, torch.empty(16, dtype=bf16), y_dtype=290)
        assert out[0].dtype == torch.uint8 and out[1].shape == (0,) and out[1].dtype == torch.uint8

    def f(a, b, w):
        y1, _, _, s1, _ = torch.ops.npu.npu_add_rms_norm_dynamic_quant(a, b, w, y_dtype=torch.float8_e5m2)
        return y1.float() * s1[..., None]

    compiled = torch.compile(f, backend="eager", dynamic=True, fullgraph=True)
    for rows in (3, 6):
        a, b, w = rand(rows, 32, dtype=bf16), rand(rows, 32, dtype=bf16), rand(32, dtype=bf16)
        assert torch.equal(compiled(a, b, w), f(a, b, w))


@pytest.mark.parametrize("y_dtype", [None, torch.float8_e4m3fn, 290, torch.quint4x2])
def test_outputs_are_contiguous_as_torch_npus_meta_allocates_them(y_dtype):
    """A dense non-contiguous x1 (the fuzz campaign's call): every output is contiguous, as
    torch_npu 2.13.0's Meta allocates them (torch.empty) and as the fake promises; it used
    to keep x1's layout in the fake only for some y_dtype."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = torch.randn(4, 32, 8, dtype=torch.float16).transpose(1, 2)
    g = torch.ones(32, dtype=torch.float16)
    x2 = x.clone()
    outs = npu.npu_add_rms_norm_dynamic_quant(x, x2, g, y_dtype=y_dtype)
    mode = FakeTensorMode()
    fx, fx2, fg = mode.from_tensor(x), mode.from_tensor(x2), mode.from_tensor(g)
    with mode:
        fakes = npu.npu_add_rms_norm_dynamic_quant(fx, fx2, fg, y_dtype=y_dtype)
    for o, f in zip(outs, fakes):
        assert o.is_contiguous() and o.stride() == f.stride() and o.shape == f.shape
