"""MX (microscaling) quantisation, Ascend 950: one E8M0 scale per block of values along an
axis, the values to float8_e4m3fn / float8_e5m2 or packed float4_e2m1 / float4_e1m2. The
rules and the arithmetic npu_dynamic_mx_quant, npu_rms_norm_dynamic_mx_quant and
npu_add_rms_norm_dynamic_mx_quant share (docs/operators.md "MX quantisation").

Read from CANN ops-nn's aclnnDynamicMxQuant / V2 / V3, aclnnRmsNormDynamicMxQuant and
aclnnAddRmsNormDynamicMxQuant documents and their arch35 kernels (quant/dynamic_mx_quant,
norm/rms_norm_dynamic_mx_quant, norm/add_rms_norm_dynamic_mx_quant), op-plugin's bindings
and Meta functions:

* blocks: ``block`` consecutive values along the axis, the last one zero-padded; the scale
  codes are padded to an even count with 0 and stored in pairs: mxscale has x's shape with
  the axis's length ceil(blocks / 2) and a trailing 2, ``mxscale[..., j, ..., k]`` the code
  of block 2j + k (an E8M0 code e is 2^(e - 127), 255 NaN), in uint8 as torch_npu returns it.
* the block's code (``scale_alg``): 0 (OCP) the biased exponent of the block's amax less the
  format's emax (8, 15, 2, 0), at least 0; 1 (cuBLAS, float8) from ``S = amax * fl(1 /
  max)`` (a multiplication by the rounded reciprocal), its biased exponent rounded up when S
  is not a power of two; 2 (float4_e2m1, blocks of 32) from amax's bfloat16 bits, the
  exponent rounded up when the mantissa is at least 65 / 128 (``dst_type_max`` 0 or 6) or
  97 / 128 (7), or for another ``dst_type_max`` (6 - 12) as scale_alg 1 with that maximum.
  A block holding an inf or a NaN has code 255 and its values are 0.
* the values: ``x * 2^(127 - code)`` (exact), then float8 rounded half to even and saturated,
  float4 rounded by ``round_mode`` ("rint" half to even, "round" half away from zero,
  "floor" toward -inf) onto the format's values and saturated (6 / 1.75), a zero keeping its
  sign. OCP and scale_alg 2 (for dst_type_max 0 / 6 / 7) scale a block of code 0 by 0, as
  the kernels do (values of a block whose amax is below 2^(emax - 126) become signed zeros).
* float4 values are packed two per byte along the last dim, element 2i in the low nibble,
  whichever axis the blocks run along (torch_npu's float4_e2m1fn_x2 layout).
"""

from __future__ import annotations

import torch

from op_sdk.ops._common import check, dtype_arg
from op_sdk.ops._formats import (
    FLOAT4_E1M2,
    FLOAT4_E2M1,
    FLOAT4_GRID,
    pack_nibbles,
    quantize_float8,
)

MX_BLOCK = 32
E8M0_NAN = 255
ROUND_MODES = ("rint", "round", "floor")
# dst_type codes: torch's ScalarType (23, 24) or torch_npu's (291, 292, 296, 297)
FLOAT8_E5M2_CODES, FLOAT8_E4M3_CODES = (23, 291), (24, 292)
MX_DST_CODES = FLOAT8_E5M2_CODES + FLOAT8_E4M3_CODES + (FLOAT4_E2M1, FLOAT4_E1M2)
# the formats' emax (the exponent of their largest value) and largest value
_EMAX = {23: 15, 291: 15, 24: 8, 292: 8, FLOAT4_E2M1: 2, FLOAT4_E1M2: 0}
_MAX = {23: 57344.0, 291: 57344.0, 24: 448.0, 292: 448.0, FLOAT4_E2M1: 6.0, FLOAT4_E1M2: 1.75}
DST_TYPE_MAX_RANGE = (6.0, 12.0)


def is_fp4(code: int) -> bool:
    return code in (FLOAT4_E2M1, FLOAT4_E1M2)


