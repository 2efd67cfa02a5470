"""The native CPU kernels (op_sdk._C) against the plain-PyTorch references.

Float outputs are compared with per-dtype tolerances (the kernels sum x^2 in another order
than torch, so rstd differs in the last fp32 bits); integer outputs may differ by one step
in a tiny fraction of elements (a value that sits on a rounding boundary); the sum output
`x` of the add-norm ops and the scales of npu_dynamic_quant are exact.
"""

import os
import subprocess
import sys

import pytest
import torch

import op_sdk
from op_sdk.ops._common import unpack_int4
from op_sdk.ops.matmul import quant_matmul_reference, transpose_batchmatmul_reference
from op_sdk.ops.norm_quant import (
    add_rms_norm_dynamic_quant_reference,
    add_rms_norm_quant_reference,
)
from op_sdk.ops.quant import dynamic_quant_reference, quantize_reference
from op_sdk.ops.rms_norm import (
    add_rms_norm_cast_reference,
    add_rms_norm_reference,
    rms_norm_reference,
)

npu = torch.ops.npu
bf16, fp16, fp32 = torch.bfloat16, torch.float16, torch.float32

# (atol, rtol) of float outputs, per dtype
TOL = {fp32: (1e-5, 1e-5), fp16: (1e-3, 1e-3), bf16: (1e-2, 1e-2)}
# integer outputs: at most one step apart, in at most this fraction of elements
INT_FLIP_FRACTION = 1e-3

NATIVE_OPS = [
    "npu_rms_norm", "npu_add_rms_norm", "npu_add_rms_norm_cast", "npu_dynamic_quant",
    "npu_quantize", "npu_add_rms_norm_quant", "npu_add_rms_norm_dynamic_quant",
    "npu_quant_matmul", "npu_transpose_batchmatmul",
]


def _rand(*shape, dtype=fp32, scale=1.0):
    return (torch.randn(*shape) * scale).to(dtype)


def assert_int_close(actual, expected, int4=False):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if int4:
        actual, expected = unpack_int4(actual), unpack_int4(expected)
    diff = (actual.long() - expected.long()).abs()
    if diff.numel() == 0:
        return
    assert int(diff.max()) <= 1, f"integer outputs differ by {int(diff.max())}"
    assert float((diff > 0).float().mean()) <= INT_FLIP_FRACTION


def assert_float_close(actual, expected, dtype=None):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    atol, rtol = TOL[dtype or actual.dtype]
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)


def assert_outputs_close(actual, expected, exact=(), int4=False, float_dtype=None):
    """Compare tuples of outputs; indices in `exact` must match bit for bit."""
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        if i in exact:
            assert a.dtype == e.dtype and a.shape == e.shape
            assert torch.equal(a, e), f"output {i} differs"
        elif a.dtype in (torch.int8, torch.uint8, torch.int32):
            assert_int_close(a, e, int4=int4 and a.dtype == torch.int32)
        else:
            assert_float_close(a, e, float_dtype if a.dtype != fp32 else fp32)


def strided(t):
    """A non-contiguous view with t's values: the transpose of a contiguous transpose."""
    if t.dim() < 2:
        return t.repeat_interleave(2)[::2]
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


# ---- dispatch ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", NATIVE_OPS)
def test_op_dispatches_to_native_cpu_kernel(name):
    assert op_sdk.get_op(name).kernel_devices()["cpu"] == "native"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f"npu::{name}", "CPU")


# ---- npu_rms_norm -----------------------------------------------------------------------

@pytest.mark.parametrize("xdt,gdt", [(fp16, fp32), (bf16, fp32), (fp16, fp16), (bf16, bf16),
                                     (fp32, fp32)])
@pytest.mark.parametrize("shape,gdims", [((1, 96), 1), ((257, 96), 1), ((2, 3, 7), 1),
                                         ((4, 3, 7), 2), ((3, 7168), 1)])
def test_rms_norm(xdt, gdt, shape, gdims):
    torch.manual_seed(0)
    x = _rand(*shape, dtype=xdt)
    g = _rand(*shape[len(shape) - gdims:], dtype=gdt)
    assert_outputs_close(npu.npu_rms_norm(x, g, 1e-5), rms_norm_reference(x, g, 1e-5),
                         float_dtype=xdt)


def test_rms_norm_non_contiguous_and_empty():
    torch.manual_seed(0)
    x = strided(_rand(33, 40, dtype=bf16))
    g = strided(_rand(40, dtype=bf16))
    assert not x.is_contiguous() and not g.is_contiguous()
    y, rstd = npu.npu_rms_norm(x, g)
    assert_outputs_close((y, rstd), rms_norm_reference(x, g), float_dtype=bf16)
    assert y.stride() == torch.empty_like(x).stride()  # laid out as the fake promises
    y, rstd = npu.npu_rms_norm(torch.empty(0, 5, 40, dtype=bf16), torch.ones(40, dtype=bf16))
    assert y.shape == (0, 5, 40) and rstd.shape == (0, 5, 1)


# ---- npu_add_rms_norm / npu_add_rms_norm_cast ------------------------------------------

