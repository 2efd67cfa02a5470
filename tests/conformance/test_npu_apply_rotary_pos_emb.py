# Conformance port of the upstream unit test of npu_apply_rotary_pos_emb.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_apply_rotary_pos_emb.py
#   read at commit 989aa0beeba5ed9fe90d909bb87e3747bd989e01. Rewritten for op_sdk on CPU,
#   not copied.
"""npu_apply_rotary_pos_emb against upstream's numpy golden (half mode on 128-dim heads,
every step in float16 as numpy computes it), compared with torch_npu's assertRtolEqual at
upstream's precision 0.001. Upstream's case: query and key (4, 1024, 16, 128), cos / sin
(4, 1024, 1, 128), float16 uniform in [0, 1), layout BSND. Upstream passes the layout as the
integer 1, which torch_npu 2.13.0's schema (``str layout='BSND'``) refuses; the port passes
"BSND", the layout upstream's 1 names."""

import numpy as np
import torch

from tests.conformance._golden import assert_rtol_equal, npu


def apply_rotary_pos_emb_golden(query, key, cos, sin):
    """Upstream's supported_op_exec: cat((-x2, x1)) * sin + x * cos, for query and key."""
    def rope(x):
        return np.concatenate((-x[..., 64:], x[..., :64]), axis=-1) * sin + x * cos
    return [rope(query), rope(key)]


def test_npu_apply_rotary_pos_emb(rng):
    q, k = (rng.uniform(0, 1, [4, 1024, 16, 128]).astype(np.float16) for _ in range(2))
    cos, sin = (rng.uniform(0, 1, [4, 1024, 1, 128]).astype(np.float16) for _ in range(2))
    golden = apply_rotary_pos_emb_golden(q, k, cos, sin)
    out = npu.npu_apply_rotary_pos_emb(*(torch.from_numpy(a) for a in (q, k, cos, sin)), "BSND")
    for want, got in zip(golden, out):
        assert_rtol_equal(want, got, 0.001)
