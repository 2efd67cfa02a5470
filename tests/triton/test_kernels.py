"""Each Triton kernel against its operator's reference (computed on CPU: the contract's
bits), over dtypes, odd sizes, 3-D, the layouts of tests/ops/_helpers.LAYOUTS (strided,
padded rows, permuted, stride-0), empty inputs and NaN / inf; outputs in the fake's
shapes, dtypes and strides. int8 outputs that need no reduction order (dynamic
quantisation, the x = x1 + x2 outputs) are compared bit for bit; after a norm they may
differ by one step in a tiny fraction of elements (the sum of squares' order, as for the
native CPU kernels)."""

import pytest
import torch
import triton
import triton.language as tl

from op_sdk.library import get_op
from op_sdk.triton_kernels import norm, rotary
from tests.ops._helpers import (
    LAYOUTS,
    assert_float_close,
    assert_int_close,
    bf16,
    fp16,
    fp32,
    rand,
    relayout,
    significant_strides,
)

npu = torch.ops.npu
FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def K(name):
    """The operator's CUDA kernel (its slice's Triton launcher), called directly."""
    return get_op(name).kernels["cuda"]


def _to(args, kwargs, device):
    mv = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
    return tuple(mv(a) for a in args), {k: mv(v) for k, v in kwargs.items()}


def _run(launcher, op, args, kwargs, device, exact=(), close=()):
    """The launcher on `device` against the reference on CPU: outputs in `exact` bit for
    bit, in `close` within the dtype's tolerance, the rest (int8 after a norm) within one
    step in a tiny fraction; shapes, dtypes and strides those of the fake."""
    ref = op(*args, **kwargs)
    ref = ref if isinstance(ref, tuple) else (ref,)
    dargs, dkwargs = _to(args, kwargs, device)
    out = launcher(*dargs, **dkwargs)
    out = out if isinstance(out, tuple) else (out,)
    with torch.device("meta"):
        margs, mkwargs = _to(dargs, dkwargs, "meta")
    fake = op(*margs, **mkwargs)
    fake = fake if isinstance(fake, tuple) else (fake,)
    assert len(out) == len(ref) == len(fake)
    for i, (o, r, f) in enumerate(zip(out, ref, fake)):
        assert o.device.type == torch.device(device).type
        assert (o.dtype, tuple(o.shape)) == (r.dtype, tuple(r.shape)), i
        assert significant_strides(o) == significant_strides(f), (i, o.stride(), f.stride())
        o = o.cpu()
        if o.dtype in FLOAT8:  # (compared as their values: NaN's bits differ by its sign)
            o, r = o.float(), r.float()
        if i in exact:
            assert torch.equal(o, r) or (o.is_floating_point() and torch.equal(o.isnan(), r.isnan())
                                         and torch.equal(o.nan_to_num(), r.nan_to_num())), i
        elif o.is_floating_point():
            assert_float_close(o, r, r.dtype if i not in close else fp32)
        else:
            assert_int_close(o, r)
    return out


# ---- the norm family --------------------------------------------------------------------

SHAPES = [(1, 96), (7, 129), (2, 3, 40), (0, 64), (5, 1)]
DTYPES = [fp16, bf16, fp32]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_rms_norm(dtype, shape, layout, device):
    torch.manual_seed(0)
    args, kw = relayout((rand(*shape, dtype=dtype), rand(shape[-1], dtype=dtype)), {}, layout,
                        which=(0,))
    _run(K("npu_rms_norm"), npu.npu_rms_norm, args, kw, device)


@pytest.mark.parametrize("pair", [(fp16, fp32), (bf16, fp32)])
def test_rms_norm_fp32_gamma_and_gamma_of_two_dims(pair, device):
    torch.manual_seed(0)
    x, g = rand(3, 4, 24, dtype=pair[0]), rand(4, 24, dtype=pair[1])
    _run(K("npu_rms_norm"), npu.npu_rms_norm, (x, g), {"epsilon": 1e-5}, device)


def test_rms_norm_long_rows_and_nonfinite(device):
    torch.manual_seed(0)
    x = rand(3, 40)
    x[0, 3], x[1, 5], x[2] = float("nan"), float("inf"), 0.0
    _run(K("npu_rms_norm"), npu.npu_rms_norm, (x, rand(40)), {}, device, exact=(0, 1))
    long = rand(2, norm.MAX_ROW + 3, dtype=bf16)  # longer than a program holds: the reference
    _run(K("npu_rms_norm"), npu.npu_rms_norm, (long, rand(norm.MAX_ROW + 3, dtype=bf16)), {}, device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 96), (7, 129), (2, 3, 40), (0, 8)])
@pytest.mark.parametrize("layout", ["contiguous", "permuted", "broadcast"])
def test_gemma_rms_norm(dtype, shape, layout, device):
    """npu_rms_norm's kernel given 1 + gamma in fp32 (and the reference past MAX_ROW)."""
    torch.manual_seed(0)
    args, kw = relayout((rand(*shape, dtype=dtype), rand(shape[-1], dtype=dtype)), {}, layout,
                        which=(0,))
    _run(K("npu_gemma_rms_norm"), npu.npu_gemma_rms_norm, args, kw, device)
    long = rand(2, norm.MAX_ROW + 3, dtype=dtype)
    _run(K("npu_gemma_rms_norm"), npu.npu_gemma_rms_norm,
         (long, rand(norm.MAX_ROW + 3, dtype=dtype)), {}, device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("layout", ["contiguous", "padded_rows", "permuted", "broadcast"])
def test_add_rms_norm(dtype, shape, layout, device):
    torch.manual_seed(0)
    args, kw = relayout((rand(*shape, dtype=dtype), rand(*shape, dtype=dtype),
                         rand(shape[-1], dtype=dtype)), {}, layout, which=(0,))
    _run(K("npu_add_rms_norm"), npu.npu_add_rms_norm, args, kw, device, exact=(2,))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 96), (2, 3, 40), (0, 8)])
def test_add_rms_norm_v2(dtype, shape, device):
    """The functional twin: npu_add_rms_norm's kernel, reordered; the in-place call writes
    its new values into x1 and x2."""
    torch.manual_seed(0)
    args = (rand(*shape, dtype=dtype), rand(*shape, dtype=dtype), rand(shape[-1], dtype=dtype))
    _run(K("npu_add_rms_norm_v2_functional"), npu.npu_add_rms_norm_v2_functional, args, {},
         device, exact=(2,))
    a, b, g = (t.to(device) for t in args)
    rstd, y, x = npu.npu_add_rms_norm_v2_functional(a, b, g)
    assert torch.equal(npu.npu_add_rms_norm_v2(a, b, g), rstd)
    assert torch.equal(a, y) and torch.equal(b, x)


@pytest.mark.parametrize("dtype", [fp16, bf16])
@pytest.mark.parametrize("shape", [(1, 96), (7, 129), (2, 3, 40), (0, 8)])
@pytest.mark.parametrize("layout", ["contiguous", "permuted", "broadcast"])
def test_rms_norm_quant(dtype, shape, layout, device):
    """The norm's static branch with the reciprocal of scale, the offset and the float16 step,
    to int8 and to int4 (8 a int32)."""
    torch.manual_seed(0)
    d = shape[-1]
    args = (rand(*shape, dtype=dtype), rand(1, d, dtype=dtype), rand(1, d, dtype=dtype) * 0.1,
            torch.tensor([0.013], dtype=dtype), torch.tensor([-3], dtype=torch.int8))
    args, kw = relayout(args, {}, layout, which=(0,))
    _run(K("npu_rms_norm_quant"), npu.npu_rms_norm_quant, args, kw, device)
    if d % 8 == 0:
        _int4_close(K("npu_rms_norm_quant"), npu.npu_rms_norm_quant, args, {"dst_dtype": 16},
                    device)


def _int4_close(launcher, op, args, kw, device):
    """Packed int4 outputs (the first) within one step after a norm (tests.ops._helpers'
    assert_int_close on the unpacked values); shape, dtype and strides the fake's."""
    from tests.ops._helpers import unpack_int4

    ref = op(*args, **kw)
    ref = ref if isinstance(ref, tuple) else (ref,)
    dargs, dkw = _to(args, kw, device)
    out = launcher(*dargs, **dkw)
    out = out if isinstance(out, tuple) else (out,)
    o, r = out[0].cpu(), ref[0]
    assert (o.dtype, o.shape, o.stride()) == (r.dtype, r.shape, r.stride())
    assert_int_close(unpack_int4(o), unpack_int4(r))
    return out


def test_rms_norm_quant_int4_rounds_saturates_and_zeroes_nan(device):
    """int4: a value past +-7.5 saturates to 7 / -8, the halves of the float16 step round to
    even, a NaN row stores 0."""
    x = torch.tensor([[1e4, -1e4, 1e4, -1e4, 1.0, -1.0, 2.0, 0.0],
                      [1.0, float("nan"), 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]], dtype=fp16)
    args = (x, torch.ones(8, dtype=fp16), torch.zeros(8, dtype=fp16),
            torch.tensor([1e-3], dtype=fp16), torch.tensor([0], dtype=torch.int8))
    from tests.ops._helpers import unpack_int4

    out = _run(K("npu_rms_norm_quant"), npu.npu_rms_norm_quant, args, {"dst_dtype": 16}, device,
               exact=(0,))
    y = unpack_int4(out[0].cpu())
    assert y[0, :4].tolist() == [7, -8, 7, -8] and y[1].tolist() == [0] * 8