@pytest.mark.parametrize("dtype", [fp16, bf16, fp32])
@pytest.mark.parametrize("shape", [(1, 96), (257, 96), (2, 5, 7), (3, 7168)])
def test_add_rms_norm(dtype, shape):
    torch.manual_seed(0)
    x1, x2 = _rand(*shape, dtype=dtype), _rand(*shape, dtype=dtype)
    g = _rand(shape[-1], dtype=dtype)
    # x, the rounded fp32 sum, is exact
    assert_outputs_close(npu.npu_add_rms_norm(x1, x2, g), add_rms_norm_reference(x1, x2, g),
                         exact=(2,), float_dtype=dtype)


@pytest.mark.parametrize("dtype", [fp16, bf16])
@pytest.mark.parametrize("shape", [(1, 96), (257, 96), (2, 5, 7), (3, 7168)])
def test_add_rms_norm_cast(dtype, shape):
    torch.manual_seed(0)
    x1, x2 = _rand(*shape, dtype=dtype), _rand(*shape, dtype=dtype)
    g = _rand(shape[-1], dtype=dtype)
    out = npu.npu_add_rms_norm_cast(x1, x2, g)
    assert_outputs_close(out, add_rms_norm_cast_reference(x1, x2, g), exact=(3,),
                         float_dtype=dtype)
    assert torch.equal(out[1], out[0].to(dtype))  # y2 is y1 rounded once


def test_add_rms_norm_non_contiguous_multi_dim_gamma_and_empty():
    torch.manual_seed(0)
    x1, x2 = strided(_rand(6, 5, 24, dtype=fp16)), _rand(6, 5, 24, dtype=fp16)
    g = _rand(5, 24, dtype=fp16)
    assert_outputs_close(npu.npu_add_rms_norm(x1, x2, g), add_rms_norm_reference(x1, x2, g),
                         exact=(2,), float_dtype=fp16)
    e = torch.empty(0, 24, dtype=bf16)
    out = npu.npu_add_rms_norm_cast(e, e, torch.ones(24, dtype=bf16))
    assert [tuple(o.shape) for o in out] == [(0, 24), (0, 24), (0, 1), (0, 24)]


# ---- npu_dynamic_quant ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [fp16, bf16, fp32])
@pytest.mark.parametrize("shape", [(1, 96), (257, 96), (2, 3, 7), (3, 7168)])
@pytest.mark.parametrize("smooth", [None, "same", "fp32"])
def test_dynamic_quant_per_token_int8(dtype, shape, smooth):
    torch.manual_seed(0)
    x = _rand(*shape, dtype=dtype, scale=3.0)
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
    x = _rand(2, 33, 48, dtype=dtype)
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
    x = _rand(5, 64, dtype=bf16)
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
    x = strided(_rand(40, 32, dtype=fp16))
    sm = strided((torch.rand(32) + 0.5).to(fp16))
    out = npu.npu_dynamic_quant(x, smooth_scales=sm)
    assert_outputs_close(out, dynamic_quant_reference(x, smooth_scales=sm))


@pytest.mark.parametrize("ends", [[2, 2, 6], [0, 6], [6], [1, 2, 3, 4, 5, 6]])
@pytest.mark.parametrize("dst", [torch.int8, torch.quint4x2])
def test_dynamic_quant_moe_group_index(ends, dst):
    torch.manual_seed(0)
    x = _rand(2, 3, 16, dtype=bf16)
    gi = torch.tensor(ends, dtype=torch.int32)
    sm = (torch.rand(len(ends), 16) + 0.5).to(bf16)
    out = npu.npu_dynamic_quant(x, smooth_scales=sm, group_index=gi, dst_type=dst)
    ref = dynamic_quant_reference(x, smooth_scales=sm, group_index=gi, dst_type=dst)
    assert_outputs_close(out, ref, exact=(0, 1))


def test_dynamic_quant_moe_many_groups_threaded():
    # rows are split over threads across group boundaries
    torch.manual_seed(0)
    x = _rand(1000, 64, dtype=fp16)
    counts = torch.randint(0, 20, (100,))
    counts[-1] += 1000 - counts.sum()
    gi = counts.cumsum(0).to(torch.int32)
    assert int(gi[-1]) == 1000 and (counts >= 0).all()
    sm = (torch.rand(100, 64) + 0.5).to(fp16)
    out = npu.npu_dynamic_quant(x, smooth_scales=sm, group_index=gi)
    assert_outputs_close(out, dynamic_quant_reference(x, smooth_scales=sm, group_index=gi),
                         exact=(0, 1))


# ---- npu_quantize -----------------------------------------------------------------------

QUANTIZE_OUT = [(torch.qint8, torch.int8), (torch.int8, torch.int8), (torch.quint8, torch.uint8),
                (torch.uint8, torch.uint8), (torch.qint32, torch.int32), (torch.int32, torch.int32)]


