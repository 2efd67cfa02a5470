"""npu_swiglu: SwiGLU on one tensor, ``silu(a) * b`` where a and b are the first and second
halves of ``self`` along ``dim`` (CANN's SwiGlu, aclnnSwiGlu; torch_npu.npu_swiglu).

Contract (hicann/ops-nn activation/swi_glu, docs/aclnnSwiGlu.md): ``self`` float16, bfloat16
or float32 with at least one dim; ``dim`` in [-self.dim(), self.dim() - 1]; the size along
``dim`` even. The result has ``self``'s dtype and shape with that size halved; float16 /
bfloat16 are computed in float32 and rounded once. Empty tensors are allowed.
"""

from __future__ import annotations

import torch

from op_sdk.library import define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.ops import check

# the dtypes aclnnSwiGlu takes (its OpDef: ops-nn activation/swi_glu/op_host/swi_glu_def.cpp)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def check_swiglu(op, self, dim):
    """The contract's rules, shared by the reference and the fake; returns dim, wrapped."""
    check(self.dtype in DTYPES, op, "self",
          "must have dtype float16, bfloat16 or float32, got " + str(self.dtype))
    check(self.dim() > 0, op, "self", "must have at least one dimension, got a 0-dim tensor")
    check(-self.dim() <= dim < self.dim(), op, "dim",
          f"must be in [{-self.dim()}, {self.dim() - 1}] for a {self.dim()}-dim 'self', got {dim}")
    dim = dim % self.dim()
    check(self.shape[dim] % 2 == 0, op, "self",
          f"must have an even size along dim {dim} (split into two halves), got {self.shape[dim]}")
    return dim


def _out_shape(self, dim):
    shape = list(self.shape)
    shape[dim] //= 2
    return shape


def swiglu_reference(self, dim=-1):
    """The ground truth (ops-nn's golden): silu(a) * b in float32, rounded to self's dtype."""
    dim = check_swiglu("npu_swiglu", self, dim)
    a, b = self.float().contiguous().chunk(2, dim)  # one layout: the same bits for any strides
    return (torch.nn.functional.silu(a) * b).to(self.dtype)


def swiglu_fake(self, dim=-1):
    """Output shape and dtype only (FakeTensor / Meta), by the reference's rules."""
    dim = check_swiglu("npu_swiglu", self, dim)
    return self.new_empty(_out_shape(self, dim))


def swiglu_composite(self, dim=-1):
    """The unfused spelling a model writes: chunk, silu, mul."""
    a, b = self.chunk(2, dim)
    return torch.nn.functional.silu(a) * b


# the aclnn API torch_npu's own kernel calls (op-plugin: EXEC_NPU_CMD(aclnnSwiGlu, self, dim, out))
prototypes.declare("aclnnSwiGlu",
                   "const aclTensor* x, int64_t dim, const aclTensor* out",
                   prototypes.CANN_HEADERS + "aclnn_swi_glu.h")

npu_swiglu = define_op(
    "npu_swiglu(Tensor self, int dim=-1) -> Tensor",
    reference=swiglu_reference, fake=swiglu_fake,
    # on the NPU: CANN's SwiGlu kernel through aclnnSwiGlu, bound OpPlugin-style
    # (csrc/npu/npu_swiglu.cpp)
    aclnn=AclnnBinding("aclnnSwiGlu", outputs=("out",), rename={"x": "self"}),
    doc="silu(a) * b of the two halves of self along dim (float32 inside).",
)