def test_rms_norm_quant_nonfinite_and_saturation(device):
    x = torch.tensor([[1.0, float("nan"), 2.0, 3.0], [1.0, float("inf"), 2.0, 3.0],
                      [1e4, -1e4, 1e4, -1e4]], dtype=fp16)
    args = (x, torch.ones(4, dtype=fp16), torch.zeros(4, dtype=fp16),
            torch.tensor([1e-4], dtype=fp16), torch.tensor([0], dtype=torch.int8))
    out = _run(K("npu_rms_norm_quant"), npu.npu_rms_norm_quant, args, {}, device, exact=(0,))
    assert out[0].cpu()[0].tolist() == [0, 0, 0, 0] and out[0].cpu()[2].tolist() == [127, -128, 127, -128]


@pytest.mark.parametrize("dtype", [fp16, bf16])
@pytest.mark.parametrize("shape", [(1, 96), (7, 129), (2, 3, 40), (0, 8)])
def test_add_rms_norm_cast(dtype, shape, device):
    torch.manual_seed(0)
    args = (rand(*shape, dtype=dtype), rand(*shape, dtype=dtype), rand(shape[-1], dtype=dtype))
    _run(K("npu_add_rms_norm_cast"), npu.npu_add_rms_norm_cast, args, {}, device, exact=(3,),
         close=(0,))


def _arq_args(dtype, shape, zp_int, two, beta):
    h = shape[-1]
    sdt = fp32 if zp_int or dtype == fp32 else dtype
    s = lambda: (torch.rand(h) * 0.05 + 0.01).to(sdt)  # noqa: E731
    z = lambda: (torch.randint(-4, 4, (h,), dtype=torch.int32) if zp_int  # noqa: E731
                 else torch.randint(-4, 4, (h,)).to(sdt))
    args = (rand(*shape, dtype=dtype), rand(*shape, dtype=dtype), rand(h, dtype=dtype), s(), z(),
            rand(h, dtype=dtype) if beta else None, s() if two else None, z() if two else None)
    return args


@pytest.mark.parametrize("dtype,zp_int", [(fp16, True), (bf16, False), (fp16, False), (fp32, False)])
@pytest.mark.parametrize("shape", [(1, 96), (7, 129), (2, 3, 40), (0, 16)])
@pytest.mark.parametrize("two,beta,div_mode", [(False, False, True), (True, True, False),
                                               (True, False, True)])
def test_add_rms_norm_quant(dtype, zp_int, shape, two, beta, div_mode, device):
    torch.manual_seed(0)
    args = _arq_args(dtype, shape, zp_int, two, beta)
    _run(K("npu_add_rms_norm_quant"), npu.npu_add_rms_norm_quant, args, {"div_mode": div_mode},
         device, exact=(2,))


def _hif8_rank(bits):
    """HiFloat8 bits (uint8) -> each value's signed position among the format's finite values
    (neighbours differ by 1; 0 is 0)."""
    from op_sdk.ops._formats import _hif8_grid

    codes, _ = _hif8_grid()
    rank = torch.zeros(256, dtype=torch.int64)
    rank[codes.long()] = torch.arange(codes.numel())
    rank[128:] = -rank[:128]
    return rank[bits.long()]


def _float8_close(o, r):
    """Float8 outputs after a norm: within one step of the format (a value on a rounding
    boundary, the sum of squares' order), NaN where the reference has NaN; HiFloat8 (uint8
    bits): at most one value apart, the same bits in nearly every element."""
    if o.dtype == torch.uint8:
        d = (_hif8_rank(o) - _hif8_rank(r)).abs().reshape(-1)
        assert (d <= 1).all() and (d > 0).sum().item() <= max(2, d.numel() // 100), d
        return
    step = 2.0 ** -(3 if o.dtype == torch.float8_e4m3fn else 2)
    torch.testing.assert_close(o.float(), r.float(), rtol=step, atol=0.0, equal_nan=True)


@pytest.mark.parametrize("dst", [292, 24, 291, 23, 290])
@pytest.mark.parametrize("dtype,zp_int", [(fp16, True), (bf16, False)])
@pytest.mark.parametrize("shape", [(7, 129), (2, 3, 40), (0, 16)])
@pytest.mark.parametrize("two,beta,div_mode", [(False, False, True), (True, True, False)])
def test_add_rms_norm_quant_float8(dst, dtype, zp_int, shape, two, beta, div_mode, device):
    """float8 y1 / y2: y / scale (or * scale) + zero point saturated to +-max, half to even
    (HiFloat8: the nearest value, a tie away from zero); x bit for bit; y2 all zeros without
    scales2; a value past the format's max (the scales' 0.01 on a norm of up to ~4)
    saturates."""
    torch.manual_seed(0)
    args = _arq_args(dtype, shape, zp_int, two, beta)
    kw = {"div_mode": div_mode, "dst_type": dst}
    ref = npu.npu_add_rms_norm_quant(*args, **kw)
    dargs, dkw = _to(args, kw, device)
    out = [o.cpu() for o in K("npu_add_rms_norm_quant")(*dargs, **dkw)]
    assert [(o.dtype, o.shape) for o in out] == [(r.dtype, r.shape) for r in ref]
    _float8_close(out[0], ref[0])
    _float8_close(out[1], ref[1])
    assert torch.equal(out[2], ref[2])


@pytest.mark.parametrize("dst", [292, 291, 290])
def test_add_rms_norm_quant_float8_saturates_and_keeps_nan(dst, device):
    """Scales of 1e-3 (HiFloat8: 1e-5): values past 448 saturate in e4m3fn (not in e5m2's
    57344), past 32768 in HiFloat8 (to its largest value, 0x6E / 0xEE); a NaN in x makes its
    row NaN (HiFloat8: 0); a zero row stores 0."""
    torch.manual_seed(0)
    x1, x2, g = rand(4, 64, dtype=bf16), rand(4, 64, dtype=bf16), rand(64, dtype=bf16)
    x1[1, 3] = float("nan")
    x1[2], x2[2] = 0.0, 0.0
    s = torch.full((64,), 1e-5 if dst == 290 else 1e-3, dtype=bf16)
    args = (x1, x2, g, s, None)
    ref = npu.npu_add_rms_norm_quant(*args, dst_type=dst)
    dargs, dkw = _to(args, {"dst_type": dst}, device)
    out = [o.cpu() for o in K("npu_add_rms_norm_quant")(*dargs, **dkw)]
    _float8_close(out[0], ref[0])
    if dst == 290:
        y = out[0]
        assert (y[1:3] == 0).all() and ((y == 0x6E) | (y == 0xEE)).sum() > 10
        return
    y = out[0].float()
    assert y[1].isnan().all() and (y[2] == 0).all()
    if dst == 292:
        assert (y.abs() == 448).sum() > 10
    else:
        assert (y.abs() > 448).sum() > 10


@pytest.mark.parametrize("dtype", [fp16, bf16])
@pytest.mark.parametrize("shape", [(1, 96), (7, 129), (2, 3, 40), (0, 16)])
@pytest.mark.parametrize("sm1,sm2,mask,beta", [(False, False, None, False), (True, True, None, True),
                                               (True, False, [True, False], False),
                                               (False, True, [False, True], True)])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_add_rms_norm_dynamic_quant(dtype, shape, sm1, sm2, mask, beta, layout, device):
    torch.manual_seed(0)
    h = shape[-1]
    kw = {"smooth_scale1": (torch.rand(h) + 0.5).to(dtype) if sm1 else None,
          "smooth_scale2": (torch.rand(h) + 0.5).to(dtype) if sm2 else None,
          "beta": rand(h, dtype=dtype) if beta else None, "output_mask": mask}
    args, kw = relayout((rand(*shape, dtype=dtype), rand(*shape, dtype=dtype),
                         rand(h, dtype=dtype)), kw, layout, which=(0,))
    _run(K("npu_add_rms_norm_dynamic_quant"), npu.npu_add_rms_norm_dynamic_quant, args, kw, device,
         exact=(2,))


def test_add_rms_norm_dynamic_quant_zero_and_nonfinite_rows(device):
    x1 = rand(4, 32, dtype=bf16)
    x1[0] = 0.0
    x1[1, 2] = float("nan")
    x1[2, 7] = float("inf")
    _run(K("npu_add_rms_norm_dynamic_quant"), npu.npu_add_rms_norm_dynamic_quant,
         (x1, torch.zeros_like(x1), rand(32, dtype=bf16)), {}, device, exact=(0, 1, 2, 3, 4))


# ---- dynamic quantisation: bit for bit ----------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 96), (7, 129), (2, 3, 40), (0, 16), (4, 0)])
@pytest.mark.parametrize("smooth", [False, True])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_dynamic_quant_is_bit_exact(dtype, shape, smooth, layout, device):
    torch.manual_seed(0)
    kw = {"smooth_scales": (torch.rand(shape[-1]) + 0.5).to(dtype) if smooth else None}
    args, kw = relayout((rand(*shape, dtype=dtype, scale=3.0),), kw, layout, which=(0,))
    _run(K("npu_dynamic_quant"), npu.npu_dynamic_quant, args, kw, device, exact=(0, 1))


def test_dynamic_quant_rounds_half_to_even_and_handles_nonfinite_rows(device):
    # amax 127: the multiplier is 1, so the halves are rounded as they are
    halves = torch.tensor([127.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, -126.5, 3.4999998])
    rows = torch.stack([halves, torch.zeros(10), halves * float("nan"), halves * float("inf")])
    out = _run(K("npu_dynamic_quant"), npu.npu_dynamic_quant, (rows,), {}, device, exact=(0, 1))
    assert out[0][0].cpu().tolist() == [127, 0, 2, 2, 0, -2, -2, 126, -126, 3]


# the int4 (8 a int32), float8 and HiFloat8 outputs of the dynamic branch, by their codes
NARROW = [torch.quint4x2, 292, 24, 291, 23, 290]


@pytest.mark.parametrize("dst", NARROW)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 96), (7, 136), (2, 3, 40), (0, 16)])
@pytest.mark.parametrize("smooth", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "broadcast"])
def test_dynamic_quant_int4_and_float8_are_bit_exact(dst, dtype, shape, smooth, layout, device):
    """int4: the values 8 a int32, element 0 in the low nibble, amax / 7 scales; float8 and
    HiFloat8: scale = amax * fl(1 / max), y = v / scale saturated: the reference's bits (and
    its shapes: int4's last dim an eighth)."""
    torch.manual_seed(0)
    kw = {"smooth_scales": (torch.rand(shape[-1]) + 0.5).to(dtype) if smooth else None,
          "dst_type": dst}
    args, kw = relayout((rand(*shape, dtype=dtype, scale=3.0),), kw, layout, which=(0,))
    _run(K("npu_dynamic_quant"), npu.npu_dynamic_quant, args, kw, device, exact=(0, 1))


