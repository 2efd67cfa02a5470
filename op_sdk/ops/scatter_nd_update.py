"""npu_scatter_nd_update (functional) and npu_scatter_nd_update_ (in-place).

The in-place schema returns its alias, so automatic functionalization does not apply;
``functional=`` makes define_op derive the in-place kernels and register the
functionalization (in-place -> functional + write back) through
op_sdk.library.functionalize_inplace.
"""

from __future__ import annotations

import torch

from op_sdk.library import define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import check

_INDEX_DTYPES = (torch.int32, torch.int64)


def check_scatter_nd_update(op, input, indices, updates):
    """Returns K, the number of leading input dims each index addresses."""
    check(indices.dtype in _INDEX_DTYPES, op, "indices",
          f"must have dtype int32 or int64, got {indices.dtype}")
    check(indices.dim() >= 1, op, "indices", "must have at least 1 dim (..., K)")
    k = indices.shape[-1]
    check(1 <= k <= input.dim(), op, "indices",
          f"last dim K must be in [1, input.dim() = {input.dim()}], got {k}")
    want = list(indices.shape[:-1]) + list(input.shape[k:])
    check(list(updates.shape) == want, op, "updates",
          f"must have shape indices.shape[:-1] + input.shape[K:] = {want}, got "
          f"{list(updates.shape)}")
    check(updates.dtype == input.dtype, op, "updates",
          f"must have the dtype of 'input' ({input.dtype}), got {updates.dtype}")
    return k


def _addresses(op, input, indices, k):
    """Each update's index as (updates, K) int64, checked in bounds (a read back: an index
    out of range raises, never writes out of bounds), and its flat address among input's
    first K dims."""
    idx = indices.reshape(-1, k).to(torch.int64)
    bound = torch.tensor(input.shape[:k], dtype=torch.int64, device=idx.device)
    check(bool(((idx >= 0) & (idx < bound)).all()), op, "indices",
          f"values must be in [0, size) of input dims {list(input.shape[:k])}")
    strides = torch.tensor(list(torch.empty(input.shape[:k], device="meta").stride()),
                           dtype=torch.int64, device=idx.device)
    return idx, (idx * strides).sum(-1)


def last_updates(flat):
    """Whether each update is written: of the updates to one address (``flat``) only the last
    in index order (index_put_ alone leaves the order unspecified). Computed on the device,
    no read back; the reference and the CUDA kernel read this one rule."""
    if flat.numel() <= 1:
        return torch.ones_like(flat, dtype=torch.bool)
    uniq, slot = torch.unique(flat, return_inverse=True)
    order = torch.arange(flat.numel(), device=flat.device)
    last = torch.full((uniq.numel(),), -1, dtype=torch.int64,
                      device=flat.device).scatter_reduce_(0, slot, order, "amax")
    return last[slot] == order


def scatter_nd_update_reference(input, indices, updates):
    op = "npu_scatter_nd_update"
    k = check_scatter_nd_update(op, input, indices, updates)
    idx, flat = _addresses(op, input, indices, k)
    keep = last_updates(flat)
    out = input.clone()
    upd = updates.reshape(idx.shape[0], *input.shape[k:])
    out[tuple(idx[keep].t())] = upd[keep]
    return out


def scatter_nd_update_cuda(input, indices, updates):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/scatter.py): input copied into the
    output, then each written update's slice stored by its own program. Dtypes wider than
    8 bytes (complex128) run the reference."""
    from op_sdk.triton_kernels import scatter

    op = "npu_scatter_nd_update"
    k = check_scatter_nd_update(op, input, indices, updates)
    if not scatter.covers(input.dtype):
        return scatter_nd_update_reference(input, indices, updates)
    _, flat = _addresses(op, input, indices, k)
    rows = torch.where(last_updates(flat), flat, -1)
    return scatter.run(scatter_nd_update_fake(input, indices, updates), input, updates, rows,
                       input.shape[k:].numel())


def scatter_nd_update_fake(input, indices, updates):
    check_scatter_nd_update("npu_scatter_nd_update", input, indices, updates)
    return torch.empty_like(input)


# the aclnn API the binding calls: its GetWorkspaceSize prototype, as CANN declares it
# varRef is updated in place: the API has no output parameter
prototypes.declare("aclnnScatterNdUpdate",
                   "aclTensor* varRef, const aclTensor* indices, const aclTensor* updates",
                   prototypes.OPS_NN + "index/scatter_nd_update/op_host/op_api/aclnn_scatter_nd_update.h",
                   cann="8.5.0")


npu_scatter_nd_update = define_op(
    "npu_scatter_nd_update(Tensor input, Tensor indices, Tensor updates) -> Tensor",
    # aclnnScatterNdUpdate updates varRef in place: here a copy of input, returned
    # aclnnScatterNdUpdate's document: indices of at least 2 dims (the reference takes 1-D)
    aclnn=AclnnBinding("aclnnScatterNdUpdate", outputs=("var",), copy_of={"var": "input"},
                       tensor_requires={"indices": {"min_dim": 2}}),
    # (inline=False: the launcher reads the index values back to check them, so the operator
    # stays one call in a compiled graph)
    kernels={"cuda": TritonKernel(scatter_nd_update_cuda)}, inline=False,
    reference=scatter_nd_update_reference, fake=scatter_nd_update_fake,
    doc="A copy of input with the slices addressed by indices replaced by updates.",
)

npu_scatter_nd_update_ = define_op(
    "npu_scatter_nd_update_(Tensor(a!) input, Tensor indices, Tensor updates) -> Tensor(a!)",
    aclnn=AclnnBinding("aclnnScatterNdUpdate", outputs=("input",), rename={"varRef": "input"},
                       tensor_requires={"indices": {"min_dim": 2}}),
    reference=scatter_nd_update_reference, functional="npu_scatter_nd_update",
    doc="In-place npu_scatter_nd_update; returns input.",
)
