# Conformance port of the upstream unit tests of npu_swiglu and its backward.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_swi_glu.py (last changed in
#   3500b236) and test/test_custom_ops/test_npu_swi_glu_backward.py (last changed in
#   0844436e), read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21.
# Rewritten for op_sdk on CPU, not copied.
"""npu_swiglu (forward and autograd, which calls npu_swiglu_backward) against upstream's
torch goldens (float32 maths, the result cast to bfloat16), with assertRtolEqual on the
results cast to float32."""

import torch
import torch.nn.functional as F

from tests.conformance._golden import assert_rtol_equal, npu

# Upstream's [8192, 1, 3904 * 2] is cut to 256 rows (each row is independent; the 7808-wide
# last dim, halved by the operator, is upstream's).
ROWS = 256


def swiglu_golden(x, dim):
    """Upstream's swiglu_v1: silu(a) * b of the halves in float32, cast to bfloat16."""
    a, b = torch.chunk(x, 2, dim=dim)
    return (F.silu(a.float()) * b.float()).to(torch.bfloat16)


def swiglu_backward_golden(grad_out, x, dim):
    """Upstream's swiglu_backward_v1 (beta 1): d/da = b * (s + a * (1 - s) * s) * g,
    d/db = g * a * s, float32, concatenated, cast to bfloat16."""
    a, b = (t.float() for t in torch.chunk(x, 2, dim=dim))
    g = grad_out.float()
    s = torch.sigmoid(a)
    da = b * (s + a * (1 - s) * s) * g
    db = g * (a * s)
    return torch.cat((da, db), dim=-1).to(torch.bfloat16)


def test_swiglu():
    x = torch.rand([ROWS, 1, 3904 * 2], dtype=torch.bfloat16)
    out = npu.npu_swiglu(x, -1)
    assert_rtol_equal(swiglu_golden(x, -1).float(), out.float())


def test_swiglu_backward():
    grad_out = torch.rand([ROWS, 1, 3904], dtype=torch.bfloat16)
    x = torch.rand([ROWS, 1, 3904 * 2], dtype=torch.bfloat16)
    golden = swiglu_backward_golden(grad_out, x, -1)
    xg = x.clone().requires_grad_(True)
    npu.npu_swiglu(xg, -1).backward(grad_out)
    assert_rtol_equal(golden.float(), xg.grad.float())
