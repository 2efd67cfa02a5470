# Conformance port of the upstream unit test of npu_scatter_nd_update.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_scatter_nd_update.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21 (the file's last change:
#   989aa0beeba5ed9fe90d909bb87e3747bd989e01).
# and the npu_scatter_nd_update_ case of Ascend/pytorch (torch_npu),
#   test/custom_ops/test_functionalization.py, read at commit
#   9e73e708ab9350d203475609f36f8a43f6a0c2ab (the file's last change:
#   a2624d6541fe63d9e2140fe6ee114dec1d65dab8).
# Rewritten for op_sdk on CPU, not copied.
"""npu_scatter_nd_update against upstream's loop golden (exact equality). Upstream calls
the functional form only (and its golden writes into the very tensor it then passes to
the operator); here the golden works on a copy, and the in-place twin is checked too.

torch_npu's functionalization case: the in-place operator traced under functionalization
becomes the functional one plus a copy_ back into the input (upstream's expected graph,
compared as text), and eager, functionalized and re-inplaced runs agree.
"""

import numpy as np
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.reinplace import reinplace

from tests.conformance._golden import npu, uniform


def scatter_nd_update_golden(var, indices, updates):
    """Upstream's supported_op_exec: for each of the first len(indices) rows of var,
    var[indices[i][0]][indices[i][1]] = updates[i] (K = 2 on a 2-D var)."""
    out = var.clone()
    for i in range(len(out)):
        if i < len(indices):
            out[indices[i][0]][indices[i][1]] = updates[i]
    return out


@pytest.mark.parametrize("inplace", [
    pytest.param(False, id="test_npu_scatter_nd_update"),
    pytest.param(True, id="test_npu_scatter_nd_update-inplace"),
])
def test_npu_scatter_nd_update(inplace):
    var = torch.zeros([3, 2], dtype=torch.float16)
    indices = torch.tensor([[0, 0], [1, 1]])
    updates = torch.tensor([10, 20], dtype=torch.float16)
    gold = scatter_nd_update_golden(var, indices, updates)

    if inplace:
        out = npu.npu_scatter_nd_update_(var, indices, updates)
        assert out.data_ptr() == var.data_ptr()
    else:
        out = npu.npu_scatter_nd_update(var, indices, updates)
        assert out.data_ptr() != var.data_ptr() and not var.any()

    assert out.dtype == torch.float16 and torch.equal(out, gold)


# ---- torch_npu test/custom_ops/test_functionalization.py::test_npu_scatter_nd_update -------

# upstream's assertExpectedInline text, line by line
EXPECTED_GRAPH = "\n".join([
    "def forward(self, arg0_1, arg1_1, arg2_1):",
    "    npu_scatter_nd_update = torch.ops.npu.npu_scatter_nd_update.default("
    "arg0_1, arg1_1, arg2_1);  arg1_1 = arg2_1 = None",
    "    copy_ = torch.ops.aten.copy_.default(arg0_1, npu_scatter_nd_update);  "
    "arg0_1 = copy_ = None",
    "    return npu_scatter_nd_update",
])


def test_npu_scatter_nd_update_functionalization(rng):
    def f(var, indices, updates):
        return npu.npu_scatter_nd_update_(var, indices, updates)

    var = torch.from_numpy(uniform(rng, 0, 1, [24, 128], np.float16))
    # uniform(0, 12) cast to int32: rows 0..11, with repeats (the test writes every row of a
    # repeated index with the same kernel, so all runs agree whichever update wins)
    indices = torch.from_numpy(uniform(rng, 0, 12, [12, 1], np.int32))
    updates = torch.from_numpy(uniform(rng, 1, 2, [12, 128], np.float16))

    # upstream traces a *args wrapper, hence the arg0_1... names
    functional = torch.func.functionalize(lambda *args: f(*args))
    graph = make_fx(functional)(var.clone(), indices, updates)
    assert graph.code.strip() == EXPECTED_GRAPH.strip()

    # upstream's assert_functionalization: eager, functionalized and re-inplaced runs give
    # the same output and the same mutated input
    eager_var = var.clone()
    out_ref = f(eager_var, indices, updates)
    func_var = var.clone()
    out_func = functional(func_var, indices, updates)
    traced = make_fx(torch.func.functionalize(lambda *args: f(*args),
                                              remove="mutations_and_views"))(
        var.clone(), indices, updates)
    reinplaced = reinplace(traced, var.clone(), indices, updates)
    re_var = var.clone()
    out_re = reinplaced(re_var, indices, updates)
    assert not torch.equal(eager_var, var)
    for v, out in ((func_var, out_func), (re_var, out_re)):
        assert torch.equal(v, eager_var) and torch.equal(out, out_ref)
