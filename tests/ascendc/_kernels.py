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

Each kernel's test module holds its driver's call wrappers and declares the driver builds it
calls (``VARIANTS``: (driver, defines) pairs); this module keeps what every kernel's tests
share (the builder, ``call`` / ``ptr`` / ``nrows``, the model's reduction order, the bounds):
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


def ptr(t):
    return ctypes.c_void_p(t.data_ptr()) if t is not None else ctypes.c_void_p(None)


def call(fn, *args):
    """Call a driver entry (..., keyOut, err, errLen); returns the tiling key."""
    key = ctypes.c_uint32(0)
    err = ctypes.create_string_buffer(4096)
    rc = fn(*args, ctypes.byref(key), err, ctypes.c_int(len(err)))
    if rc != 0:
        raise KernelError(err.value.decode(errors="replace"))
    return key.value


def nrows(t, cols):
    return ctypes.c_uint64(t.numel() // cols if cols else 0)


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