# the destinations as the native and Triton kernels number them (csrc/mx_form.h opk::MxDst,
# op_sdk/triton_kernels/mx.py's DST switch)
KERNEL_DST = {**dict.fromkeys(FLOAT8_E4M3_CODES, 0), **dict.fromkeys(FLOAT8_E5M2_CODES, 1),
              FLOAT4_E2M1: 2, FLOAT4_E1M2: 3}


def kernel_form(code: int, alg: int, round_mode: str) -> tuple | None:
    """(destination, scale_alg, round mode, emax, max) of a valid call quantising the last dim
    in blocks of 32 that the Triton kernel computes (float8 with scale_alg 0 / 1, float4 with
    scale_alg 0, round modes numbered as ROUND_MODES); None: the reference's (scale_alg 2)."""
    if alg not in (0, 1) or (is_fp4(code) and alg != 0):
        return None
    return KERNEL_DST[code], alg, ROUND_MODES.index(round_mode), _EMAX[code], _MAX[code]


def y_dtype(code: int) -> torch.dtype:
    if code in FLOAT8_E5M2_CODES:
        return torch.float8_e5m2
    if code in FLOAT8_E4M3_CODES:
        return torch.float8_e4m3fn
    return torch.uint8


def scale_algs(code: int, fused: bool) -> tuple[int, ...]:
    """The scale_alg values a destination takes (the fused norms: 0 / 1 for float8, 0 for
    float4)."""
    if not is_fp4(code):
        return (0, 1)
    return (0, 2) if code == FLOAT4_E2M1 and not fused else (0,)


def check_mx_args(op: str, x: torch.Tensor, xname: str, dst_type, round_mode: str,
                  scale_alg, fused: bool) -> tuple[int, int]:
    """The destination / round_mode / scale_alg rules; returns (dst code, scale_alg)."""
    code = dtype_arg(op, "dst_type", dst_type, MX_DST_CODES, FLOAT4_E2M1)
    modes = ROUND_MODES if is_fp4(code) else ("rint",)
    check(round_mode in modes, op, "round_mode",
          f"must be {' / '.join(repr(m) for m in modes)} for "
          f"{'float4' if is_fp4(code) else 'float8'} outputs, got {round_mode!r}")
    alg = 0 if scale_alg is None else int(scale_alg)
    algs = scale_algs(code, fused)
    check(alg in algs, op, "scale_alg",
          f"must be {' or '.join(map(str, algs))} for dst_type {code} "
          f"({'0: OCP, 1: cuBLAS' if not is_fp4(code) else '0: OCP, 2: float4_e2m1 rounded up'}"
          f"), got {scale_alg}")
    if is_fp4(code):
        check(x.dim() >= 1 and x.shape[-1] % 2 == 0, op, xname,
              f"must have an even last dim for float4 outputs (two values per byte), got "
              f"shape {list(x.shape)}")
    return code, alg


