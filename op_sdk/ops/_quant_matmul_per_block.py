"""npu_quant_matmul's per-block forms (op_sdk/ops/quant_matmul.py): G-B and B-B scales over
int8, float8 or HiFloat8 inputs, their rules and reference."""

from __future__ import annotations

import torch

from op_sdk.ops._common import (
    BFLOAT16,
    INT8,
    check,
    dtype_arg,
)
from op_sdk.ops._quant_matmul_common import (
    _broadcasts_to,
    _group_sizes,
    _matmul_shapes,
    _none_outside_subset,
)
from op_sdk.ops._quant_matmul_float8 import _FLOAT8_OUT, _check_float8_inputs, _float8_values


# ---- per-block scales: G-B and B-B --------------------------------------------------------
#
# CANN's aclnnQuantMatmulV5 (hicann/ops-nn @ e5c3fa9327ea95ba26d06227e746923580d10921,
# matmul/quant_batch_matmul_v4/docs/aclnnQuantMatmulV5.md, "G-B量化 && B-B量化场景约束"):
# x1 (m, k) and x2 (k, n) float8_e4m3fn / float8_e5m2 (either with either) or both HiFloat8,
# or both int8; pertoken_scale (x1Scale) float32 (ceil(m / gsM), ceil(k / gsK)), scale
# (x2Scale) float32 (ceil(k / gsK), ceil(n / gsN)) (leading batch dims broadcasting with the
# output's); group_sizes [gsM, gsN, gsK] = [1, 128, 128] (G-B) or [128, 128, 128] (B-B; not
# for int8), a 0 (or group_sizes None: all three) inferred as the dim over the scale's dim
# when it divides, as CANN infers it; int8: G-B only, an optional float32 bias (n,), output
# bfloat16 (the table's only row; the formula section names float16 too); float8 / HiFloat8:
# no bias, output float16 / bfloat16 / float32. torch_npu 2.13.0's Meta answers these calls
# (quant_matmul_group_sizes_check). The doc's formula
#   out[m, n] = sum_j (x1[m, Kj] @ x2[Kj, n]) * (x1Scale[m / gsM, j] * x2Scale[j, n / gsN])
#               + bias[n],   Kj = [j * gsK, min(k, (j + 1) * gsK))
# in CANN's per-block golden's order (matmul/quant_batch_matmul_v3/tests/assets/
# qbmmv3_kernel_golden.py at that commit): each block's product, then times the product of
# its two scales, summed over the blocks in order. op_sdk takes each block's product exactly
# (fp64 of the decoded values, exact for int8 and e4m3 and for e5m2 / HiFloat8 unless one
# block spans more than 2^53 in magnitude) and rounds it once to fp32; the scales' product,
# the terms and their running sum (from +0.0) are fp32; then the bias (fp32) and one
# rounding to the output.

PER_BLOCK_FORMS = {(1, 128, 128): "G-B", (128, 128, 128): "B-B"}


def _is_per_block(x1, x2, scale, pertoken_scale):
    return (x1.dtype != torch.int32 and x2.dtype != torch.int32 and scale.dim() >= 2
            and pertoken_scale is not None and pertoken_scale.dim() >= 2)