@pytest.mark.parametrize("dtype", [fp16, bf16, fp32])
@pytest.mark.parametrize("code,out_dtype", QUANTIZE_OUT)
@pytest.mark.parametrize("axis,nscale", [(-1, "n"), (1, "n"), (0, "n"), (-1, 1)])
def test_quantize_div_mode(dtype, code, out_dtype, axis, nscale):
    torch.manual_seed(0)
    x = _rand(6, 5, 24, dtype=dtype, scale=100.0)
    n = 1 if nscale == 1 else x.shape[axis]
    s = (torch.rand(n) + 0.05)
    zp = torch.randint(-5, 5, (n,), dtype=torch.int32)
    out = npu.npu_quantize(x, s, zp, code, axis, True)
    assert out.dtype == out_dtype
    assert_int_close(out, quantize_reference(x, s, zp, code, axis, True))
    out = npu.npu_quantize(x, s.to(bf16), None, code, axis, True)
    assert_int_close(out, quantize_reference(x, s.to(bf16), None, code, axis, True))


@pytest.mark.parametrize("dtype", [fp16, bf16, fp32])
@pytest.mark.parametrize("axis", [1, -1, 5, -2])
@pytest.mark.parametrize("code", [torch.int8, torch.quint4x2, torch.uint8])
def test_quantize_mul_mode_axis_coercion(dtype, axis, code):
    torch.manual_seed(0)
    x = _rand(3, 4, 16, dtype=dtype, scale=5.0)
    ax = axis if axis == -2 else -1  # axis >= -1 means the last axis
    n = x.shape[ax]
    s = (torch.rand(n) + 0.5).to(dtype)
    zp = torch.randint(-2, 2, (n,)).to(dtype)
    out = npu.npu_quantize(x, s, zp, code, axis, False)
    ref = quantize_reference(x, s, zp, code, axis, False)
    assert_int_close(out, ref, int4=code == torch.quint4x2)
    if code == torch.quint4x2:
        assert out.shape == (3, 4, 2) and out.dtype == torch.int32


def test_quantize_saturates_and_rounds_half_to_even():
    x = torch.tensor([[0.5, 1.5, 2.5, -0.5, -2.5, 1e6, -1e6, 3e9, -3e9, 127.5, -128.5, 254.5]])
    one = torch.ones(1)
    assert npu.npu_quantize(x, one, None, torch.int8, -1, True).tolist() == \
        [[0, 2, 2, 0, -2, 127, -128, 127, -128, 127, -128, 127]]
    assert npu.npu_quantize(x, one, None, torch.uint8, -1, True).tolist() == \
        [[0, 2, 2, 0, 0, 255, 0, 255, 0, 128, 0, 254]]
    i32 = npu.npu_quantize(x, one, None, torch.int32, -1, True)
    assert i32.tolist() == quantize_reference(x, one, None, torch.int32, -1, True).tolist()
    assert i32[0, 7] == 2**31 - 1 and i32[0, 8] == -2**31


def test_quantize_one_dim_non_contiguous_and_empty():
    torch.manual_seed(0)
    x = strided(_rand(40, 16, dtype=bf16, scale=10.0))
    s = torch.rand(16, dtype=bf16) + 0.5
    assert_int_close(npu.npu_quantize(x, s, None, torch.int8, 1, False),
                     quantize_reference(x, s, None, torch.int8, 1, False))
    # 1-D input with the default axis=1 in mul mode: the last axis
    x1 = _rand(16, dtype=bf16)
    assert_int_close(npu.npu_quantize(x1, s, None, torch.int8, 1, False),
                     quantize_reference(x1, s, None, torch.int8, 1, False))
    assert npu.npu_quantize(torch.empty(0, 16), torch.ones(16), None, torch.quint4x2, -1,
                            False).shape == (0, 2)


def test_quantize_large_single_scale_threaded():
    torch.manual_seed(0)
    x = _rand(300, 1000, dtype=fp16, scale=50.0)
    s, zp = torch.tensor([0.7], dtype=fp16), torch.tensor([3.0], dtype=fp16)
    assert_int_close(npu.npu_quantize(x, s, zp, torch.quint4x2, -1, False),
                     quantize_reference(x, s, zp, torch.quint4x2, -1, False), int4=True)


# ---- npu_add_rms_norm_quant -------------------------------------------------------------

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
    x1, x2, g = _rand(*shape, dtype=dtype), _rand(*shape, dtype=dtype), _rand(h, dtype=dtype)
    s1, z1, s2, z2 = _static_quant_args(dtype, h, two, zp)
    b = _rand(h, dtype=dtype) if beta else None
    out = npu.npu_add_rms_norm_quant(x1, x2, g, s1, z1, b, s2, z2, div_mode=div)
    ref = add_rms_norm_quant_reference(x1, x2, g, s1, z1, b, s2, z2, div_mode=div)
    assert_outputs_close(out, ref, exact=(2,))
    if not two:
        assert (out[1] == 0).all()


