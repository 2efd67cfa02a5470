"""RmsNorm Ascend C kernel (kernels/ascendc/rms_norm) on the CPU model vs npu_rms_norm's reference."""

import ctypes

import pytest
import torch

import op_sdk
from tests.ascendc import _kernels as K
from tests.ascendc._cases import CASES, SPLIT, WHOLE, case_id, check_key

pytestmark = pytest.mark.ascendc

# the driver builds these tests call (tests/ascendc/_kernels.py builds them together)
VARIANTS = [("rms_norm", (("DTYPE_X", x), ("DTYPE_GAMMA", g)))
            for x, g in (("half", "float"), ("bfloat16_t", "float"), ("half", "half"),
                         ("bfloat16_t", "bfloat16_t"), ("float", "float"))]


# ---- the kernel's call wrappers (tests/ascendc/driver_rms_norm.cpp) ----

def rms_norm(builder, x, gamma, eps=1e-6, cores=40, ub=K.UB_910B):
    lib = builder.lib("rms_norm", DTYPE_X=K.CTYPE[x.dtype], DTYPE_GAMMA=K.CTYPE[gamma.dtype])
    x, gamma = x.contiguous(), gamma.contiguous()
    cols = gamma.numel()
    y = torch.empty_like(x)
    rstd = torch.empty(x.numel() // cols, dtype=torch.float32)
    key = K.call(lib.opsdk_run, K.ptr(x), K.ptr(gamma), K.ptr(y), K.ptr(rstd), K.nrows(x, cols), ctypes.c_uint32(cols),
                 ctypes.c_float(eps), ctypes.c_uint32(cores), ctypes.c_uint32(ub))
    return (y, rstd), key


class RmsNormTiling(ctypes.Structure):
    _fields_ = [("numRows", ctypes.c_uint64), ("numCols", ctypes.c_uint32), ("blockDim", ctypes.c_uint32),
                ("rowsPerBlock", ctypes.c_uint64), ("formerBlocks", ctypes.c_uint32),
                ("tilingKey", ctypes.c_uint32), ("rowsPerLoop", ctypes.c_uint32), ("chunkCols", ctypes.c_uint32),
                ("numChunks", ctypes.c_uint32), ("lastChunkCols", ctypes.c_uint32), ("epsilon", ctypes.c_float),
                ("avgFactor", ctypes.c_float)]


def rms_norm_tiling(builder, rows, cols, cores, ub, x_dtype=torch.float16, gamma_dtype=torch.float32):
    lib = builder.lib("rms_norm", DTYPE_X=K.CTYPE[x_dtype], DTYPE_GAMMA=K.CTYPE[gamma_dtype])
    t = RmsNormTiling()
    size = lib.opsdk_tiling(ctypes.c_uint64(rows), ctypes.c_uint32(cols), ctypes.c_float(1e-6),
                            ctypes.c_uint32(cores), ctypes.c_uint32(ub), ctypes.byref(t))
    assert size == ctypes.sizeof(RmsNormTiling)
    return t


f16, bf16, f32 = torch.float16, torch.bfloat16, torch.float32
DTYPES = [(f16, f32), (bf16, f32), (f16, f16), (bf16, bf16), (f32, f32)]


def _ref(x, g, eps):
    return op_sdk.get_op("npu_rms_norm").reference(x, g, eps)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("dtypes", DTYPES, ids=lambda d: f"{str(d[0])[6:]}-{str(d[1])[6:]}")
def test_rms_norm_matches_reference(kernels, case, dtypes):
    rows, cols, cores, ub, want_key = case
    xdt, gdt = dtypes
    torch.manual_seed(rows * 1000 + cols)
    x = (torch.randn(rows, cols) * 3).to(xdt)
    g = torch.randn(cols).to(gdt)
    (y, rstd), key = rms_norm(kernels, x, g, 1e-6, cores=cores, ub=ub)
    check_key(key, case)
    y_ref, rstd_ref = _ref(x, g, 1e-6)
    K.assert_ulp(rstd, rstd_ref.reshape(-1), K.RSTD_ULP, what="rstd")
    if xdt == f32:
        K.assert_ulp(y, y_ref, K.Y32_ULP, what="y")
    else:
        K.assert_ulp(y, y_ref, 1, K.Y_FLIP_FRACTION, what="y")


def test_rms_norm_leading_dims_and_gamma_dims(kernels):
    """gamma over the last two dims: the kernel sees rows = prod(leading), cols = numel(gamma)."""
    x = torch.randn(2, 3, 4, 24).to(f16)
    g = torch.randn(4, 24)
    (y, rstd), key = rms_norm(kernels, x, g, 1e-5, cores=3)
    y_ref, rstd_ref = _ref(x, g, 1e-5)
    K.assert_ulp(rstd, rstd_ref.reshape(-1), K.RSTD_ULP, what="rstd")
    K.assert_ulp(y, y_ref, 1, K.Y_FLIP_FRACTION, what="y")


def test_rms_norm_zero_row_and_large_values(kernels):
    x = torch.randn(6, 129).to(f16)
    x[2] = 0
    x[4] = 60000.0
    g = torch.randn(129)
    (y, rstd), _ = rms_norm(kernels, x, g, 1e-6, cores=4)
    y_ref, rstd_ref = _ref(x, g, 1e-6)
    K.assert_ulp(rstd, rstd_ref.reshape(-1), K.RSTD_ULP, what="rstd")
    K.assert_ulp(y, y_ref, 1, K.Y_FLIP_FRACTION, what="y")


@pytest.mark.parametrize("rows,cores", [(1, 40), (7, 3), (40, 40), (41, 40), (1000, 40), (5, 8)])
def test_tiling_splits_rows_over_blocks(kernels, rows, cores):
    t = rms_norm_tiling(kernels, rows, 96, cores, K.UB_910B)
    assert t.blockDim == min(rows, cores)
    assert t.rowsPerBlock * t.blockDim + t.formerBlocks == rows
    assert t.formerBlocks < t.blockDim
    assert t.tilingKey == WHOLE and t.rowsPerLoop >= 1


def test_tiling_split_row_chunks(kernels):
    t = rms_norm_tiling(kernels, 4, 7168, 8, 16 * 1024)
    assert t.tilingKey == SPLIT
    assert t.chunkCols % 64 == 0 and t.chunkCols > 0
    assert (t.numChunks - 1) * t.chunkCols + t.lastChunkCols == 7168
    assert 0 < t.lastChunkCols <= t.chunkCols


def test_tiling_rejects_a_unified_buffer_too_small(kernels):
    t = rms_norm_tiling(kernels, 4, 7168, 8, 512)
    assert t.tilingKey == 0
    x = torch.randn(4, 7168).to(f16)
    with pytest.raises(K.KernelError, match="no tiling fits"):
        rms_norm(kernels, x, torch.randn(7168), cores=8, ub=512)
