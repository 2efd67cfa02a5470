"""The contract's semantics, checked on hand-built cases independent of the references.

Every call goes through the dispatcher, so these exercise whichever CPU kernel is
registered (native C++ when op_sdk._C is built)."""

import pytest
import torch

import op_sdk  # noqa: F401
from op_sdk.ops._common import pack_int4, unpack_int4

npu = torch.ops.npu
bf16, fp16, fp32 = torch.bfloat16, torch.float16, torch.float32


def _rms64(x, gamma, eps=1e-6):
    x = x.double()
    rstd = 1 / torch.sqrt(x.square().mean(-1, keepdim=True) + eps)
    return x * rstd * gamma.double(), rstd


# ---- rounding, saturation, zero points ---------------------------------------------------

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


def test_quantize_mul_mode_axis_coercion():
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


# ---- dynamic quant -----------------------------------------------------------------------

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


@pytest.mark.parametrize("bad,rule", [([3, 2, 7], "non-decreasing"), ([3, 5, 6], "last value"),
                                      ([-1, 5, 7], "negative")])
def test_dynamic_quant_bad_group_index_values_raise(bad, rule):
    x = torch.randn(7, 16)
    with pytest.raises(RuntimeError, match=f"npu_dynamic_quant.*group_index.*{rule}"):
        npu.npu_dynamic_quant(x, smooth_scales=torch.ones(3, 16),
                              group_index=torch.tensor(bad, dtype=torch.int32))


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


# ---- add + rms norm family ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [bf16, fp16, fp32])
def test_add_rms_norm_uses_unrounded_sum(dtype):
    torch.manual_seed(4)
    x1, x2 = torch.randn(9, 64, dtype=dtype), torch.randn(9, 64, dtype=dtype)
    g = torch.randn(64, dtype=dtype)
    y, rstd, x = npu.npu_add_rms_norm(x1, x2, g)
    s = x1.double() + x2.double()
    y64, r64 = _rms64(s, g)
    assert torch.equal(x, (x1.float() + x2.float()).to(dtype))
    torch.testing.assert_close(rstd.double(), r64, rtol=1e-5, atol=1e-6)
    tol = {bf16: 1e-2, fp16: 1e-3, fp32: 1e-5}[dtype]
    torch.testing.assert_close(y.double(), y64.to(dtype).double(), rtol=tol, atol=tol)


def test_rms_norm_multi_dim_gamma_and_rstd_shape():
    x = torch.randn(2, 3, 4, 8)
    g = torch.randn(4, 8)
    y, rstd = npu.npu_rms_norm(x, g)
    assert rstd.shape == (2, 3, 1, 1)
    xf = x.double()
    r = 1 / torch.sqrt(xf.square().mean((-2, -1), keepdim=True) + 1e-6)
    torch.testing.assert_close(y.double(), xf * r * g.double(), rtol=1e-5, atol=1e-5)


def test_add_rms_norm_cast_outputs():
    x1, x2, g = torch.randn(5, 32, dtype=bf16), torch.randn(5, 32, dtype=bf16), torch.randn(32, dtype=bf16)
    y1, y2, rstd, x = npu.npu_add_rms_norm_cast(x1, x2, g)
    assert (y1.dtype, y2.dtype, rstd.dtype, x.dtype) == (fp32, bf16, fp32, bf16)
    assert torch.equal(y2, y1.to(bf16))
    yr, _, _ = npu.npu_add_rms_norm(x1, x2, g)
    torch.testing.assert_close(y2.float(), yr.float(), rtol=1e-2, atol=1e-2)


def test_add_rms_norm_quant_y2_zero_without_scales2_and_beta():
    torch.manual_seed(5)
    x1, x2, g = torch.randn(4, 32, dtype=fp16), torch.randn(4, 32, dtype=fp16), torch.randn(32, dtype=fp16)
    beta = torch.randn(32, dtype=fp16)
    s1 = torch.rand(32) / 10 + 0.01
    zp = torch.randint(-3, 3, (32,), dtype=torch.int32)
    y1, y2, x = npu.npu_add_rms_norm_quant(x1, x2, g, s1, zp, beta)
    assert torch.equal(y2, torch.zeros_like(y1))
    y64, _ = _rms64(x1.double() + x2.double(), g)
    expect = torch.round((y64 + beta.double()) / s1.double() + zp.double()).clamp(-128, 127)
    assert (y1.double() - expect).abs().max() <= 1


def test_add_rms_norm_quant_two_scale_sets_mul_mode():
    x1, x2 = torch.randn(3, 5, 32, dtype=bf16), torch.randn(3, 5, 32, dtype=bf16)
    g = torch.randn(32, dtype=bf16)
    s1, s2 = (torch.rand(32) * 20 + 1).to(bf16), (torch.rand(32) * 20 + 1).to(bf16)
    y1, y2, _ = npu.npu_add_rms_norm_quant(x1, x2, g, s1, None, None, s2, div_mode=False)
    y64, _ = _rms64(x1.double() + x2.double(), g)
    for y, s in ((y1, s1), (y2, s2)):
        expect = torch.round(y64 * s.double()).clamp(-128, 127)
        assert (y.double() - expect).abs().max() <= 1


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
    y64, _ = _rms64(x1.double() + x2.double(), g)
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


# ---- matmuls -----------------------------------------------------------------------------

