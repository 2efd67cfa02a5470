"""npu_transpose_batchmatmul and npu_quant_matmul (the spec's subset).

npu_transpose_batchmatmul's CPU kernel is native (csrc/batch_matmul.cpp): a register-blocked
kernel for few rows, torch.bmm written straight into the permuted output otherwise.
npu_quant_matmul's CPU kernel is native (csrc/quant_matmul.cpp): an exact int8
product (an AVX-512 VNNI kernel reading (n, k) weights in place for few-row inputs, ATen's
int8 GEMM otherwise) with the dequantisation fused into one pass over the output.
"""

from __future__ import annotations

import torch

from op_sdk.library import define_op
from op_sdk.ops._common import (
    FLOAT_DTYPES,
    check,
    check_dtype,
    dtype_arg,
    quantize_round,
    unpack_int4,
    unsupported,
)

# ---- npu_transpose_batchmatmul -----------------------------------------------------------

_PERM_X1 = ([0, 1, 2], [1, 0, 2])
_PERM_X2 = ([0, 1, 2], [0, 2, 1])
_LIMIT = 65536


def check_transpose_batchmatmul(input, weight, bias, scale, perm_x1, perm_x2, perm_y,
                                batch_split_factor):
    """Returns (perm_x1, perm_x2, B, M, K, N, factor)."""
    op = "npu_transpose_batchmatmul"
    check(bias is None, op, "bias", "must be None")
    p1 = list(perm_x1) if perm_x1 is not None else [0, 1, 2]
    p2 = list(perm_x2) if perm_x2 is not None else [0, 1, 2]
    py = list(perm_y) if perm_y is not None else [1, 0, 2]
    check(p1 in _PERM_X1, op, "perm_x1", f"must be [0, 1, 2] or [1, 0, 2], got {p1}")
    check(p2 in _PERM_X2, op, "perm_x2", f"must be [0, 1, 2] or [0, 2, 1], got {p2}")
    check(py == [1, 0, 2], op, "perm_y", f"must be [1, 0, 2], got {py}")
    check(input.dim() == 3, op, "input", f"must be 3-D, got {input.dim()} dims")
    check(weight.dim() == 3, op, "weight", f"must be 3-D, got {weight.dim()} dims")
    check_dtype(input, op, "input", FLOAT_DTYPES)
    check(weight.dtype == input.dtype, op, "weight",
          f"must have the dtype of 'input' ({input.dtype}), got {weight.dtype}")
    b, m, k = (input.shape[0], input.shape[1], input.shape[2]) if p1 == [0, 1, 2] else \
        (input.shape[1], input.shape[0], input.shape[2])
    wb, wk, n = (weight.shape[0], weight.shape[1], weight.shape[2]) if p2 == [0, 1, 2] else \
        (weight.shape[0], weight.shape[2], weight.shape[1])
    check(wb == b, op, "weight", f"batch {wb} must equal the input's batch {b}")
    check(wk == k, op, "weight", f"reduction dim {wk} must equal the input's K = {k}")
    check(b < _LIMIT, op, "input", f"batch B must be < {_LIMIT}, got {b}")
    check(n < _LIMIT, op, "weight", f"N must be < {_LIMIT}, got {n}")
    f = 1 if batch_split_factor is None else batch_split_factor
    check(f >= 1, op, "batch_split_factor", f"must be >= 1, got {f}")
    check((b * n) % f == 0, op, "batch_split_factor",
          f"must divide B * N = {b * n}, got {f}")
    if scale is not None:
        # the int8-output path (aclnnTransposeBatchMatMul): float16 in, int8 out
        check(input.dtype == torch.float16, op, "scale",
              f"(int8 output) requires float16 input, got {input.dtype}")
        check(scale.dtype in (torch.int64, torch.float32), op, "scale",
              "must be int64 (npu_trans_quant_param's packed value) or float32, got "
              f"{scale.dtype}")
        check(scale.dim() == 1 and scale.shape[0] == b * n, op, "scale",
              f"must be 1-D of length B * N = {b * n}, got {list(scale.shape)}")
        check(f == 1, op, "batch_split_factor", f"must be 1 with scale, got {f}")
    return p1, p2, b, m, k, n, f


