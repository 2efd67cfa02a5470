"""The 8-bit float output formats of Ascend 950 quantisation: float8_e5m2 and
float8_e4m3fn (torch dtypes) and HiFloat8 (no torch dtype: its bits are stored in a
uint8 tensor, as torch_npu stores them).

torch_npu names these by integer codes beside the ScalarType codes: 23 / 291
float8_e5m2, 24 / 292 float8_e4m3fn, 290 hifloat8 (``torch_npu.hifloat8``; codes of 256
and above are CANN's aclDataType + 256).

Rounding, as the 950 quantisation kernels convert fp32 (CANN ops-nn, arch35 kernels):
float8 rounds half to even and saturates to the largest finite value (448, 57344; NaN
stays NaN); HiFloat8 rounds half away from zero and saturates to 32768, and NaN becomes
0 in that saturating mode.

HiFloat8 (one byte: sign, a prefix-coded "dot" field, exponent, mantissa), decoded:
  dot 0000 (bits 6..3): DML, 2^(e) with e = bits 2..0 - 23 (e in -22..-16; 0 is zero)
  dot 0001:             D0, exponent 0, 3 mantissa bits
  dot 001s:             D1, exponent +-1 (s = sign), 3 mantissa bits
  dot 01s e:            D2, |exponent| 2..3, 3 mantissa bits
  dot 10s ee:           D3, |exponent| 4..7, 2 mantissa bits
  dot 11s eee:          D4, |exponent| 8..15, 1 mantissa bit
  0x80 NaN, 0x6F / 0xEF +-Inf, 0x6E / 0xEE +-32768 (the largest finite value).
"""

from __future__ import annotations

import functools

import torch

HIFLOAT8 = 290
FLOAT8_CODES = {23: torch.float8_e5m2, 291: torch.float8_e5m2,
                24: torch.float8_e4m3fn, 292: torch.float8_e4m3fn}
HIF8_MAX = 32768.0
# the largest finite value of each 8-bit float output code (DTYPE_MAX of dynamic quantisation)
FLOAT8_MAX = {23: 57344.0, 291: 57344.0, 24: 448.0, 292: 448.0, HIFLOAT8: HIF8_MAX}
FLOAT8_OUT_CODES = (23, 24, HIFLOAT8, 291, 292)


def storage_dtype(code: int) -> torch.dtype:
    """The torch dtype of an 8-bit float output code (HiFloat8: uint8 bits)."""
    return torch.uint8 if code == HIFLOAT8 else FLOAT8_CODES[code]


@functools.cache
def _hif8_grid() -> tuple[torch.Tensor, torch.Tensor]:
    """The non-negative finite HiFloat8 codes in order of value (hif8_to_float decodes them),
    and the rounding boundaries between neighbours: their midpoints, exact in fp32 (each
    value has at most 4 significant bits)."""
    codes = torch.tensor([c for c in range(128) if c != 111], dtype=torch.int32)  # 111: inf
    values = hif8_to_float(codes)
    order = torch.argsort(values)
    values = values[order]
    return codes[order], (values[:-1] + values[1:]) * 0.5


def _nearest_hif8(a: torch.Tensor) -> torch.Tensor:
    """The code of the nearest HiFloat8 value to each magnitude ``a`` >= 0, a tie to the
    larger one (half away from zero): from the midpoint below 2^-22 (2^-23) down, 0; from the
    one above the largest value (1.25 * 2^15 ... inf) up, the largest (code 110)."""
    codes, bounds = _hif8_grid()
    return codes[torch.bucketize(a, bounds, right=True).clamp_(max=codes.numel() - 1)]


@functools.cache
def _hif8_lut() -> torch.Tensor:
    """The code of every fp32 magnitude by its top 12 bits (exponent and 4 mantissa bits).
    HiFloat8 keeps at most 3 mantissa bits and rounds half away from zero, so whether a value
    rounds up is its first dropped bit: the 12 bits decide the code."""
    return _nearest_hif8((torch.arange(4096, dtype=torch.int32) << 19).view(torch.float32))


def _encode_hif8(x: torch.Tensor) -> torch.Tensor:
    bits = x.view(torch.int32)
    code = _hif8_lut()[(bits & 0x7FFFFFFF) >> 19]
    code = torch.where((code != 0) & (bits < 0), code + 128, code)
    return torch.where(torch.isnan(x), 0, code).to(torch.uint8)


