"""torch_npu's documented contract beyond the Atlas A2 / A3 subset: the Ascend 950 dtype
table and float8 / HiFloat8 outputs of npu_add_rms_norm_quant, per-channel smoothing of
npu_dynamic_quant, per-head (multi-dimensional) scales of npu_quantize, the int8-output
`scale` of npu_transpose_batchmatmul, complex casts. Each: native kernel against the
reference over dtypes, 2-D / 3-D and strided inputs; values against the formula; every new
rule raises naming the operator and argument."""

import itertools
import math

import pytest
import torch

import op_sdk  # noqa: F401
from op_sdk.ops._formats import float_to_hif8, hif8_to_float, quantize_float8
from op_sdk.ops.matmul import pack_quant_scale, transpose_batchmatmul_reference, unpack_quant_scale
from op_sdk.ops.norm_quant import ARQ_DTYPES, add_rms_norm_quant_reference
from op_sdk.ops.quant import dynamic_quant_reference, quantize_reference

npu = torch.ops.npu
fp16, bf16, fp32 = torch.float16, torch.bfloat16, torch.float32
DST = {"int8": None, "e5m2": torch.float8_e5m2, "e4m3fn": torch.float8_e4m3fn, "hif8": 290,
       "npu_e5m2": 291, "npu_e4m3fn": 292}
ROWS = [(x, s, z) for x, pairs in ARQ_DTYPES.items() for s, z in pairs]