def test_add_rms_norm_quant_non_contiguous_multi_dim_gamma_and_empty():
    torch.manual_seed(0)
    x1, x2 = strided(_rand(4, 3, 16, dtype=bf16)), strided(_rand(4, 3, 16, dtype=bf16))
    g = _rand(3, 16, dtype=bf16)
    s = (torch.rand(3, 16) * 0.05 + 0.01).to(bf16)
    out = npu.npu_add_rms_norm_quant(x1, x2, g, s, None)
    assert_outputs_close(out, add_rms_norm_quant_reference(x1, x2, g, s, None), exact=(2,))
    e = torch.empty(0, 16, dtype=fp16)
    out = npu.npu_add_rms_norm_quant(e, e, torch.ones(16, dtype=fp16), torch.ones(16), None)
    assert [tuple(o.shape) for o in out] == [(0, 16)] * 3


# ---- npu_add_rms_norm_dynamic_quant -----------------------------------------------------

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
    x1, x2, g = _rand(*shape, dtype=dtype), _rand(*shape, dtype=dtype), _rand(h, dtype=dtype)
    kw = {"smooth_scale1": (torch.rand(h) + 0.5).to(dtype) if sm1 else None,
          "smooth_scale2": (torch.rand(h) + 0.5).to(dtype) if sm2 else None,
          "beta": _rand(h, dtype=dtype) if beta else None, "output_mask": mask}
    out = npu.npu_add_rms_norm_dynamic_quant(x1, x2, g, **kw)
    ref = add_rms_norm_dynamic_quant_reference(x1, x2, g, **kw)
    assert_outputs_close(out, ref, exact=(2,))
    for y, s in ((out[0], out[3]), (out[1], out[4])):
        assert (y.shape == (0,)) == (s.shape == (0,))  # a branch that does not run: (0,)


def test_add_rms_norm_dynamic_quant_zero_rows_non_contiguous_and_empty():
    torch.manual_seed(0)
    x1 = strided(_rand(9, 40, dtype=bf16))
    x2 = _rand(9, 40, dtype=bf16)
    x2[3] = -x1[3]  # the sum is zero: scale 0, y 0, never NaN
    g = _rand(40, dtype=bf16)
    sm = (torch.rand(40) + 0.5).to(bf16)
    out = npu.npu_add_rms_norm_dynamic_quant(x1, x2, g, smooth_scale1=sm, smooth_scale2=sm)
    assert_outputs_close(out, add_rms_norm_dynamic_quant_reference(
        x1, x2, g, smooth_scale1=sm, smooth_scale2=sm), exact=(2,))
    assert float(out[3][3]) == 0.0 and (out[0][3] == 0).all() and not out[3].isnan().any()
    e = torch.empty(0, 3, 16, dtype=fp16)
    out = npu.npu_add_rms_norm_dynamic_quant(e, e, torch.ones(16, dtype=fp16))
    assert [tuple(o.shape) for o in out] == [(0, 3, 16), (0,), (0, 3, 16), (0, 3), (0,)]


# ---- npu_quant_matmul --------------------------------------------------------------------
# The int32 product is exact and the epilogue does the contract's fp32 steps in its order,
# so the native kernel must equal the reference bit for bit.

def _i8(*shape):
    return torch.randint(-128, 128, shape, dtype=torch.int8)


def _qmm_epilogues(m, n):
    pt = torch.rand(m) + 0.5
    return {
        "int8": {},
        "int8-offset": {"offset": torch.randn(n) * 3},
        "int8-offset1": {"offset": torch.tensor([2.5])},
        "int32": {"output_dtype": torch.int32},
        # values near the int32 limit: the bias add wraps like torch's int32 add
        "int32-bias": {"output_dtype": torch.int32,
                       "bias": torch.randint(2**31 - 3000, 2**31 - 1, (n,), dtype=torch.int32)},
        "int8-int-bias": {"bias": torch.randint(-5000, 5000, (n,), dtype=torch.int32)},
        "bf16-pertoken": {"pertoken_scale": pt, "output_dtype": torch.bfloat16},
        "fp16-pertoken-fp32-bias": {"pertoken_scale": pt, "output_dtype": torch.float16,
                                    "bias": torch.randn(n)},
        "bf16-pertoken-bf16-bias": {"pertoken_scale": pt, "output_dtype": torch.bfloat16,
                                    "bias": torch.randn(n).to(bf16)},
        "fp16-pertoken-fp16-bias": {"pertoken_scale": pt, "output_dtype": torch.float16,
                                    "bias": torch.randn(n).to(fp16)},
        "fp16-no-pertoken": {"output_dtype": torch.float16},
    }


def _qmm_check(x1, x2, scale, **kw):
    out = npu.npu_quant_matmul(x1, x2, scale, **kw)
    ref = quant_matmul_reference(x1, x2, scale, **kw)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    assert torch.equal(out, ref), f"max diff {(out.double() - ref.double()).abs().max()}"


# m = 1..3 take the VNNI kernel on CPUs that have it, 4..32 the AMX kernel, larger m
# ATen's int8 GEMM; k covers whole 64-byte steps, tails, k < 64 and k = 0; n covers the
# 4-row groups / 16-column tiles and their tails.
@pytest.mark.parametrize("m,k,n", [(1, 96, 40), (1, 1, 5), (2, 64, 4), (3, 77, 45),
                                   (4, 7168, 9), (7, 130, 33), (8, 200, 70), (9, 64, 16),
                                   (17, 100, 31), (32, 65, 17), (40, 100, 31), (64, 64, 48),
                                   (2, 0, 3)])