def unpack_quant_scale(scale: torch.Tensor) -> torch.Tensor:
    """The fp32 scale a packed quantisation parameter holds (npu_trans_quant_param's
    int64: the fp32 bits of the scale, low 13 mantissa bits cleared, in the low 32 bits).
    A float32 scale is used as it is."""
    if scale.dtype == torch.float32:
        return scale
    bits = (scale & 0xFFFFE000).to(torch.int32)  # the low word, as the hardware reads it
    return bits.view(torch.float32)


def pack_quant_scale(scale: torch.Tensor) -> torch.Tensor:
    """fp32 scale -> the int64 packed value (npu_trans_quant_param's round_mode 0 layout:
    truncated to 19 bits, bit 46 set)."""
    bits = scale.float().contiguous().view(torch.int32).to(torch.int64) & 0xFFFFE000
    return bits | (1 << 46)


def _batched_operands(input, weight, p1, p2):
    """(B, M, K) and (B, K, N) views of the operands under perm_x1 / perm_x2."""
    x = input if p1 == [0, 1, 2] else input.permute(1, 0, 2)
    w = weight if p2 == [0, 1, 2] else weight.transpose(1, 2)
    return x, w


def transpose_batchmatmul_reference(input, weight, *, bias=None, scale=None, perm_x1=None,
                                    perm_x2=None, perm_y=None, batch_split_factor=1):
    p1, p2, b, m, k, n, f = check_transpose_batchmatmul(
        input, weight, bias, scale, perm_x1, perm_x2, perm_y, batch_split_factor)
    x, w = _batched_operands(input, weight, p1, p2)
    if scale is not None:
        # fp32 accumulator * scale, rounded half to even and saturated: (M, 1, B * N) int8
        acc = torch.bmm(x.float(), w.float()) * unpack_quant_scale(scale).reshape(b, 1, n)
        q = quantize_round(acc, -128.0, 127.0, torch.int8)
        return q.permute(1, 0, 2).reshape(m, 1, b * n).contiguous()
    out = torch.bmm(x, w).permute(1, 0, 2)  # (M, B, N)
    if f > 1:
        out = out.reshape(m, f, b * n // f).transpose(0, 1)
    return out.contiguous()


def transpose_batchmatmul_fake(input, weight, *, bias=None, scale=None, perm_x1=None,
                               perm_x2=None, perm_y=None, batch_split_factor=1):
    _, _, b, m, _, n, f = check_transpose_batchmatmul(
        input, weight, bias, scale, perm_x1, perm_x2, perm_y, batch_split_factor)
    if scale is not None:
        return input.new_empty((m, 1, b * n), dtype=torch.int8)
    shape = (m, b, n) if f == 1 else (f, m, b * n // f)
    return input.new_empty(shape)


npu_transpose_batchmatmul = define_op(
    "npu_transpose_batchmatmul(Tensor input, Tensor weight, *, Tensor? bias=None, "
    "Tensor? scale=None, int[]? perm_x1=None, int[]? perm_x2=None, int[]? perm_y=None, "
    "int? batch_split_factor=1) -> Tensor",
    reference=transpose_batchmatmul_reference, fake=transpose_batchmatmul_fake,
    native=("cpu",),
    doc="Batched matmul with input / weight / output permutations, result (M, B, N).",
)


# ---- npu_quant_matmul --------------------------------------------------------------------

INT8, INT32, FLOAT16, BFLOAT16 = 1, 3, 5, 15
_OUT_DTYPES = {INT8: torch.int8, INT32: torch.int32, FLOAT16: torch.float16,
               BFLOAT16: torch.bfloat16}
_FLOAT_BIAS = (torch.float16, torch.bfloat16, torch.float32)


def check_quant_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype,
                       x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes, y_scale,
                       op="npu_quant_matmul"):
    """Returns the output dtype code. Everything outside the subset is NotImplementedError."""
    for name, v in (("x1_dtype", x1_dtype), ("x2_dtype", x2_dtype),
                    ("pertoken_scale_dtype", pertoken_scale_dtype),
                    ("scale_dtype", scale_dtype), ("group_sizes", group_sizes),
                    ("y_scale", y_scale)):
        if v is not None:
            unsupported(op, name, "is outside the supported subset (must be None)")
    if x1.dtype != torch.int8:
        unsupported(op, "x1", f"must be int8 (the supported subset), got {x1.dtype}")
    if x2.dtype != torch.int8:
        unsupported(op, "x2", f"must be int8 (the supported subset), got {x2.dtype}")
    code = dtype_arg(op, "output_dtype", output_dtype, tuple(_OUT_DTYPES), INT8)
    check(x1.dim() >= 2, op, "x1", f"must have at least 2 dims (m, k), got {x1.dim()}")
    check(x2.dim() >= 2, op, "x2", f"must have at least 2 dims (k, n), got {x2.dim()}")
    m, k = x1.shape[-2], x1.shape[-1]
    k2, n = x2.shape[-2], x2.shape[-1]
    check(k == k2, op, "x2", f"must have k = {k} rows (x1 is (m, k)), got {k2}")
    try:
        torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    except RuntimeError:
        fail_shape = f"{list(x1.shape[:-2])} vs {list(x2.shape[:-2])}"
        check(False, op, "x2", f"batch dims must broadcast with x1's: {fail_shape}")
    check(scale.dim() == 1 and scale.shape[0] in (1, n), op, "scale",
          f"must have shape (1,) or (n,) = ({n},), got {list(scale.shape)}")
    check(scale.dtype in (torch.float32, torch.bfloat16), op, "scale",
          f"must be float32 or bfloat16, got {scale.dtype}")
    if pertoken_scale is not None:
        check(pertoken_scale.dtype == torch.float32, op, "pertoken_scale",
              f"must be float32, got {pertoken_scale.dtype}")
        check(pertoken_scale.dim() == 1 and pertoken_scale.shape[0] == m, op,
              "pertoken_scale", f"must have shape (m,) = ({m},), got "
              f"{list(pertoken_scale.shape)}")
        if code not in (FLOAT16, BFLOAT16):
            unsupported(op, "pertoken_scale", "requires output_dtype float16 or bfloat16")
    if offset is not None:
        if code != INT8:
            unsupported(op, "offset", "requires output_dtype int8")
        check(offset.dtype == torch.float32 and offset.dim() == 1
              and offset.shape[0] in (1, n), op, "offset",
              f"must be float32 of shape (1,) or ({n},), got {offset.dtype} "
              f"{list(offset.shape)}")
    if bias is not None:
        check(bias.dim() == 1 and bias.shape[0] == n, op, "bias",
              f"must have shape (n,) = ({n},), got {list(bias.shape)}")
        if bias.dtype in _FLOAT_BIAS:
            if pertoken_scale is None:
                unsupported(op, "bias", "of a float dtype requires pertoken_scale")
        else:
            check(bias.dtype == torch.int32, op, "bias",
                  f"must be int32, or float16 / bfloat16 / float32 with pertoken_scale, got "
                  f"{bias.dtype}")
    return code


# ---- int4 weights (int32-packed: 8 values per int32, element 0 in the lowest nibble)
#
# A4W4: x1 int32 (m, k/8) and x2 int32, either (k, n/8) packed along n, or the "continuous
# x2" layout: the transpose view (k/8, n) of an (n, k/8) tensor packed along k (which of
# the two is told by shape, as torch_npu's Meta does: x2.size(-2) == x1.size(-1) is the
# transposed one). The product is the int8 one on the unpacked values; the epilogue is
# the int8 path's (without pertoken_scale the output must be float16, as on the NPU).
# A8W4 (per-group, K-G): x1 int8 (m, k), x2 int32 (k, n/8), scale (k/256, n) per group of
# 256 rows of k (int64 as npu_trans_quant_param packs it, or float32), pertoken_scale
# (m, 1), offset (n,) float32 (the y offset), float16 / bfloat16 output. The NPU multiplies
# x1 - 8 (it splits x1 into a signed high nibble and its low nibble minus 8), which the
# documented y offset, 8 * sum_k x2 * scale, cancels:
#   out = (sum_g scale[g] * ((x1[:, g] - 8) @ x2[g, :]) + offset) * pertoken_scale
# summed in fp32 over the groups in order, each group's product exact in int32 (computed
# as x1 @ x2 - 8 * the column sums of x2).

A8W4_GROUP = 256


def _is_a4w4(x1, x2):
    return x1.dtype == torch.int32 and x2.dtype == torch.int32


def _is_a8w4(x1, x2):
    return x1.dtype == torch.int8 and x2.dtype == torch.int32


def _a4w4_shapes(x1, x2, op="npu_quant_matmul"):
    """(k, n, transposed x2) of an A4W4 call."""
    check(x1.dim() >= 2, op, "x1", f"must have at least 2 dims (m, k/8), got {x1.dim()}")
    check(x2.dim() == 2, op, "x2", f"must be 2-D for int4 (int32-packed) weights, got {x2.dim()} dims")
    k = x1.shape[-1] * 8
    if x2.shape[0] == x1.shape[-1]:
        return k, x2.shape[1], True
    check(x2.shape[0] == k, op, "x2", f"must be (k, n/8) = ({k}, n/8) packed along n, or the "
          f"transpose of an (n, k/8) = (n, {k // 8}) tensor packed along k, got {list(x2.shape)}")
    return k, x2.shape[1] * 8, False


def _a4w4_unpack(x1, x2):
    _, _, transposed = _a4w4_shapes(x1, x2)
    w = unpack_int4(x2.t()).t() if transposed else unpack_int4(x2)
    return unpack_int4(x1), w


def _check_a4w4(x1, x2, pertoken_scale, output_dtype):
    op = "npu_quant_matmul"
    _a4w4_shapes(x1, x2)
    code = dtype_arg(op, "output_dtype", output_dtype, tuple(_OUT_DTYPES), INT8)
    if pertoken_scale is None:
        check(code == FLOAT16, op, "output_dtype",
              f"must be float16 for int4 x1 and x2 without pertoken_scale, got {output_dtype}")


def check_a8w4(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, group_sizes):
    """Returns (output code, k, n, groups)."""
    op = "npu_quant_matmul"
    check(x1.dim() == 2, op, "x1", f"must be 2-D (m, k) with int4 weights, got {x1.dim()} dims")
    check(x2.dim() == 2, op, "x2", f"must be 2-D (k, n/8) int32 (int4 packed), got {x2.dim()} dims")
    m, k = x1.shape
    check(x2.shape[0] == k, op, "x2", f"must have k = {k} rows, got {list(x2.shape)}")
    n = x2.shape[1] * 8
    check(k % A8W4_GROUP == 0, op, "x1", f"k must be a multiple of {A8W4_GROUP} with int4 "
          f"weights (one scale per {A8W4_GROUP} rows of k), got {k}")
    groups = k // A8W4_GROUP
    if group_sizes is not None:
        check(len(group_sizes) == 3 and group_sizes[2] == A8W4_GROUP, op, "group_sizes",
              f"must be [0, 0, {A8W4_GROUP}] (or None) with int4 weights, got {list(group_sizes)}")
    check(scale.dtype in (torch.int64, torch.float32) and list(scale.shape) == [groups, n], op,
          "scale", f"must be int64 (npu_trans_quant_param's packed value) or float32 of shape "
          f"(k/{A8W4_GROUP}, n) = ({groups}, {n}), got {scale.dtype} {list(scale.shape)}")
    check(pertoken_scale is not None, op, "pertoken_scale", "is required with int4 weights")
    check(pertoken_scale.dtype == torch.float32 and pertoken_scale.dim() == 2
          and list(pertoken_scale.shape) == [m, 1], op, "pertoken_scale",
          f"must be float32 of shape (m, 1) = ({m}, 1) with int4 weights, got "
          f"{pertoken_scale.dtype} {list(pertoken_scale.shape)}")
    if offset is not None:
        check(offset.dtype == torch.float32 and list(offset.shape) == [n], op, "offset",
              f"must be float32 of shape (n,) = ({n},), got {offset.dtype} {list(offset.shape)}")
    if bias is not None:
        unsupported(op, "bias", "is not supported with int8 x1 and int4 weights (use offset)")
    code = dtype_arg(op, "output_dtype", output_dtype, (FLOAT16, BFLOAT16), None)
    return code, k, n, groups


def _a8w4_reference(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, group_sizes):
    code, k, n, groups = check_a8w4(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                                    group_sizes)
    w = unpack_int4(x2)
    s = unpack_quant_scale(scale)
    out = torch.zeros(x1.shape[0], n)
    for g in range(groups):
        rows = slice(g * A8W4_GROUP, (g + 1) * A8W4_GROUP)
        acc = (torch.matmul(x1[:, rows].double(), w[rows].double())
               - 8 * w[rows].double().sum(0)).to(torch.int32)
        out = out + acc.float() * s[g]
    if offset is not None:
        out = out + offset
    return (out * pertoken_scale).to(_OUT_DTYPES[code])


def quant_matmul_reference(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None,
                           output_dtype=None, x1_dtype=None, x2_dtype=None,
                           pertoken_scale_dtype=None, scale_dtype=None, group_sizes=None,
                           y_scale=None):
    if _is_a8w4(x1, x2) and x1_dtype is None and x2_dtype is None:
        return _a8w4_reference(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                               group_sizes)
    if _is_a4w4(x1, x2):
        _check_a4w4(x1, x2, pertoken_scale, output_dtype)
        x1, x2 = _a4w4_unpack(x1, x2)
    code = check_quant_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                              x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype,
                              group_sizes, y_scale)
    # fp64 products of int8 values are exact for any realistic k (< 2**38)
    acc = torch.matmul(x1.double(), x2.double()).to(torch.int32)
    if bias is not None and bias.dtype == torch.int32:
        acc = acc + bias
    if code == INT32:
        return acc
    out = acc.float() * scale.float()
    if pertoken_scale is not None:
        out = out * pertoken_scale[:, None]
        if bias is not None and bias.dtype != torch.int32:
            out = out + bias.float()
    if code == INT8:
        if offset is not None:
            out = out + offset
        return quantize_round(out, -128.0, 127.0, torch.int8)
    return out.to(_OUT_DTYPES[code])


