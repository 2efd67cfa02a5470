"""npu_add_rms_norm_v2 (in-place) and npu_add_rms_norm_v2_functional: npu_add_rms_norm with
its results written into its inputs, as CANN's aclnnInplaceAddRmsNorm does.

aclnnInplaceAddRmsNorm (ops-nn `norm/inplace_add_rms_norm`) computes what aclnnAddRmsNorm
computes (the same kernel, add_rms_norm.h) and writes y into x1 ("x1Ref": the add's first
input and the normalised result) and x = x1 + x2 into x2 ("x2Ref"); it returns rstd. The
functional twin returns (rstd, y, x) (op-plugin runs the API on clones), which TorchAir
converts to AddRmsNorm on TensorMove copies and re-inplaces to the in-place operator.
Every rule and number is npu_add_rms_norm's (op_sdk/ops/add_rms_norm.py): one
implementation, reordered here. Native CPU kernel: csrc/add_rms_norm_v2.cpp (npu_add_rms_norm's
launch).
"""

from __future__ import annotations

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import bench_norm_inputs
from op_sdk.ops._norm import check_add_rms_norm
from op_sdk.ops.add_rms_norm import add_rms_norm_cuda, add_rms_norm_fake, add_rms_norm_reference

OP = "npu_add_rms_norm_v2_functional"


def _reordered(run, x1, x2, gamma, epsilon):
    """npu_add_rms_norm's ``run`` (reference, fake or CUDA kernel) after the checks under this
    operator's name; its (y, rstd, x) -> the twin's (rstd, y, x)."""
    check_add_rms_norm(OP, x1, x2, gamma)
    y, rstd, x = run(x1, x2, gamma, epsilon)
    return rstd, y, x


def add_rms_norm_v2_functional_reference(x1, x2, gamma, epsilon=1e-6):
    return _reordered(add_rms_norm_reference, x1, x2, gamma, epsilon)


def add_rms_norm_v2_functional_fake(x1, x2, gamma, epsilon=1e-6):
    return _reordered(add_rms_norm_fake, x1, x2, gamma, epsilon)


def add_rms_norm_v2_functional_cuda(x1, x2, gamma, epsilon=1e-6):
    """npu_add_rms_norm's CUDA kernel (Triton), reordered."""
    return _reordered(add_rms_norm_cuda, x1, x2, gamma, epsilon)


# the aclnn API the bindings call: its GetWorkspaceSize prototype, as CANN declares it
prototypes.declare("aclnnInplaceAddRmsNorm",
                   "aclTensor* x1Ref, aclTensor* x2Ref, const aclTensor* gamma, double epsilon, "
                   "const aclTensor* rstdOut",
                   prototypes.OPS_NN + "norm/inplace_add_rms_norm/op_host/op_api/"
                   "aclnn_inplace_add_rms_norm.h", cann="8.5.0")


npu_add_rms_norm_v2_functional = define_op(
    "npu_add_rms_norm_v2_functional(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) "
    "-> (Tensor, Tensor, Tensor)",
    # as op-plugin's kernel: the in-place API on copies of x1 and x2, returned
    aclnn=AclnnBinding("aclnnInplaceAddRmsNorm", outputs=("rstd", "x1", "x2"),
                       copy_of={"x1": "x1", "x2": "x2"}),
    kernels={"cuda": TritonKernel(add_rms_norm_v2_functional_cuda)},
    reference=add_rms_norm_v2_functional_reference, fake=add_rms_norm_v2_functional_fake,
    native=("cpu",),
    doc="npu_add_rms_norm's results as (rstd, y, x): the functional form of "
        "npu_add_rms_norm_v2.",
    benchmarks=(Benchmark(lambda t, h, dt: (bench_norm_inputs(t, h, dt), {})),),
)

npu_add_rms_norm_v2 = define_op(
    "npu_add_rms_norm_v2(Tensor(a!) x1, Tensor(b!) x2, Tensor gamma, float epsilon=1e-06) -> Tensor",
    aclnn=AclnnBinding("aclnnInplaceAddRmsNorm", outputs=("rstd",),
                       rename={"x1Ref": "x1", "x2Ref": "x2"}),
    reference=add_rms_norm_v2_functional_reference, functional="npu_add_rms_norm_v2_functional",
    doc="In-place npu_add_rms_norm: y into x1, x = x1 + x2 into x2; returns rstd.",
)
