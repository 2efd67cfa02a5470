"""npu_clipped_swiglu: GPT-OSS's clipped SwiGLU, ``min(A, limit) * sigmoid(alpha * min(A,
limit)) * (clamp(B, -limit, limit) + bias)`` (ops-nn ``activation/clipped_swiglu``,
aclnnClippedSwiglu; torch_npu.npu_clipped_swiglu). Scaffolded by ``op-sdk new-op --in-tree``.

Contract (ops-nn docs/aclnnClippedSwiglu.md, its A2 / A3 kernel op_kernel/clipped_swiglu.hpp
and tiling, op-plugin's document and Meta function):

* ``x`` float16, bfloat16 or float32 with 1 to 8 dims; ``dim`` in [-x.dim(), x.dim() - 1];
  x's size along ``dim`` even. x is seen as [pre, n], pre the product of the dims before
  ``dim``, n the product of the others (the kernel's tiling merges them so).
* ``interleaved`` True: A and B are the even and odd elements of each row of n (the
  kernel's gather / de-interleave over the merged row: adjacent pairs in memory order,
  which are pairs along ``dim`` only when it is the last dim); False: the first and second
  halves of the row, i.e. of x along ``dim``.
* In float32, each step rounded as the kernel's vector instructions: ``A = min(A, limit)``,
  ``B = clamp(B, -limit, limit) + bias``, ``y = B * (A / (1 + exp(A * -alpha)))``, one
  rounding to x's dtype. A NaN propagates (torch.clamp's rule; the kernel's Mins / Maxs on a
  NaN are not documented).
* ``limit`` > 0 (the document; Ascend 950's tiling checks it).
* ``group_index``: int64, 1-D with at most 8192 values, each >= 0, the row counts of the
  groups: only the first ``min(sum, pre)`` rows are computed. The NPU leaves the other rows
  of y unwritten (uninitialised memory; its tests zero them before comparing): here they are
  0. The A2 / A3 kernel sums the counts in float32 (inexact above 2^24); here the sum is
  exact.
* y: x's shape with ``dim`` halved, x's dtype, contiguous (op-plugin's Meta). Empty tensors
  give empty results. Inference only (no autograd, as torch_npu's).

Native CPU kernel: csrc/clipped_swiglu.cpp (kernels/swiglu.h); CUDA: Triton
(op_sdk/triton_kernels/swiglu.py).
"""

from __future__ import annotations

import math

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.ops import check
from op_sdk.ops._common import bench_randn
from op_sdk.ops.swiglu import halved_output, halved_shape
from op_sdk.triton_kernels import TritonKernel

OP = "npu_clipped_swiglu"
# the dtypes aclnnClippedSwiglu takes (its OpDef: op_host/clipped_swiglu_def.cpp)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_DIMS = 8
MAX_GROUPS = 8192


def check_clipped_swiglu(x, group_index, dim, limit):
    """The contract's rules on shapes, dtypes and attributes (the reference's, the fake's and
    the native launcher's); returns dim, wrapped."""
    check(x.dtype in DTYPES, OP, "x", "must have dtype float16, bfloat16 or float32, got "
          + str(x.dtype))
    check(1 <= x.dim() <= MAX_DIMS, OP, "x", f"must have 1 to {MAX_DIMS} dims, got {x.dim()}")
    check(-x.dim() <= dim < x.dim(), OP, "dim",
          f"must be in [{-x.dim()}, {x.dim() - 1}] for a {x.dim()}-dim 'x', got {dim}")
    dim = dim % x.dim()
    check(x.shape[dim] % 2 == 0, OP, "x",
          f"must have an even size along dim {dim} (split into A and B), got {x.shape[dim]}")
    check(limit > 0, OP, "limit", f"must be > 0, got {limit}")
    if group_index is not None:
        check(group_index.dtype == torch.int64 and group_index.dim() == 1
              and group_index.shape[0] <= MAX_GROUPS, OP, "group_index",
              f"must be a 1-D int64 tensor of at most {MAX_GROUPS} row counts, got "
              f"{list(group_index.shape)} {group_index.dtype}")
    return dim


def group_rows(group_index, pre: int) -> int:
    """The rows computed: the sum of group_index's counts (each >= 0: a data rule), at most
    ``pre``."""
    counts = group_index.to(torch.int64)
    check(bool((counts >= 0).all()), OP, "group_index",
          f"values must be row counts >= 0, got {counts.tolist()[:8]}")
    return min(int(counts.sum()), pre)