def quant_matmul_fake(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None,
                      output_dtype=None, x1_dtype=None, x2_dtype=None,
                      pertoken_scale_dtype=None, scale_dtype=None, group_sizes=None,
                      y_scale=None):
    if _is_a8w4(x1, x2) and x1_dtype is None and x2_dtype is None:
        code, _, n, _ = check_a8w4(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                                   group_sizes)
        return x1.new_empty((x1.shape[0], n), dtype=_OUT_DTYPES[code])
    if _is_a4w4(x1, x2):
        _check_a4w4(x1, x2, pertoken_scale, output_dtype)
        k, n, _ = _a4w4_shapes(x1, x2)
        # the int8 rules on operands of the unpacked shapes
        x1 = x1.new_empty((*x1.shape[:-1], k), dtype=torch.int8)
        x2 = x2.new_empty((k, n), dtype=torch.int8)
    code = check_quant_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                              x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype,
                              group_sizes, y_scale)
    batch = torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    return x1.new_empty((*batch, x1.shape[-2], x2.shape[-1]), dtype=_OUT_DTYPES[code])


npu_quant_matmul = define_op(
    "npu_quant_matmul(Tensor x1, Tensor x2, Tensor scale, *, Tensor? offset=None, "
    "Tensor? pertoken_scale=None, Tensor? bias=None, int? output_dtype=None, "
    "int? x1_dtype=None, int? x2_dtype=None, int? pertoken_scale_dtype=None, "
    "int? scale_dtype=None, int[]? group_sizes=None, Tensor? y_scale=None) -> Tensor",
    reference=quant_matmul_reference, fake=quant_matmul_fake, native=("cpu",),
    doc="int8 x int8, int4 x int4 and int8 x int4 (per-group) matmul with per-channel / "
        "per-token dequantisation.",
)


