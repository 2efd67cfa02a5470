"""npu_dynamic_quant: the native CPU kernel against the reference (per token, per tensor,
per channel; int8 and int4; smoothing; MoE group_index, threaded across groups; all-zero
rows, strided and empty inputs; the scales exact); values on hand-built cases; per-channel
smoothing and the Ascend 950 float8 / HiFloat8 outputs with dst_type_max (torch_npu's and
CANN's documented contract beyond A2 / A3); no backward."""

import pytest
import torch

from op_sdk.ops._common import unpack_int4
from op_sdk.ops._formats import float_to_hif8, hif8_to_float
from op_sdk.ops.dynamic_quant import dynamic_quant_reference
from tests.ops._helpers import (
    T,
    assert_bits_equal,
    assert_int_close,
    assert_outputs_close,
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
    'npu_dynamic_quant(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None, int? dst_type=None, str quant_mode="pertoken", float dst_type_max=0.0) -> (Tensor, Tensor)',  # noqa: E501
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_dynamic_quant": ("DynamicQuant", "DynamicQuantV2")}
# sample calls the converter refuses, by words of the error: forms it does not write
GE_REFUSED = {"npu::npu_dynamic_quant": ("torch.quint4x2 (int4 packed in int32)",)}



def samples():
    h = 24
    return [
        ("npu_dynamic_quant", (rand(7, h, dtype=bf16),), {}),
        ("npu_dynamic_quant", (rand(2, 5, h, dtype=fp16),), {"smooth_scales": rand(h, dtype=fp16)}),
        ("npu_dynamic_quant", (rand(6, 16, dtype=bf16),),
         {"smooth_scales": rand(3, 16, dtype=bf16),
          "group_index": torch.tensor([2, 2, 6], dtype=torch.int32)}),
        ("npu_dynamic_quant", (rand(5, 16),), {"dst_type": torch.quint4x2}),
        ("npu_dynamic_quant", (rand(2, 5, h),), {"quant_mode": "pertensor"}),
        ("npu_dynamic_quant", (rand(2, 5, h),), {"quant_mode": "perchannel"}),
        ("npu_dynamic_quant", (rand(2, 5, h),), {"quant_mode": "perchannel", "smooth_scales": rand(5)}),
        # Ascend 950: float8 / HiFloat8 outputs (HiFloat8's bits in uint8), dst_type_max
        ("npu_dynamic_quant", (rand(7, h, dtype=bf16),), {"dst_type": torch.float8_e4m3fn}),
        ("npu_dynamic_quant", (rand(2, 5, h, dtype=fp16),),
         {"dst_type": torch.float8_e5m2, "quant_mode": "pertensor"}),
        ("npu_dynamic_quant", (rand(2, 5, h, dtype=bf16),),
         {"dst_type": 290, "dst_type_max": 15.0, "smooth_scales": rand(h, dtype=bf16)}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real): 2-D and 3-D inputs, every dtype, smoothing,
    int4 and int8 outputs, per-tensor and per-channel (smoothed) modes."""
    def pos(*shape, dtype=fp32):
        return (torch.rand(*shape) + 0.05).to(dtype)

    h = 24
    cases = []
    for lead in [(5,), (2, 3)]:
        for dt in (fp16, bf16, fp32):
            x = rand(*lead, h, dtype=dt)
            cases.append(("npu_dynamic_quant", (x,), {}))
            cases.append(("npu_dynamic_quant", (x,), {"smooth_scales": pos(h, dtype=dt)}))
            cases.append(("npu_dynamic_quant", (x,), {"dst_type": torch.quint4x2}))
            cases.append(("npu_dynamic_quant", (x,), {"quant_mode": "pertensor"}))
            cases.append(("npu_dynamic_quant", (x,), {"dst_type": torch.int8}))
        cases.append(("npu_dynamic_quant", (rand(*lead, 6, h),), {"quant_mode": "perchannel",
                                                                  "smooth_scales": pos(6)}))
        # Ascend 950's 8-bit float outputs: every code, per token / tensor / channel
        for dst in (torch.float8_e5m2, torch.float8_e4m3fn, 290, 291, 292):
            cases.append(("npu_dynamic_quant", (rand(*lead, h, dtype=bf16),), {"dst_type": dst}))
        cases.append(("npu_dynamic_quant", (rand(*lead, 6, h, dtype=fp16),),
                      {"dst_type": 290, "quant_mode": "perchannel", "dst_type_max": 240.0}))
        cases.append(("npu_dynamic_quant", (rand(*lead, 6, h, dtype=fp16),),
                      {"dst_type": torch.float8_e4m3fn, "quant_mode": "pertensor"}))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("dq/1-dim", "npu_dynamic_quant", (T(8),), {}, "input", RuntimeError),
    ("dq/int-input", "npu_dynamic_quant", (T(4, 8, dtype=i32),), {}, "input", RuntimeError),
    ("dq/dst-type", "npu_dynamic_quant", (T(4, 8),), {"dst_type": torch.int32}, "dst_type", RuntimeError),
    ("dq/quant-mode", "npu_dynamic_quant", (T(4, 8),), {"quant_mode": "perblock"}, "quant_mode", RuntimeError),
    ("dq/int4-last-dim", "npu_dynamic_quant", (T(4, 12),), {"dst_type": torch.quint4x2}, "input", RuntimeError),
    ("dq/smooth-len", "npu_dynamic_quant", (T(4, 8),), {"smooth_scales": T(7)}, "smooth_scales", RuntimeError),
    ("dq/group-dtype", "npu_dynamic_quant", (T(4, 8),),
     {"smooth_scales": T(2, 8), "group_index": T(2, dtype=torch.int64)}, "group_index", RuntimeError),
    ("dq/group-needs-smooth", "npu_dynamic_quant", (T(4, 8),), {"group_index": T(2, dtype=i32)},
     "smooth_scales", RuntimeError),
    ("dq/group-smooth-shape", "npu_dynamic_quant", (T(4, 8),),
     {"smooth_scales": T(3, 8), "group_index": T(2, dtype=i32)}, "smooth_scales", RuntimeError),
    ("dq/too-many-groups", "npu_dynamic_quant", (T(4, 8),),
     {"smooth_scales": T(1025, 8), "group_index": T(1025, dtype=i32)}, "group_index", RuntimeError),
    ("dq/group-pertensor", "npu_dynamic_quant", (T(4, 8),),
     {"smooth_scales": T(2, 8), "group_index": T(2, dtype=i32), "quant_mode": "pertensor"},
     "group_index", RuntimeError),
    ("dq/dst-type-max", "npu_dynamic_quant", (T(4, 8),), {"dst_type_max": 127.0}, "dst_type_max", RuntimeError),
    ("dq/dst-type-max-float8", "npu_dynamic_quant", (T(4, 8),),
     {"dst_type": torch.float8_e4m3fn, "dst_type_max": 100.0}, "dst_type_max", RuntimeError),
    ("dq/dst-type-max-hif8-range", "npu_dynamic_quant", (T(4, 8),),
     {"dst_type": 290, "dst_type_max": 40000.0}, "dst_type_max", RuntimeError),
    ("dq/dst-type-max-hif8-negative", "npu_dynamic_quant", (T(4, 8),),
     {"dst_type": 290, "dst_type_max": -1.0}, "dst_type_max", RuntimeError),
    ("dq/dst-type-293", "npu_dynamic_quant", (T(4, 8),), {"dst_type": 293}, "dst_type", RuntimeError),
]

BAD_CALLS = [
    bad("npu_dynamic_quant", "input", zeros(8)),
    bad("npu_dynamic_quant", "input", zeros(4, 8, dtype=torch.int8)),
    bad("npu_dynamic_quant", "dst_type", zeros(4, 8), dst_type=torch.int32),
    bad("npu_dynamic_quant", "input", zeros(4, 12), dst_type=torch.quint4x2),
    bad("npu_dynamic_quant", "quant_mode", zeros(4, 8), quant_mode="pergroup"),
    bad("npu_dynamic_quant", "dst_type_max", zeros(4, 8), dst_type_max=127.0),
    bad("npu_dynamic_quant", "dst_type_max", zeros(4, 8), dst_type=torch.float8_e5m2,
        dst_type_max=1.0),
    bad("npu_dynamic_quant", "dst_type_max", zeros(4, 8), dst_type=290, dst_type_max=32769.0),
    bad("npu_dynamic_quant", "smooth_scales", zeros(4, 8), smooth_scales=zeros(7)),
    bad("npu_dynamic_quant", "smooth_scales", zeros(4, 8), smooth_scales=zeros(8, dtype=torch.int32)),
    bad("npu_dynamic_quant", "smooth_scales",
        zeros(4, 8), group_index=torch.tensor([4], dtype=torch.int32)),
    bad("npu_dynamic_quant", "group_index",
        zeros(4, 8), smooth_scales=zeros(2, 8), group_index=torch.tensor([2, 4])),
    bad("npu_dynamic_quant", "group_index",
        zeros(4, 8), smooth_scales=zeros(1025, 8),
        group_index=torch.full((1025,), 4, dtype=torch.int32)),
    bad("npu_dynamic_quant", "smooth_scales",
        zeros(4, 8), smooth_scales=zeros(3, 8), group_index=torch.tensor([2, 4], dtype=torch.int32)),
    bad("npu_dynamic_quant", "group_index",
        zeros(4, 8), smooth_scales=zeros(2, 8), group_index=torch.tensor([2, 4], dtype=torch.int32),
        quant_mode="pertensor"),
    bad("npu_dynamic_quant", "group_index",
        zeros(4, 8), smooth_scales=zeros(2, 8), group_index=torch.tensor([3, 2], dtype=torch.int32)),
    bad("npu_dynamic_quant", "group_index",
        zeros(4, 8), smooth_scales=zeros(2, 8), group_index=torch.tensor([2, 5], dtype=torch.int32)),
    bad("npu_dynamic_quant", "group_index",
        zeros(4, 8), smooth_scales=zeros(2, 8), group_index=torch.tensor([-1, 4], dtype=torch.int32)),
]


# ---- the native kernel against the reference ------------------------------------------

@pytest.mark.parametrize("dtype", [fp16, bf16, fp32])
@pytest.mark.parametrize("shape", [(1, 96), (257, 96), (2, 3, 7), (3, 7168)])
@pytest.mark.parametrize("smooth", [None, "same", "fp32"])
def test_dynamic_quant_per_token_int8(dtype, shape, smooth):
    torch.manual_seed(0)
    x = rand(*shape, dtype=dtype, scale=3.0)
    sm = None if smooth is None else (torch.rand(shape[-1]) + 0.5).to(
        dtype if smooth == "same" else fp32)
    y, scale = npu.npu_dynamic_quant(x, smooth_scales=sm)
    y_ref, scale_ref = dynamic_quant_reference(x, smooth_scales=sm)
    assert_int_close(y, y_ref)
    torch.testing.assert_close(scale, scale_ref, atol=0, rtol=1e-6)


@pytest.mark.parametrize("dtype", [fp16, bf16, fp32])
@pytest.mark.parametrize("mode", ["pertoken", "pertensor", "perchannel"])
@pytest.mark.parametrize("dst", [torch.int8, torch.quint4x2])
def test_dynamic_quant_modes_and_int4(dtype, mode, dst):
    torch.manual_seed(0)
    x = rand(2, 33, 48, dtype=dtype)
    # per channel smooths each row of dim -2 (aclnnDynamicQuantV3), the others each column
    sm = (torch.rand(33 if mode == "perchannel" else 48) + 0.5).to(dtype)
    out = npu.npu_dynamic_quant(x, smooth_scales=sm, dst_type=dst, quant_mode=mode)
    ref = dynamic_quant_reference(x, smooth_scales=sm, dst_type=dst, quant_mode=mode)
    assert out[0].dtype == (torch.int32 if dst == torch.quint4x2 else torch.int8)
    assert_outputs_close(out, ref, int4=True)


def test_dynamic_quant_int4_packing_layout():
    # element 0 in the lowest nibble: a row whose max is at element 0 packs 7 there
    x = torch.zeros(1, 8)
    x[0, 0], x[0, 7] = 7.0, -7.0
    y, scale = npu.npu_dynamic_quant(x, dst_type=torch.quint4x2)
    assert y.dtype == torch.int32 and y.shape == (1, 1)
    assert int(y[0, 0]) & 0xF == 7 and (int(y[0, 0]) >> 28) & 0xF == 0x9  # -7 = 0b1001
    assert float(scale[0]) == 1.0


def test_dynamic_quant_all_zero_rows_and_empty():
    x = rand(5, 64, dtype=bf16)
    x[1] = 0
    x[4] = 0
    for mode, dst in [("pertoken", None), ("pertoken", torch.quint4x2)]:
        y, scale = npu.npu_dynamic_quant(x, dst_type=dst, quant_mode=mode)
        assert float(scale[1]) == 0.0 and float(scale[4]) == 0.0
        assert not torch.isnan(scale).any()
        assert (y[1] == 0).all() and (y[4] == 0).all()
    y, scale = npu.npu_dynamic_quant(torch.zeros(3, 16), quant_mode="pertensor")
    assert float(scale[0]) == 0.0 and (y == 0).all()
    y, scale = npu.npu_dynamic_quant(torch.zeros(3, 16), quant_mode="perchannel")
    assert (scale == 0).all() and (y == 0).all()
    y, scale = npu.npu_dynamic_quant(torch.empty(0, 4, 16, dtype=fp16), dst_type=torch.quint4x2)
    assert y.shape == (0, 4, 2) and scale.shape == (0, 4)


def test_dynamic_quant_non_contiguous():
    torch.manual_seed(0)
    x = strided(rand(40, 32, dtype=fp16))
    sm = strided((torch.rand(32) + 0.5).to(fp16))
    out = npu.npu_dynamic_quant(x, smooth_scales=sm)
    assert_outputs_close(out, dynamic_quant_reference(x, smooth_scales=sm))


@pytest.mark.parametrize("ends", [[2, 2, 6], [0, 6], [6], [1, 2, 3, 4, 5, 6]])
@pytest.mark.parametrize("dst", [torch.int8, torch.quint4x2])
def test_dynamic_quant_moe_group_index(ends, dst):
    torch.manual_seed(0)
    x = rand(2, 3, 16, dtype=bf16)
    gi = torch.tensor(ends, dtype=torch.int32)
    sm = (torch.rand(len(ends), 16) + 0.5).to(bf16)
    out = npu.npu_dynamic_quant(x, smooth_scales=sm, group_index=gi, dst_type=dst)
    ref = dynamic_quant_reference(x, smooth_scales=sm, group_index=gi, dst_type=dst)
    assert_outputs_close(out, ref, exact=(0, 1))


def test_dynamic_quant_moe_many_groups_threaded():
    # rows are split over threads across group boundaries
    torch.manual_seed(0)
    x = rand(1000, 64, dtype=fp16)
    counts = torch.randint(0, 20, (100,))
    counts[-1] += 1000 - counts.sum()
    gi = counts.cumsum(0).to(torch.int32)
    assert int(gi[-1]) == 1000 and (counts >= 0).all()
    sm = (torch.rand(100, 64) + 0.5).to(fp16)
    out = npu.npu_dynamic_quant(x, smooth_scales=sm, group_index=gi)
    assert_outputs_close(out, dynamic_quant_reference(x, smooth_scales=sm, group_index=gi),
                         exact=(0, 1))


# ---- semantics on hand-built cases ----------------------------------------------------------

def test_dynamic_quant_row_max_maps_to_127_and_zero_rows_are_zero():
    x = torch.tensor([[1.0, -2.0, 0.5, 0.0], [0.0, 0.0, 0.0, 0.0], [-4.0, 1.0, 3.0, 2.0]])
    y, scale = npu.npu_dynamic_quant(x)
    assert y.dtype == torch.int8 and scale.dtype == fp32 and scale.shape == (3,)
    assert y[0].tolist() == [64, -127, 32, 0]  # rint(1 * 127/2) = rint(63.5) = 64
    assert y[1].tolist() == [0, 0, 0, 0] and scale[1].item() == 0.0
    assert y[2, 0].item() == -127
    torch.testing.assert_close(scale, torch.tensor([2 / 127, 0.0, 4 / 127]))
    assert torch.isfinite(scale).all()


def test_dynamic_quant_multiplies_by_reciprocal():
    torch.manual_seed(1)
    x = torch.randn(64, 96)
    y, scale = npu.npu_dynamic_quant(x)
    amax = x.abs().amax(-1, keepdim=True)
    expect = torch.round(x * (127.0 / amax)).to(torch.int8)
    assert torch.equal(y, expect)
    assert torch.equal(scale, (amax / 127.0).squeeze(-1))


def test_dynamic_quant_smooth_and_groups():
    torch.manual_seed(2)
    x = torch.randn(7, 16, dtype=bf16)
    sm = torch.rand(3, 16, dtype=bf16) + 0.5
    gi = torch.tensor([3, 3, 7], dtype=torch.int32)  # group 1 is empty
    y, scale = npu.npu_dynamic_quant(x, smooth_scales=sm, group_index=gi)
    y0, s0 = npu.npu_dynamic_quant(x[:3], smooth_scales=sm[0])
    y2, s2 = npu.npu_dynamic_quant(x[3:], smooth_scales=sm[2])
    assert torch.equal(y, torch.cat([y0, y2])) and torch.equal(scale, torch.cat([s0, s2]))


@pytest.mark.parametrize("bad_ends,rule", [([3, 2, 7], "non-decreasing"), ([3, 5, 6], "last value"),
                                           ([-1, 5, 7], "negative")])
def test_dynamic_quant_bad_group_index_values_raise(bad_ends, rule):
    x = torch.randn(7, 16)
    with pytest.raises(RuntimeError, match=f"npu_dynamic_quant.*group_index.*{rule}"):
        npu.npu_dynamic_quant(x, smooth_scales=torch.ones(3, 16),
                              group_index=torch.tensor(bad_ends, dtype=torch.int32))


def test_dynamic_quant_int4_matches_int8_path_with_dmax_7():
    torch.manual_seed(3)
    x = torch.randn(2, 5, 32, dtype=fp16)
    y, scale = npu.npu_dynamic_quant(x, dst_type=torch.quint4x2)
    assert y.dtype == torch.int32 and y.shape == (2, 5, 4) and scale.shape == (2, 5)
    amax = x.float().abs().amax(-1, keepdim=True)
    expect = torch.round(x.float() * (7.0 / amax)).clamp(-8, 7).to(torch.int8)
    assert torch.equal(unpack_int4(y), expect)
    assert torch.equal(scale, (amax / 7.0).squeeze(-1))


def test_dynamic_quant_pertensor_and_perchannel_shapes_and_values():
    x = torch.randn(2, 5, 8)
    _, st = npu.npu_dynamic_quant(x, quant_mode="pertensor")
    assert st.shape == (1,) and st.item() == pytest.approx(x.abs().max().item() / 127)
    yc, sc = npu.npu_dynamic_quant(x, quant_mode="perchannel")
    assert sc.shape == (2, 8)
    torch.testing.assert_close(sc, x.abs().amax(-2) / 127)
    assert (yc.abs().amax(-2) == 127).all()


# ---- per-channel smoothing (the documented contract beyond A2 / A3) ---------------------------

@pytest.mark.parametrize("dtype", [fp16, bf16, fp32])
@pytest.mark.parametrize("shape", [(7, 24), (2, 5, 16)])
@pytest.mark.parametrize("dst", [None, torch.quint4x2])
def test_dynamic_quant_perchannel_smoothing_scales_rows(dtype, shape, dst):
    torch.manual_seed(0)
    x = torch.randn(*shape).to(dtype)
    sm = (torch.rand(shape[-2]) + 0.5).to(dtype)
    y, scale = npu.npu_dynamic_quant(x, smooth_scales=sm, quant_mode="perchannel", dst_type=dst)
    ry, rscale = dynamic_quant_reference(x, smooth_scales=sm, quant_mode="perchannel", dst_type=dst)
    torch.testing.assert_close(scale, rscale, rtol=0, atol=0)
    assert_int_close(y, ry, max_fraction=0.002)
    s = x.float() * sm.float()[:, None]
    dmax = 7.0 if dst else 127.0
    torch.testing.assert_close(scale, s.abs().amax(-2) / dmax)


def test_dynamic_quant_perchannel_smoothing_length_is_rows():
    x = torch.randn(6, 16)
    with pytest.raises(RuntimeError, match=r"npu_dynamic_quant: argument 'smooth_scales' .*size\(-2\)"):
        npu.npu_dynamic_quant(x, smooth_scales=torch.ones(16), quant_mode="perchannel")
    with pytest.raises(RuntimeError, match="argument 'group_index'"):
        npu.npu_dynamic_quant(x, smooth_scales=torch.ones(1, 16), quant_mode="perchannel",
                              group_index=torch.tensor([6], dtype=torch.int32))


# ---- Ascend 950: float8 / HiFloat8 outputs (aclnnDynamicQuantV3 / V4) -------------------------

F8 = {"e5m2": (torch.float8_e5m2, 57344.0), "e4m3fn": (torch.float8_e4m3fn, 448.0),
      "npu-e5m2": (291, 57344.0), "npu-e4m3fn": (292, 448.0), "hif8": (290, 32768.0)}


def _decode(y):
    return hif8_to_float(y) if y.dtype == torch.uint8 else y.float()


@pytest.mark.parametrize("dst", list(F8))
@pytest.mark.parametrize("mode", ["pertoken", "pertensor", "perchannel"])
@pytest.mark.parametrize("dtype", [fp16, bf16, fp32])
def test_dynamic_quant_float8_native_matches_reference(dst, mode, dtype):
    torch.manual_seed(0)
    x = rand(2, 33, 47, dtype=dtype, scale=3.0)  # odd sizes
    sm = (torch.rand(33 if mode == "perchannel" else 47) + 0.5).to(dtype)
    code, _ = F8[dst]
    for kw in ({}, {"smooth_scales": sm}):
        y, scale = npu.npu_dynamic_quant(x, dst_type=code, quant_mode=mode, **kw)
        ry, rscale = dynamic_quant_reference(x, dst_type=code, quant_mode=mode, **kw)
        assert y.dtype == (torch.uint8 if dst == "hif8" else
                           {291: torch.float8_e5m2, 292: torch.float8_e4m3fn}.get(code, code))
        assert y.shape == x.shape
        assert_bits_equal(y, ry)
        assert_bits_equal(scale, rscale)


@pytest.mark.parametrize("dst", list(F8))
def test_dynamic_quant_float8_values(dst):
    # scale = amax * fp32(1 / DTYPE_MAX); y = v / scale in the 8-bit format (950 kernels)
    torch.manual_seed(1)
    code, dmax = F8[dst]
    x = torch.randn(5, 40, dtype=bf16)
    y, scale = npu.npu_dynamic_quant(x, dst_type=code)
    amax = x.float().abs().amax(-1)
    inv = torch.tensor(1.0) / torch.tensor(dmax)
    assert torch.equal(scale, amax * inv)
    v = x.float() / scale[:, None]
    got = _decode(y)
    # the row max lands on DTYPE_MAX (within one rounding of the division), exact format values
    torch.testing.assert_close(got.abs().amax(-1), torch.full((5,), dmax), rtol=0.13, atol=0)
    if dst == "hif8":
        assert torch.equal(y, float_to_hif8(v))
        # HiFloat8 keeps 1 mantissa bit for |v| in [2^8, 2^16): within a quarter of v
        assert ((got - v).abs() <= v.abs() / 4 + 2.0 ** -22).all()
    else:
        fdt = torch.float8_e5m2 if "e5m2" in dst else torch.float8_e4m3fn
        assert torch.equal(got, v.clamp(-dmax, dmax).to(fdt).float())


def test_dynamic_quant_hifloat8_dst_type_max():
    torch.manual_seed(2)
    x = torch.randn(4, 32, dtype=fp16)
    for dtm, dmax in [(0.0, 32768.0), (15.0, 15.0), (240.0, 240.0), (32768.0, 32768.0)]:
        y, scale = npu.npu_dynamic_quant(x, dst_type=290, dst_type_max=dtm)
        inv = torch.tensor(1.0) / torch.tensor(dmax)
        assert torch.equal(scale, x.float().abs().amax(-1) * inv)
        got = hif8_to_float(y).abs().amax(-1)
        assert (got <= dmax * 1.07).all() and (got >= dmax * 0.93).all()
        ry, rs = dynamic_quant_reference(x, dst_type=290, dst_type_max=dtm)
        assert torch.equal(y, ry) and torch.equal(scale, rs)


def test_dynamic_quant_float8_zero_rows_groups_strided_empty():
    torch.manual_seed(3)
    x = rand(6, 16, dtype=bf16)
    x[2] = 0
    y, scale = npu.npu_dynamic_quant(x, dst_type=torch.float8_e4m3fn)
    assert float(scale[2]) == 0.0 and (y[2].float() == 0).all() and not torch.isnan(y.float()).any()
    gi = torch.tensor([2, 2, 6], dtype=torch.int32)
    sm = (torch.rand(3, 16) + 0.5).to(bf16)
    for code in (290, torch.float8_e5m2):
        out = npu.npu_dynamic_quant(x, smooth_scales=sm, group_index=gi, dst_type=code)
        ref = dynamic_quant_reference(x, smooth_scales=sm, group_index=gi, dst_type=code)
        assert_bits_equal(out[0], ref[0])
        assert_bits_equal(out[1], ref[1])
        # group 1 is empty: rows 0-1 use sm[0], rows 2-5 sm[2]
        y0 = npu.npu_dynamic_quant(x[:2], smooth_scales=sm[0], dst_type=code)[0]
        assert_bits_equal(out[0][:2], y0)
    xs = strided(rand(40, 32, dtype=fp16))
    out = npu.npu_dynamic_quant(xs, dst_type=291)
    ref = dynamic_quant_reference(xs.contiguous(), dst_type=291)
    assert_bits_equal(out[0], ref[0])
    y, scale = npu.npu_dynamic_quant(torch.empty(0, 3, 16, dtype=fp16), dst_type=290)
    assert y.shape == (0, 3, 16) and y.dtype == torch.uint8 and scale.shape == (0, 3)


def test_dynamic_quant_float8_fake_and_dynamic_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        y, s = npu.npu_dynamic_quant(torch.empty(3, 5, 16, dtype=bf16), dst_type=290,
                                     quant_mode="perchannel")
        assert y.dtype == torch.uint8 and y.shape == (3, 5, 16) and s.shape == (3, 16)
        y, s = npu.npu_dynamic_quant(torch.empty(4, 16, dtype=fp16), dst_type=torch.float8_e5m2)
        assert y.dtype == torch.float8_e5m2 and s.shape == (4,)

    def f(x):
        y, s = torch.ops.npu.npu_dynamic_quant(x, dst_type=torch.float8_e4m3fn)
        return y.float() * s[..., None]

    compiled = torch.compile(f, backend="eager", dynamic=True, fullgraph=True)
    for rows in (3, 7):
        x = torch.randn(rows, 24, dtype=bf16)
        assert torch.equal(compiled(x), f(x))


# ---- autograd ---------------------------------------------------------------------------------

def test_non_differentiable_op_fails_at_backward_naming_it():
    x = torch.randn(4, 16, requires_grad=True)
    y, scale = torch.ops.npu.npu_dynamic_quant(x)
    assert y.dtype == torch.int8
    with pytest.raises(RuntimeError, match="npu_dynamic_quant"):
        scale.sum().backward()
