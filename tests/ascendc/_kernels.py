"""Build and call the Ascend C kernels of kernels/ascendc/ on the CPU model of the Ascend C
API (kernels/ascendc/model/kernel_operator.h).

Each driver (tests/ascendc/driver_<op>.cpp) includes one kernel source and exports an
``extern "C"`` entry that computes the tiling with the kernel's plain tiling function and runs
the kernel once per block index. A driver is compiled once per dtype variant and session
(g++ -std=c++17 -O1) into a temporary directory; the first request starts every variant of the
suite on a thread pool, so the compiles overlap.

Comparisons with op_sdk's references (docs/ascendc.md, "Tests and bounds"):
- outputs computed in the reference's order (x = x1 + x2, dynamic quantisation's y and scale)
  are bit-exact;
- rstd (a sum in another order, and x * (1/n) for the mean) is within RSTD_ULP fp32 ulps;
- y of the norms is within one ulp of its dtype (fp32 y: Y32_ULP ulps), and differs from the
  reference in at most Y_FLIP_FRACTION of the elements;
- int8 outputs downstream of rstd (or of silu) are at most one step apart in at most
  INT_FLIP_FRACTION of the elements, and dynamic-quantisation scales within SCALE_ULP ulps;
  the same outputs are bit-exact against the reference's formula evaluated with the model's
  rstd (model_rstd: the model's ReduceSum order) or the model's exp (model_exp);
- static quantisation (npu_quantize) is bit-exact.

Each test module declares the driver builds it calls (``VARIANTS``: (driver, defines) pairs);
a kernel's driver, call wrapper and tests need no entry elsewhere.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import os
import shutil
import subprocess
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels" / "ascendc"
HERE = Path(__file__).resolve().parent
CXXFLAGS = ["-std=c++17", "-O1", "-ffp-contract=off", "-shared", "-fPIC",
            f"-I{KERNELS / 'model'}", f"-I{KERNELS}", f"-I{HERE}"]

RSTD_ULP = 8
Y32_ULP = 8
Y_FLIP_FRACTION = 0.01
INT_FLIP_FRACTION = 0.01
UB_910B = 192 * 1024

CTYPE = {torch.float16: "half", torch.bfloat16: "bfloat16_t", torch.float32: "float", torch.int32: "int32_t"}
# npu_add_rms_norm_quant's dst_type code -> (the kernels' outType, y's storage dtype)
ARNQ_OUT = {None: (0, torch.int8), 1: (0, torch.int8), 12: (0, torch.int8), 23: (1, torch.float8_e5m2),
            291: (1, torch.float8_e5m2), 24: (2, torch.float8_e4m3fn), 292: (2, torch.float8_e4m3fn),
            290: (3, torch.uint8)}
SCALE_ULP = 8    # dynamic-quant scales downstream of rstd (or silu) vs the plain reference

# AddRmsNormQuant's dtype rows (x, scales, zero points) the kernel is built for
# (npu_add_rms_norm_quant's table: op_sdk/ops/add_rms_norm_quant.py ARQ_DTYPES)
ARNQ_DTYPES = (("half", "float", "int32_t"), ("half", "half", "half"), ("half", "float", "float"),
               ("bfloat16_t", "float", "int32_t"), ("bfloat16_t", "bfloat16_t", "bfloat16_t"),
               ("bfloat16_t", "float", "float"), ("float", "float", "float"))
# Quantize's (x, scales, zero points) per build; AscendQuantV2's scale / offset take x's dtype
QUANTIZE_DTYPES = (("half", "float", "int32_t"), ("bfloat16_t", "bfloat16_t", "bfloat16_t"),
                   ("float", "float", "int32_t"))

def variants() -> list[tuple[str, tuple]]:
    """Every (driver, defines) the suite builds, started together on the first request: the
    ``VARIANTS`` each test module of tests/ascendc declares for the drivers it calls."""
    out = []
    for path in sorted(HERE.glob("test_*.py")):
        out.extend(getattr(importlib.import_module(f"{__package__}.{path.stem}"), "VARIANTS", ()))
    return out


def compiler() -> str | None:
    return shutil.which(os.environ.get("CXX", "g++"))


class KernelBuilder:
    """Compiles the drivers (once per variant), returns ctypes libraries."""

    def __init__(self, outdir: Path, cxx: str):
        self.outdir, self.cxx = Path(outdir), cxx
        self.pool = ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1))
        self.futures: dict[tuple, Future] = {}
        self.libs: dict[tuple, ctypes.CDLL] = {}
        self.lock = threading.Lock()

    def _compile(self, driver: str, defines: tuple) -> Path:
        src = HERE / f"driver_{driver}.cpp"
        tag = hashlib.sha1(repr((driver, defines)).encode()).hexdigest()[:12]
        out = self.outdir / f"{driver}_{tag}.so"
        cmd = [self.cxx, *CXXFLAGS, *[f"-D{k}={v}" for k, v in defines], str(src), "-o", str(out)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"compiling {src.name} {defines} failed:\n{' '.join(cmd)}\n{r.stderr[-6000:]}")
        return out

    def _submit(self, key):
        if key not in self.futures:
            self.futures[key] = self.pool.submit(self._compile, *key)

    def lib(self, driver: str, **defines) -> ctypes.CDLL:
        key = (driver, tuple(sorted(defines.items())))
        with self.lock:
            if key in self.libs:
                return self.libs[key]
            self._submit(key)
            for d, defs in variants():
                self._submit((d, tuple(sorted(defs))))
            fut = self.futures[key]
        lib = ctypes.CDLL(str(fut.result()))
        with self.lock:
            self.libs[key] = lib
        return lib

    def close(self):
        self.pool.shutdown(wait=True)


# ---- calling the kernels ----------------------------------------------------------------------

class KernelError(RuntimeError):
    """A rule of the CPU model was broken (the message names the API, call site and rule)."""


def _ptr(t):
    return ctypes.c_void_p(t.data_ptr()) if t is not None else ctypes.c_void_p(None)


def call(fn, *args):
    """Call a driver entry (..., keyOut, err, errLen); returns the tiling key."""
    key = ctypes.c_uint32(0)
    err = ctypes.create_string_buffer(4096)
    rc = fn(*args, ctypes.byref(key), err, ctypes.c_int(len(err)))
    if rc != 0:
        raise KernelError(err.value.decode(errors="replace"))
    return key.value


def _rows(t, cols):
    return ctypes.c_uint64(t.numel() // cols if cols else 0)


def rms_norm(builder, x, gamma, eps=1e-6, cores=40, ub=UB_910B):
    lib = builder.lib("rms_norm", DTYPE_X=CTYPE[x.dtype], DTYPE_GAMMA=CTYPE[gamma.dtype])
    x, gamma = x.contiguous(), gamma.contiguous()
    cols = gamma.numel()
    y = torch.empty_like(x)
    rstd = torch.empty(x.numel() // cols, dtype=torch.float32)
    key = call(lib.opsdk_run, _ptr(x), _ptr(gamma), _ptr(y), _ptr(rstd), _rows(x, cols), ctypes.c_uint32(cols),
               ctypes.c_float(eps), ctypes.c_uint32(cores), ctypes.c_uint32(ub))
    return (y, rstd), key


class RmsNormTiling(ctypes.Structure):
    _fields_ = [("numRows", ctypes.c_uint64), ("numCols", ctypes.c_uint32), ("blockDim", ctypes.c_uint32),
                ("rowsPerBlock", ctypes.c_uint64), ("formerBlocks", ctypes.c_uint32),
                ("tilingKey", ctypes.c_uint32), ("rowsPerLoop", ctypes.c_uint32), ("chunkCols", ctypes.c_uint32),
                ("numChunks", ctypes.c_uint32), ("lastChunkCols", ctypes.c_uint32), ("epsilon", ctypes.c_float),
                ("avgFactor", ctypes.c_float)]


def rms_norm_tiling(builder, rows, cols, cores, ub, x_dtype=torch.float16, gamma_dtype=torch.float32):
    lib = builder.lib("rms_norm", DTYPE_X=CTYPE[x_dtype], DTYPE_GAMMA=CTYPE[gamma_dtype])
    t = RmsNormTiling()
    size = lib.opsdk_tiling(ctypes.c_uint64(rows), ctypes.c_uint32(cols), ctypes.c_float(1e-6),
                            ctypes.c_uint32(cores), ctypes.c_uint32(ub), ctypes.byref(t))
    assert size == ctypes.sizeof(RmsNormTiling)
    return t


def add_rms_norm(builder, x1, x2, gamma, eps=1e-6, cores=40, ub=UB_910B):
    lib = builder.lib("add_rms_norm", DTYPE_X1=CTYPE[x1.dtype])
    x1, x2, gamma = x1.contiguous(), x2.contiguous(), gamma.contiguous()
    cols = gamma.numel()
    y, x = torch.empty_like(x1), torch.empty_like(x1)
    rstd = torch.empty(x1.numel() // cols, dtype=torch.float32)
    key = call(lib.opsdk_run, _ptr(x1), _ptr(x2), _ptr(gamma), _ptr(y), _ptr(rstd), _ptr(x), _rows(x1, cols),
               ctypes.c_uint32(cols), ctypes.c_float(eps), ctypes.c_uint32(cores), ctypes.c_uint32(ub))
    return (y, rstd, x), key


def add_rms_norm_cast(builder, x1, x2, gamma, eps=1e-6, cores=40, ub=UB_910B):
    lib = builder.lib("add_rms_norm_cast", DTYPE_X1=CTYPE[x1.dtype])
    x1, x2, gamma = x1.contiguous(), x2.contiguous(), gamma.contiguous()
    cols = gamma.numel()
    y1 = torch.empty(x1.shape, dtype=torch.float32)
    y2, x = torch.empty_like(x1), torch.empty_like(x1)
    rstd = torch.empty(x1.numel() // cols, dtype=torch.float32)
    key = call(lib.opsdk_run, _ptr(x1), _ptr(x2), _ptr(gamma), _ptr(y1), _ptr(y2), _ptr(rstd), _ptr(x),
               _rows(x1, cols), ctypes.c_uint32(cols), ctypes.c_float(eps), ctypes.c_uint32(cores),
               ctypes.c_uint32(ub))
    return (y1, y2, rstd, x), key


DQ_MODES = {"pertoken": 0, "pertensor": 1, "perchannel": 2}


def dynamic_quant(builder, x, smooth_scales=None, group_index=None, quant_mode="pertoken", int4=False, v2=None,
                  flags=0, dst_type=None, dst_type_max=0.0, cores=40, ub=UB_910B):
    """DynamicQuant (per token) or DynamicQuantV2 (v2; the default for per tensor / per
    channel). Returns ((y, scale), tiling key), or ((y, scale, offset), key) with v2; y is int8,
    or int4 packed 8 per int32 (int4, npu_dynamic_quant's quint4x2 layout), or an 8-bit float
    output (dst_type: npu_dynamic_quant's code, ARNQ_OUT; dst_type_max: DynamicQuantV2's)."""
    v2 = quant_mode != "pertoken" if v2 is None else v2
    lib = builder.lib("dynamic_quant", DTYPE_X=CTYPE[x.dtype])
    x = x.contiguous()
    cols = x.shape[-1]
    rows = x.numel() // cols
    m = x.shape[-2]
    out_type, ydt = ARNQ_OUT[dst_type] if not int4 else (0, torch.int32)
    y = torch.empty((*x.shape[:-1], cols // 8), dtype=torch.int32) if int4 else torch.empty(x.shape, dtype=torch.uint8)
    s_shape = {"pertoken": x.shape[:-1], "pertensor": (1,), "perchannel": (*x.shape[:-2], cols)}[quant_mode]
    scale = torch.full(s_shape, float("nan"), dtype=torch.float32)
    offset = torch.full(s_shape, float("nan"), dtype=torch.float32) if v2 else None
    sm = smooth_scales.contiguous() if smooth_scales is not None else None
    gi = group_index.contiguous() if group_index is not None else None
    key = call(lib.opsdk_run, ctypes.c_int(int(v2)), _ptr(x), _ptr(sm), _ptr(gi), _ptr(y), _ptr(scale), _ptr(offset),
               ctypes.c_uint64(rows), ctypes.c_uint32(cols), ctypes.c_uint32(gi.numel() if gi is not None else 0),
               ctypes.c_uint32(DQ_MODES[quant_mode]), ctypes.c_uint64(m), ctypes.c_int(int(int4)), ctypes.c_int(flags),
               ctypes.c_uint32(out_type), ctypes.c_float(dst_type_max), ctypes.c_uint32(cores), ctypes.c_uint32(ub))
    y = y if int4 else y.view(ydt)
    return ((y, scale, offset) if v2 else (y, scale)), key


class DynamicQuantTiling(ctypes.Structure):
    _fields_ = [("numRows", ctypes.c_uint64), ("numCols", ctypes.c_uint32), ("blockDim", ctypes.c_uint32),
                ("rowsPerBlock", ctypes.c_uint64), ("formerBlocks", ctypes.c_uint32),
                ("tilingKey", ctypes.c_uint32), ("rowsPerLoop", ctypes.c_uint32), ("chunkCols", ctypes.c_uint32),
                ("numChunks", ctypes.c_uint32), ("lastChunkCols", ctypes.c_uint32)] + [
                (f, ctypes.c_uint32) for f in ("hasSmooth", "numGroups", "chanRows", "int4Out", "outType")] + [
                ("float8Max", ctypes.c_float)]


def dynamic_quant_tiling(builder, shape, quant_mode="pertoken", smooth=False, groups=0, int4=False, cores=40,
                         ub=UB_910B, x_dtype=torch.float16):
    """The plain tiling (DynamicQuantV2's) of an x of `shape`."""
    lib = builder.lib("dynamic_quant", DTYPE_X=CTYPE[x_dtype])
    cols = shape[-1]
    rows = 1
    for d in shape[:-1]:
        rows *= d
    t = DynamicQuantTiling()
    size = lib.opsdk_tiling(ctypes.c_uint64(rows), ctypes.c_uint32(cols), ctypes.c_int(int(smooth)),
                            ctypes.c_uint32(groups), ctypes.c_uint32(DQ_MODES[quant_mode]), ctypes.c_uint64(shape[-2]),
                            ctypes.c_int(int(int4)), ctypes.c_uint32(cores), ctypes.c_uint32(ub), ctypes.byref(t))
    assert size == ctypes.sizeof(DynamicQuantTiling)
    return t


class AddRmsNormQuantTiling(ctypes.Structure):
    _fields_ = [("numRows", ctypes.c_uint64), ("numCols", ctypes.c_uint32), ("blockDim", ctypes.c_uint32),
                ("rowsPerBlock", ctypes.c_uint64), ("formerBlocks", ctypes.c_uint32),
                ("tilingKey", ctypes.c_uint32), ("rowsPerLoop", ctypes.c_uint32), ("chunkCols", ctypes.c_uint32),
                ("numChunks", ctypes.c_uint32), ("lastChunkCols", ctypes.c_uint32), ("epsilon", ctypes.c_float),
                ("avgFactor", ctypes.c_float)] + [
                (f, ctypes.c_uint32) for f in ("hasBeta", "run1", "run2", "hasScale1", "hasScale2", "hasZero1",
                                               "hasZero2", "divMode", "int4Out", "outType")]


def _mask_arg(output_mask, int4=False, out_type=0):
    if output_mask is None:
        return ctypes.c_int(255 | 256 * int4 | (out_type << 9) if int4 or out_type else -1)
    return ctypes.c_int((1 if output_mask[0] else 0) | (2 if output_mask[1] else 0) | (256 if int4 else 0)
                        | (out_type << 9))


def add_rms_norm_dynamic_quant(builder, x1, x2, gamma, smooth_scale1=None, smooth_scale2=None, beta=None, eps=1e-6,
                               output_mask=None, int4=False, dst_type=None, cores=40, ub=UB_910B):
    """Returns ((y1, y2, x, scale1, scale2), tiling); outputs of a branch that does not run are
    (0,) tensors, as the reference returns them. int4: y1 / y2 int4 packed 8 per int32 (the
    reference's quint4x2 layout); dst_type: an 8-bit float output's code (ARNQ_OUT)."""
    out_type, f8dt = ARNQ_OUT[dst_type]
    lib = builder.lib("add_rms_norm_dynamic_quant", DTYPE_X1=CTYPE[x1.dtype])
    x1, x2, gamma = x1.contiguous(), x2.contiguous(), gamma.contiguous()
    sm1, sm2, b = (t.contiguous() if t is not None else None for t in (smooth_scale1, smooth_scale2, beta))
    cols, rows = gamma.numel(), x1.numel() // gamma.numel()
    t = AddRmsNormQuantTiling()
    lib.opsdk_tiling(ctypes.c_uint64(rows), ctypes.c_uint32(cols), ctypes.c_float(eps), _ptr(sm1), _ptr(sm2),
                     _ptr(b), _mask_arg(output_mask, int4, out_type), ctypes.c_uint32(cores), ctypes.c_uint32(ub),
                     ctypes.byref(t))
    y_shape, y_dtype = ((*x1.shape[:-1], cols // 8), torch.int32) if int4 else (x1.shape, torch.int8)
    y1 = torch.empty(y_shape if t.run1 else (0,), dtype=y_dtype)
    y2 = torch.empty(y_shape if t.run2 else (0,), dtype=y_dtype)
    s1 = torch.empty(x1.shape[:-1] if t.run1 else (0,), dtype=torch.float32)
    s2 = torch.empty(x1.shape[:-1] if t.run2 else (0,), dtype=torch.float32)
    x = torch.empty_like(x1)
    outs = [(o if o.numel() else None) for o in (y1, y2, s1, s2)]
    call(lib.opsdk_run, _ptr(x1), _ptr(x2), _ptr(gamma), _ptr(sm1), _ptr(sm2), _ptr(b), _ptr(outs[0]),
         _ptr(outs[1]), _ptr(x), _ptr(outs[2]), _ptr(outs[3]), ctypes.c_uint64(rows), ctypes.c_uint32(cols),
         ctypes.c_float(eps), _mask_arg(output_mask, int4, out_type), ctypes.c_uint32(cores), ctypes.c_uint32(ub))
    if out_type:
        y1, y2 = y1.view(f8dt), y2.view(f8dt)
    return (y1, y2, x, s1, s2), t


def add_rms_norm_quant(builder, x1, x2, gamma, scales1, zero_points1=None, beta=None, scales2=None,
                       zero_points2=None, eps=1e-6, div_mode=True, axis=-1, dst_type=None, out_type=None, cores=40,
                       ub=UB_910B):
    """Returns ((y1, y2, x), tiling). dst_type: npu_add_rms_norm_quant's code (ARNQ_OUT; y1 / y2
    in its storage dtype); out_type overrides the kernels' outType (an unknown one: key 0)."""
    zdt = (zero_points1 if zero_points1 is not None else zero_points2)
    xs, ss = CTYPE[x1.dtype], CTYPE[scales1.dtype]
    zname = CTYPE[zdt.dtype] if zdt is not None else next(z for x, s, z in ARNQ_DTYPES if (x, s) == (xs, ss))
    lib = builder.lib("add_rms_norm_quant", DTYPE_X1=xs, DTYPE_SCALES1=ss, DTYPE_ZERO_POINTS1=zname)
    x1, x2, gamma, scales1 = x1.contiguous(), x2.contiguous(), gamma.contiguous(), scales1.contiguous()
    s2, z1, z2, b = (t.contiguous() if t is not None else None for t in (scales2, zero_points1, zero_points2, beta))
    cols, rows = gamma.numel(), x1.numel() // gamma.numel()
    out, ydt = ARNQ_OUT[dst_type]
    out = out if out_type is None else out_type
    t = AddRmsNormQuantTiling()
    lib.opsdk_tiling(ctypes.c_uint64(rows), ctypes.c_uint32(cols), ctypes.c_float(eps), _ptr(s2), _ptr(z1), _ptr(z2),
                     _ptr(b), ctypes.c_int(int(div_mode)), ctypes.c_int64(axis), ctypes.c_uint32(out),
                     ctypes.c_uint32(cores), ctypes.c_uint32(ub), ctypes.byref(t))
    y1 = torch.empty(x1.shape, dtype=torch.uint8)
    y2 = torch.full(x1.shape, 0x5A, dtype=torch.uint8)  # the kernel must write y2, zeros included
    x = torch.empty_like(x1)
    call(lib.opsdk_run, _ptr(x1), _ptr(x2), _ptr(gamma), _ptr(scales1), _ptr(s2), _ptr(z1), _ptr(z2), _ptr(b),
         _ptr(y1), _ptr(y2), _ptr(x), ctypes.c_uint64(rows), ctypes.c_uint32(cols), ctypes.c_float(eps),
         ctypes.c_int(int(div_mode)), ctypes.c_int64(axis), ctypes.c_uint32(out), ctypes.c_uint32(cores),
         ctypes.c_uint32(ub))
    return (y1.view(ydt), y2.view(ydt), x), t


QUANT_ROUND = {"round": 0, "floor": 1, "ceil": 2, "trunc": 3}
# npu_quantize's dtype -> (QUANT_OUT_*, y's storage dtype)
QUANT_OUT = {torch.qint8: (0, torch.int8), torch.int8: (0, torch.int8), torch.quint8: (1, torch.uint8),
             torch.uint8: (1, torch.uint8), torch.qint32: (2, torch.int32), torch.int32: (2, torch.int32),
             torch.quint4x2: (3, torch.int32)}


def quantize(builder, x, scales, zero_points, div_mode=True, axis=-1, sqrt_mode=False, round_mode="round",
             dtype=torch.qint8, cores=40, ub=UB_910B):
    """npu_quantize's kernels: Quantize (div_mode) or AscendQuantV2 (with its sqrt_mode and
    round_mode attributes; an unknown round mode reaches the tiling as an unsupported one);
    returns (y, tiling key). The build is chosen by x's dtype (QUANTIZE_DTYPES). axis is passed
    as the IR attribute: Quantize's axis, or AscendQuantV2's (-1 or -2, as the converter gives).
    dtype: npu_quantize's (quint4x2: int4 packed 8 per int32); None: an unsupported output."""
    row = next(r for r in QUANTIZE_DTYPES if r[0] == CTYPE[x.dtype])
    lib = builder.lib("quantize", DTYPE_X=row[0], DTYPE_SCALES=row[1], DTYPE_ZERO_POINTS=row[2])
    x, scales = x.contiguous(), scales.contiguous()
    zp = zero_points.contiguous() if zero_points is not None else None
    cols = x.shape[-1] if x.dim() else 1
    rank = x.dim()
    ax = axis + rank if axis < 0 else axis
    ax_dim = x.shape[ax] if 0 <= ax < rank else 0
    inner = 1
    for d in x.shape[ax + 1:rank - 1] if 0 <= ax < rank else ():
        inner *= d
    out, ydt = QUANT_OUT.get(dtype, (4, torch.int8))
    y = torch.empty((*x.shape[:-1], cols // 8) if out == 3 else x.shape, dtype=ydt)
    key = call(lib.opsdk_run, ctypes.c_int(int(div_mode)), _ptr(x), _ptr(scales), _ptr(zp), _ptr(y),
               _rows(x, cols), ctypes.c_uint32(cols), ctypes.c_uint64(scales.numel()), ctypes.c_int64(rank),
               ctypes.c_int64(axis), ctypes.c_uint64(ax_dim), ctypes.c_uint64(inner), ctypes.c_int(int(sqrt_mode)),
               ctypes.c_uint32(QUANT_ROUND.get(round_mode, 4)), ctypes.c_uint32(out), ctypes.c_uint32(cores),
               ctypes.c_uint32(ub))
    return y, key


def silu_mul_quant(builder, gate, up, cores=40, ub=UB_910B):
    lib = builder.lib("silu_mul_quant", DTYPE_GATE=CTYPE[gate.dtype])
    gate, up = gate.contiguous(), up.contiguous()
    cols = gate.shape[-1]
    y = torch.empty(gate.shape, dtype=torch.int8)
    scale = torch.empty(gate.shape[:-1], dtype=torch.float32)
    key = call(lib.opsdk_run, _ptr(gate), _ptr(up), _ptr(y), _ptr(scale), _rows(gate, cols), ctypes.c_uint32(cols),
               ctypes.c_uint32(cores), ctypes.c_uint32(ub))
    return (y, scale), key


def model_exp(builder, v: torch.Tensor) -> torch.Tensor:
    """The model's fp32 Exp (the host's std::exp), elementwise."""
    lib = builder.lib("silu_mul_quant", DTYPE_GATE="half")
    v = v.float().contiguous()
    out = torch.empty_like(v)
    lib.opsdk_expf(_ptr(v), _ptr(out), ctypes.c_uint64(v.numel()))
    return out


# ---- the model's reduction order, for bit-exact checks downstream of rstd ----------------------

def model_tree_sum(v: torch.Tensor) -> torch.Tensor:
    """(rows, n) fp32 -> (rows,) fp32 in the model's ReduceSum order (64-element repeats, each
    by pairwise halving, then the repeat sums again by the same rule)."""
    v = v.float()
    while v.shape[1] > 1:
        reps = (v.shape[1] + 63) // 64
        lane = torch.zeros(v.shape[0], reps * 64, dtype=torch.float32)
        lane[:, :v.shape[1]] = v
        lane = lane.view(v.shape[0], reps, 64)
        w = 32
        while w >= 1:
            lane = lane[:, :, :w] + lane[:, :, w:2 * w]
            w //= 2
        v = lane[:, :, 0]
    return v[:, 0]


def model_rstd(x: torch.Tensor, eps: float, chunk: int | None = None) -> torch.Tensor:
    """rstd (rows, 1) as the norm kernels compute it on the model: the sum of squares by
    model_tree_sum (chunk by chunk, the chunk sums added in order, for the split-row key),
    then 1 / sqrt(sum * (1/n) + eps) in fp32, each step correctly rounded as the model's (the
    steps are computed in fp64 and rounded to fp32, which is exact rounding for + * / and sqrt;
    torch's own fp32 sqrt is not correctly rounded on every CPU)."""
    x = x.float()
    n = x.shape[-1]
    sq = x * x
    if not chunk or chunk >= n:
        total = model_tree_sum(sq)
    else:
        total = torch.zeros(x.shape[0], dtype=torch.float32)
        for c0 in range(0, n, chunk):
            total = total + model_tree_sum(sq[:, c0:c0 + chunk])
    r = lambda v: v.float().double()  # noqa: E731  (round an fp64 result to fp32)
    avg = r(torch.tensor(1.0, dtype=torch.float64) / float(n))
    eps32 = r(torch.tensor(eps, dtype=torch.float64))
    t = r(r(total.double() * avg) + eps32)
    return r(1.0 / r(torch.sqrt(t))).float().unsqueeze(-1)


# ---- comparisons ------------------------------------------------------------------------------

def ordered(t: torch.Tensor) -> torch.Tensor:
    """Float bits as integers whose difference counts ulps (sign-magnitude -> ordered)."""
    if t.dtype == torch.float32:
        i = t.contiguous().view(torch.int32).to(torch.int64)
        return torch.where(i < 0, -(i & 0x7FFFFFFF), i)
    i = t.contiguous().view(torch.int16).to(torch.int64)
    return torch.where(i < 0, -(i & 0x7FFF), i)


def ulp_diff(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    return (ordered(a) - ordered(b)).abs()


def assert_ulp(out, ref, max_ulp, max_fraction=1.0, what="output"):
    d = ulp_diff(out, ref.reshape(out.shape))
    worst = int(d.max()) if d.numel() else 0
    frac = float((d > 0).float().mean()) if d.numel() else 0.0
    assert worst <= max_ulp, f"{what}: {worst} ulp apart (bound {max_ulp})"
    assert frac <= max_fraction, f"{what}: {frac:.4%} of the elements differ (bound {max_fraction:.2%})"


def assert_int_close(out, ref, max_fraction=INT_FLIP_FRACTION, what="int8 output"):
    d = (out.to(torch.int32) - ref.reshape(out.shape).to(torch.int32)).abs()
    worst = int(d.max()) if d.numel() else 0
    frac = float((d > 0).float().mean()) if d.numel() else 0.0
    assert worst <= 1, f"{what}: {worst} steps apart (bound 1)"
    assert frac <= max_fraction, f"{what}: {frac:.4%} of the elements differ (bound {max_fraction:.2%})"