@pytest.mark.parametrize("dst", [torch.quint4x2, 292, 291])
def test_dynamic_quant_narrow_outputs_round_and_handle_nonfinite_rows(dst, device):
    """Halves at the int4 step round to even (amax 7: the multiplier is 1); a zero row gives
    0 and scale 0; a NaN gives a NaN scale and a row of 0 (no positive scale); an inf gives
    NaN where it sits in float8 (inf / inf) and 0 in int4 (inf * 7 / inf), the row's finite
    values 0."""
    halves = torch.tensor([7.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 6.5, -6.5, 3.4999998, -7.0,
                           5.5, 1e-6, -3.0, 4.5, 0.0])
    inf, nan = halves.clone(), halves.clone()
    inf[3], nan[5] = float("inf"), float("nan")
    rows = torch.stack([halves, torch.zeros(16), nan, inf])
    out = _run(K("npu_dynamic_quant"), npu.npu_dynamic_quant, (rows,), {"dst_type": dst},
               device, exact=(0, 1))
    y = out[0].cpu()
    if dst == torch.quint4x2:
        from tests.ops._helpers import unpack_int4
        assert unpack_int4(y)[0].tolist() == [7, 0, 2, 2, 0, -2, -2, 6, -6, 3, -7, 6, 0, -3, 4, 0]
        assert unpack_int4(y)[3].tolist() == [0] * 16  # (inf * 0: NaN, stored as 0)
    else:
        assert torch.isnan(y[3].float()).tolist() == [False] * 3 + [True] + [False] * 12
    assert (y[1:3].float() == 0).all() and out[1][1].item() == 0 and out[1][2].isnan().item()


@pytest.mark.parametrize("dst", NARROW + [285])
@pytest.mark.parametrize("dtype", [bf16, fp16])
@pytest.mark.parametrize("sm2", [False, True])
def test_add_rms_norm_dynamic_quant_int4_and_float8(dst, dtype, sm2, device):
    """y1 / y2 in int4 or float8 after the norm: the scales within fp32 rounding of the sum
    of squares' order, a value within one step of the format where it sits on a rounding
    boundary; x bit for bit."""
    torch.manual_seed(0)
    h = 136
    kw = {"smooth_scale1": (torch.rand(h) + 0.5).to(dtype),
          "smooth_scale2": (torch.rand(h) + 0.5).to(dtype) if sm2 else None,
          "beta": rand(h, dtype=dtype), "y_dtype": dst}
    args = (rand(3, 5, h, dtype=dtype), rand(3, 5, h, dtype=dtype), rand(h, dtype=dtype))
    ref = npu.npu_add_rms_norm_dynamic_quant(*args, **kw)
    dargs, dkw = _to(args, kw, device)
    out = [o.cpu() for o in K("npu_add_rms_norm_dynamic_quant")(*dargs, **dkw)]
    assert [(o.dtype, o.shape) for o in out] == [(r.dtype, r.shape) for r in ref]
    assert torch.equal(out[2], ref[2])
    for o, r in zip(out[:2], ref[:2]):
        if o.dtype == torch.int32:
            from tests.ops._helpers import unpack_int4
            assert_int_close(unpack_int4(o), unpack_int4(r))
        else:
            _float8_close(o, r)
    for o, r in zip(out[3:], ref[3:]):
        torch.testing.assert_close(o, r, rtol=1e-6, atol=0.0)


@pytest.mark.parametrize("dst", [None, torch.quint4x2, 292])
@pytest.mark.parametrize("dtype", [bf16, fp16])
@pytest.mark.parametrize("index", [[2, 2, 7], [7], [0, 3, 7]])
def test_dynamic_quant_moe_groups_are_bit_exact(dst, dtype, index, device):
    """MoE group_index (cumulative end rows): each row smoothed by its group's row of
    smooth_scales, empty groups included; bit for bit (int8, int4, float8)."""
    torch.manual_seed(0)
    g = len(index)
    kw = {"smooth_scales": (torch.rand(g, 64) + 0.5).to(dtype),
          "group_index": torch.tensor(index, dtype=torch.int32), "dst_type": dst}
    _run(K("npu_dynamic_quant"), npu.npu_dynamic_quant, (rand(7, 64, dtype=dtype, scale=3.0),),
         kw, device, exact=(0, 1))


def test_dynamic_quant_moe_group_rules_name_the_operator(device):
    kw = {"smooth_scales": torch.rand(2, 64).to(bf16),
          "group_index": torch.tensor([3, 6], dtype=torch.int32)}
    with pytest.raises(Exception, match="npu_dynamic_quant.*group_index"):
        K("npu_dynamic_quant")(rand(7, 64, dtype=bf16).to(device), **_to((), kw, device)[1])


@pytest.mark.parametrize("mode", ["pertensor", "perchannel"])
@pytest.mark.parametrize("dst", [None] + NARROW)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 96), (7, 136), (2, 3, 40), (3, 1, 8), (2, 5, 7, 16)])
@pytest.mark.parametrize("smooth", [False, True])
def test_dynamic_quant_per_tensor_and_per_channel_are_bit_exact(mode, dst, dtype, shape, smooth,
                                                               device):
    """One amax for the tensor, or one per column of each matrix of the last two dims (the
    smooth scales per element of a row, or per row of a matrix): the reference's y and
    scales bit for bit, in its shapes ((1,); (..., H))."""
    if dst == torch.quint4x2 and shape[-1] % 8:
        pytest.skip("int4 needs a last dim that is a multiple of 8")
    torch.manual_seed(0)
    m = shape[-2] if mode == "perchannel" else shape[-1]
    kw = {"smooth_scales": (torch.rand(m) + 0.5).to(dtype) if smooth else None,
          "quant_mode": mode, "dst_type": dst}
    _run(K("npu_dynamic_quant"), npu.npu_dynamic_quant, (rand(*shape, dtype=dtype, scale=3.0),),
         kw, device, exact=(0, 1))


@pytest.mark.parametrize("mode", ["pertensor", "perchannel"])
@pytest.mark.parametrize("layout", ["strided", "broadcast", "permuted"])
def test_dynamic_quant_modes_read_any_layout(mode, layout, device):
    torch.manual_seed(0)
    args, kw = relayout((rand(4, 6, 24, dtype=bf16, scale=3.0),), {"quant_mode": mode}, layout,
                        which=(0,))
    _run(K("npu_dynamic_quant"), npu.npu_dynamic_quant, args, kw, device, exact=(0, 1))


@pytest.mark.parametrize("dst", [None, torch.quint4x2, 292])
def test_dynamic_quant_modes_handle_zero_nan_and_inf(dst, device):
    """Per channel: a zero column has scale 0 and y 0; a NaN makes its column's scale NaN and
    the column 0; an inf its column's finite values 0. Per tensor: a NaN anywhere makes the
    scale NaN and y all 0."""
    x = rand(2, 3, 16, scale=3.0)
    x[0, :, 2] = 0.0
    x[0, 1, 5] = float("nan")
    x[1, 2, 7] = float("inf")
    for mode in ("perchannel", "pertensor"):
        out = _run(K("npu_dynamic_quant"), npu.npu_dynamic_quant, (x,),
                   {"quant_mode": mode, "dst_type": dst}, device, exact=(0, 1))
    assert out[1].isnan().all() and (out[0].cpu().float().nan_to_num() == 0).all()


def test_dynamic_quant_modes_over_many_programs(device, monkeypatch):
    """Rows split among programs of a matrix (each its part of the amax): the parts' max is
    the amax whatever the split."""
    monkeypatch.setattr(norm, "_programs_cap", lambda device: 3)
    torch.manual_seed(0)
    for mode in ("pertensor", "perchannel"):
        _run(K("npu_dynamic_quant"), npu.npu_dynamic_quant, (rand(2, 11, 24, scale=3.0),),
             {"quant_mode": mode}, device, exact=(0, 1))


@pytest.mark.parametrize("mode", ["pertoken", "pertensor", "perchannel"])
@pytest.mark.parametrize("dst_type_max", [0.0, 15.0, 448.0, 32768.0, 5e-7])
def test_dynamic_quant_hifloat8_range_is_bit_exact(mode, dst_type_max, device):
    """HiFloat8's DTYPE_MAX is dst_type_max where given (below 1e-6: not given, 32768):
    scale = amax * fl(1 / DTYPE_MAX), y = v / scale rounded to the nearest HiFloat8 value; a
    zero row / column scale 0, y 0; NaN 0 where it sits, the rest by the NaN scale (0)."""
    torch.manual_seed(0)
    x = rand(3, 5, 48, dtype=bf16, scale=3.0)
    x[0, 1] = 0.0
    x[2, :, 4] = 0.0
    x[1, 2, 9] = float("nan")
    x[2, 3, 11] = float("inf")
    _run(K("npu_dynamic_quant"), npu.npu_dynamic_quant, (x,),
         {"dst_type": 290, "quant_mode": mode, "dst_type_max": dst_type_max}, device,
         exact=(0, 1))


