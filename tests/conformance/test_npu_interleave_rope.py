# Conformance port of the upstream unit test of npu_interleave_rope.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_interleave_rope.py
#   read at commit 6589cad1a25067728bb4784279853035e6c1a32c. Rewritten for op_sdk on CPU,
#   not copied.
"""npu_interleave_rope against upstream's numpy golden, compared with torch_npu's
assertRtolEqual as upstream compares. Upstream's two cases (float16 and bfloat16, x of
(32, 32, 1, 64), cos / sin of (32, 1, 1, 64)) are marked skipped there ("skip ... now");
they run here. The golden de-interleaves x (reshape to (..., 32, 2), swap the last two
axes, reshape back) and applies rotate_half RoPE in float32, then casts to x's dtype."""

import numpy as np
import pytest
import torch

from tests.conformance._golden import assert_rtol_equal, npu


def _rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate((-x[..., h:], x[..., :h]), axis=-1)


def interleave_rope_golden(x, cos, sin):
    """Upstream's interleave_rope_numpy: float32 numpy, cast to x's dtype."""
    b, n, s, d = x.shape
    xn, cn, sn = (t.float().numpy() for t in (x, cos, sin))
    q = xn.reshape(b, n, s, d // 2, 2).transpose(0, 1, 2, 4, 3).reshape(b, n, s, d)
    return torch.tensor(q * cn + _rotate_half(q) * sn, dtype=x.dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_npu_interleave_rope(dtype):
    x = torch.randn(32, 32, 1, 64, dtype=dtype)
    cos = torch.randn(32, 1, 1, 64, dtype=dtype)
    sin = torch.randn(32, 1, 1, 64, dtype=dtype)
    assert_rtol_equal(interleave_rope_golden(x, cos, sin), npu.npu_interleave_rope(x, cos, sin))