# ---- prepacked weights (op_sdk's own) -------------------------------------------------------
#
# op_sdk's weight prepacking (compiler/prepack.py, on with experimental_config.frozen_parameter
# on CPU) replaces npu_quant_matmul(x1, W, ...) on a frozen 2-D weight W with
# quant_matmul_packed(x1, W, pack_quant_weight(W), ...), the weight packed once at compile
# time. The packed layout (kernels/quant_matmul_packed.h): 16-column blocks, each kpad / 4
# rows of 64 bytes holding 4 consecutive k-values of its 16 columns (the operand order of
# AVX-512 VNNI and AMX), k padded to a multiple of 64 with zeros; then the int32 column
# sums (16 per block, zero past n), as bytes; then the address of x2's first element
# (int64): quant_matmul_packed uses the packed copy only while its x2 is that same weight
# (a parameter replaced after the compile is multiplied as it lies; one changed in place
# is not seen, the frozen_parameter contract). On the NPU the same idea is the
# FRACTAL_NZ weight format that TorchAir's frozen_parameter lets GE convert weights to.


def _packed_dims(k: int, n: int) -> tuple[int, int]:
    """(k padded to whole 64-byte rows, number of 16-column blocks)."""
    return (k + 63) // 64 * 64, (n + 15) // 16