@pytest.mark.parametrize("p1", [[0, 1, 2], [1, 0, 2]])
@pytest.mark.parametrize("p2", [[0, 1, 2], [0, 2, 1]])
@pytest.mark.parametrize("f", [1, 2, 4])
def test_transpose_batchmatmul_perms(p1, p2, f):
    torch.manual_seed(7)
    b, m, k, n = 4, 5, 16, 6
    x = torch.randn(b, m, k) if p1 == [0, 1, 2] else torch.randn(m, b, k)
    w = torch.randn(b, k, n) if p2 == [0, 1, 2] else torch.randn(b, n, k)
    out = npu.npu_transpose_batchmatmul(x, w, perm_x1=p1, perm_x2=p2, batch_split_factor=f)
    xb = x if p1 == [0, 1, 2] else x.permute(1, 0, 2)
    wb = w if p2 == [0, 1, 2] else w.transpose(1, 2)
    ref = torch.einsum("bmk,bkn->mbn", xb.double(), wb.double())
    if f > 1:
        ref = ref.reshape(m, f, b * n // f).transpose(0, 1)
    assert out.shape == ref.shape
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


def test_quant_matmul_formulas():
    torch.manual_seed(8)
    a = torch.randint(-128, 128, (6, 40), dtype=torch.int8)
    b = torch.randint(-128, 128, (40, 10), dtype=torch.int8)
    acc = a.long() @ b.long()
    scale = torch.rand(10) / 1000
    out = npu.npu_quant_matmul(a, b, scale)
    assert out.dtype == torch.int8
    # rint(acc * scale) in fp32: within one step of the fp64 value
    assert (out.double() - torch.round(acc.double() * scale.double()).clamp(-128, 127)).abs().max() <= 1
    bias = torch.randint(-500, 500, (10,), dtype=torch.int32)
    raw = npu.npu_quant_matmul(a, b, scale, bias=bias, output_dtype=torch.int32)
    assert torch.equal(raw.long(), acc + bias)
    pt = torch.rand(6)
    fb = torch.randn(10, dtype=bf16)
    o16 = npu.npu_quant_matmul(a, b, scale, pertoken_scale=pt, bias=fb, output_dtype=torch.bfloat16)
    ref = acc.double() * scale.double() * pt.double()[:, None] + fb.double()
    torch.testing.assert_close(o16.double(), ref.to(bf16).double(), rtol=1e-2, atol=1e-2)
    o8 = npu.npu_quant_matmul(a, b, scale, offset=torch.full((10,), 3.0))
    expect8 = torch.round(acc.double() * scale.double() + 3).clamp(-128, 127)
    assert (o8.double() - expect8).abs().max() <= 1


# ---- cast and scatter --------------------------------------------------------------------

def test_dtype_cast_is_a_new_tensor_and_truncates():
    x = torch.tensor([-1.7, -0.5, 0.5, 1.7, 2.9])
    y = npu.npu_dtype_cast(x, torch.int32)
    assert y.tolist() == [-1, 0, 0, 1, 2]
    same = npu.npu_dtype_cast(x, torch.float32)
    assert same.data_ptr() != x.data_ptr() and torch.equal(same, x)
    same2 = npu._npu_dtype_cast(x, torch.float32)
    assert same2.data_ptr() != x.data_ptr()


def test_scatter_functional_leaves_input_and_inplace_mutates():
    x = torch.zeros(5, 3)
    idx = torch.tensor([[4], [0]])
    upd = torch.tensor([[1.0, 2, 3], [4, 5, 6]])
    out = npu.npu_scatter_nd_update(x, idx, upd)
    assert x.abs().sum() == 0 and out[4].tolist() == [1, 2, 3] and out[0].tolist() == [4, 5, 6]
    r = npu.npu_scatter_nd_update_(x, idx, upd)
    assert r is x and torch.equal(x, out)


@pytest.mark.parametrize("bad", [[[5]], [[-1]]])
def test_scatter_out_of_range_raises_and_writes_nothing(bad):
    x = torch.zeros(5, 3)
    with pytest.raises(RuntimeError, match="npu_scatter_nd_update.*indices"):
        npu.npu_scatter_nd_update_(x, torch.tensor(bad), torch.ones(1, 3))
    assert x.abs().sum() == 0


# ---- empty inputs ------------------------------------------------------------------------

def test_empty_inputs_give_empty_outputs():
    e = torch.empty(0, 16, dtype=bf16)
    g = torch.ones(16, dtype=bf16)
    y, r = npu.npu_rms_norm(e, g)
    assert y.shape == (0, 16) and r.shape == (0, 1)
    outs = npu.npu_add_rms_norm(e, e, g)
    assert [t.shape for t in outs] == [(0, 16), (0, 1), (0, 16)]
    outs = npu.npu_add_rms_norm_cast(e, e, g)
    assert [t.shape for t in outs] == [(0, 16), (0, 16), (0, 1), (0, 16)]
    y, s = npu.npu_dynamic_quant(e)
    assert y.shape == (0, 16) and s.shape == (0,)
    q = npu.npu_quantize(e, torch.ones(1), None, 1, -1)
    assert q.shape == (0, 16)
    outs = npu.npu_add_rms_norm_quant(e.half(), e.half(), g.half(), torch.ones(16), None)
    assert [t.shape for t in outs] == [(0, 16)] * 3
    outs = npu.npu_add_rms_norm_dynamic_quant(e, e, g)
    assert [t.shape for t in outs] == [(0, 16), (0,), (0, 16), (0,), (0,)]
    e3 = torch.empty(2, 0, 16, dtype=bf16)
    outs = npu.npu_add_rms_norm_dynamic_quant(e3, e3, g, output_mask=[True, True])
    assert [t.shape for t in outs] == [(2, 0, 16), (2, 0, 16), (2, 0, 16), (2, 0), (2, 0)]
    mm = npu.npu_quant_matmul(torch.empty(0, 32, dtype=torch.int8),
                              torch.ones(32, 8, dtype=torch.int8), torch.ones(8))
    assert mm.shape == (0, 8)
