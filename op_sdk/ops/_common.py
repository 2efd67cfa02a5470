"""Shared rules of the operator contract: dtype codes, error messages, rounding, int4.

Every constraint failure goes through ``fail`` / ``check`` so the message always reads
``"<operator>: argument '<name>' <rule>"``; the C++ launchers use the same wording
(csrc/checks.h), and the tests match on operator and argument.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

# The dispatcher passes ``int dtype`` arguments as ScalarType codes; a torch.dtype given
# by the caller arrives as its code too. The contract's table of codes:
DTYPE_CODES: dict[int, torch.dtype] = {
    0: torch.uint8,
    1: torch.int8,
    3: torch.int32,
    5: torch.float16,
    6: torch.float32,
    12: torch.qint8,
    13: torch.quint8,
    14: torch.qint32,
    15: torch.bfloat16,
    16: torch.quint4x2,
    23: torch.float8_e5m2,
    24: torch.float8_e4m3fn,
}
CODE_OF = {dt: code for code, dt in DTYPE_CODES.items()}
# torch_npu's codes beyond ScalarType (CANN aclDataType + 256): no torch dtype, or a
# second spelling of one (op_sdk/ops/_formats.py)
NPU_DTYPE_NAMES = {285: "torch_npu.int4", 290: "torch_npu.hifloat8", 291: "torch_npu.float8_e5m2",
                   292: "torch_npu.float8_e4m3fn", 296: "torch_npu.float4_e2m1fn_x2",
                   297: "torch_npu.float4_e1m2fn_x2"}

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
HALF_DTYPES = (torch.float16, torch.bfloat16)

# ScalarType codes (the integer form of dtype arguments)
UINT8, INT8, INT32, FLOAT16, FLOAT32, BFLOAT16 = 0, 1, 3, 5, 6, 15
QINT8, QUINT8, QINT32, QUINT4X2 = 12, 13, 14, 16

INT8_MAX = 127.0
INT4_MAX = 7.0


class OpArgumentError(RuntimeError):
    """A call broke one of the operator's documented constraints."""


def fail(op: str, arg: str, rule: str, exc: type[Exception] = OpArgumentError):
    raise exc(f"{op}: argument '{arg}' {rule}")


def check(cond: bool, op: str, arg: str, rule: str) -> None:
    if not cond:
        fail(op, arg, rule)


def unsupported(op: str, arg: str, rule: str):
    fail(op, arg, rule, NotImplementedError)


def dtype_value_str(value) -> str:
    """The value of an ``int dtype`` argument in an error: "torch.bfloat16 (15)", "None"
    (csrc/checks.h dtype_value_str)."""
    if value is None:
        return "None"
    code = CODE_OF.get(value, value) if isinstance(value, torch.dtype) else value
    name = DTYPE_CODES.get(code) or NPU_DTYPE_NAMES.get(code)
    return f"{name} ({code})" if name is not None else str(value)


def dtype_arg(op: str, arg: str, value, allowed: Sequence[int], default: int) -> int:
    """Normalise an ``int dtype`` argument to its code and check it is allowed."""
    code = default if value is None else value
    if isinstance(code, torch.dtype):
        code = CODE_OF.get(code, -1)
    if code not in allowed:
        names = ", ".join(dtype_value_str(c) for c in allowed)
        fail(op, arg, f"must be one of {names}, got {dtype_value_str(value)}")
    return int(code)


def names(dtypes: Sequence[torch.dtype]) -> str:
    return "/".join(str(d).replace("torch.", "") for d in dtypes)


def rows_by_group(op: str, counts: torch.Tensor, rows: int) -> torch.Tensor:
    """Each of ``rows`` rows' MoE group from the groups' row counts (int64, each >= 0: the
    caller's data rules): group g's ``counts[g]`` rows in order, -1 after the last group.
    The one rule of every operator with a group_index; their sum must be at most ``rows``."""
    total = int(counts.sum())
    check(total <= rows, op, "group_index",
          f"must cover at most the {rows} rows of x (every dim but the last), got {total}")
    of_row = torch.repeat_interleave(torch.arange(counts.shape[0], device=counts.device), counts)
    return torch.cat((of_row, of_row.new_full((rows - total,), -1)))


def check_dtype(t: torch.Tensor, op: str, arg: str, allowed: Sequence[torch.dtype]) -> None:
    check(t.dtype in allowed, op, arg, f"must have dtype {names(allowed)}, got {t.dtype}")


def check_same_shape(a: torch.Tensor, b: torch.Tensor, op: str, arg: str, other: str) -> None:
    check(a.shape == b.shape, op, arg,
          f"must have the same shape as '{other}', got {list(a.shape)} and {list(b.shape)}")


def check_1d(t: torch.Tensor, op: str, arg: str, n) -> None:
    check(t.dim() == 1 and t.shape[0] == n, op, arg,
          f"must be 1-D of length {n}, got shape {list(t.shape)}")


def quantize_round(v: torch.Tensor, lo: float, hi: float, dtype: torch.dtype) -> torch.Tensor:
    """Round half to even and saturate, as every float -> integer step of the contract; a
    NaN stores 0 (aclnnCast's rule for float -> integer; csrc/launch.h quantize_round and
    kernels/simd.h store_q are the native twins)."""
    r = torch.round(v)
    if dtype == torch.int32:  # saturated in fp64: int32's max is not an fp32 value
        r = r.double()
    return r.clamp_(lo, hi).nan_to_num_(0.0).to(dtype)


def div_scalar(t: torch.Tensor, d: float) -> torch.Tensor:
    """t / d as one IEEE division per element on every device: CUDA divides a tensor by a
    Python scalar as a multiplication by its reciprocal (other bits), so d is made a
    tensor. On CPU the bits are those of ``t / d``."""
    return t / torch.full_like(t, d)