def packed_weight_bytes(k: int, n: int) -> int:
    kpad, blocks = _packed_dims(k, n)
    return blocks * 16 * kpad + blocks * 16 * 4 + 8


def _check_pack_x2(op, x2):
    check(x2.dtype == torch.int8, op, "x2", f"must be int8, got {x2.dtype}")
    check(x2.dim() == 2, op, "x2", f"must be 2-D (k, n), got {x2.dim()} dims")


def pack_quant_weight_reference(x2):
    _check_pack_x2("pack_quant_weight", x2)
    k, n = x2.shape
    kpad, blocks = _packed_dims(k, n)
    w = x2.new_zeros((blocks * 16, kpad))
    w[:n, :k] = x2.t()
    tiles = w.view(blocks, 16, kpad // 4, 4).permute(0, 2, 1, 3).reshape(-1)
    sums = torch.zeros(blocks * 16, dtype=torch.int64, device=x2.device)
    sums[:n] = x2.sum(0, dtype=torch.int64)
    # the low 32 bits (int32 wrap-around: int64 -> int32 conversion truncates), as bytes
    source = torch.tensor([x2.data_ptr()], dtype=torch.int64, device=x2.device)
    return torch.cat([tiles, sums.to(torch.int32).view(torch.int8), source.view(torch.int8)])


def pack_quant_weight_fake(x2):
    _check_pack_x2("pack_quant_weight", x2)
    return x2.new_empty((packed_weight_bytes(x2.shape[0], x2.shape[1]),))


pack_quant_weight = define_op(
    "pack_quant_weight(Tensor x2) -> Tensor",
    reference=pack_quant_weight_reference, fake=pack_quant_weight_fake, native=("cpu",),
    namespace="op_sdk",
    doc="An int8 (k, n) weight in the layout of quant_matmul_packed (1-D int8 bytes).",
)


def _check_packed(x1, x2, packed, scale, offset, pertoken_scale, bias, output_dtype):
    op = "quant_matmul_packed"
    _check_pack_x2(op, x2)
    code = check_quant_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                              None, None, None, None, None, None, op=op)
    want = packed_weight_bytes(x2.shape[0], x2.shape[1])
    check(packed.dtype == torch.int8 and packed.dim() == 1 and packed.shape[0] == want
          and packed.is_contiguous(), op, "packed",
          f"must be pack_quant_weight(x2): contiguous int8 of {want} bytes, got "
          f"{packed.dtype} {list(packed.shape)}")
    return code


