"""RmsNormRope Ascend C kernel (kernels/ascendc/rms_norm_rope) on the CPU model of the Ascend C
API: bit for bit the contract's formula evaluated with the model's rstd (its ReduceSum order,
the two halves' sums added), and close to op_sdk::rms_norm_rope's reference; every dtype pair
it is built for, odd head dims (halves that are not whole 32-byte blocks), cos / sin
broadcast over batch, tokens or heads, rows split over blocks with tails, several tiles per
block; a row too long for the unified buffer is reported, not run."""

import ctypes

import pytest
import torch

from op_sdk.ops.rms_norm_rope import rms_norm_rope_reference
from tests.ascendc import _kernels as K

pytestmark = pytest.mark.ascendc

f16, bf16, f32 = torch.float16, torch.bfloat16, torch.float32
DTYPES = [(f16, f32), (bf16, f32), (f16, f16), (bf16, bf16), (f32, f32)]
# the driver builds these tests call
VARIANTS = [("rms_norm_rope", (("DTYPE_X", K.CTYPE[x]), ("DTYPE_GAMMA", K.CTYPE[g]))) for x, g in DTYPES]


class RmsNormRopeTiling(ctypes.Structure):
    _fields_ = [("numRows", ctypes.c_uint64), ("numCols", ctypes.c_uint32), ("blockDim", ctypes.c_uint32),
                ("rowsPerBlock", ctypes.c_uint64), ("formerBlocks", ctypes.c_uint32),
                ("tilingKey", ctypes.c_uint32), ("rowsPerLoop", ctypes.c_uint32), ("chunkCols", ctypes.c_uint32),
                ("numChunks", ctypes.c_uint32), ("lastChunkCols", ctypes.c_uint32), ("epsilon", ctypes.c_float),
                ("avgFactor", ctypes.c_float), ("lead", ctypes.c_uint32 * 3),
                ("cosRowStride", ctypes.c_uint64 * 3)]


def _shape(t):
    return (ctypes.c_int64 * t.dim())(*t.shape)


def rms_norm_rope(builder, x, gamma, cos, sin, eps=1e-6, cores=40, ub=K.UB_910B):
    lib = builder.lib("rms_norm_rope", DTYPE_X=K.CTYPE[x.dtype], DTYPE_GAMMA=K.CTYPE[gamma.dtype])
    x, gamma, cos, sin = (t.contiguous() for t in (x, gamma, cos.to(x.dtype), sin.to(x.dtype)))
    y = torch.empty_like(x)
    key = K.call(lib.opsdk_run, K.ptr(x), K.ptr(gamma), K.ptr(cos), K.ptr(sin), K.ptr(y), _shape(x), _shape(cos),
                 ctypes.c_uint32(x.dim()), ctypes.c_float(eps), ctypes.c_uint32(cores), ctypes.c_uint32(ub))
    return y, key


def tiling(builder, xshape, cosshape, cores=40, ub=K.UB_910B, dtype=f16):
    lib = builder.lib("rms_norm_rope", DTYPE_X=K.CTYPE[dtype], DTYPE_GAMMA=K.CTYPE[f32])
    t = RmsNormRopeTiling()
    xs, cs = (ctypes.c_int64 * len(xshape))(*xshape), (ctypes.c_int64 * len(cosshape))(*cosshape)
    size = lib.opsdk_tiling(xs, cs, ctypes.c_uint32(len(xshape)), ctypes.c_float(1e-6), ctypes.c_uint32(cores),
                            ctypes.c_uint32(ub), ctypes.byref(t))
    assert size == ctypes.sizeof(RmsNormRopeTiling)
    return t