def check_per_block(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype,
                    x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes, y_scale,
                    op="npu_quant_matmul"):
    """Returns (output code, (gsM, gsN, gsK), batch dims, m, n) of the G-B / B-B forms."""
    _none_outside_subset(op, offset=offset, pertoken_scale_dtype=pertoken_scale_dtype,
                         scale_dtype=scale_dtype, y_scale=y_scale)
    int8 = x1.dtype == torch.int8 and x2.dtype == torch.int8 and x1_dtype is None \
        and x2_dtype is None
    if not int8:
        _check_float8_inputs(op, x1, x2, x1_dtype, x2_dtype)
    m, n, batch = _matmul_shapes(op, x1, x2)
    k = x1.shape[-1]
    check(pertoken_scale.dtype == torch.float32, op, "pertoken_scale",
          f"must be float32 with per-block scales, got {pertoken_scale.dtype}")
    check(scale.dtype == torch.float32, op, "scale",
          f"must be float32 with per-block scales, got {scale.dtype}")
    sm, sk = pertoken_scale.shape[-2:]
    sk2, sn = scale.shape[-2:]
    check(sk == sk2, op, "pertoken_scale", f"must have as many k groups (its last dim) as scale "
          f"(its dim -2, {sk2}), got shape {list(pertoken_scale.shape)}")
    given, gs = _group_sizes(op, group_sizes, (m, n, k), (sm, sn, sk))
    forms = " or ".join(f"{list(g)} ({name})" for g, name in PER_BLOCK_FORMS.items())
    check(tuple(gs) in PER_BLOCK_FORMS, op, "group_sizes",
          f"must be {forms} with per-block scales (a 0 is the dim over the scale's dim), got "
          f"{given} ([gsM, gsN, gsK] = {gs})")
    gm, gn, gk = gs
    check(not int8 or gm == 1, op, "group_sizes",
          f"must be [1, 128, 128] (G-B) with int8 x1 and x2 (B-B takes float8 / hifloat8 "
          f"inputs), got {given}")
    want_pt = [-(-m // gm), -(-k // gk)]
    want_s = [-(-k // gk), -(-n // gn)]
    check(list(pertoken_scale.shape[-2:]) == want_pt, op, "pertoken_scale",
          f"must have shape (..., ceil(m / {gm}), ceil(k / {gk})) = (..., {want_pt[0]}, "
          f"{want_pt[1]}), got {list(pertoken_scale.shape)}")
    check(list(scale.shape[-2:]) == want_s, op, "scale",
          f"must have shape (..., ceil(k / {gk}), ceil(n / {gn})) = (..., {want_s[0]}, "
          f"{want_s[1]}), got {list(scale.shape)}")
    for name, t in (("pertoken_scale", pertoken_scale), ("scale", scale)):
        check(_broadcasts_to(t.shape[:-2], batch), op, name, f"batch dims must broadcast to the "
              f"output's {list(batch)}, got {list(t.shape[:-2])}")
    if int8:
        if bias is not None:
            check(bias.dtype == torch.float32 and list(bias.shape) == [n], op, "bias",
                  f"must be float32 of shape (n,) = ({n},) with int8 x1 and x2 and per-block "
                  f"scales, got {bias.dtype} {list(bias.shape)}")
        code = dtype_arg(op, "output_dtype", output_dtype, (BFLOAT16,), INT8)
    else:
        check(bias is None, op, "bias", "must be None with float8 / hifloat8 inputs and "
              "per-block scales")
        code = dtype_arg(op, "output_dtype", output_dtype, tuple(_FLOAT8_OUT), INT8)
    return code, (gm, gn, gk), tuple(batch), m, n


def _block_sum(a, b, xs, ws, gk, bias, code):
    """sum_j fp32(a[..., Kj] @ b[..., Kj, :]) * (xs[..., j] * ws[..., j, :]) + bias: the
    per-block and MX formula on the decoded inputs (fp64) and per-block scales xs (..., m,
    blocks), ws (..., blocks, n) in fp32."""
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    out = torch.zeros(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2], xs.shape[:-2],
                                             ws.shape[:-2]) + (m, n))
    for j in range(-(-k // gk)):
        rows = slice(j * gk, min(k, (j + 1) * gk))
        acc = torch.matmul(a[..., rows], b[..., rows, :]).float()
        out = out + acc * (xs[..., j:j + 1] * ws[..., j:j + 1, :])
    if bias is not None:
        out = out + bias
    return out.to(_FLOAT8_OUT[code])


def _per_block_reference(x1, x2, scale, pertoken_scale, bias, x1_dtype, x2_dtype, code, gs):
    gm, gn, gk = gs
    a, b = _float8_values(x1, x1_dtype), _float8_values(x2, x2_dtype)
    xs = pertoken_scale.repeat_interleave(gm, dim=-2)[..., :a.shape[-2], :]
    ws = scale.repeat_interleave(gn, dim=-1)[..., :b.shape[-1]]
    return _block_sum(a, b, xs, ws, gk, bias, code)