@pytest.mark.parametrize("layout", ["nk", "kn"])
def test_quant_matmul(m, k, n, layout):
    x1 = _i8(m, k)
    # "nk": the (k, n) view of an (n, k) row-major weight (w.t()), "kn": row-major (k, n)
    x2 = _i8(n, k).t() if layout == "nk" else _i8(k, n)
    scale = torch.rand(n) * 1e-3
    for name, kw in _qmm_epilogues(m, n).items():
        for s in (scale, scale[:1], scale.to(bf16)):
            _qmm_check(x1, x2, s, **kw)


def test_quant_matmul_non_contiguous_batched_and_empty():
    # rows of x1 with a stride, a weight whose rows are a slice of wider ones
    x1 = _i8(5, 300)[:, ::3]
    wide = _i8(24, 160)
    _qmm_check(x1, wide[:, 20:120].t(), torch.rand(24) * 1e-2)
    _qmm_check(_i8(100, 6).t(), wide[:, :100].t(), torch.rand(24) * 1e-2)  # column-major x1
    pt = torch.rand(4)
    # broadcast batch dims on either side
    _qmm_check(_i8(2, 3, 4, 40), _i8(3, 24, 40).transpose(1, 2), torch.rand(24) * 1e-2,
               pertoken_scale=pt, output_dtype=bf16)
    _qmm_check(_i8(4, 40), _i8(2, 40, 24), torch.rand(24) * 1e-2, output_dtype=torch.int32)
    _qmm_check(_i8(3, 1, 4, 40), _i8(5, 40, 24), torch.rand(1), offset=torch.randn(24))
    # empty m / n / batch
    for x1, x2, n in [(_i8(0, 32), _i8(32, 8), 8), (_i8(4, 32), _i8(32, 0), 0),
                      (_i8(0, 4, 32), _i8(32, 8), 8)]:
        out = npu.npu_quant_matmul(x1, x2, torch.ones(max(n, 1)), output_dtype=torch.int32)
        assert out.shape == (*x1.shape[:-1], n) and out.dtype == torch.int32


def test_quant_matmul_saturates_and_rounds_half_to_even():
    # 1 x 1 products whose dequantised values sit on .5 and beyond the int8 range
    x1 = torch.tensor([[1], [3], [-5], [100], [-100]], dtype=torch.int8)
    x2 = torch.tensor([[1, 127]], dtype=torch.int8)
    out = npu.npu_quant_matmul(x1, x2, torch.tensor([0.5, 1.0]))
    assert out[:, 0].tolist() == [0, 2, -2, 50, -50]
    assert out[:, 1].tolist() == [127, 127, -128, 127, -128]
    _qmm_check(x1, x2, torch.tensor([0.5, 1.0]))


# ---- npu_transpose_batchmatmul -------------------------------------------------------------
# fp32 accumulation in another order than ATen's GEMM: float tolerances, scaled with sqrt(K)

def _tbmm_check(x, w, **kw):
    out = npu.npu_transpose_batchmatmul(x, w, **kw)
    ref = transpose_batchmatmul_reference(x.float(), w.float(), **kw).to(x.dtype)
    assert out.dtype == x.dtype and out.shape == ref.shape and out.is_contiguous()
    atol, rtol = TOL[x.dtype]
    k = x.shape[-1]
    torch.testing.assert_close(out, ref, atol=atol * max(1.0, k ** 0.5), rtol=rtol)


# m <= 16 takes the few-row kernel (above 8 rows only up to 2^23 multiply-adds: (12, 32,
# 128, 512) goes to ATen), larger m ATen's bmm; n covers 4-vector blocks and partial
# vectors; k = 1 and k = 0
@pytest.mark.parametrize("dtype", [fp32, bf16, fp16])
@pytest.mark.parametrize("m,b,k,n", [(1, 8, 128, 256), (4, 8, 128, 256), (3, 2, 7, 33),
                                     (8, 3, 64, 70), (9, 2, 40, 9), (5, 1, 1, 1),
                                     (2, 3, 0, 4), (13, 2, 40, 70), (16, 8, 128, 256),
                                     (17, 2, 40, 9), (12, 32, 128, 512)])
@pytest.mark.parametrize("perm_x1", [[0, 1, 2], [1, 0, 2]])
@pytest.mark.parametrize("perm_x2", [[0, 1, 2], [0, 2, 1]])
def test_transpose_batchmatmul(dtype, m, b, k, n, perm_x1, perm_x2):
    x = _rand(*((b, m, k) if perm_x1 == [0, 1, 2] else (m, b, k)), dtype=dtype)
    w = _rand(*((b, k, n) if perm_x2 == [0, 1, 2] else (b, n, k)), dtype=dtype)
    _tbmm_check(x, w, perm_x1=perm_x1, perm_x2=perm_x2)
    if (b * n) % 2 == 0:
        _tbmm_check(x, w, perm_x1=perm_x1, perm_x2=perm_x2, batch_split_factor=2)