def quant_matmul_packed_reference(x1, x2, packed, scale, *, offset=None, pertoken_scale=None,
                                  bias=None, output_dtype=None):
    # the packed copy is x2 rearranged (or stale, when x2 is no longer its source: then x2
    # is what counts): the result is npu_quant_matmul's
    _check_packed(x1, x2, packed, scale, offset, pertoken_scale, bias, output_dtype)
    return quant_matmul_reference(x1, x2, scale, offset=offset, pertoken_scale=pertoken_scale,
                                  bias=bias, output_dtype=output_dtype)


def quant_matmul_packed_fake(x1, x2, packed, scale, *, offset=None, pertoken_scale=None,
                             bias=None, output_dtype=None):
    code = _check_packed(x1, x2, packed, scale, offset, pertoken_scale, bias, output_dtype)
    return x1.new_empty((*x1.shape[:-1], x2.shape[-1]), dtype=_OUT_DTYPES[code])


quant_matmul_packed = define_op(
    "quant_matmul_packed(Tensor x1, Tensor x2, Tensor packed, Tensor scale, *, "
    "Tensor? offset=None, Tensor? pertoken_scale=None, Tensor? bias=None, "
    "int? output_dtype=None) -> Tensor",
    reference=quant_matmul_packed_reference, fake=quant_matmul_packed_fake, native=("cpu",),
    namespace="op_sdk",
    doc="npu_quant_matmul(x1, x2, scale, ...) with x2 (2-D) also given prepacked "
        "(packed = pack_quant_weight(x2)); the CPU kernel reads the packed copy.",
)