def absmax(v: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """max |v| over ``dim`` (kept as size 1), or over every element (shape [1] * v.dim()):
    the dynamic quantisations' amax. NaN propagates (a row with a NaN has a NaN amax, so a
    NaN scale); an empty reduction is 0, the rule of an all-zero row (scale 0, y 0).
    csrc/launch.h absmax and kernels/simd.h absmax are the native twins."""
    if dim is None:
        m = v.abs().amax() if v.numel() else v.new_zeros(())
        return m.reshape([1] * v.dim())
    if v.shape[dim] == 0:
        shape = list(v.shape)
        shape[dim] = 1
        return v.new_zeros(shape)
    return v.abs().amax(dim, keepdim=True)


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """Pack int4 values (an integer tensor in [-8, 7]) 8 per int32 along the last dim;
    element 0 sits in the lowest nibble."""
    *lead, n = q.shape
    nib = (q.to(torch.int64) & 0xF).reshape(*lead, n // 8, 8)
    shifts = torch.arange(0, 32, 4, dtype=torch.int64, device=q.device)
    word = (nib << shifts).sum(-1)
    # back to the signed int32 range: the top nibble carries bit 31
    word = torch.where(word >= 2**31, word - 2**32, word)
    return word.to(torch.int32)


def unpack_int4(w: torch.Tensor) -> torch.Tensor:
    """Inverse of pack_int4: int32 (..., n/8) -> int8 (..., n) in [-8, 7]."""
    *lead, m = w.shape
    shifts = torch.arange(0, 32, 4, dtype=torch.int64, device=w.device)
    nib = (w.to(torch.int64).unsqueeze(-1) >> shifts) & 0xF
    nib = torch.where(nib >= 8, nib - 16, nib)
    return nib.reshape(*lead, m * 8).to(torch.int8)


def empty_like_rows(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t.new_empty((0,), dtype=dtype)


def unpack_quant_scale(scale: torch.Tensor) -> torch.Tensor:
    """The fp32 scale a packed quantisation parameter holds (npu_trans_quant_param's
    int64: the fp32 bits of the scale, low 13 mantissa bits cleared, in the low 32 bits;
    uint64 holds the same bits). A floating-point scale (float32, bfloat16, ...) is
    returned as it is, as the C++ kernels' unpack_quant_scale does."""
    if scale.dtype not in (torch.int64, torch.uint64):
        return scale
    if scale.dtype == torch.uint64:
        scale = scale.view(torch.int64)
    bits = (scale & 0xFFFFE000).to(torch.int32)  # the low word, as the hardware reads it
    return bits.view(torch.float32)


def pack_quant_scale(scale: torch.Tensor, offset: torch.Tensor | None = None) -> torch.Tensor:
    """fp32 scale (and offset) -> the int64 packed value, npu_trans_quant_param's round_mode 0
    layout (aclnnTransQuantParam, hicann/ops-nn @ e5c3fa93, quant/trans_quant_param): the
    scale truncated to 19 bits in the low word, bit 46 set; an offset rounded to an integer,
    saturated to [-256, 255] (quantize_s9) and stored as 9 bits at bits 37..45. Scale and
    offset broadcast."""
    bits = scale.float().contiguous().view(torch.int32).to(torch.int64) & 0xFFFFE000
    bits = bits | (1 << 46)
    if offset is None:
        return bits
    s9 = quantize_s9(offset.float()).to(torch.int64) & 0x1FF
    return torch.bitwise_or(bits, s9 << 37)


def unpack_quant_offset(scale: torch.Tensor) -> torch.Tensor:
    """The offset an int64 / uint64 packed value holds (bits 37..45, a signed 9-bit integer),
    as float32 of the scale's shape."""
    bits = scale.view(torch.int64) if scale.dtype == torch.uint64 else scale
    raw = (bits >> 37) & 0x1FF
    return torch.where(raw >= 256, raw - 512, raw).to(torch.float32)


def quantize_s9(v: torch.Tensor) -> torch.Tensor:
    """CANN's float32 -> s9 step of the requantisation (fixpipe): round half to even and
    saturate to [-256, 255]; a NaN becomes -256 (a NaN lane takes the low bound, as every
    quantised store of the C++ kernels). Returns float32 integers."""
    return torch.round(torch.nan_to_num(v.float(), nan=-256.0).clamp(-256.0, 255.0))


def requantize_int8(v: torch.Tensor, offset: torch.Tensor | None) -> torch.Tensor:
    """int8 output of a scaled int32 product (CANN's requantisation; hicann/ops-nn @
    e5c3fa93, matmul/quant_batch_matmul_v3/tests/assets/qbmmv3_kernel_golden.py,
    compute_requant): quantize_s9(v), plus the offset (already an s9 integer), saturated to
    [-128, 127]."""
    t = quantize_s9(v)
    if offset is not None:
        t = t + offset
    return t.clamp_(-128.0, 127.0).to(torch.int8)


# ---- benchmark inputs (op_sdk.library.Benchmark.make) ---------------------------------------

def bench_randn(*shape, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


def bench_positive(*shape, dtype: torch.dtype) -> torch.Tensor:
    """Values in [0.5, 1.5): smoothing factors."""
    return (torch.rand(*shape) + 0.5).to(dtype)


def bench_norm_inputs(t: int, h: int, dtype: torch.dtype) -> tuple:
    """(x1, x2, gamma) of an add + rms-norm operator."""
    return bench_randn(t, h, dtype=dtype), bench_randn(t, h, dtype=dtype), bench_randn(h, dtype=dtype)