def test_transpose_batchmatmul_non_contiguous_and_empty():
    # MLA's query: a slice of a projection's rows, viewed per head (strided rows and heads)
    qkv = _rand(3, 8 * 32 + 48, dtype=bf16)
    q = qkv[:, : 8 * 32].reshape(3, 8, 32)
    _tbmm_check(q, _rand(8, 32, 40, dtype=bf16), perm_x1=[1, 0, 2])
    _tbmm_check(strided(_rand(3, 4, 24)), _rand(4, 24, 20), perm_x1=[1, 0, 2])
    _tbmm_check(_rand(2, 3, 24), _rand(2, 48, 40)[:, ::2])  # weight rows with a stride
    for x, w in [(_rand(0, 2, 8), _rand(2, 8, 4)), (_rand(3, 2, 8), _rand(2, 8, 0))]:
        out = npu.npu_transpose_batchmatmul(x, w, perm_x1=[1, 0, 2])
        assert out.shape == (x.shape[0], 2, w.shape[2])


_MATMUL_SCRIPT = r"""
import torch, tests.test_kernels_cpu as t
torch.manual_seed(0)
for m, k, n in [(1, 96, 40), (3, 77, 45), (8, 200, 70), (17, 100, 31), (40, 100, 31),
                (64, 64, 48), (2, 0, 3)]:
    for layout in ("nk", "kn"):
        t.test_quant_matmul(m, k, n, layout)
t.test_quant_matmul_non_contiguous_batched_and_empty()
for m in (1, 4, 9):
    t.test_transpose_batchmatmul(torch.bfloat16, m, 3, 40, 70, [1, 0, 2], [0, 1, 2])
t.test_transpose_batchmatmul_non_contiguous_and_empty()
print("ok")
"""


@pytest.mark.parametrize("env", [
    {"OP_SDK_CPU_ISA": "avx2"},
    {"OP_SDK_CPU_ISA": "generic"},
    {"OP_SDK_QMM_VNNI_MAX_M": "0", "OP_SDK_QMM_AMX_MAX_M": "0", "OP_SDK_TBMM_MAX_M": "0"},
    {"OP_SDK_QMM_VNNI_MAX_M": "1000", "OP_SDK_TBMM_MAX_M": "1000"},
    {"OP_SDK_QMM_VNNI_MAX_M": "0", "OP_SDK_QMM_AMX_MAX_M": "64"}],
    ids=["avx2", "generic", "aten-only", "vnni-every-m", "amx-every-m"])