@triton.jit
def _hif8_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, norm._hif8(x).to(tl.uint8), mask=mask)


def test_hif8_encoding_is_the_formats(device):
    """norm._hif8 against ops/_formats.float_to_hif8 over every fp32 binade and mantissa
    prefix (the top 12 bits of |x|, both signs) with the low bits that decide a rounding
    (none, the lowest, all but the first dropped bit, exactly it, just past it), and the
    edges: +-0, subnormals, 2^-23 and the float below it, 2^15, 1.25 * 2^15 and the floats
    around them, +-inf, NaN of both signs."""
    from op_sdk.ops._formats import float_to_hif8

    top = torch.arange(4096, dtype=torch.int32) << 19
    low = torch.tensor([0, 1, 0x3FFFF, 0x40000, 0x40001, 0x7FFFF], dtype=torch.int32)
    bits = (top[:, None] | low[None, :]).reshape(-1)
    x = torch.cat([bits, bits | -2147483648]).view(torch.float32)
    edges = torch.tensor([0.0, -0.0, 1e-45, -1e-40, 2.0 ** -23, -(2.0 ** -23), 2.0 ** -22,
                          32768.0, 40960.0, -40960.0, 65504.0, float("inf"), float("-inf"),
                          float("nan"), -float("nan")])
    near = torch.tensor([2.0 ** -23, 2.0 ** 15, 40960.0])
    x = torch.cat([x, edges, torch.nextafter(near, near * 2), torch.nextafter(near, near * 0)])
    y = torch.empty(x.shape, dtype=torch.uint8, device=device)
    _hif8_kernel[(triton.cdiv(x.numel(), 1024),)](x.to(device), y, x.numel(), BLOCK=1024)
    want = float_to_hif8(x)
    bad = (y.cpu() != want).nonzero().flatten()
    assert bad.numel() == 0, [(x[i].item(), y[i].item(), want[i].item()) for i in bad[:8]]


def test_rules_are_the_operators(device):
    """The launchers check with the operator's own rules (the same message)."""
    with pytest.raises(Exception, match="npu_rms_norm.*gamma"):
        K("npu_rms_norm")(rand(2, 8).to(device), rand(7).to(device))
    with pytest.raises(Exception, match="npu_dynamic_quant.*input"):
        K("npu_dynamic_quant")(rand(8).to(device))
    with pytest.raises(Exception, match="npu_swiglu.*input"):
        K("npu_swiglu")(rand(2, 7).to(device))


# ---- SwiGLU -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", [((4, 96), -1), ((3, 6, 5), 1), ((6, 5), 0), ((2, 3, 14), -1),
                                       ((0, 8), -1), ((3,), 0)])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "broadcast"])
def test_swiglu_and_its_backward(dtype, shape, dim, layout, device):
    torch.manual_seed(0)
    if shape == (3,):
        shape = (4,)
    args, kw = relayout((rand(*shape, dtype=dtype, scale=2.0),), {"dim": dim}, layout)
    y = _run(K("npu_swiglu"), npu.npu_swiglu, args, kw, device)[0]
    g = rand(*y.shape, dtype=dtype)
    _run(K("npu_swiglu_backward"), npu.npu_swiglu_backward, (g,) + args, kw, device)


def test_swiglu_nonfinite(device):
    x = torch.tensor([[float("inf"), -float("inf"), float("nan"), 0.0, 2.0, 3.0, 1.0, -1.0]])
    _run(K("npu_swiglu"), npu.npu_swiglu, (x,), {}, device, exact=(0,))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", [((4, 96), -1), ((3, 6, 5), 1), ((6, 5), 0), ((2, 3, 14), -1),
                                       ((0, 8), -1), ((4,), 0)])
@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "broadcast"])
def test_clipped_swiglu(dtype, shape, dim, interleaved, layout, device):
    torch.manual_seed(0)
    args, kw = relayout((rand(*shape, dtype=dtype, scale=9.0),),
                        {"dim": dim, "interleaved": interleaved, "alpha": 0.7, "limit": 3.0}, layout)
    _run(K("npu_clipped_swiglu"), npu.npu_clipped_swiglu, args, kw, device)


def test_clipped_swiglu_groups_and_nonfinite(device):
    x = rand(9, 16, dtype=bf16, scale=9.0)
    for counts in ([2, 3], [], [0], [4, 100]):
        g = torch.tensor(counts, dtype=torch.int64)
        _run(K("npu_clipped_swiglu"), npu.npu_clipped_swiglu, (x,), {"group_index": g}, device)
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[inf, 1.0, 1.0, inf, 1.0, -inf, 2.0, 3.0]])  # clamped to the limit
    _run(K("npu_clipped_swiglu"), npu.npu_clipped_swiglu, (x,), {}, device)
    y = K("npu_clipped_swiglu")(torch.tensor([[nan, 1.0, 1.0, nan, -inf, 1.0]]).to(device)).cpu()
    assert torch.isnan(y).all()  # a NaN propagates through min / max; -inf / inf is NaN
    with pytest.raises(Exception, match="npu_clipped_swiglu.*limit"):
        K("npu_clipped_swiglu")(rand(2, 8).to(device), limit=0.0)


@pytest.mark.parametrize("x_dtype", [torch.int32, bf16, fp16], ids=str)
@pytest.mark.parametrize("swiglu_mode", [0, 1, 2])
@pytest.mark.parametrize("quant_mode", [0, 1])
@pytest.mark.parametrize("shape", [(5, 34), (2, 3, 130), (0, 8)], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "strided", "broadcast"])
def test_dequant_swiglu_quant(x_dtype, swiglu_mode, quant_mode, shape, layout, device):
    g = torch.Generator().manual_seed(0)
    d, h = shape[-1], shape[-1] // 2
    if x_dtype == torch.int32:
        x = torch.randint(-3000, 3000, shape, generator=g, dtype=torch.int32)
        kw = {"weight_scale": torch.rand(d, generator=g) * 1e-3,
              "activation_scale": torch.rand(*shape[:-1], 1, generator=g) + 0.25,
              "bias": (torch.randint(-9, 9, (d,), generator=g, dtype=torch.int32)
                       if swiglu_mode != 1 else torch.randn(1, d, generator=g).half())}
    else:
        x, kw = rand(*shape, dtype=x_dtype, scale=3.0), {}
    if quant_mode == 1:
        kw["quant_scale"] = torch.rand(h, generator=g) + 0.5
    else:
        form = (1, h) if swiglu_mode != 2 else (1,)
        kw.update(quant_scale=torch.rand(form, generator=g) * 0.05 + 0.01,
                  quant_offset=torch.randn(form, generator=g))
    kw.update(quant_mode=quant_mode, swiglu_mode=swiglu_mode, activate_left=swiglu_mode == 2)
    args, kw = relayout((x,), kw, layout)
    _run(K("npu_dequant_swiglu_quant"), npu.npu_dequant_swiglu_quant, args, kw, device)


@pytest.mark.parametrize("swiglu_mode", [0, 1, 2])
@pytest.mark.parametrize("quant_mode,per", [(1, "group"), (0, "group"), (0, "scalar")])
@pytest.mark.parametrize("bias", ["int", "float", None])
@pytest.mark.parametrize("counts", [[2, 0, 3], [3, 4, 3]])
def test_dequant_swiglu_quant_moe_groups(swiglu_mode, quant_mode, per, bias, counts, device):
    """MoE groups: each row's group's weight_scale / bias (int32 or bfloat16) / quant_scale /
    quant_offset (per channel, or one per group in static mode), an empty group, rows past
    the groups' sum (y 0, scale 0) or none, on 10 rows of 2 x 24."""
    g = torch.Generator().manual_seed(0)
    G, h, rows = len(counts), 12, 10
    x = torch.randint(-3000, 3000, (rows, 2 * h), generator=g, dtype=torch.int32)
    kw = {"weight_scale": torch.rand(G, 2 * h, generator=g) * 1e-3,
          "activation_scale": torch.rand(rows, generator=g) + 0.25,
          "group_index": torch.tensor(counts), "quant_mode": quant_mode,
          "swiglu_mode": swiglu_mode, "activate_left": swiglu_mode == 2}
    if bias == "int":
        kw["bias"] = torch.randint(-9, 9, (G, 2 * h), generator=g, dtype=torch.int32)
    elif bias == "float":
        kw["bias"] = torch.randn(G, 2 * h, generator=g).to(bf16)
    if quant_mode == 1:
        kw["quant_scale"] = torch.rand(G, h, generator=g) + 0.5
    else:
        form = (G,) if per == "scalar" else (G, h)
        kw.update(quant_scale=torch.rand(form, generator=g) * 0.05 + 0.01,
                  quant_offset=torch.randn(form, generator=g))
    out = _run(K("npu_dequant_swiglu_quant"), npu.npu_dequant_swiglu_quant, (x,), kw, device)
    if sum(counts) < rows:
        assert (out[0][sum(counts):].cpu() == 0).all() and (out[1][sum(counts):].cpu() == 0).all()