def float_to_hif8(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> HiFloat8 bits (uint8): round half away from zero, saturate, NaN -> 0."""
    return _encode_hif8(x.float())


def hif8_to_float(bits: torch.Tensor) -> torch.Tensor:
    """HiFloat8 bits (uint8) -> fp32 (0x80 -> NaN, 0x6F / 0xEF -> +-inf)."""
    b = bits.to(torch.int32)
    sign = torch.where(b >= 128, -1.0, 1.0)
    v = b & 127
    dot = v >> 3
    e = torch.zeros_like(v)
    m = torch.ones_like(v, dtype=torch.float32)
    d4, d3, d2, d1 = dot >= 12, (dot >= 8) & (dot < 12), (dot >= 4) & (dot < 8), (dot >= 2) & (dot < 4)
    d0, dml = dot == 1, dot == 0

    def signed(mag, neg_bit):
        return torch.where(neg_bit, -mag, mag)

    e = torch.where(d4, signed(((v >> 1) & 7) + 8, (v & 16) > 0), e)
    m = torch.where(d4, 1.0 + (v & 1) * 0.5, m)
    e = torch.where(d3, signed(((v >> 2) & 3) + 4, (v & 16) > 0), e)
    m = torch.where(d3, 1.0 + (v & 3) * 0.25, m)
    e = torch.where(d2, signed(((v >> 3) & 1) + 2, (v & 16) > 0), e)
    m = torch.where(d2 | d1 | d0, 1.0 + (v & 7) * 0.125, m)
    e = torch.where(d1, signed(torch.ones_like(v), (v & 8) > 0), e)
    e = torch.where(dml, (v & 7) - 23, e)
    out = sign * m * torch.pow(2.0, e.to(torch.float32))
    out = torch.where(v == 0, 0.0, out)
    out = torch.where(b == 128, float("nan"), out)
    return torch.where(v == 111, sign * float("inf"), out)


def float8_inv(dmax: float) -> float:
    """fp32(1 / dmax), the reciprocal the 950 kernels scale an 8-bit float quantisation's amax
    by (one fp32 division; exact as a Python float)."""
    return (torch.tensor(1.0, dtype=torch.float32) / torch.tensor(dmax, dtype=torch.float32)).item()


def dynamic_quant_float8(v: torch.Tensor, amax: torch.Tensor, code: int, dmax: float):
    """Symmetric dynamic quantisation of fp32 ``v`` to an 8-bit float output, as the Ascend 950
    kernels compute it (CANN ops-nn arch35 DynamicQuant / AddRmsNormDynamicQuant):
    scale = amax * fp32(1 / dmax), y = cast(v / scale). ``amax`` broadcasts against ``v``.
    Where amax is 0 the scale is 0 and y is 0 (the contract's choice for all-zero rows).
    Returns (y, scale)."""
    scale = amax * torch.tensor(float8_inv(dmax), dtype=torch.float32)
    q = torch.where(scale > 0, v / torch.where(scale > 0, scale, torch.ones_like(scale)),
                    torch.zeros_like(v))
    return quantize_float8(q, code), scale


def quantize_float8(v: torch.Tensor, code: int) -> torch.Tensor:
    """fp32 values -> the 8-bit float format of ``code``, saturating (950 kernels)."""
    if code == HIFLOAT8:
        return float_to_hif8(v)
    dtype = FLOAT8_CODES[code]
    fmax = torch.finfo(dtype).max
    return v.float().clamp(-fmax, fmax).to(dtype)  # NaN stays NaN; rounds half to even


# ---- 4-bit formats, two per byte (torch_npu stores them in uint8) -----------------------------
# float4_e2m1 (torch_npu.float4_e2m1fn_x2, 296) and float4_e1m2 (torch_npu.float4_e1m2fn_x2,
# 297): sign, then exponent / mantissa; no inf, no NaN. The magnitudes of codes 0..7:
FLOAT4_E2M1, FLOAT4_E1M2 = 296, 297
FLOAT4_GRID = {
    FLOAT4_E2M1: (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0),      # bias 1, 2 exponent bits
    FLOAT4_E1M2: (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75),  # bias 1, 1 exponent bit
}


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """4-bit codes (integers, only the low 4 bits count) -> uint8, two per byte along the last
    dim (even length): element 2i in the low nibble, 2i + 1 in the high nibble."""
    c = codes.to(torch.int32) & 0xF
    c = c.reshape(*c.shape[:-1], c.shape[-1] // 2, 2)
    return (c[..., 0] | (c[..., 1] << 4)).to(torch.uint8)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """The inverse of pack_nibbles: uint8 (..., n) -> int32 codes 0..15 of shape (..., 2n)."""
    b = packed.to(torch.int32)
    return torch.stack((b & 0xF, (b >> 4) & 0xF), dim=-1).reshape(*b.shape[:-1], 2 * b.shape[-1])


def float_to_fp4_codes(v: torch.Tensor, code: int) -> torch.Tensor:
    """Real values -> float4 codes (int32 0..15, sign in bit 3), as CANN's Cast converts
    (ops-math arch35 castMap: through bfloat16, round half to even at each step): v is
    rounded to bfloat16 first, then to the nearest float4 value, ties to the even code;
    |v| beyond the largest value (6 / 1.75) and +-inf saturate to it; NaN becomes +0
    (float4 has no NaN; op_sdk's choice, CANN does not say)."""
    b = v.to(torch.bfloat16).float()
    grid = torch.tensor(FLOAT4_GRID[code], dtype=torch.float32, device=v.device)
    a = b.abs().clamp(max=grid[-1].item())
    hi = torch.searchsorted(grid, a.contiguous()).clamp(1, 7)
    lo = hi - 1
    d_lo, d_hi = a - grid[lo], grid[hi] - a
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    mag = torch.where(pick_hi, hi, lo).to(torch.int32)
    code4 = torch.where(torch.signbit(b), mag | 8, mag)
    return torch.where(torch.isnan(b), 0, code4)


def fp4_codes_to_float(codes: torch.Tensor, code: int) -> torch.Tensor:
    """float4 codes (0..15) -> fp32 (exact)."""
    grid = torch.tensor(FLOAT4_GRID[code], dtype=torch.float32, device=codes.device)
    c = codes.to(torch.int64)
    mag = grid[c & 7]
    return torch.where((c & 8) > 0, -mag, mag)