def test_matmul_other_paths_match_reference(env):
    """npu_quant_matmul / npu_transpose_batchmatmul with the product from ATen only, or from
    op_sdk's few-row kernels for every m (the choice is made once per process)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, "-c", _MATMUL_SCRIPT], cwd=root,
                            env=dict(os.environ, PYTHONPATH=root, **env),
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]


# ---- constraint checks of the C++ launchers ---------------------------------------------

def _x(*shape, dtype=bf16):
    return torch.zeros(*shape, dtype=dtype)


# (operator, argument the message must name, args, kwargs): one bad argument each
def bad(op, arg, *args, **kwargs):
    return op, arg, args, kwargs


BAD_CALLS = [
    bad("npu_rms_norm", "gamma", _x(4, 8), _x(8, dtype=fp16)),
    bad("npu_rms_norm", "gamma", _x(4, 8), _x(7)),
    bad("npu_rms_norm", "gamma", _x(4, 8), _x(2, 4, 8)),
    bad("npu_add_rms_norm", "x1",
        _x(4, 8, dtype=torch.int32), _x(4, 8, dtype=torch.int32), _x(8, dtype=torch.int32)),
    bad("npu_add_rms_norm", "x2", _x(4, 8), _x(4, 9), _x(8)),
    bad("npu_add_rms_norm", "x2", _x(4, 8), _x(4, 8, dtype=fp16), _x(8)),
    bad("npu_add_rms_norm", "gamma", _x(4, 8), _x(4, 8), _x(8, dtype=fp32)),
    bad("npu_add_rms_norm", "x1", _x(*[1] * 9), _x(*[1] * 9), _x(1)),
    bad("npu_add_rms_norm_cast", "x1",
        _x(4, 8, dtype=fp32), _x(4, 8, dtype=fp32), _x(8, dtype=fp32)),
    bad("npu_dynamic_quant", "input", _x(8)),
    bad("npu_dynamic_quant", "input", _x(4, 8, dtype=torch.int8)),
    bad("npu_dynamic_quant", "dst_type", _x(4, 8), dst_type=torch.int32),
    bad("npu_dynamic_quant", "input", _x(4, 12), dst_type=torch.quint4x2),
    bad("npu_dynamic_quant", "quant_mode", _x(4, 8), quant_mode="pergroup"),
    bad("npu_dynamic_quant", "dst_type_max", _x(4, 8), dst_type_max=127.0),
    bad("npu_dynamic_quant", "smooth_scales", _x(4, 8), smooth_scales=_x(7)),
    bad("npu_dynamic_quant", "smooth_scales", _x(4, 8), smooth_scales=_x(8, dtype=torch.int32)),
    bad("npu_dynamic_quant", "smooth_scales",
        _x(4, 8), group_index=torch.tensor([4], dtype=torch.int32)),
    bad("npu_dynamic_quant", "group_index",
        _x(4, 8), smooth_scales=_x(2, 8), group_index=torch.tensor([2, 4])),
    bad("npu_dynamic_quant", "group_index",
        _x(4, 8), smooth_scales=_x(1025, 8),
        group_index=torch.full((1025,), 4, dtype=torch.int32)),
    bad("npu_dynamic_quant", "smooth_scales",
        _x(4, 8), smooth_scales=_x(3, 8), group_index=torch.tensor([2, 4], dtype=torch.int32)),
    bad("npu_dynamic_quant", "group_index",
        _x(4, 8), smooth_scales=_x(2, 8), group_index=torch.tensor([2, 4], dtype=torch.int32),
        quant_mode="pertensor"),
    bad("npu_dynamic_quant", "group_index",
        _x(4, 8), smooth_scales=_x(2, 8), group_index=torch.tensor([3, 2], dtype=torch.int32)),
    bad("npu_dynamic_quant", "group_index",
        _x(4, 8), smooth_scales=_x(2, 8), group_index=torch.tensor([2, 5], dtype=torch.int32)),
    bad("npu_dynamic_quant", "group_index",
        _x(4, 8), smooth_scales=_x(2, 8), group_index=torch.tensor([-1, 4], dtype=torch.int32)),
    bad("npu_quantize", "input",
        _x(4, 8, dtype=torch.int32), torch.ones(8), None, torch.int8, -1, True),
    bad("npu_quantize", "dtype", _x(4, 8), torch.ones(8), None, torch.float16, -1, True),
    bad("npu_quantize", "axis", _x(4, 8), torch.ones(8), None, torch.int8, 2, True),
    bad("npu_quantize", "axis", _x(4, 8), torch.ones(8), None, torch.int8, -3, False),
    bad("npu_quantize", "dtype", _x(4, 8), torch.ones(8), None, torch.quint4x2, -1, True),
    bad("npu_quantize", "scales", _x(4, 8), torch.ones(8), None, torch.int8, -1, False),
    bad("npu_quantize", "zero_points", _x(4, 8), _x(8), torch.ones(8), torch.int8, -1, False),
    bad("npu_quantize", "input", _x(4, 12), _x(12), None, torch.quint4x2, -1, False),
    bad("npu_quantize", "scales", _x(4, 8), torch.ones(5), None, torch.int8, -1, True),
    bad("npu_quantize", "scales",
        _x(4, 8), torch.ones(8, dtype=torch.int32), None, torch.int8, -1, True),
    bad("npu_quantize", "zero_points",
        _x(4, 8), torch.ones(8), torch.ones(8, dtype=torch.bool), torch.int8, -1, True),
    bad("npu_quantize", "zero_points",
        _x(4, 8), torch.ones(8), torch.ones(3), torch.int8, -1, True),
    bad("npu_add_rms_norm_quant", "axis", _x(4, 8), _x(4, 8), _x(8), _x(8), None, axis=0),
    bad("npu_add_rms_norm_quant", "x1", _x(4, 8, dtype=torch.float64),
        _x(4, 8, dtype=torch.float64), _x(8, dtype=torch.float64), _x(8, dtype=fp32), None),
    bad("npu_add_rms_norm_quant", "scales1", _x(4, 8), _x(4, 8), _x(8), _x(8, dtype=fp16), None),
    bad("npu_add_rms_norm_quant", "zero_points1",
        _x(4, 8, dtype=fp16), _x(4, 8, dtype=fp16), _x(8, dtype=fp16), _x(8, dtype=fp32),
        _x(8, dtype=fp16)),
    bad("npu_add_rms_norm_quant", "scales1", _x(4, 8), _x(4, 8), _x(8), _x(7), None),
    bad("npu_add_rms_norm_quant", "zero_points2",
        _x(4, 8), _x(4, 8), _x(8), _x(8), None, None, None, _x(8)),
    bad("npu_add_rms_norm_quant", "beta",
        _x(4, 8), _x(4, 8), _x(8), _x(8), None, _x(8, dtype=fp16)),
    bad("npu_add_rms_norm_quant", "dst_type",
        _x(4, 8), _x(4, 8), _x(8), _x(8), None, dst_type=torch.quint4x2),
    bad("npu_add_rms_norm_dynamic_quant", "x1", _x(8), _x(8), _x(8)),
    bad("npu_add_rms_norm_dynamic_quant", "gamma", _x(4, 8), _x(4, 8), _x(2, 8)),
    bad("npu_add_rms_norm_dynamic_quant", "smooth_scale1",
        _x(4, 8), _x(4, 8), _x(8), smooth_scale1=_x(8, dtype=fp16)),
    bad("npu_add_rms_norm_dynamic_quant", "beta", _x(4, 8), _x(4, 8), _x(8), beta=_x(9)),
    bad("npu_add_rms_norm_dynamic_quant", "smooth_scale2",
        _x(4, 8), _x(4, 8), _x(8), smooth_scale2=_x(8)),
    bad("npu_add_rms_norm_dynamic_quant", "output_mask",
        _x(4, 8), _x(4, 8), _x(8), output_mask=[False, False]),
    bad("npu_add_rms_norm_dynamic_quant", "smooth_scale1",
        _x(4, 8), _x(4, 8), _x(8), smooth_scale1=_x(8), output_mask=[False, True]),
    bad("npu_add_rms_norm_dynamic_quant", "smooth_scale2",
        _x(4, 8), _x(4, 8), _x(8), smooth_scale2=_x(8), output_mask=[True, False]),
    bad("npu_add_rms_norm_dynamic_quant", "output_mask", _x(4, 8), _x(4, 8), _x(8),
        output_mask=[True, True, True]),
    bad("npu_add_rms_norm_dynamic_quant", "y_dtype",
        _x(4, 8), _x(4, 8), _x(8), y_dtype=torch.int32),
]


@pytest.mark.parametrize("i", range(len(BAD_CALLS)),
                         ids=lambda i: f"{BAD_CALLS[i][0]}-{BAD_CALLS[i][1]}-{i}")
def test_constraint_violation_names_operator_and_argument(i):
    """The C++ launcher and the Python reference reject the call naming the same argument."""
    op, arg, args, kwargs = BAD_CALLS[i]
    for fn in (getattr(npu, op), op_sdk.get_op(op).reference):
        with pytest.raises(RuntimeError) as info:
            fn(*args, **kwargs)
        assert f"{op}: argument '{arg}'" in str(info.value), str(info.value)


# ---- the other code paths: AVX2, streaming stores ----------------------------------------

_PATHS_SCRIPT = r"""
import torch, op_sdk, tests.test_kernels_cpu as t
torch.manual_seed(0)
t.test_rms_norm(torch.bfloat16, torch.float32, (257, 96), 1)
t.test_rms_norm(torch.float16, torch.float16, (2, 3, 7), 1)
t.test_rms_norm(torch.float32, torch.float32, (3, 7168), 1)
t.test_add_rms_norm(torch.float32, (2, 5, 7))
t.test_add_rms_norm(torch.bfloat16, (257, 96))
t.test_add_rms_norm_cast(torch.float16, (257, 96))
t.test_dynamic_quant_per_token_int8(torch.bfloat16, (3, 7168), "same")
for mode in ("pertoken", "pertensor", "perchannel"):
    t.test_dynamic_quant_modes_and_int4(torch.float16, mode, torch.quint4x2)