def test_dequant_swiglu_quant_groups_and_nonfinite(device):
    g = torch.tensor([2, 0, 3])
    x = torch.randint(-99, 99, (6, 16), dtype=torch.int32)
    kw = {"weight_scale": torch.rand(3, 16), "group_index": g, "quant_mode": 1}
    _run(K("npu_dequant_swiglu_quant"), npu.npu_dequant_swiglu_quant, (x,), kw, device)
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[0.0, 0.0, 0.0, 0.0], [nan, 1.0, 2.0, 3.0], [inf, 1.0, 2.0, -1.0]]).half()
    y, scale = (t.cpu() for t in K("npu_dequant_swiglu_quant")(x.to(device), quant_mode=1,
                                                               activate_left=True))
    # an all-zero row: scale 0, y 0; a NaN row: scale NaN, y 0; an inf row: scale inf, and
    # y = t * (127 / inf) is 0 (inf * 0 is NaN, stored as 0)
    assert y.tolist() == [[0, 0], [0, 0], [0, 0]]
    assert scale[0] == 0 and scale[1].isnan() and scale[2] == inf
    assert torch.equal(y, npu.npu_dequant_swiglu_quant(x, quant_mode=1, activate_left=True)[0])
    with pytest.raises(Exception, match="npu_dequant_swiglu_quant.*weight_scale"):
        K("npu_dequant_swiglu_quant")(x.int().to(device))


def test_without_triton_the_cuda_kernel_runs_the_reference(monkeypatch, caplog, device):
    import op_sdk.triton_kernels as tk

    kernel = K("npu_rms_norm")
    monkeypatch.setattr(tk, "available", lambda: False)
    monkeypatch.setattr(kernel, "_warned", False)
    x, g = rand(3, 16).to(device), rand(16).to(device)
    with caplog.at_level("WARNING", logger="op_sdk"):
        out = kernel(x, g)
    assert "runs its reference" in caplog.text
    for o, r in zip(out, npu.npu_rms_norm(x.cpu(), g.cpu())):
        assert torch.equal(o.cpu(), r) or torch.allclose(o.cpu(), r)


# ---- static quantisation: bit for bit ------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("code", [torch.qint8, torch.int8, torch.quint8, torch.uint8, torch.int32])
@pytest.mark.parametrize("axis,nscale", [(-1, "n"), (1, "n"), (0, "n"), (-1, 1)])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "permuted", "broadcast"])
def test_quantize_div_mode_is_bit_exact(dtype, code, axis, nscale, layout, device):
    torch.manual_seed(0)
    x = rand(6, 5, 23, dtype=dtype, scale=100.0)
    n = 1 if nscale == 1 else x.shape[axis]
    s, zp = torch.rand(n) + 0.05, torch.randint(-5, 5, (n,), dtype=torch.int32)
    args, kw = relayout((x, s, zp, code, axis, True), {}, layout, which=(0,))
    _run(K("npu_quantize"), npu.npu_quantize, args, kw, device, exact=(0,))
    args = (args[0], s.to(bf16), None, code, axis, True)
    _run(K("npu_quantize"), npu.npu_quantize, args, {}, device, exact=(0,))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [1, -1, -2])
@pytest.mark.parametrize("code", [torch.int8, torch.uint8, torch.quint4x2])
def test_quantize_mul_mode_is_bit_exact(dtype, axis, code, device):
    torch.manual_seed(0)
    x = rand(3, 4, 16, dtype=dtype, scale=5.0)
    n = x.shape[-2 if axis == -2 else -1]
    s, zp = (torch.rand(n) + 0.5).to(dtype), torch.randint(-2, 2, (n,)).to(dtype)
    _run(K("npu_quantize"), npu.npu_quantize, (x, s, zp, code, axis, False), {}, device,
         exact=(0,))
    if axis == -2:  # per-head scales of input's rank: (1, 4, 1)
        args = (x, s.reshape(1, n, 1), zp.reshape(1, n, 1), code, axis, False)
        _run(K("npu_quantize"), npu.npu_quantize, args, {}, device, exact=(0,))


def test_quantize_rounds_half_to_even_saturates_and_handles_nan(device):
    x = torch.tensor([[0.5, 1.5, 2.5, -0.5, -2.5, 1e6, -1e6, 3e9, -3e9, 127.5, -128.5, 254.5,
                       float("nan"), float("inf"), -float("inf"), 4194304.5]])
    for code in (torch.int8, torch.uint8):
        _run(K("npu_quantize"), npu.npu_quantize, (x, torch.ones(1), None, code, -1, True), {},
             device, exact=(0,))
    _run(K("npu_quantize"), npu.npu_quantize, (torch.empty(0, 16), torch.ones(16), None,
                                               torch.int8, -1, True), {}, device, exact=(0,))


# ---- rotary position embedding: bit for bit -------------------------------------------------

ROPE_LAYOUTS = [((2, 3, 5, 8), (1, 1, 5, 8)), ((2, 5, 3, 16), (2, 5, 1, 16)),
                ((5, 2, 3, 12), (5, 1, 1, 12)), ((7, 3, 4), (7, 1, 4)), ((7, 3, 4), (7, 3, 4)),
                ((0, 3, 8), (0, 1, 8))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["half", "interleave", "quarter", "interleave-half"])
@pytest.mark.parametrize("shape,rshape", ROPE_LAYOUTS)
@pytest.mark.parametrize("layout", ["contiguous", "permuted", "broadcast"])
def test_rotary_mul_is_bit_exact(dtype, mode, shape, rshape, layout, device):
    if mode == "quarter" and shape[-1] % 4:
        pytest.skip("quarter needs a multiple of 4")
    torch.manual_seed(0)
    x, c, s = rand(*shape, dtype=dtype), rand(*rshape, dtype=dtype), rand(*rshape, dtype=dtype)
    args, kw = relayout((x, c, s, mode), {}, layout, which=(0,))
    _run(K("npu_rotary_mul"), npu.npu_rotary_mul, args, kw, device, exact=(0,))


def test_rotary_mul_mixed_dtypes_nonfinite_and_rotate(device):
    torch.manual_seed(0)
    x, c, s = rand(2, 3, 4, 8, dtype=bf16), rand(1, 1, 4, 8), rand(1, 1, 4, 8)
    x[0, 0, 0, 1], x[1, 2, 3, 6] = float("nan"), float("inf")
    _run(K("npu_rotary_mul"), npu.npu_rotary_mul, (x, c, s, "interleave"), {}, device, exact=(0,))
    rot = rand(8, 8, dtype=bf16)  # a matrix product: the reference runs
    _run(K("npu_rotary_mul"), npu.npu_rotary_mul, (x, c, s, "half", rot), {}, device, exact=(0,))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["half", "interleave", "quarter", "interleave-half"])
@pytest.mark.parametrize("shape,rshape", ROPE_LAYOUTS)
@pytest.mark.parametrize("layout", ["contiguous", "permuted"])
def test_rotary_mul_backward(dtype, mode, shape, rshape, layout, device):
    """dx bit for bit (each product rounded, the pair's two terms summed in the reference's
    order); dr1 / dr2 bit for bit where r1 has input's shape (the products themselves), else
    within float32 summation order of the reference (the same reduction, over products
    computed by the kernel)."""
    if mode == "quarter" and shape[-1] % 4:
        pytest.skip("quarter needs a multiple of 4")
    torch.manual_seed(0)
    g, x = rand(*shape, dtype=dtype), rand(*shape, dtype=dtype)
    c, s = rand(*rshape, dtype=dtype), rand(*rshape, dtype=dtype)
    args, kw = relayout((g, x, c, s, mode), {}, layout, which=(0, 1))
    whole = tuple(rshape) == tuple(shape)
    _run(K("npu_rotary_mul_backward"), npu.npu_rotary_mul_backward, args, kw, device,
         exact=(0, 1, 2) if whole else (0,))


def test_rotary_mul_backward_mixed_dtypes_and_nonfinite(device):
    """float32 r1 / r2 with a bfloat16 input (rounded to its dtype first, as the reference),
    a float32 grad (rounded to input's dtype), NaN / inf in x and grad."""
    torch.manual_seed(0)
    x, g = rand(2, 3, 4, 8, dtype=bf16), rand(2, 3, 4, 8)
    c, s = rand(1, 1, 4, 8), rand(1, 1, 4, 8)
    x[0, 0, 0, 1], g[1, 2, 3, 6] = float("nan"), float("inf")
    args = (g, x, c, s, "interleave")
    ref = npu.npu_rotary_mul_backward(*args)
    out = [o.cpu() for o in K("npu_rotary_mul_backward")(*_to(args, {}, device)[0])]
    assert torch.equal(out[0].isnan(), ref[0].isnan())
    assert torch.equal(out[0].nan_to_num(), ref[0].nan_to_num())
    for o, r in zip(out[1:], ref[1:]):
        assert (o.dtype, o.shape) == (r.dtype, r.shape)
        torch.testing.assert_close(o, r, rtol=1.6e-2, atol=1e-2, equal_nan=True)


# ---- npu_dtype_cast: the numeric casts in one pass, bit for bit ----------------------------

CAST_DTYPES = [fp16, bf16, fp32, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
               torch.bool]


def _cast_source(src, dst, shape):
    """Values of ``src`` that ``dst`` holds where the contract gives a value: a float going to
    an integer within its range (NaN too: it stores 0), anything else over its own range
    (integers wrap, floats overflow to inf, NaN / inf kept)."""
    g = torch.Generator().manual_seed(0)
    if src == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if not src.is_floating_point:
        info = torch.iinfo(src)
        lo, hi = max(info.min, -2**40), min(info.max, 2**40)
        return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(src)
    if dst.is_floating_point or dst == torch.bool:
        v = torch.randn(shape, generator=g) * 3e4
        v.view(-1)[:3] = torch.tensor([float("nan"), float("inf"), -0.0])[: v.numel()]
        return v.to(src)
    info = torch.iinfo(dst)
    lo, hi = max(info.min, -60000), min(info.max, 60000)  # (within float16's range too)
    v = torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo + 0.99) + lo
    v = v.to(src).clamp(lo, hi)
    v.view(-1)[:2] = torch.tensor([float("nan"), -0.75])[: v.numel()]
    return v


