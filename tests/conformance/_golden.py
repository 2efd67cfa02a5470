"""Shared pieces of the conformance suite: the upstream comparison rules, int4 packing,
torch_npu's custom dtype codes and the upstream commits the suite was ported from.

The comparison rules are re-implementations of the checks the upstream tests use, so a
case passes here under the same tolerance it passes under on an NPU:

- ``assert_rtol_equal``: torch_npu's ``TestCase.assertRtolEqual``
  (Ascend/pytorch, torch_npu/testing/testcase.py).
- ``benchmark_compare``: the element-wise ``compare(golden, actual, benchmark)`` of
  op-plugin's test_npu_add_rms_norm_quant.py / test_npu_add_rms_norm_dynamic_quant.py.
- ``golden_compare``: the error-balance + relative check of op-plugin's
  test_npu_quant_matmul.py (A8W4 cases).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

import op_sdk  # noqa: F401  (defines torch.ops.npu.*)

# Upstream sources (snapshot HEADs read for the port; each test file names the commit that
# last changed its upstream file as well).
OP_PLUGIN = "Ascend/op-plugin"
OP_PLUGIN_HEAD = "517f2e7d0f202f38b76310706cb977ca2388ad21"
TORCH_NPU = "Ascend/pytorch"
TORCH_NPU_HEAD = "9e73e708ab9350d203475609f36f8a43f6a0c2ab"

# torch_npu's custom dtype codes: 256 + the ACL enum (torch_npu/csrc/custom_dtype/Init.h).
NPU_INT4 = 256 + 29
NPU_HIFLOAT8 = 256 + 34
NPU_FLOAT8_E5M2 = 256 + 35
NPU_FLOAT8_E4M3FN = 256 + 36
NPU_FLOAT8_E8M0FNU = 256 + 37
NPU_FLOAT4_E2M1FN_X2 = 256 + 40

npu = torch.ops.npu


# ---- comparisons ---------------------------------------------------------------------------

def _as_numpy(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu()
        # numpy has no bfloat16: upstream compares bf16 results through .float()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.numpy()
    return np.asarray(t)


def assert_rtol_equal(golden, actual, prec: float = 1e-4, prec16: float = 1e-3) -> None:
    """torch_npu's assertRtolEqual: same shape and dtype; the check fails only when more
    than a fraction ``prec`` of the elements miss both the absolute bound ``prec`` and the
    relative bound ``|d| / (max(|a|, |b|) + tiny) <= prec`` (``prec16`` for float16)."""
    a, b = _as_numpy(golden), _as_numpy(actual)
    assert a.shape == b.shape, f"shape error: golden {a.shape}, actual {b.shape}"
    assert a.dtype == b.dtype, f"dtype error: golden {a.dtype}, actual {b.dtype}"
    if a.dtype == np.bool_:
        assert np.array_equal(a, b), "result error (bool)"
        return
    if a.dtype == np.float16:
        pre, tiny = prec16, 6e-8
    else:
        pre, tiny = prec, 10e-10
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    diff = np.abs(b64 - a64)
    deno = np.maximum(np.abs(a64), np.abs(b64))
    atol_ok = diff <= pre
    rtol_ok = diff / (deno + tiny) <= pre
    if rtol_ok.all() or atol_ok.all():
        return
    allowed = a.size * pre
    n_rtol, n_atol = int((~rtol_ok).sum()), int((~atol_ok).sum())
    assert not (n_rtol > allowed and n_atol > allowed), (
        f"result error: {n_rtol} elements over rtol {pre} and {n_atol} over atol {pre} "
        f"(allowed {allowed:.3g} of {a.size}); max |diff| {diff.max():.6g}")


def benchmark_errors(golden, actual, benchmark: float) -> int:
    """Number of elements the upstream ``compare`` counts as errors: for |golden| < 1 the
    absolute difference must be <= benchmark, otherwise the relative one (1 when exactly
    one side is zero)."""
    a = torch.as_tensor(golden).detach().reshape(-1).to(torch.float64)
    b = torch.as_tensor(actual).detach().reshape(-1).to(torch.float64)
    assert a.shape == b.shape, f"size error: golden {a.numel()}, actual {b.numel()}"
    diff = (a - b).abs()
    one_zero = (a == 0) != (b == 0)
    rel = torch.where(a != 0, diff / a.abs().clamp_min(1e-300), torch.zeros_like(diff))
    rel = torch.where(one_zero, torch.ones_like(rel), rel)
    err = torch.where(a.abs() < 1, diff > benchmark, rel > benchmark)
    return int(err.sum())


def benchmark_compare(golden, actual, benchmark: float) -> bool:
    return benchmark_errors(golden, actual, benchmark) == 0


def assert_benchmark(golden, actual, benchmark: float, what: str = "") -> None:
    n = benchmark_errors(golden, actual, benchmark)
    assert n == 0, f"{what}: {n} elements outside benchmark {benchmark}"


def golden_compare(actual: torch.Tensor, golden: torch.Tensor, ksize: int) -> bool:
    """The A8W4 check of test_npu_quant_matmul.py: mean signed error (error balance) and
    an element-wise bound relative to max(|golden|, 1). As upstream, the error-balance
    bound is 2**-7 for every dtype (the golden is already float32 when it is tested)."""
    g = golden.to(torch.float32)
    nmax = g.abs().clamp(min=1)
    eb = torch.mean((actual.to(torch.float32) - g) / nmax) <= 2 ** -7
    if actual.dtype == torch.float16:
        thresh = 2 ** -8 if ksize < 2048 else 2 ** -7
    else:
        thresh = 2 ** -7 if ksize < 2048 else 2 ** -6
    cmp = ((actual.to(torch.float32) - g).abs() <= thresh * nmax).all()
    return bool(eb) and bool(cmp)


# ---- int4 ----------------------------------------------------------------------------------

def pack_int4_lsb_first(q: torch.Tensor) -> torch.Tensor:
    """Signed int4 values (any integer dtype, in [-8, 7]) packed 8 per int32 along the last
    dim, element 0 in the lowest nibble (torch_npu's int4-in-int32 layout)."""
    *lead, n = q.shape
    assert n % 8 == 0
    nib = (q.to(torch.int64) & 0xF).reshape(*lead, n // 8, 8)
    word = (nib << torch.arange(0, 32, 4, dtype=torch.int64)).sum(-1)
    return (word - (word >= 2 ** 31).to(torch.int64) * 2 ** 32).to(torch.int32)


def unpack_int4_lsb_first(w: torch.Tensor) -> torch.Tensor:
    """Inverse of pack_int4_lsb_first: int32 (..., m) -> int8 (..., 8 m), sign-extended."""
    assert w.dtype == torch.int32
    nib = (w.to(torch.int64).unsqueeze(-1) >> torch.arange(0, 32, 4, dtype=torch.int64)) & 0xF
    nib = torch.where(nib > 7, nib - 16, nib)
    return nib.reshape(*w.shape[:-1], w.shape[-1] * 8).to(torch.int8)


def int4_bytes_to_int8(packed: torch.Tensor) -> torch.Tensor:
    """The byte-wise unpacking of test_npu_dynamic_quant.py (convert_int4_to_int8): each
    byte of the packed tensor gives its low nibble, then its high nibble, sign-extended;
    returned flat."""
    u8 = packed.contiguous().view(torch.uint8).reshape(-1, 1)
    low = ((u8 & 0x0F) << 4).view(torch.int8) >> 4
    high = (u8 & 0xF0).view(torch.int8) >> 4
    return torch.cat([low, high], dim=-1).reshape(-1)


# ---- misc ----------------------------------------------------------------------------------

def quantize_per_channel_int_repr(x, scales, zero_points, axis, dtype) -> torch.Tensor:
    """torch.quantize_per_channel(...).int_repr(), the golden of several upstream cases
    (deprecated in torch 2.13; its warning is silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.quantize_per_channel(x, scales, zero_points, axis, dtype).int_repr()


def uniform(rng: np.random.Generator, lo: float, hi: float, shape, dtype) -> np.ndarray:
    """np.random.uniform(lo, hi, shape).astype(dtype), drawn in float32 (much faster for the
    12 M-element upstream shapes; the distribution is what matters)."""
    u = rng.random(shape, dtype=np.float32) * np.float32(hi - lo) + np.float32(lo)
    return u.astype(dtype)


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Element-wise distance in units in the last place between two tensors of the same
    floating dtype (bit patterns mapped to a monotonic integer line)."""
    assert a.dtype == b.dtype and a.is_floating_point()
    bits = {torch.float16: torch.int16, torch.bfloat16: torch.int16,
            torch.float32: torch.int32}[a.dtype]
    sign = {torch.int16: 0x7FFF, torch.int32: 0x7FFFFFFF}[bits]

    def line(t):
        i = t.contiguous().view(bits).to(torch.int64)
        return torch.where(i < 0, -(i & sign), i)

    return (line(a) - line(b)).abs()


def assert_within_ulps(actual: torch.Tensor, expected: torch.Tensor, ulps: int,
                       what: str = "") -> None:
    d = ulp_distance(actual, expected)
    assert int(d.max()) <= ulps, (
        f"{what}: {int((d > ulps).sum())} elements more than {ulps} ulp apart "
        f"(max {int(d.max())})")


def trans_quant_param(scale: torch.Tensor, round_mode: int = 0) -> torch.Tensor:
    """torch_npu.npu_trans_quant_param without offset, as its documentation
    (docs/zh/custom_APIs/torch_npu/torch_npu-npu_trans_quant_param.md) describes it: the
    float32 scale cut to FP19 (its top 19 bits; round_mode 1 rounds to nearest even
    first) in the low 32 bits of an int64, with bit 46 set."""
    bits = scale.to(torch.float32).contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    if round_mode == 1:
        bits = bits + 0xFFF + ((bits >> 13) & 1)
    return (bits & 0xFFFFE000) | (1 << 46)


# ---- HiFloat8 ------------------------------------------------------------------------------
#
# HiFloat8 has no torch or numpy dtype (upstream's golden uses en_dtypes.hifloat8). The
# format, as the HiFloat8 paper (Huawei, "Ascend HiFloat8 Format for Deep Learning", 2024)
# defines it: sign bit, then a prefix-coded "dot" field giving the exponent width, a
# sign-magnitude exponent and the mantissa:
#   0000 eee   denormal-like: 2^(eee - 23) (eee = 0: zero; 0x80: NaN)
#   0001 mmm   exponent 0
#   001s mmm   exponent +-1
#   01se mmm   exponent +-(2 + e)
#   10se emm   exponent +-(4 + ee)
#   11se eem   exponent +-(8 + eee); 0x6F / 0xEF (exponent 15, mantissa 1) are +-Inf
# so the largest finite value is 2^15 = 32768. Conversion rounds half away from zero.

def _hif8_magnitude(v: int) -> float:
    """The value of the low 7 bits of a HiFloat8 byte (finite codes)."""
    dot = v >> 3
    if dot == 0:
        return 0.0 if v == 0 else 2.0 ** ((v & 7) - 23)
    if dot == 1:
        e, m = 0, 1 + (v & 7) / 8
    elif dot < 4:
        e, m = (-1 if v & 8 else 1), 1 + (v & 7) / 8
    elif dot < 8:
        e, m = (2 + ((v >> 3) & 1)) * (-1 if v & 16 else 1), 1 + (v & 7) / 8
    elif dot < 12:
        e, m = (4 + ((v >> 2) & 3)) * (-1 if v & 16 else 1), 1 + (v & 3) / 4
    else:
        e, m = (8 + ((v >> 1) & 7)) * (-1 if v & 16 else 1), 1 + (v & 1) / 2
    return m * 2.0 ** e


def hifloat8_to_float(bits: torch.Tensor) -> torch.Tensor:
    """HiFloat8 bytes (uint8) -> float64 values (NaN for 0x80, +-Inf for 0x6F / 0xEF)."""
    table = []
    for code in range(256):
        v = code & 127
        if code == 0x80:
            table.append(float("nan"))
        elif v == 0x6F:
            table.append(float("-inf") if code & 128 else float("inf"))
        else:
            table.append(-_hif8_magnitude(v) if code & 128 else _hif8_magnitude(v))
    return torch.tensor(table, dtype=torch.float64)[bits.to(torch.int64)]


def round_to_hifloat8(x: torch.Tensor) -> torch.Tensor:
    """float values -> the nearest finite HiFloat8 value (ties away from zero; magnitudes
    past the largest finite value are not expected: the golden clips first), as float64."""
    mags = sorted({_hif8_magnitude(v) for v in range(128) if v != 0x6F})
    table = torch.tensor(mags, dtype=torch.float64)
    a = x.to(torch.float64).abs()
    hi_idx = torch.searchsorted(table, a).clamp(max=len(mags) - 1)
    lo_idx = (hi_idx - 1).clamp(min=0)
    lo, hi = table[lo_idx], table[hi_idx]
    pick = torch.where(a - lo >= hi - a, hi, lo)  # the tie goes to the larger magnitude
    pick = torch.where(a >= table[-1], table[-1], pick)
    return torch.where(x < 0, -pick, pick)
