"""npu_swiglu: SwiGLU on one tensor, ``silu(a) * b`` where a and b are the first and second
halves of ``input`` along ``dim`` (CANN's SwiGlu, aclnnSwiGlu; torch_npu.npu_swiglu), and
its backward npu_swiglu_backward (CANN's SwiGluGrad, aclnnSwiGluGrad), which autograd of
npu_swiglu calls as torch_npu's does.

Contract (hicann/ops-nn activation/swi_glu, docs/aclnnSwiGlu.md): ``input`` float16, bfloat16
or float32 with at least one dim; ``dim`` in [-input.dim(), input.dim() - 1]; the size along
``dim`` even. The result has ``input``'s dtype and shape with that size halved; float16 /
bfloat16 are computed in float32 and rounded once. Empty tensors are allowed.

Backward (docs/aclnnSwiGluGrad.md): ``grad_output`` of ``input``'s dtype and of the forward's
output shape; with s = sigmoid(a), the gradient is ``grad_output * (s + s * (1 - s) * a) * b``
for the first half and ``grad_output * s * a`` for the second, in float32, rounded once.
(ops-nn lists empty tensors as unsupported by the NPU kernel; here they give empty results.)

Native CPU kernels: csrc/swiglu.cpp (over kernels/swiglu.h), every valid call.
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.ops import check
from op_sdk.ops._common import bench_randn
from op_sdk.triton_kernels import TritonKernel

# the dtypes aclnnSwiGlu takes (its OpDef: ops-nn activation/swi_glu/op_host/swi_glu_def.cpp)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def check_swiglu(op, input, dim):
    """The contract's rules, shared by the reference and the fake; returns dim, wrapped."""
    check(input.dtype in DTYPES, op, "input",
          "must have dtype float16, bfloat16 or float32, got " + str(input.dtype))
    check(input.dim() > 0, op, "input", "must have at least one dimension, got a 0-dim tensor")
    check(-input.dim() <= dim < input.dim(), op, "dim",
          f"must be in [{-input.dim()}, {input.dim() - 1}] for a {input.dim()}-dim 'input', got {dim}")
    dim = dim % input.dim()
    check(input.shape[dim] % 2 == 0, op, "input",
          f"must have an even size along dim {dim} (split into two halves), got {input.shape[dim]}")
    return dim


def halved_shape(input, dim):
    """input's shape with dim (wrapped) halved: the SwiGLU operators' outputs (npu_swiglu,
    npu_clipped_swiglu)."""
    shape = list(input.shape)
    shape[dim] //= 2
    return shape


def swiglu_reference(input, dim=-1):
    """The ground truth (ops-nn's golden): silu(a) * b in float32, rounded to input's dtype."""
    dim = check_swiglu("npu_swiglu", input, dim)
    a, b = input.float().contiguous().chunk(2, dim)  # one layout: the same bits for any strides
    return (torch.nn.functional.silu(a) * b).to(input.dtype)


def swiglu_fake(input, dim=-1):
    """Output shape and dtype only (FakeTensor / Meta), by the reference's rules."""
    return halved_output(input, check_swiglu("npu_swiglu", input, dim))


def halved_output(input, dim):
    """The result as the fake allocates it (dim wrapped): contiguous, dim halved."""
    return input.new_empty(halved_shape(input, dim))


def check_swiglu_backward(op, grad_output, input, dim):
    """The backward's rules: the forward's on input, and grad_output shaped like its output."""
    dim = check_swiglu(op, input, dim)
    check(grad_output.dtype == input.dtype, op, "grad_output",
          f"must have the dtype of 'input' ({input.dtype}), got {grad_output.dtype}")
    want = halved_shape(input, dim)
    check(list(grad_output.shape) == want, op, "grad_output",
          f"must have the forward's output shape {want} (input's with dim {dim} halved), "
          f"got {list(grad_output.shape)}")
    return dim


def swiglu_backward_reference(grad_output, input, dim=-1):
    """ops-nn's SwiGluGrad formula in float32, rounded once to input's dtype."""
    dim = check_swiglu_backward("npu_swiglu_backward", grad_output, input, dim)
    a, b = input.float().contiguous().chunk(2, dim)
    g = grad_output.float()
    s = torch.sigmoid(a)
    grad = torch.cat((g * (s + s * (1 - s) * a) * b, g * s * a), dim)
    return torch.empty_like(input).copy_(grad)  # input's layout, as torch_npu's Meta (empty_like)


def swiglu_backward_fake(grad_output, input, dim=-1):
    check_swiglu_backward("npu_swiglu_backward", grad_output, input, dim)
    return torch.empty_like(input)


def _swiglu_setup(ctx, inputs, output):
    input, dim = inputs[0], inputs[1] if len(inputs) > 1 else -1
    ctx.save_for_backward(input)
    ctx.dim = dim


def _swiglu_backward(ctx, grad):
    (input,) = ctx.saved_tensors
    return torch.ops.npu.npu_swiglu_backward(grad, input, ctx.dim), None


def swiglu_cuda(input, dim=-1):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/swiglu.py): every form."""
    from op_sdk.triton_kernels import swiglu

    d = check_swiglu("npu_swiglu", input, dim)
    return swiglu.run(input, halved_output(input, d), d)


def swiglu_backward_cuda(grad_output, input, dim=-1):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/swiglu.py): every form."""
    from op_sdk.triton_kernels import swiglu

    d = check_swiglu_backward("npu_swiglu_backward", grad_output, input, dim)
    return swiglu.run_backward(grad_output, input, torch.empty_like(input), d)


# the aclnn API torch_npu's own kernel calls (op-plugin: EXEC_NPU_CMD(aclnnSwiGlu, input, dim, out))
prototypes.declare("aclnnSwiGlu",
                   "const aclTensor* x, int64_t dim, const aclTensor* out",
                   prototypes.CANN_HEADERS + "aclnn_swi_glu.h")

npu_swiglu = define_op(
    "npu_swiglu(Tensor input, int dim=-1) -> Tensor",
    kernels={"cuda": TritonKernel(swiglu_cuda)},
    native=("cpu",), reference_op=True,  # the CPU launcher's invalid calls raise here
    benchmarks=(Benchmark(lambda t, h, dt: ((bench_randn(t, 2 * h, dtype=dt),), {})),),
    reference=swiglu_reference, fake=swiglu_fake,
    # on the NPU: CANN's SwiGlu kernel through aclnnSwiGlu, bound OpPlugin-style
    # (csrc/npu/npu_swiglu.cpp)
    aclnn=AclnnBinding("aclnnSwiGlu", outputs=("out",), rename={"x": "input"}),
    backward=_swiglu_backward, setup_context=_swiglu_setup,
    doc="silu(a) * b of the two halves of input along dim (float32 inside).",
)

prototypes.declare("aclnnSwiGluGrad",
                   "const aclTensor* yGrad, const aclTensor* x, int64_t dim, const aclTensor* out",
                   prototypes.CANN_HEADERS + "aclnn_swi_glu_grad.h")

npu_swiglu_backward = define_op(
    "npu_swiglu_backward(Tensor grad_output, Tensor input, int dim=-1) -> Tensor",
    kernels={"cuda": TritonKernel(swiglu_backward_cuda)},
    native=("cpu",), reference_op=True,
    reference=swiglu_backward_reference, fake=swiglu_backward_fake,
    aclnn=AclnnBinding("aclnnSwiGluGrad", outputs=("out",), rename={"yGrad": "grad_output", "x": "input"}),
    doc="The gradient of npu_swiglu with respect to input (float32 inside).",
)
