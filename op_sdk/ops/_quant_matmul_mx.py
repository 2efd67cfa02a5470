"""npu_quant_matmul's MX form (microscaling; op_sdk/ops/quant_matmul.py): float8 or
float4_e2m1 inputs with float8_e8m0 scales per 32 values of k, its rules and reference."""

from __future__ import annotations

import torch

from op_sdk.ops._common import (
    INT8,
    check,
    dtype_arg,
    dtype_value_str,
    unsupported,
)
from op_sdk.ops._formats import (
    FLOAT4_E2M1,
    fp4_codes_to_float,
    unpack_nibbles,
)
from op_sdk.ops._quant_matmul_common import (
    _batch_dims,
    _broadcasts_to,
    _check_bias_shape,
    _group_sizes,
    _matmul_shapes,
    _none_outside_subset,
)
from op_sdk.ops._quant_matmul_float8 import _FLOAT8_IN, _FLOAT8_OUT
from op_sdk.ops._quant_matmul_per_block import _block_sum


# ---- MX scales (microscaling) ---------------------------------------------------------------
#
# aclnnQuantMatmulV5's "MX全量化" row for float8 inputs (same document and commit as the
# per-block forms): x1 / x2 float8_e4m3fn / float8_e5m2 (either with either), pertoken_scale
# (x1Scale) (..., m, ceil(k / 64), 2) and scale (x2Scale) (..., ceil(k / 64), n, 2), both
# float8_e8m0 held in 1-byte tensors with pertoken_scale_dtype = scale_dtype =
# torch_npu.float8_e8m0fnu (293), as torch_npu 2.13.0's Meta reads them: one scale per 32
# values of k, block j at [..., j // 2, j % 2]; group_sizes [1, 1, 32] (0s inferred as CANN
# does, k / (2 * ceil(k / 64)) for gsK); an optional float32 bias (n,) or (batch, 1, n);
# output float16 / bfloat16 / float32. An E8M0 code e is 2^(e - 127), 255 is NaN. The formula
# is the per-block one with gsK = 32 (the bias last). Outside the subset: float4 inputs
# (x1_dtype / x2_dtype float4_e2m1), the A8W4 MX row, HiFloat8 inputs.

E8M0 = 293
MX_GROUP = 32


def e8m0_to_float(codes: torch.Tensor) -> torch.Tensor:
    """E8M0 codes (a 1-byte tensor) -> float32: 2^(e - 127), NaN for 255 (exact: 2^-127 is a
    float32 subnormal)."""
    e = codes.view(torch.uint8).to(torch.int32)
    v = torch.ldexp(torch.ones_like(e, dtype=torch.float64), (e - 127).double()).float()
    return torch.where(e == 255, torch.full_like(v, float("nan")), v)


def _is_mx(scale_dtype, pertoken_scale_dtype):
    return scale_dtype is not None or pertoken_scale_dtype is not None