def mx_scale_shape(shape, axis: int, block: int) -> list:
    out = list(shape) + [2]
    blocks = -(-shape[axis] // block)
    out[axis] = (blocks + 1) // 2
    return out


def mx_outputs_like(x: torch.Tensor, code: int, axis: int = -1, block: int = MX_BLOCK):
    """(y, mxscale) as torch_npu's Meta allocates them: a float8 y in x's layout, a float4 y
    (uint8, last dim halved) and mxscale contiguous."""
    axis = axis % x.dim()
    if is_fp4(code):
        y = x.new_empty((*x.shape[:-1], x.shape[-1] // 2), dtype=torch.uint8)
    else:
        y = torch.empty_like(x, dtype=y_dtype(code))
    return y, x.new_empty(mx_scale_shape(x.shape, axis, block), dtype=torch.uint8)


# ---- the arithmetic ---------------------------------------------------------------------------

def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


def _inv(m: float) -> torch.Tensor:
    """fl(1 / m) in float32 (one IEEE division)."""
    return torch.tensor(1.0, dtype=torch.float32) / torch.tensor(m, dtype=torch.float32)


def _rounded_up_exponent(s: torch.Tensor, subnormal_half: bool) -> torch.Tensor:
    """The biased exponent of float32 ``s`` >= 0, plus one where s is not a power of two
    (and, with ``subnormal_half``, a subnormal s above 2^-127)."""
    b = _bits(s)
    e = (b >> 23) & 0xFF
    m = b & 0x7FFFFF
    up = (e > 0) & (e < 254) & (m > 0)
    if subnormal_half:
        up = up | ((e == 0) & (m > 0x400000))
    return e + up.to(torch.int32)


def block_codes(amax: torch.Tensor, src: torch.dtype, code: int, alg: int,
                dst_type_max: float = 0.0, max_low_bound: float = 0.0):
    """E8M0 codes (int32) of blocks whose float32 amax is ``amax`` (of values of dtype
    ``src``), and whether a code-0 block's values are scaled by 0 (OCP, scale_alg 2's bit
    form) rather than by 2^127."""
    finite = torch.isfinite(amax)
    a = torch.where(finite, amax, torch.zeros_like(amax))
    zero_scaled = True
    if alg == 0:
        e = (_bits(a) >> 23) & 0xFF
        c = (e - _EMAX[code]).clamp_(min=0)
    elif alg == 1:
        s = torch.maximum(a, torch.tensor(max_low_bound, dtype=torch.float32)) * _inv(_MAX[code])
        c = torch.where(a == 0, 0, _rounded_up_exponent(s, subnormal_half=True))
        zero_scaled = False
    elif dst_type_max in (0.0, 6.0, 7.0):  # scale_alg 2, from amax's bfloat16 bits
        if src == torch.float32:
            a16 = (_bits(a) >> 16) & 0x7FFF  # truncated
        else:
            a16 = _bits(a.to(torch.bfloat16).float()) >> 16  # float16: rounded to nearest
        add = 0x1F if dst_type_max == 7.0 else 0x3F
        c = torch.where((a16 & 0x7F80) < 0x100, 0, (((a16 + add) & 0x7F80) - 0x100) >> 7)
    else:  # scale_alg 2 with another maximum: scale_alg 1's form
        s = a * _inv(dst_type_max)
        c = torch.where(a == 0, 0, _rounded_up_exponent(s, subnormal_half=False))
        zero_scaled = False
    return torch.where(finite, c, E8M0_NAN), zero_scaled


def _pow2(e: torch.Tensor) -> torch.Tensor:
    """2^e in float32 for integer e in [-127, 127] (exact: 2^-127 is a float32 subnormal)."""
    return torch.ldexp(torch.ones_like(e, dtype=torch.float64), e.double()).float()


def _fp4_round(v: torch.Tensor, code: int, round_mode: str) -> torch.Tensor:
    """float32 values -> the float4 format's values (float64), rounded by ``round_mode`` at
    the format's step for |v|'s binade (e2m1: 0.5 below 2, 1 below 4, 2 above; e1m2: 0.25),
    saturated, a zero keeping v's sign."""
    v = v.double()
    if code == FLOAT4_E2M1:
        _, e = torch.frexp(v)
        step = torch.ldexp(torch.ones_like(v), ((e - 1).clamp(min=0) - 1).double())
    else:
        step = torch.full_like(v, 0.25)
    t = v / step  # exact (a power of two)
    if round_mode == "rint":
        r = torch.round(t)
    elif round_mode == "round":
        r = torch.copysign(torch.floor(t.abs() + 0.5), t)  # exact in float64
    else:
        r = torch.floor(t)
    out = (r * step).clamp(-_MAX[code], _MAX[code])
    return torch.copysign(out, v)  # a zero keeps its sign; a non-zero has v's


def _fp4_codes(vals: torch.Tensor, code: int) -> torch.Tensor:
    grid = torch.tensor(FLOAT4_GRID[code], dtype=torch.float64, device=vals.device)
    mag = torch.searchsorted(grid, vals.abs().contiguous()).to(torch.int32)
    return torch.where(torch.signbit(vals), mag | 8, mag)


def mx_quantize(x: torch.Tensor, code: int, *, axis: int = -1, block: int = MX_BLOCK,
                alg: int = 0, round_mode: str = "rint", dst_type_max: float = 0.0,
                max_low_bound: float = 0.0):
    """x (float16 / bfloat16 / float32) -> (y, mxscale) as the module docstring says; y in
    the layout the fake allocates."""
    axis = axis % x.dim()
    v = x.float().movedim(axis, -1).contiguous()
    n = v.shape[-1]
    nb = -(-n // block)
    pad = nb * block - n
    if pad:
        v = torch.nn.functional.pad(v, (0, pad))
    blocks = v.reshape(*v.shape[:-1], nb, block)
    amax = blocks.abs().amax(-1) if blocks.numel() else blocks.new_zeros(blocks.shape[:-1])
    codes, zero_scaled = block_codes(amax, x.dtype, code, alg, dst_type_max, max_low_bound)
    factor = _pow2(127 - codes.clamp(max=254))
    if zero_scaled:
        factor = torch.where(codes == 0, torch.zeros_like(factor), factor)
    q = blocks * factor.unsqueeze(-1)
    bad = (codes == E8M0_NAN).unsqueeze(-1)
    q = torch.where(bad, torch.zeros_like(q), q)  # a block with an inf / NaN: values 0
    q = q.reshape(*v.shape[:-1], nb * block)[..., :n].movedim(-1, axis)
    y_out, s_out = mx_outputs_like(x, code, axis, block)
    if is_fp4(code):
        y_out.copy_(pack_nibbles(_fp4_codes(_fp4_round(q, code, round_mode), code)))
    else:
        y_out.copy_(quantize_float8(q, code))
    if nb % 2:
        codes = torch.nn.functional.pad(codes, (0, 1))
    pairs = codes.reshape(*codes.shape[:-1], codes.shape[-1] // 2, 2).movedim(-2, axis)
    s_out.copy_(pairs.to(torch.uint8))
    return y_out, s_out


def check_mx_quant_only(op: str, code: int, alg: int, block: int, x: torch.Tensor,
                        dst_type_max: float, max_low_bound: float) -> None:
    """npu_dynamic_mx_quant's dst_type_max / max_low_bound / block rules."""
    if alg == 2:
        check(block == MX_BLOCK, op, "block_size",
              f"must be {MX_BLOCK} with scale_alg 2, got {block}")
    lo, hi = DST_TYPE_MAX_RANGE
    check(dst_type_max == 0.0 or lo <= dst_type_max <= hi, op, "dst_type_max",
          f"must be 0.0 or in [{lo}, {hi}], got {dst_type_max}")
    check(dst_type_max == 0.0 or alg == 2, op, "dst_type_max",
          f"must be 0.0 unless scale_alg is 2 (float4_e2m1's range, read by scale_alg 2 "
          f"only), got {dst_type_max} with scale_alg {alg}")
    check(max_low_bound >= 0.0, op, "max_low_bound", f"must be >= 0, got {max_low_bound}")
    check(max_low_bound == 0.0 or alg == 1, op, "max_low_bound",
          f"must be 0.0 unless scale_alg is 1 (the amax floor of the cuBLAS scale), got "
          f"{max_low_bound} with scale_alg {alg}")
    if x.dtype == torch.float32:
        check(block == MX_BLOCK, op, "block_size",
              f"must be {MX_BLOCK} for a float32 input, got {block}")


__all__ = ["MX_BLOCK", "MX_DST_CODES", "ROUND_MODES", "check_mx_args", "check_mx_quant_only",
           "mx_outputs_like", "mx_quantize", "mx_scale_shape", "block_codes", "is_fp4"]