t.test_dynamic_quant_moe_group_index([2, 2, 6], torch.int8)
t.test_dynamic_quant_all_zero_rows_and_empty()
t.test_quantize_div_mode(torch.bfloat16, torch.uint8, torch.uint8, 1, "n")
t.test_quantize_mul_mode_axis_coercion(torch.float16, -2, torch.quint4x2)
t.test_quantize_saturates_and_rounds_half_to_even()
for two, zp, beta, div in [(True, True, True, True), (False, False, False, False)]:
    t.test_add_rms_norm_quant(torch.float16, (257, 96), two, zp, beta, div)
t.test_add_rms_norm_dynamic_quant(torch.bfloat16, (2, 3, 7), True, True, None, True)
t.test_add_rms_norm_dynamic_quant(torch.float16, (257, 96), False, True, [False, True], False)
t.test_add_rms_norm_dynamic_quant(torch.bfloat16, (257, 96), True, True, None, False)
print("ok")
"""


@pytest.mark.parametrize("env", [{"OP_SDK_CPU_ISA": "avx2"},
                                 {"OP_SDK_CPU_ISA": "generic"},
                                 {"OP_SDK_CPU_STREAM": "always"},
                                 {"OP_SDK_CPU_ISA": "avx2", "OP_SDK_CPU_STREAM": "always"},
                                 {"OP_SDK_CPU_ISA": "generic", "OP_SDK_CPU_STREAM": "always"}],
                         ids=["avx2", "generic", "stream", "avx2-stream", "generic-stream"])
def test_other_code_paths_match_reference(env):
    """The baseline (AVX2) kernels, the portable kernels (the only ones on aarch64), and the
    non-temporal-store variants, forced by environment variables in a fresh process (the
    choice is made once per process)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    full_env = dict(os.environ, PYTHONPATH=root, **env)
    result = subprocess.run([sys.executable, "-c", _PATHS_SCRIPT], cwd=root, env=full_env,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]


def test_large_all_zero_output_is_zero_and_writable():
    # npu_add_rms_norm_quant's y2 without scales2 maps fresh zero pages when it is large
    x = torch.randn(2048, 2048, dtype=bf16)
    s = torch.full((2048,), 0.05, dtype=bf16)
    y1, y2, _ = npu.npu_add_rms_norm_quant(x, x, torch.ones(2048, dtype=bf16), s, None)
    assert y2.shape == y1.shape and y2.dtype == torch.int8 and not y2.any()
    y2.fill_(3)
    assert int(y2.sum()) == 3 * y2.numel()