def formula(x, gamma, cos, sin, eps):
    """The contract's steps with the model's rstd: t = (x * rstd) * gamma rounded to x's dtype,
    then t1 * c1 - t2 * s1 | t2 * c2 + t1 * s2 in fp32 (each product rounded), rounded once."""
    d = x.shape[-1]
    rows = x.reshape(-1, d)
    rstd = K.model_rstd(rows, eps, chunk=d // 2)
    t = ((rows.float() * rstd) * gamma.float()).to(x.dtype).float().reshape(x.shape)
    c, s = (v.to(x.dtype).float().expand(x.shape) for v in (cos, sin))
    h = d // 2
    t1, t2 = t[..., :h], t[..., h:]
    y = torch.cat([t1 * c[..., :h] - t2 * s[..., :h], t2 * c[..., h:] + t1 * s[..., h:]], -1)
    return y.to(x.dtype)


# (x shape, cos shape, cores, ub bytes)
SHAPES = [
    ((2, 9, 4, 128), (2, 9, 1, 128), 40, K.UB_910B),    # Qwen3 BSND, cos per token
    ((2, 4, 9, 128), (2, 1, 9, 128), 7, K.UB_910B),     # BNSD (the transposed view), cos per token
    ((3, 5, 2, 30), (1, 5, 1, 30), 4, K.UB_910B),       # halves of 15: not whole 32-byte blocks
    ((17, 3, 64), (17, 1, 64), 5, K.UB_910B),           # TND
    ((5, 7, 2), (1, 1, 2), 3, K.UB_910B),               # one cos row for all
    ((1, 37, 8, 256), (1, 37, 1, 256), 2, 48 * 1024),   # several tiles per block, a tail tile
    ((2, 3, 1, 1024), (2, 3, 1, 1024), 3, K.UB_910B),   # the longest head dim
]


@pytest.mark.parametrize("dtypes", DTYPES, ids=lambda d: f"{str(d[0])[6:]}-{str(d[1])[6:]}")
@pytest.mark.parametrize("xs,cs,cores,ub", SHAPES, ids=lambda v: str(v))
def test_rms_norm_rope_kernel_matches_formula_and_reference(kernels, dtypes, xs, cs, cores, ub):
    xdt, gdt = dtypes
    torch.manual_seed(sum(xs))
    x = (torch.randn(xs) * 3).to(xdt)
    g = (torch.rand(xs[-1]) + 0.5).to(gdt)
    cos, sin = torch.randn(cs).to(xdt), torch.randn(cs).to(xdt)
    y, key = rms_norm_rope(kernels, x, g, cos, sin, 1e-5, cores=cores, ub=ub)
    assert key == 1
    assert torch.equal(y.view(-1).view(torch.uint8) if y.numel() else y, formula(x, g, cos, sin, 1e-5).view(-1).view(
        torch.uint8) if y.numel() else y)
    tol = {f32: 1e-5, f16: 4e-3, bf16: 3e-2}[xdt]
    torch.testing.assert_close(y.float(), rms_norm_rope_reference(x, g, cos, sin, 1e-5).float(), rtol=tol,
                               atol=tol * 4)


def test_rms_norm_rope_kernel_fp32_cos_rounded_to_x(kernels):
    """cos / sin of another dtype are cast to x's before the kernel (the converter's Cast): the
    result is the reference's, which rounds them to x's dtype first."""
    x, g = torch.randn(2, 5, 3, 64).to(bf16), torch.rand(64).to(bf16)
    cos, sin = torch.randn(2, 5, 1, 64), torch.randn(2, 5, 1, 64)
    y, _ = rms_norm_rope(kernels, x, g, cos, sin)
    assert torch.equal(y, formula(x, g, cos, sin, 1e-6))


def test_rms_norm_rope_tiling(kernels):
    t = tiling(kernels, (2, 4, 9, 128), (2, 1, 9, 128), cores=5)
    assert t.tilingKey == 1 and t.numRows == 72 and t.numCols == 128 and t.blockDim == 5
    assert list(t.lead) == [2, 4, 9] and list(t.cosRowStride) == [9, 0, 1]
    t = tiling(kernels, (17, 3, 64), (1, 3, 64))
    assert list(t.lead) == [1, 17, 3] and list(t.cosRowStride) == [0, 0, 1]
    # outside the kernel's rules: tiling key 0 (the host refuses the call)
    for xs, cs in [((2, 3, 31), (2, 3, 31)), ((2, 3, 2048), (2, 3, 2048)), ((2, 3, 8), (2, 2, 8)),
                   ((3, 8), (3, 8))]:
        assert tiling(kernels, xs, cs).tilingKey == 0, (xs, cs)
    # not even one row fits a tiny unified buffer: reported, not run
    assert tiling(kernels, (2, 3, 1024), (2, 3, 1024), ub=16 * 1024).tilingKey == 0