@pytest.mark.parametrize("src", CAST_DTYPES)
@pytest.mark.parametrize("dst", CAST_DTYPES)
def test_dtype_cast_numeric_is_bit_exact(src, dst, device):
    """Every pair of float16 / bfloat16 / float32, the integers and bool, on an odd 3-D shape
    read through a transposed view, against the reference; through both spellings."""
    x = _cast_source(src, dst, (3, 37, 5)).transpose(0, 2)
    for name, args in (("npu_dtype_cast", (x, _DTYPE_CODES[dst])), ("_npu_dtype_cast", (x, dst))):
        _run(K(name), getattr(npu, name), args, {}, device, exact=(0,))


_DTYPE_CODES = {torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4,
                fp16: 5, fp32: 6, torch.bool: 11, bf16: 15}


def test_dtype_cast_empty_and_other_formats(device):
    """An empty input; float64 and the float8 / 950 targets run the reference."""
    _run(K("npu_dtype_cast"), npu.npu_dtype_cast, (torch.zeros(0, 4, dtype=bf16), 3), {}, device,
         exact=(0,))
    x = rand(4, 8, dtype=bf16)
    for code in (7, 292, 290, 296):
        _run(K("npu_dtype_cast"), npu.npu_dtype_cast, (x, code), {}, device, exact=(0,))


# ---- npu_transpose_batchmatmul: torch's batched GEMM into the permuted output ------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p1,p2", [([0, 1, 2], [0, 1, 2]), ([1, 0, 2], [0, 2, 1]),
                                   ([1, 0, 2], [0, 1, 2])])
@pytest.mark.parametrize("b,m,k,n,f", [(4, 3, 16, 8, 1), (6, 5, 7, 3, 2), (6, 1, 9, 5, 3),
                                       (2, 3, 4, 6, 4), (3, 0, 4, 5, 1)])
def test_transpose_batchmatmul(dtype, p1, p2, b, m, k, n, f, device):
    """Every permutation, odd sizes, a batch split (factor dividing B: a GEMM per split into
    its part of the output; one that splits a batch, 4 of 2 x 6: the reference), an empty M;
    the output's shape and strides the fake's."""
    torch.manual_seed(0)
    x = rand(b, m, k, dtype=dtype) if p1 == [0, 1, 2] else rand(m, b, k, dtype=dtype)
    w = rand(b, k, n, dtype=dtype) if p2 == [0, 1, 2] else rand(b, n, k, dtype=dtype)
    kw = {"perm_x1": p1, "perm_x2": p2, "batch_split_factor": f}
    _run(K("npu_transpose_batchmatmul"), npu.npu_transpose_batchmatmul, (x, w), kw, device)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("p1", [[0, 1, 2], [1, 0, 2]])
def test_transpose_batchmatmul_int8_epilogue(packed, p1, device):
    """The scale form: the float32 product times the scale (float32, or npu_trans_quant_param's
    int64), rounded half to even and saturated, stored (M, 1, B * N): within one step where a
    product sits on a rounding boundary (the GEMM's summation order); saturated values and a
    NaN (stored 0) exact."""
    from op_sdk.ops._common import pack_quant_scale

    torch.manual_seed(0)
    b, m, k, n = 3, 5, 24, 7
    x = rand(b, m, k, dtype=fp16) if p1 == [0, 1, 2] else rand(m, b, k, dtype=fp16)
    x.view(-1)[0] = float("nan")
    w = rand(b, k, n, dtype=fp16)
    scale = torch.rand(b * n) * 60 + 1  # (products of up to ~10: many saturate)
    scale = pack_quant_scale(scale) if packed else scale
    out = _run(K("npu_transpose_batchmatmul"), npu.npu_transpose_batchmatmul, (x, w),
               {"scale": scale, "perm_x1": p1}, device)
    y = out[0].cpu()
    assert y.shape == (m, 1, b * n) and (y.int().abs() >= 127).sum() > 10 and (y[0, 0, :n] == 0).all()


# ---- op_sdk::rms_norm_rope: the norm, rounded, then the "half" rotation ----------------------

NORM_ROPE_SHAPES = [((2, 5, 3, 16), (2, 5, 1, 16)), ((2, 3, 5, 8), (1, 1, 5, 8)), ((7, 3, 30), (7, 1, 30)),
                    ((1, 2, 1, 1024), (1, 2, 1, 1024)), ((0, 3, 8), (0, 1, 8))]


def _norm_rope_close(o, r):
    """Within the dtype's rounding of the norm (an ulp of t, times cos / sin): the sum of
    squares runs in another order than the CPU reference's."""
    tol = {fp32: 1e-5, fp16: 2e-3, bf16: 1.6e-2}[r.dtype]
    scale = r.float().abs().max().item() if r.numel() else 1.0
    torch.testing.assert_close(o.float(), r.float(), rtol=tol, atol=tol * scale, equal_nan=True)


@pytest.mark.parametrize("pair", [(fp16, fp16), (bf16, bf16), (fp32, fp32), (bf16, fp32)])
@pytest.mark.parametrize("shape,rshape", NORM_ROPE_SHAPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast"])
def test_rms_norm_rope(pair, shape, rshape, layout, device):
    """The Triton kernel against the reference: y contiguous, x read through its leading
    strides (Qwen3's transposed view), cos / sin broadcast through stride 0."""
    torch.manual_seed(0)
    op = get_op("rms_norm_rope", "op_sdk")
    x = rand(*shape, dtype=pair[0], scale=2.0)
    g, c, s = rand(shape[-1], dtype=pair[1]) + 1.5, rand(*rshape, dtype=pair[0]), rand(*rshape, dtype=pair[0])
    if layout == "transposed" and x.dim() == 4:
        x, c, s = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (x, c, s))
    elif layout == "broadcast":
        x = x[..., :1, :].expand(x.shape) if x.shape[-2] else x
    ref = op.reference(x, g, c, s, 1e-5)
    dx, dg, dc, ds = (t.to(device) for t in (x, g, c, s))
    out = op.kernels["cuda"](dx, dg, dc, ds, 1e-5)
    assert out.dtype == ref.dtype and out.shape == ref.shape and out.is_contiguous()
    _norm_rope_close(out.cpu(), ref)


def test_rms_norm_rope_nonfinite_and_fp32_cos(device):
    op = get_op("rms_norm_rope", "op_sdk")
    x, g = rand(2, 3, 4, 8, dtype=bf16), rand(8, dtype=bf16) + 1.5
    c, s = rand(2, 3, 1, 8), rand(2, 3, 1, 8)
    x[0, 0, 0, 1], x[1, 2, 3, 6] = float("nan"), float("inf")
    ref = op.reference(x, g, c, s)
    out = op.kernels["cuda"](*(t.to(device) for t in (x, g, c, s))).cpu()
    assert torch.equal(out.isnan(), ref.isnan())
    _norm_rope_close(out.nan_to_num(), ref.nan_to_num())


# ---- the elementwise kernels' 64-bit indexing (tensors of 2^31 elements and more) ----------

def test_elementwise_kernels_index_in_64_bits_too(monkeypatch, device):
    """The int64 specialisation (``WIDE``) of each elementwise kernel, forced on small
    tensors: the same results as the int32 one (which every other test runs)."""
    from op_sdk.triton_kernels import _common

    monkeypatch.setattr(_common, "WIDE_FROM", 0)
    torch.manual_seed(0)
    x = rand(3, 6, 10, dtype=bf16, scale=2.0)
    _run(K("npu_swiglu"), npu.npu_swiglu, (x,), {"dim": 1}, device)
    _run(K("npu_swiglu_backward"), npu.npu_swiglu_backward,
         (rand(3, 3, 10, dtype=bf16), x), {"dim": 1}, device)
    _run(K("npu_quantize"), npu.npu_quantize,
         (x, torch.rand(6) + 0.1, torch.randint(-3, 3, (6,), dtype=torch.int32), torch.qint8, 1,
          True), {}, device, exact=(0,))
    c, s = rand(1, 1, 5, 8, dtype=bf16), rand(1, 1, 5, 8, dtype=bf16)
    _run(K("npu_rotary_mul"), npu.npu_rotary_mul, (rand(2, 3, 5, 8, dtype=bf16), c, s,
                                                   "interleave-half"), {}, device, exact=(0,))


# ---- SwiGLU + int8 quantisation ---------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 96), (2, 3, 258), (1, 2), (0, 16)])
@pytest.mark.parametrize("form", ["dynamic", "dynamic_smooth_channel", "dynamic_smooth_tensor",
                                  "static_channel", "static_tensor_no_offset"])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "permuted"])
def test_swiglu_quant(dtype, shape, form, left, layout, device):
    torch.manual_seed(0)
    n = shape[-1] // 2
    per = (1, n) if "channel" in form or form == "dynamic" else (1,)
    smooth = None if form == "dynamic" else torch.rand(per) + 0.5
    offsets = torch.randn(per) * 3 if form == "static_channel" else None
    if form == "dynamic_smooth_channel":  # offsets are read in static mode only
        offsets = torch.randn(per)
    kw = {"smooth_scales": smooth, "offsets": offsets, "activate_left": left,
          "quant_mode": 0 if form.startswith("static") else 1}
    args, kw = relayout((rand(*shape, dtype=dtype, scale=4.0),), kw, layout, which=(0,))
    _run(K("npu_swiglu_quant"), npu.npu_swiglu_quant, args, kw, device)