def check_mx(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype, x2_dtype,
             pertoken_scale_dtype, scale_dtype, group_sizes, y_scale, op="npu_quant_matmul"):
    """Returns (output code, batch dims, m, n) of the MX form."""
    _none_outside_subset(op, offset=offset, y_scale=y_scale)
    for arg, v in (("scale_dtype", scale_dtype), ("pertoken_scale_dtype", pertoken_scale_dtype)):
        check(v == E8M0, op, arg,
              f"must be torch_npu.float8_e8m0fnu ({E8M0}) with MX scales (scale_dtype and "
              f"pertoken_scale_dtype together), got {dtype_value_str(v)}")
    if _is_mx_fp4(x1, x2, x1_dtype, x2_dtype):
        m, k, n, batch, _, _ = _mx_fp4_shapes(op, x1, x2)
    else:
        if x1_dtype is not None or x2_dtype is not None or x1.dtype not in _FLOAT8_IN \
                or x2.dtype not in _FLOAT8_IN:
            unsupported(op, "x1" if x1_dtype is not None or x1.dtype not in _FLOAT8_IN else "x2",
                        f"must be float8_e4m3fn or float8_e5m2, or both float4_e2m1 "
                        f"(x1_dtype = x2_dtype = {FLOAT4_E2M1}), with MX scales (the supported "
                        f"subset), got {x1.dtype} / {x2.dtype} (x1_dtype "
                        f"{dtype_value_str(x1_dtype)}, x2_dtype {dtype_value_str(x2_dtype)})")
        m, n, batch = _matmul_shapes(op, x1, x2)
        k = x1.shape[-1]
    check(pertoken_scale is not None, op, "pertoken_scale", "is required with MX scales")
    kb = -(-k // 64)
    for name, t, want in (("pertoken_scale", pertoken_scale, [m, kb, 2]),
                          ("scale", scale, [kb, n, 2])):
        check(t.element_size() == 1 and not t.is_floating_point(), op, name,
              f"must be a 1-byte integer tensor holding float8_e8m0 codes (uint8 / int8) with MX "
              f"scales, got {t.dtype}")
        check(t.dim() >= 3 and list(t.shape[-3:]) == want
              and _broadcasts_to(t.shape[:-3], batch), op, name, f"must have shape (..., {', '.join(map(str, want))}) with MX scales (one "  # noqa: E501
              f"per 32 values of k, in pairs), its batch dims broadcasting to {list(batch)}, got "
              f"{list(t.shape)}")
    given, gs = _group_sizes(op, group_sizes, (m, n, k), (m, n, 2 * kb))
    check(gs == [1, 1, MX_GROUP], op, "group_sizes",
          f"must be [1, 1, {MX_GROUP}] with MX scales (a 0 is the dim over the scale's dim), got "
          f"{given} ([gsM, gsN, gsK] = {gs})")
    if bias is not None:
        check(bias.dtype == torch.float32, op, "bias",
              f"must be float32 with MX scales, got {bias.dtype}")
        _check_bias_shape(op, x1, x2, bias, n)
    code = dtype_arg(op, "output_dtype", output_dtype, tuple(_FLOAT8_OUT), INT8)
    return code, tuple(batch), m, n


def _is_transposed(t):
    """torch_npu's is_transpose_last_two_dims: the last two dims a transposed contiguous
    tensor's (batch dims contiguous outside them), not both of size 1."""
    if t.dim() < 2 or t.dim() > 6:
        return False
    d1, d2 = t.dim() - 1, t.dim() - 2
    if t.stride(d2) != 1 or t.stride(d1) != t.size(d2):
        return False
    size = t.size(d1) * t.size(d2)
    for b in range(t.dim() - 3, -1, -1):
        if t.stride(b) != size:
            return False
        size *= t.size(b)
    return not (t.size(d1) == 1 and t.size(d2) == 1)


def _is_mx_fp4(x1, x2, x1_dtype, x2_dtype):
    return x1_dtype == FLOAT4_E2M1 and x2_dtype == FLOAT4_E2M1


def _mx_fp4_shapes(op, x1, x2):
    """float4_e2m1 x1 / x2, two values per byte, element 2i in the low nibble (as torch_npu's
    float4_e2m1fn_x2): x1 either (..., m, k / 2) packed along k or the transpose view
    (..., m / 2, k) of a (..., k, m / 2) tensor packed along m; x2 either (..., k, n / 2)
    packed along n or the transpose view (..., k / 2, n) of an (..., n, k / 2) tensor packed
    along k; transposition told apart by strides as torch_npu's Meta does. Returns (m, k, n,
    batch, x1 transposed, x2 transposed)."""
    for name, x in (("x1", x1), ("x2", x2)):
        check(x.element_size() == 1 and not x.is_floating_point() and x.dim() >= 2, op, name,
              f"must be a 1-byte integer tensor of at least 2 dims holding float4_e2m1 pairs "
              f"(uint8 / int8), got {x.dtype} of {x.dim()} dims")
    t1 = _is_transposed(x1)
    m, k = (2 * x1.shape[-2], x1.shape[-1]) if t1 else (x1.shape[-2], 2 * x1.shape[-1])
    check(k > 2, op, "x1", f"must have k > 2 with float4_e2m1 inputs (aclnnQuantMatmulV5), got "
          f"k = {k}")
    t2 = _is_transposed(x2)
    k2, n = (2 * x2.shape[-2], x2.shape[-1]) if t2 else (x2.shape[-2], 2 * x2.shape[-1])
    check(k2 == k, op, "x2", f"must hold k = {k} values along k (as x1 {list(x1.shape)}"
          f"{', transposed' if t1 else ''}), got {list(x2.shape)} "
          f"({'transposed, ' if t2 else ''}k = {k2})")
    return m, k, n, _batch_dims(op, x1, x2), t1, t2


def _fp4_values(x, transposed):
    """float4_e2m1 pairs -> float64: (..., r, c) packed along c -> (..., r, 2c), or the
    transpose view of a tensor packed along its own last dim (..., r, c) -> (..., 2r, c)."""
    if transposed:
        return _fp4_values(x.transpose(-1, -2), False).transpose(-1, -2)
    return fp4_codes_to_float(unpack_nibbles(x.view(torch.uint8)), FLOAT4_E2M1).double()


def _mx_reference(x1, x2, scale, pertoken_scale, bias, x1_dtype, x2_dtype, code):
    if _is_mx_fp4(x1, x2, x1_dtype, x2_dtype):
        t1, t2 = _mx_fp4_shapes("npu_quant_matmul", x1, x2)[4:]
        a, b = _fp4_values(x1, t1), _fp4_values(x2, t2)
    else:
        a, b = x1.double(), x2.double()
    kb = -(-a.shape[-1] // MX_GROUP)
    xs = e8m0_to_float(pertoken_scale).flatten(-2)[..., :kb]                # (..., m, blocks)
    ws = e8m0_to_float(scale).transpose(-2, -1).flatten(-3, -2)[..., :kb, :]  # (..., blocks, n)
    return _block_sum(a, b, xs, ws, MX_GROUP, bias, code)