def clipped_glu(a, b, alpha, limit, bias):
    """The clipped SwiGLU of float32 lanes a, b in the kernel's steps: ``A = min(a, limit)``,
    ``B = clamp(b, -limit, limit) + bias``, ``B * (A / (exp(A * -alpha) + 1))`` (also
    npu_dequant_swiglu_quant's swiglu_mode 1 / 2; kernels/swiglu.inl ClippedGlu is the native
    twin)."""
    a = a.clamp(max=limit)
    b = b.clamp(-limit, limit) + bias
    return b * (a / (torch.exp(a * -alpha) + 1))


def clipped_swiglu_reference(x, *, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0,
                             interleaved=True):
    """The ground truth: the kernel's steps in float32 (module docstring), one rounding."""
    d = check_clipped_swiglu(x, group_index, dim, limit)
    pre, n = math.prod(x.shape[:d]), math.prod(x.shape[d:])
    v = x.float().contiguous().reshape(pre, n)
    a, b = (v[:, 0::2], v[:, 1::2]) if interleaved else (v[:, :n // 2], v[:, n // 2:])
    y = clipped_glu(a, b, alpha, limit, bias)
    if group_index is not None:
        y[group_rows(group_index, pre):] = 0
    return y.to(x.dtype).reshape(halved_shape(x, d))


def clipped_swiglu_fake(x, *, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0,
                        interleaved=True):
    """Output shape and dtype (FakeTensor / Meta), by the reference's rules."""
    return halved_output(x, check_clipped_swiglu(x, group_index, dim, limit))


def clipped_swiglu_cuda(x, *, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0,
                        interleaved=True):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/swiglu.py): every form; the group
    counts summed on the device."""
    from op_sdk.triton_kernels import swiglu

    d = check_clipped_swiglu(x, group_index, dim, limit)
    y = halved_output(x, d)
    pre = math.prod(x.shape[:d])
    rows = pre if group_index is None else group_rows(group_index, pre)
    return swiglu.run_clipped(x, y, pre, rows, alpha, limit, bias, interleaved)


def _unfused(x, *, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0, interleaved=True):
    """GPT-OSS's MoE activation as model code writes it (transformers' GptOssExperts):
    gate / up the even / odd lanes, clamped, then (up + 1) * gate * sigmoid(gate * alpha)."""
    gate, up = x[..., ::2], x[..., 1::2]
    gate = gate.clamp(max=limit)
    up = up.clamp(-limit, limit)
    return (up + bias) * (gate * torch.sigmoid(gate * alpha))


# the aclnn API torch_npu's kernel calls (op-plugin op_plugin_functions.yaml: aclnnClippedSwiglu;
# CANN generates it from the kernel's OpDef, ops-nn documents its GetWorkspaceSize)
prototypes.declare("aclnnClippedSwiglu",
                   "const aclTensor* x, const aclTensor* groupIndexOptional, int64_t dim, "
                   "double alpha, double limit, double bias, bool interleaved, const aclTensor* out",
                   prototypes.OPS_NN + "activation/clipped_swiglu/docs/aclnnClippedSwiglu.md",
                   cann="8.5.0")

npu_clipped_swiglu = define_op(
    "npu_clipped_swiglu(Tensor x, *, Tensor? group_index=None, int dim=-1, float alpha=1.702, "
    "float limit=7., float bias=1., bool interleaved=True) -> Tensor",
    kernels={"cuda": TritonKernel(clipped_swiglu_cuda)},
    native=("cpu",), reference_op=True,  # the CPU launcher's invalid calls raise here
    reference=clipped_swiglu_reference, fake=clipped_swiglu_fake,
    # on the NPU: CANN's ClippedSwiglu kernel through aclnnClippedSwiglu, bound OpPlugin-style
    # (csrc/npu/npu_clipped_swiglu.cpp)
    aclnn=AclnnBinding("aclnnClippedSwiglu", outputs=("out",), rename={"groupIndexOptional": "group_index"}),
    benchmarks=(Benchmark(lambda t, h, dt: ((bench_randn(t, 2 * h, dtype=dt),), {}), _unfused,
                          "GPT-OSS's clipped SwiGLU in torch"),),
    doc="GPT-OSS's clipped SwiGLU of A and B (the even / odd elements, or the halves, of x "
        "along dim): (clamp(B, +-limit) + bias) * min(A, limit) * sigmoid(alpha * min(A, "
        "limit)), float32 inside; with group_index only its first sum(group_index) rows.",
)