def test_swiglu_quant_nonfinite_zero_rows_and_groups(device):
    x = rand(4, 8, scale=3.0)
    x[0, 1] = float("nan")  # a NaN row: scale NaN, y 0
    x[1] = 0.0              # an all-zero row: scale inf, y 0
    x[2, 6] = float("inf")  # silu(inf) * b: inf; the row's scale 0, the inf 0 (NaN product)
    x[3, 5] = -float("nan")  # a NaN with its sign bit set: still the row's amax
    _run(K("npu_swiglu_quant"), npu.npu_swiglu_quant, (x,),
         {"activate_left": True, "quant_mode": 1}, device, exact=(0, 1))
    with pytest.raises(Exception, match="npu_swiglu_quant.*smooth_scales"):
        K("npu_swiglu_quant")(rand(2, 8).to(device), quant_mode=0)


@pytest.mark.parametrize("dtype", [bf16, fp32])
@pytest.mark.parametrize("per", ["channel", "tensor"])
@pytest.mark.parametrize("quant_mode,offsets", [(1, False), (0, False), (0, True)])
@pytest.mark.parametrize("group_list_type,index", [(0, [2, 2, 5]), (1, [2, 0, 3]),
                                                   (0, [3, 7, 10])])
def test_swiglu_quant_moe_groups(dtype, per, quant_mode, offsets, group_list_type, index,
                                 device):
    """Each row's group's smooth scales (and offsets), per channel or per tensor, from cumsum
    or count group_index, with an empty group and rows after the last group (left
    unsmoothed), or groups covering all 2 x 5 rows; int8 within one step (the sigmoid),
    scales the dtype's."""
    torch.manual_seed(0)
    g, n = len(index), 48
    shape = (g, n) if per == "channel" else (g,)
    kw = {"smooth_scales": torch.rand(shape) + 0.5,
          "offsets": torch.randn(shape) * 3 if offsets else None,
          "group_index": torch.tensor(index, dtype=torch.int32), "quant_mode": quant_mode,
          "group_list_type": group_list_type, "activate_left": per == "tensor"}
    x = rand(2, 5, 2 * n, dtype=dtype, scale=4.0)
    out = _run(K("npu_swiglu_quant"), npu.npu_swiglu_quant, (x,), kw, device)
    assert out[0].shape == (2, 5, n)


def test_swiglu_quant_moe_group_rules_name_the_operator(device):
    kw = {"smooth_scales": torch.rand(2, 4) + 0.5,
          "group_index": torch.tensor([3, 1], dtype=torch.int32), "quant_mode": 1}
    with pytest.raises(Exception, match="npu_swiglu_quant.*group_index"):
        K("npu_swiglu_quant")(rand(5, 8).to(device), **_to((), kw, device)[1])


@triton.jit
def _rotary_pairs(out_ptr, MODE: tl.constexpr, D: tl.constexpr, H: tl.constexpr):
    j = tl.arange(0, H)
    o1, o2, i1, i2 = rotary._pairs(j, MODE, D)
    tl.store(out_ptr + j, o1)
    tl.store(out_ptr + H + j, o2)
    tl.store(out_ptr + 2 * H + j, i1)
    tl.store(out_ptr + 3 * H + j, i2)


def test_rotary_pairs_are_the_modes_permutations(device):
    """The kernel's pair arithmetic (triton_kernels.rotary._pairs) against each mode's one
    definition (ops.rotary_mul.rotation): o1 the outputs of sign -1 in order, i1 / i2 their
    A / B inputs, o2 the output whose A input is i2, which reads i1 with sign +1."""
    from op_sdk.ops.rotary_mul import MODES, rotation

    for mode, code in MODES.items():
        for d in (8, 32, 128):
            pa, pb, sb = rotation(mode, d)
            pa = torch.arange(d) if pa is None else pa
            inv = torch.empty_like(pa)
            inv[pa] = torch.arange(d)
            o1 = torch.nonzero(sb < 0).flatten()
            i1, i2 = pa[o1], pb[o1]
            o2 = inv[i2]
            assert bool((sb[o2] > 0).all()) and torch.equal(pb[o2], i1), (mode, d)
            got = torch.empty(4, d // 2, dtype=torch.int32, device=device)
            _rotary_pairs[(1,)](got, MODE=code, D=d, H=d // 2)
            assert torch.equal(got.cpu().long(), torch.stack((o1, o2, i1, i2))), (mode, d)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,rshape", [((2, 3, 5, 64), (2, 1, 5, 64)), ((2, 3, 5, 64), (1, 1, 1, 64)),
                                          ((0, 2, 3, 64), (0, 1, 3, 64))])
@pytest.mark.parametrize("layout", ["contiguous", "permuted", "broadcast"])
def test_interleave_rope_is_bit_exact(dtype, shape, rshape, layout, device):
    """npu_interleave_rope runs the rotary kernel's "interleave-half" mode, in x's layout."""
    torch.manual_seed(0)
    x, c, s = rand(*shape, dtype=dtype), rand(*rshape, dtype=dtype), rand(*rshape, dtype=dtype)
    args, kw = relayout((x, c, s), {}, layout, which=(0,))
    _run(K("npu_interleave_rope"), npu.npu_interleave_rope, args, kw, device, exact=(0,))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout,shapes", [("BSND", ((2, 3, 4, 64), (2, 3, 1, 64), (2, 3, 1, 64))),
                                           ("BNSD", ((2, 4, 3, 128), (2, 2, 3, 128), (2, 1, 3, 128))),
                                           ("TND", ((5, 4, 64), (5, 2, 64), (5, 1, 64)))])
@pytest.mark.parametrize("mode", ["half", "quarter", "interleave"])
@pytest.mark.parametrize("layout_of_q", ["contiguous", "permuted"])
def test_apply_rotary_pos_emb_is_bit_exact(dtype, layout, shapes, mode, layout_of_q, device):
    """npu_apply_rotary_pos_emb runs the rotary kernel on query and on key, each result in
    its input's layout."""
    torch.manual_seed(0)
    q, k, c = (rand(*s, dtype=dtype) for s in shapes)
    args, kw = relayout((q, k, c, rand(*shapes[2], dtype=dtype)), {"layout": layout, "rotary_mode": mode},
                        layout_of_q, which=(0,))
    _run(K("npu_apply_rotary_pos_emb"), npu.npu_apply_rotary_pos_emb, args, kw, device, exact=(0, 1))


# ---- npu_kv_rmsnorm_rope_cache and its v2 pair: norm, rotation, the caches' stores ---------

def _kv_cache_close(out, ref):
    """k_rope and the k cache bit for bit (no reduction); c_kv and a float ckv cache within
    the norm's rounding, an int8 ckv cache within one step (the sum of squares' order)."""
    k_out, v_out, k_rope, c_kv = out
    rk, rv, rkr, rckv = ref
    assert torch.equal(k_rope.isnan(), rkr.isnan()) and torch.equal(k_rope.nan_to_num(), rkr.nan_to_num())
    assert torch.equal(k_out.isnan(), rk.isnan()) and torch.equal(k_out.nan_to_num(), rk.nan_to_num())
    assert torch.equal(c_kv.isnan(), rckv.isnan())
    _norm_rope_close(c_kv.nan_to_num(), rckv.nan_to_num())
    if v_out.dtype == torch.int8:
        assert_int_close(v_out, rv)
    else:
        assert torch.equal(v_out.isnan(), rv.isnan())
        _norm_rope_close(v_out.nan_to_num(), rv.nan_to_num())


@pytest.mark.parametrize("mode", ["Norm", "PA", "PA_BNSD", "PA_NZ", "PA_BLK_BNSD", "PA_BLK_NZ"])
@pytest.mark.parametrize("quant", [False, True])
@pytest.mark.parametrize("dtype", [bf16, fp16])
def test_kv_rmsnorm_rope_cache(mode, quant, dtype, device):
    """Every cache mode, int8 and float caches: outputs and caches (untouched rows kept,
    index -1 skipped) as the reference computes them; odd widths (Dv 40, Dk 24), S = 5
    with blocks of 32 / 16 (a partial page), cos / sin broadcast over S."""
    from tests.ops.test_kv_rmsnorm_rope_cache import make

    nz = mode.endswith("NZ")  # (FRACTAL_NZ: widths of whole 32-byte blocks)
    args, kw = make(mode, b=3, s=5, dv=64 if nz else 40, dk=32 if nz else 24, dtype=dtype,
                    quant=quant, block_size=32 if quant else 16, blocks=6,
                    cos_s=1 if mode == "PA" else None)
    ref = npu.npu_kv_rmsnorm_rope_cache(*args, **kw)
    dargs, dkw = _to(args, kw, device)
    out = K("npu_kv_rmsnorm_rope_cache")(*dargs, **dkw)
    assert [o.shape for o in out] == [r.shape for r in ref]
    _kv_cache_close([o.cpu() for o in out], ref)


