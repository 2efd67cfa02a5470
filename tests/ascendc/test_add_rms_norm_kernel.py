"""AddRmsNorm / AddRmsNormCast Ascend C kernels (kernels/ascendc/add_rms_norm, add_rms_norm_cast)
on the CPU model vs npu_add_rms_norm's / npu_add_rms_norm_cast's references."""

import ctypes

import pytest
import torch

import op_sdk
from tests.ascendc import _kernels as K
from tests.ascendc._cases import CASES, case_id, check_key

pytestmark = pytest.mark.ascendc

# the driver builds these tests call (tests/ascendc/_kernels.py builds them together)
VARIANTS = ([("add_rms_norm", (("DTYPE_X1", x),)) for x in ("half", "bfloat16_t", "float")]
            + [("add_rms_norm_cast", (("DTYPE_X1", x),)) for x in ("half", "bfloat16_t")])


# ---- the kernel's call wrappers (tests/ascendc/driver_add_rms_norm.cpp) ----

def add_rms_norm(builder, x1, x2, gamma, eps=1e-6, cores=40, ub=K.UB_910B):
    lib = builder.lib("add_rms_norm", DTYPE_X1=K.CTYPE[x1.dtype])
    x1, x2, gamma = x1.contiguous(), x2.contiguous(), gamma.contiguous()
    cols = gamma.numel()
    y, x = torch.empty_like(x1), torch.empty_like(x1)
    rstd = torch.empty(x1.numel() // cols, dtype=torch.float32)
    key = K.call(lib.opsdk_run, K.ptr(x1), K.ptr(x2), K.ptr(gamma), K.ptr(y), K.ptr(rstd), K.ptr(x), K.nrows(x1, cols),
                 ctypes.c_uint32(cols), ctypes.c_float(eps), ctypes.c_uint32(cores), ctypes.c_uint32(ub))
    return (y, rstd, x), key


def add_rms_norm_cast(builder, x1, x2, gamma, eps=1e-6, cores=40, ub=K.UB_910B):
    lib = builder.lib("add_rms_norm_cast", DTYPE_X1=K.CTYPE[x1.dtype])
    x1, x2, gamma = x1.contiguous(), x2.contiguous(), gamma.contiguous()
    cols = gamma.numel()
    y1 = torch.empty(x1.shape, dtype=torch.float32)
    y2, x = torch.empty_like(x1), torch.empty_like(x1)
    rstd = torch.empty(x1.numel() // cols, dtype=torch.float32)
    key = K.call(lib.opsdk_run, K.ptr(x1), K.ptr(x2), K.ptr(gamma), K.ptr(y1), K.ptr(y2), K.ptr(rstd), K.ptr(x),
                 K.nrows(x1, cols), ctypes.c_uint32(cols), ctypes.c_float(eps), ctypes.c_uint32(cores),
                 ctypes.c_uint32(ub))
    return (y1, y2, rstd, x), key


f16, bf16, f32 = torch.float16, torch.bfloat16, torch.float32


def _inputs(rows, cols, dt):
    torch.manual_seed(rows * 1000 + cols)
    return (torch.randn(rows, cols) * 2).to(dt), torch.randn(rows, cols).to(dt), torch.randn(cols).to(dt)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("dt", [f16, bf16, f32], ids=str)
def test_add_rms_norm_matches_reference(kernels, case, dt):
    rows, cols, cores, ub, want_key = case
    x1, x2, g = _inputs(rows, cols, dt)
    (y, rstd, x), key = add_rms_norm(kernels, x1, x2, g, 1e-6, cores=cores, ub=ub)
    check_key(key, case)
    y_ref, rstd_ref, x_ref = op_sdk.get_op("npu_add_rms_norm").reference(x1, x2, g, 1e-6)
    assert torch.equal(x.view(torch.int16 if dt != f32 else torch.int32),
                       x_ref.view(torch.int16 if dt != f32 else torch.int32)), "x = x1 + x2 must be bit-exact"
    K.assert_ulp(rstd, rstd_ref.reshape(-1), K.RSTD_ULP, what="rstd")
    if dt == f32:
        K.assert_ulp(y, y_ref, K.Y32_ULP, what="y")
    else:
        K.assert_ulp(y, y_ref, 1, K.Y_FLIP_FRACTION, what="y")


@pytest.mark.parametrize("case", [c for c in CASES if c[1] in (7, 96, 300, 1000, 7168)], ids=case_id)
@pytest.mark.parametrize("dt", [f16, bf16], ids=str)
def test_add_rms_norm_cast_matches_reference(kernels, case, dt):
    rows, cols, cores, ub, want_key = case
    x1, x2, g = _inputs(rows, cols, dt)
    (y1, y2, rstd, x), key = add_rms_norm_cast(kernels, x1, x2, g, 1e-6, cores=cores, ub=ub)
    check_key(key, case)
    y1_ref, y2_ref, rstd_ref, x_ref = op_sdk.get_op("npu_add_rms_norm_cast").reference(x1, x2, g, 1e-6)
    assert torch.equal(x.view(torch.int16), x_ref.view(torch.int16))
    K.assert_ulp(rstd, rstd_ref.reshape(-1), K.RSTD_ULP, what="rstd")
    K.assert_ulp(y1, y1_ref, K.Y32_ULP, what="y1 (fp32)")
    K.assert_ulp(y2, y2_ref, 1, K.Y_FLIP_FRACTION, what="y2")
    # y2 is y1 rounded once, in the kernel itself
    assert torch.equal(y2.view(torch.int16), y1.to(dt).view(torch.int16))
