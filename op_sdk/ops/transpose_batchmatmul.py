"""npu_transpose_batchmatmul: batched matmul with input / weight / output permutations.

Native CPU kernel: csrc/transpose_batchmatmul.cpp (over kernels/batch_matmul.h): a
register-blocked kernel for few rows, torch.bmm written straight into the permuted output
otherwise.
"""

from __future__ import annotations

import torch

from op_sdk.composite import Composite, same
from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import (
    FLOAT_DTYPES,
    bench_randn,
    check,
    check_dtype,
    quantize_round,
    unpack_quant_scale,
)


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


def transpose_batchmatmul_cuda(input, weight, *, bias=None, scale=None, perm_x1=None,
                               perm_x2=None, perm_y=None, batch_split_factor=1):
    """The CUDA kernel: torch's batched GEMM (cuBLAS) written straight into the (M, B, N)
    output's (B, M, N) view (no copy after it); with a batch_split_factor that divides B one
    batched product permuted into the output by one copy (the reference makes two); with
    ``scale`` the float32 product and the Triton epilogue (op_sdk/triton_kernels/bmm.py: times
    the scale, rounded, saturated, stored permuted in one pass). A factor that splits a batch
    runs the reference."""
    from op_sdk.triton_kernels import bmm

    p1, p2, b, m, k, n, f = check_transpose_batchmatmul(
        input, weight, bias, scale, perm_x1, perm_x2, perm_y, batch_split_factor)
    x, w = _batched_operands(input, weight, p1, p2)
    out = transpose_batchmatmul_fake(input, weight, bias=bias, scale=scale, perm_x1=perm_x1,
                                     perm_x2=perm_x2, perm_y=perm_y,
                                     batch_split_factor=batch_split_factor)
    if scale is not None:
        acc = torch.bmm(x.float(), w.float())
        return bmm.run_requant(acc, unpack_quant_scale(scale).float(), out)
    if b % f:
        return transpose_batchmatmul_reference(
            input, weight, bias=bias, scale=scale, perm_x1=perm_x1, perm_x2=perm_x2,
            perm_y=perm_y, batch_split_factor=batch_split_factor)
    if f == 1:
        torch.bmm(x, w, out=out.permute(1, 0, 2))
        return out
    # split i of the output, (M, B / f, N), holds batches i * B / f ...: one batched product
    # over (f, B / f), permuted into the output by one copy
    per = b // f
    y = torch.matmul(x.reshape(f, per, m, k), w.reshape(f, per, k, n))
    return y.permute(0, 2, 1, 3).reshape(f, m, per * n)


# Decode / small-batch shapes of DeepSeek's MLA absorption: 32 heads of 128, N = 512. The
# composite is what a model writes without the operator: a bmm of the per-head query and
# a transpose to (tokens, heads, N).
_MLA_HEADS, _MLA_K, _MLA_N = 32, 128, 512


def _bench_inputs(t, k, dt):
    return (bench_randn(t, _MLA_HEADS, k, dtype=dt),
            bench_randn(_MLA_HEADS, k, _MLA_N, dtype=dt) / k ** 0.5), {"perm_x1": [1, 0, 2]}


def _composite(x, w, *, perm_x1):
    return torch.bmm(x.transpose(0, 1), w).transpose(0, 1).contiguous()


def _expand(t):
    return t.expand(t.shape)


def _view_expand(t):
    return t.expand(t.shape).view(t.shape)


def _view(t):
    return t.view(t.shape)


def _unfused_spelling(input, weight, perm_x1=None, *, x1_view=same, y_view=same):
    """What the fused operator replaces: bmm of input (permuted by perm_x1) and weight,
    then the (M, B, N) transpose. The steps: the no-op expand / view a 3-D matmul leaves
    on its input, and a no-op view of the bmm's result."""
    x1 = input if perm_x1 is None else input.permute(perm_x1)
    return y_view(torch.bmm(x1_view(x1), weight)).transpose(0, 1)


# the aclnn API the binding calls: its GetWorkspaceSize prototype, as CANN declares it
# scale may be null: "输入（可选）" (the API document's scale row); bias is reserved,
# "当前暂不支持", and the bindings pass null for it
prototypes.declare("aclnnTransposeBatchMatMul",
                   "const aclTensor* x1, const aclTensor* x2, const aclTensor* bias, "
                   "const aclTensor* scale, const aclIntArray* permX1, const aclIntArray* permX2, "
                   "const aclIntArray* permY, int8_t cubeMathType, const int32_t batchSplitFactor, "
                   "aclTensor* out",
                   prototypes.OPS_NN + "matmul/transpose_batch_mat_mul/op_api/aclnn_transpose_batch_mat_mul.h; "
                   "nullable: matmul/transpose_batch_mat_mul/docs/aclnnTransposeBatchMatMul.md",
                   nullable=("bias", "scale"), cann="8.5.0")


npu_transpose_batchmatmul = define_op(
    "npu_transpose_batchmatmul(Tensor input, Tensor weight, *, Tensor? bias=None, "
    "Tensor? scale=None, int[]? perm_x1=None, int[]? perm_x2=None, int[]? perm_y=None, "
    "int? batch_split_factor=1) -> Tensor",
    # bias is reserved by the API (null: the Meta function rejects any other); the
    # permutations the call leaves None are the reference's defaults; cubeMathType 0 is
    # KEEP_DTYPE: the product in the inputs' dtype, as the reference computes it.
    aclnn=AclnnBinding("aclnnTransposeBatchMatMul", outputs=("y",),
                       rename={"x1": "input", "x2": "weight"}, constants={"cubeMathType": "0"},
                       defaults={"perm_x1": (0, 1, 2), "perm_x2": (0, 1, 2),
                                 "perm_y": (1, 0, 2), "batch_split_factor": 1},
                       # the API takes quantisation parameters (int64 / uint64), which a
                       # float32 scale becomes through npu_trans_quant_param (pack_quant_scale)
                       tensor_requires={"scale": {"dtype": "int64"}}),
    reference=transpose_batchmatmul_reference, fake=transpose_batchmatmul_fake,
    native=("cpu",), kernels={"cuda": TritonKernel(transpose_batchmatmul_cuda)},
    doc="Batched matmul with input / weight / output permutations, result (M, B, N).",
    benchmarks=(Benchmark(_bench_inputs, _composite, "bmm + transpose + contiguous (eager)",
                          composite=_composite, n=_MLA_N,
                          shapes=tuple((t, _MLA_K) for t in (1, 4, 8, 16, 64))),),
    composite=Composite(_unfused_spelling, outputs=("y",),
                        spellings={"x1_view": {"": same, "expand": _expand,
                                               "view(expand)": _view_expand},
                                   "y_view": {"": same, "view": _view}}),
)