def test_kv_rmsnorm_rope_cache_repeated_rows_nonfinite_strided_and_empty(device):
    """Repeated slots (the last token in (b, s) order is written, as the reference), NaN /
    inf in kv, a non-contiguous kv and stride-0 cos / sin, the v2 functional pair's order,
    and an empty batch (the caches returned as copies)."""
    from tests.ops.test_kv_rmsnorm_rope_cache import make

    args, kw = make("PA_BNSD", b=2, s=4, dv=32, dk=16, block_size=16, blocks=2)
    kv, gamma, cos, sin, index, kc, vc = args
    index = torch.tensor([3, 7, 3, -1, 7, 9, 3, 0])
    kv = kv.transpose(2, 3).contiguous().transpose(2, 3)
    kv[0, 0, 1, 5], kv[1, 0, 2, 40] = float("nan"), float("inf")
    cos, sin = cos[:, :, :1].expand(cos.shape), sin[:, :, :1].expand(sin.shape)
    args = (kv, gamma, cos, sin, index, kc, vc)
    ref = npu.npu_kv_rmsnorm_rope_cache(*args, **kw)
    dargs, dkw = _to(args, kw, device)
    _kv_cache_close([o.cpu() for o in K("npu_kv_rmsnorm_rope_cache")(*dargs, **dkw)], ref)
    out = K("npu_kv_rmsnorm_rope_cache_v2_functional")(*dargs, **dkw)
    _kv_cache_close([o.cpu() for o in (out[2], out[3], out[0], out[1])], ref)
    args, kw = make("PA_BNSD", b=0, s=3, dv=32, dk=16)
    dargs, dkw = _to(args, kw, device)
    out = K("npu_kv_rmsnorm_rope_cache")(*dargs, **dkw)
    assert torch.equal(out[0].cpu(), args[5]) and torch.equal(out[1].cpu(), args[6])
    assert out[2].shape == (0, 1, 3, 16) and out[3].shape == (0, 1, 3, 32)


# ---- npu_qkv_rms_norm_rope_cache: per-head norm and rotation of q / k, the NZ caches' stores

def _qkv_close(out, ref):
    """v and its cache bit for bit (no arithmetic, or one division); q, k and a float k cache
    within the norm's rounding (the sum of squares' order), an int8 k cache within one step;
    NaN where the reference has NaN."""
    for i, (o, r) in enumerate(zip(out, ref)):
        o = o.cpu()
        assert (o.dtype, o.shape) == (r.dtype, r.shape), i
        if i in (2, 5) or o.dim() == 0:
            assert torch.equal(o.isnan(), r.isnan()) if o.is_floating_point() else True, i
            assert torch.equal(o.nan_to_num(), r.nan_to_num()) if o.is_floating_point() \
                else torch.equal(o, r), i
        elif o.dtype == torch.int8:
            assert_int_close(o, r)
        else:
            assert torch.equal(o.isnan(), r.isnan()), i
            _norm_rope_close(o.nan_to_num(), r.nan_to_num())


@pytest.mark.parametrize("quant,offset", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("output", [False, True])
@pytest.mark.parametrize("cos_per_seq", [False, True])
@pytest.mark.parametrize("dtype", [bf16, fp16])
def test_qkv_rms_norm_rope_cache(quant, offset, output, cos_per_seq, dtype, device):
    """Float and int8 caches (with and without offsets), q / k / v returned or not, cos /
    sin per token or per sequence: every output and both caches (untouched slots kept, an
    index of -1 skipped) as the reference computes them; a head dim whose half is not a
    power of two (D 96: 48 pairs), heads (3, 2, 1), S = 5 in blocks of 32 (partial pages)."""
    from tests.ops.test_qkv_rms_norm_rope_cache import make

    args, kw = make(b=3, s=5, heads=(3, 2, 1), d=96, dtype=dtype, quant=quant, offset=offset,
                    cos_per_seq=cos_per_seq, blocks=2)
    kw = dict(kw, is_output_qkv=output)
    ref = npu.npu_qkv_rms_norm_rope_cache_functional(*args, **kw)
    dargs, dkw = _to(args, kw, device)
    out = K("npu_qkv_rms_norm_rope_cache_functional")(*dargs, **dkw)
    _qkv_close(out, ref)
    with torch.device("meta"):
        fake = npu.npu_qkv_rms_norm_rope_cache_functional(*_to(dargs, dkw, "meta")[0],
                                                          **_to(dargs, dkw, "meta")[1])
    assert [significant_strides(o) for o in out] == [significant_strides(f) for f in fake]


def test_qkv_rms_norm_rope_cache_repeated_slots_nonfinite_strided_and_empty(device):
    """Repeated slots (the last token in order is written), NaN / inf in q, k and v, a
    padded (strided) qkv and stride-0 cos / sin, the in-place operator through its
    functional kernel, and an empty batch (the caches returned as copies)."""
    from tests.ops.test_qkv_rms_norm_rope_cache import make

    for quant in (False, True):
        args, kw = make(b=2, s=4, heads=(2, 1, 1), d=32, quant=quant, blocks=1)
        qkv, qg, kg, cos, sin, index, q_out, kc, vc, size, heads = args
        index = torch.tensor([3, 7, 3, -1, 7, 9, 3, 0])
        qkv = torch.cat([qkv, qkv[:, :8]], 1)[:, :128]  # rows padded to 136
        qkv[1, 5], qkv[2, 70], qkv[3, 100], qkv[5, 110] = (float("nan"), float("inf"),
                                                           float("-inf"), float("nan"))
        cos, sin = cos[:1].expand(cos.shape), sin[1:2].expand(sin.shape)
        args = (qkv, qg, kg, cos, sin, index, q_out, kc, vc, size, heads)
        kw = dict(kw, is_output_qkv=True)
        ref = npu.npu_qkv_rms_norm_rope_cache_functional(*args, **kw)
        dargs, dkw = _to(args, kw, device)
        _qkv_close(K("npu_qkv_rms_norm_rope_cache_functional")(*dargs, **dkw), ref)
    args, kw = make(b=0, s=3, heads=(2, 1, 1), d=32)
    dargs, dkw = _to(args, dict(kw, is_output_qkv=True), device)
    out = K("npu_qkv_rms_norm_rope_cache_functional")(*dargs, **dkw)
    assert [tuple(o.shape) for o in out[:4]] == [(0, 64), (0, 32), (0, 32), (0, 64)]
    assert torch.equal(out[4].cpu(), args[7]) and torch.equal(out[5].cpu(), args[8])


def test_qkv_rms_norm_rope_cache_rules_name_the_operator_on_cuda_too(device):
    from tests.ops.test_qkv_rms_norm_rope_cache import make

    args, kw = make()
    args = args[:5] + (torch.tensor([0, 1, 2, 3, 4, 10**6]),) + args[6:]
    dargs, dkw = _to(args, kw, device)
    with pytest.raises(RuntimeError, match="npu_qkv_rms_norm_rope_cache_functional.*index"):
        K("npu_qkv_rms_norm_rope_cache_functional")(*dargs, **dkw)


def test_kv_rmsnorm_rope_cache_rules_name_the_operator_on_cuda_too(device):
    from tests.ops.test_kv_rmsnorm_rope_cache import make

    args, kw = make("PA_BNSD", b=1, s=2, dv=32, dk=16)
    args = args[:4] + (torch.tensor([0, 10**6]),) + args[5:]
    dargs, dkw = _to(args, kw, device)
    with pytest.raises(RuntimeError, match="npu_kv_rmsnorm_rope_cache.*index"):
        K("npu_kv_rmsnorm_rope_cache")(*dargs, **dkw)


# ---- npu_scatter_nd_update ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [fp16, bf16, fp32, torch.int8, torch.int64, torch.bool,
                                   torch.complex64])
@pytest.mark.parametrize("shape,k,n", [((7, 5, 3), 1, 4), ((4, 6, 8), 2, 9), ((3, 4, 5), 3, 6),
                                       ((9, 1100), 1, 3), ((6, 4), 1, 0)])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_scatter_nd_update_is_bit_exact(dtype, shape, k, n, index_dtype, device):
    """Each update's slice at its address among input's first K dims, the rest of input
    copied; repeated addresses (drawn with replacement): the last update in index order;
    bit for bit (NaN / inf values included), every dtype by its bits, no updates."""
    torch.manual_seed(0)
    mk = (lambda *s: (torch.randn(*s) * 4).to(dtype)) if dtype != torch.bool else (
        lambda *s: torch.rand(*s) > 0.5)
    x = mk(*shape)
    if dtype.is_floating_point:
        x.view(-1)[:3] = torch.tensor([float("nan"), float("inf"), -float("inf")]).to(dtype)
    idx = torch.stack([torch.randint(0, shape[d], (n,)) for d in range(k)], -1).to(index_dtype)
    upd = mk(n, *shape[k:])
    _run(K("npu_scatter_nd_update"), npu.npu_scatter_nd_update, (x, idx, upd), {}, device,
         exact=(0,))


def test_scatter_nd_update_last_update_wins_and_layouts(device):
    """Three updates to one row: the third is written; 2-D indices (..., K); a permuted input
    (the output takes its layout, as the fake's empty_like)."""
    x = torch.zeros(5, 4)
    idx = torch.tensor([[[1], [3]], [[1], [1]]])
    upd = torch.arange(16, dtype=torch.float32).reshape(2, 2, 4)
    out = _run(K("npu_scatter_nd_update"), npu.npu_scatter_nd_update, (x, idx, upd), {}, device,
               exact=(0,))
    assert out[0][1].cpu().tolist() == [12.0, 13.0, 14.0, 15.0]
    xp = torch.randn(4, 6, 5).permute(2, 0, 1)
    _run(K("npu_scatter_nd_update"), npu.npu_scatter_nd_update,
         (xp, torch.tensor([[0, 3], [4, 1]]), torch.randn(2, 6)), {}, device, exact=(0,))


def test_scatter_nd_update_rules_are_the_operators(device):
    x = torch.zeros(5, 4).to(device)
    with pytest.raises(Exception, match="npu_scatter_nd_update.*indices.*\\[0, size\\)"):
        K("npu_scatter_nd_update")(x, torch.tensor([[5]]).to(device), torch.zeros(1, 4).to(device))
    with pytest.raises(Exception, match="npu_scatter_nd_update.*updates.*shape"):
        K("npu_scatter_nd_update")(x, torch.tensor([[1]]).to(device), torch.zeros(2, 4).to(device))