def _equal(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype in (torch.float8_e5m2, torch.float8_e4m3fn):
        a, b = a.view(torch.uint8), b.view(torch.uint8)
    assert torch.equal(a, b), (a.flatten()[:8], b.flatten()[:8])


def _int_close(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    d = (a.long() - b.long()).abs()
    assert d.numel() == 0 or (int(d.max()) <= 1 and float((d > 0).float().mean()) <= 0.002)


# ---- HiFloat8 ----------------------------------------------------------------------------

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


# ---- npu_add_rms_norm_quant: the 950 table -----------------------------------------------

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
        _equal(out[2], ref[2])
        for o, r in zip(out[:2], ref[:2]):
            (_int_close if dst == "int8" else _equal)(o, r)
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
        _equal(o, r)
    assert out[1].dtype == torch.uint8 and (out[1] == 0).all()


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


# ---- npu_dynamic_quant: per-channel smoothing ------------------------------------------

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
    _int_close(y, ry)
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


# ---- npu_quantize: per-head scales -------------------------------------------------------

@pytest.mark.parametrize("dtype", [fp16, bf16, fp32])
@pytest.mark.parametrize("axis,sshape", [(-2, (1, 1, 6, 1)), (-1, (1, 1, 1, 16)), (3, (1, 1, 1, 16)),
                                         (-2, (1, 1, 1, 1))])
@pytest.mark.parametrize("code", [torch.qint8, torch.quint4x2])
def test_quantize_multi_dim_scales_broadcast_per_head(dtype, axis, sshape, code):
    torch.manual_seed(0)
    x = (torch.randn(2, 3, 6, 16) * 4).to(dtype)
    s = (torch.rand(sshape) + 0.5).to(dtype)
    z = torch.randint(-2, 2, sshape).to(dtype)
    out = npu.npu_quantize(x, s, z, code, axis, False)
    ref = quantize_reference(x, s, z, code, axis, False)
    assert torch.equal(out, ref)
    flat = npu.npu_quantize(x, s.reshape(-1), z.reshape(-1), code, axis, False)
    assert torch.equal(out, flat)
    if code == torch.qint8:
        expect = torch.round(x.float() * s.float() + z.float()).clamp(-128, 127).to(torch.int8)
        assert torch.equal(out, expect)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_quantize_scale_shape_and_axis_rules(device):
    x = torch.randn(2, 3, 6, 16, device=device)
    with pytest.raises(RuntimeError, match="npu_quantize: argument 'scales'"):
        npu.npu_quantize(x, torch.ones(1, 3, 6, 1, device=device), None, 1, -2, False)
    with pytest.raises(RuntimeError, match="npu_quantize: argument 'scales'"):
        npu.npu_quantize(x, torch.ones(1, 1, 6, 1, device=device), None, 1, 2, True)
    with pytest.raises(RuntimeError, match="npu_quantize: argument 'axis'"):
        npu.npu_quantize(x, torch.ones(3, device=device), None, 1, -3, False)
    with pytest.raises(RuntimeError, match="npu_quantize: argument 'zero_points'"):
        npu.npu_quantize(x, torch.ones(1, 1, 6, 1, device=device), torch.zeros(6, device=device),
                         1, -2, False)


# ---- npu_transpose_batchmatmul: int8 output ---------------------------------------------

@pytest.mark.parametrize("perms", [([0, 1, 2], [0, 1, 2]), ([1, 0, 2], [0, 2, 1])])
@pytest.mark.parametrize("packed", [True, False])
def test_transpose_batchmatmul_scale_int8_output(perms, packed):
    torch.manual_seed(0)
    b, m, k, n = 3, 5, 16, 8
    x = torch.randn(*([b, m, k] if perms[0] == [0, 1, 2] else [m, b, k])).half()
    w = torch.randn(*([b, k, n] if perms[1] == [0, 1, 2] else [b, n, k])).half()
    s32 = torch.rand(b * n) * 4 + 1
    scale = pack_quant_scale(s32) if packed else s32
    out = npu.npu_transpose_batchmatmul(x, w, scale=scale, perm_x1=perms[0], perm_x2=perms[1])
    ref = transpose_batchmatmul_reference(x, w, scale=scale, perm_x1=perms[0], perm_x2=perms[1])
    assert out.dtype == torch.int8 and out.shape == (m, 1, b * n)
    assert torch.equal(out, ref)
    xb = x.float() if perms[0] == [0, 1, 2] else x.float().permute(1, 0, 2)
    wb = w.float() if perms[1] == [0, 1, 2] else w.float().transpose(1, 2)
    s_eff = unpack_quant_scale(scale).reshape(b, 1, n)
    expect = torch.round(torch.bmm(xb, wb) * s_eff).clamp(-128, 127).to(torch.int8)
    assert torch.equal(out, expect.permute(1, 0, 2).reshape(m, 1, b * n))
    if packed:  # the packed value keeps the top 19 bits of the fp32 scale
        assert (unpack_quant_scale(scale) - s32).abs().le(s32 * 2.0 ** -10).all()


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_transpose_batchmatmul_scale_rules(device):
    x, w = torch.randn(2, 3, 8, device=device).half(), torch.randn(2, 8, 4, device=device).half()
    s = torch.ones(8, dtype=torch.int64, device=device)
    with pytest.raises(RuntimeError, match="npu_transpose_batchmatmul: argument 'scale'"):
        npu.npu_transpose_batchmatmul(x.bfloat16(), w.bfloat16(), scale=s)
    with pytest.raises(RuntimeError, match="argument 'scale'"):
        npu.npu_transpose_batchmatmul(x, w, scale=torch.ones(7, dtype=torch.int64, device=device))
    with pytest.raises(RuntimeError, match="argument 'batch_split_factor'"):
        npu.npu_transpose_batchmatmul(x, w, scale=s, batch_split_factor=2)
    assert npu.npu_transpose_batchmatmul(x, w, scale=s).shape == (3, 1, 8)


# ---- npu_dtype_cast: complex -------------------------------------------------------------

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


# ---- npu_quant_matmul: int4 weights ----------------------------------------------------

from op_sdk.ops._common import pack_int4  # noqa: E402
from op_sdk.ops.matmul import quant_matmul_reference  # noqa: E402


def _int4(*shape):
    return torch.randint(-8, 8, shape, dtype=torch.int8)


@pytest.mark.parametrize("m,k,n", [(1, 64, 24), (5, 128, 40), (33, 64, 16)])
@pytest.mark.parametrize("continuous", [False, True])
@pytest.mark.parametrize("epilogue", ["fp16", "pertoken-bf16", "pertoken-fp16-bias"])
def test_quant_matmul_a4w4(m, k, n, continuous, epilogue):
    torch.manual_seed(0)
    q1, q2 = _int4(m, k), _int4(k, n)
    x1 = pack_int4(q1)
    # (k, n/8) packed along n, or the transpose view of an (n, k/8) tensor packed along k
    x2 = pack_int4(q2.t().contiguous()).t() if continuous else pack_int4(q2)
    scale = torch.rand(n) / 50
    kw = {"output_dtype": torch.float16}
    if epilogue != "fp16":
        kw = {"pertoken_scale": torch.rand(m), "output_dtype": bf16 if "bf16" in epilogue else fp16}
    if "bias" in epilogue:
        kw["bias"] = torch.randn(n, dtype=fp16)
    out = npu.npu_quant_matmul(x1, x2, scale, **kw)
    ref = quant_matmul_reference(x1, x2, scale, **kw)
    assert out.shape == (m, n) and out.dtype == kw["output_dtype"]
    assert torch.equal(out, ref)
    int8 = quant_matmul_reference(q1, q2, scale, **kw)  # the same product on the int8 values
    assert torch.equal(out, int8)


def test_quant_matmul_a4w4_rules():
    x1, x2 = pack_int4(_int4(4, 64)), pack_int4(_int4(64, 16))
    with pytest.raises(RuntimeError, match="npu_quant_matmul: argument 'output_dtype' must be float16"):
        npu.npu_quant_matmul(x1, x2, torch.rand(16))
    with pytest.raises(RuntimeError, match="npu_quant_matmul: argument 'x2'"):
        npu.npu_quant_matmul(x1, pack_int4(_int4(32, 16)), torch.rand(16), output_dtype=fp16)
    with pytest.raises(RuntimeError, match="npu_quant_matmul: argument 'x2'"):
        npu.npu_quant_matmul(x1, x2.unsqueeze(0), torch.rand(16), output_dtype=fp16)


@pytest.mark.parametrize("m", [1, 7, 40])
@pytest.mark.parametrize("packed_scale", [True, False])
@pytest.mark.parametrize("out", [fp16, bf16])
def test_quant_matmul_a8w4_per_group(m, packed_scale, out):
    torch.manual_seed(0)
    k, n = 512, 24
    x1, q2 = torch.randint(-128, 128, (m, k), dtype=torch.int8), _int4(k, n)
    s32 = torch.rand(k // 256, n) / 100
    scale = pack_quant_scale(s32) if packed_scale else s32
    pt, off = torch.rand(m, 1), torch.randn(n)
    got = npu.npu_quant_matmul(x1, pack_int4(q2), scale, pertoken_scale=pt, offset=off,
                               output_dtype=out)
    ref = quant_matmul_reference(x1, pack_int4(q2), scale, pertoken_scale=pt, offset=off,
                                 output_dtype=out)
    assert got.shape == (m, n) and got.dtype == out
    assert torch.equal(got, ref)
    s = unpack_quant_scale(scale)
    # the NPU's convention: x1 - 8 (the documented y offset 8 * sum_k x2 * scale cancels it)
    expect = sum(((x1[:, g * 256:(g + 1) * 256].double() - 8) @ q2[g * 256:(g + 1) * 256].double())
                 * s[g] for g in range(k // 256))
    torch.testing.assert_close(got.double(), ((expect + off) * pt).to(out).double())


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_quant_matmul_a8w4_rules(device):
    x1 = torch.zeros(4, 512, dtype=torch.int8, device=device)
    x2 = torch.zeros(512, 3, dtype=torch.int32, device=device)
    s, pt = torch.ones(2, 24, device=device), torch.ones(4, 1, device=device)
    cases = [
        ({"scale": torch.ones(24, device=device)}, "scale"),
        ({"pertoken_scale": None}, "pertoken_scale"),
        ({"pertoken_scale": torch.ones(4, device=device)}, "pertoken_scale"),
        ({"output_dtype": None}, "output_dtype"),
        ({"offset": torch.ones(3, device=device)}, "offset"),
        ({"group_sizes": [0, 0, 128]}, "group_sizes"),
    ]
    for change, arg in cases:
        kw = {"scale": s, "pertoken_scale": pt, "output_dtype": fp16}
        kw.update(change)
        scale = kw.pop("scale")
        with pytest.raises(RuntimeError, match=f"npu_quant_matmul: argument '{arg}'"):
            npu.npu_quant_matmul(x1, x2, scale, **kw)
    with pytest.raises(RuntimeError, match="argument 'x1'"):
        npu.npu_quant_matmul(x1[:, :384], x2[:384], s[:1], pertoken_scale=pt, output_dtype=fp16)
    with pytest.raises(NotImplementedError, match="argument 'bias'"):
        npu.npu_quant_matmul(x1, x2, s, pertoken_scale=pt, output_dtype=fp16,
                             bias=torch.zeros(24, dtype=torch.int32, device=device))
