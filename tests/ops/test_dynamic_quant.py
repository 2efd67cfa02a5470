"""npu_dynamic_quant: the native CPU kernel against the reference (per token, per tensor,
per channel; int8 and int4; smoothing; MoE group_index, threaded across groups; all-zero
rows, strided and empty inputs; the scales exact); values on hand-built cases; per-channel
smoothing (torch_npu's documented contract beyond A2 / A3); no backward."""

import pytest
import torch

from op_sdk.ops._common import unpack_int4
from op_sdk.ops.dynamic_quant import dynamic_quant_reference
from tests.ops._helpers import (
    T,
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
    'npu_dynamic_quant(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None, int? dst_type=None, str quant_mode="pertoken", float dst_type_max=0.0) -> (Tensor, Tensor)',
]


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
]

BAD_CALLS = [
    bad("npu_dynamic_quant", "input", zeros(8)),
    bad("npu_dynamic_quant", "input", zeros(4, 8, dtype=torch.int8)),
    bad("npu_dynamic_quant", "dst_type", zeros(4, 8), dst_type=torch.int32),
    bad("npu_dynamic_quant", "input", zeros(4, 12), dst_type=torch.quint4x2),
    bad("npu_dynamic_quant", "quant_mode", zeros(4, 8), quant_mode="pergroup"),
    bad("npu_dynamic_quant", "dst_type_max", zeros(4, 8), dst_type_max=127.0),
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


# ---- autograd ---------------------------------------------------------------------------------

def test_non_differentiable_op_fails_at_backward_naming_it():
    x = torch.randn(4, 16, requires_grad=True)
    y, scale = torch.ops.npu.npu_dynamic_quant(x)
    assert y.dtype == torch.int8
    with pytest.raises(RuntimeError, match="npu_dynamic_quant"):
        scale.sum().backward()
