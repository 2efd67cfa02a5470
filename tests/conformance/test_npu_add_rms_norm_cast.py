# Conformance port of the upstream unit test of npu_add_rms_norm_cast.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_add_rms_norm_cast.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21 (the file's last change:
#   f9962cb7e1ff2899318c6af22b0ac3463bd15905). Rewritten for op_sdk on CPU, not copied.
"""npu_add_rms_norm_cast against upstream's numpy golden (assertRtolEqual, prec 1e-3).

Upstream's only case is skipped there ("skip test_add_rms_norm_cast_fp16 now"); it runs
here. As in npu_add_rms_norm, upstream's golden normalises the fp16-rounded sum and the
contract the unrounded fp32 one: within upstream's tolerance, and op_sdk is also checked
against the contract's formula.
"""

import numpy as np
import pytest
import torch

from tests.conformance._golden import assert_rtol_equal, assert_within_ulps, npu, uniform

# Upstream normalises 1024 rows of 12288; the rows are cut to keep the suite fast on 2 CPU
# cores (each row is normalised independently; the reduced dim H = 12288 is upstream's).
ROWS = 64


def add_rms_norm_cast_golden(x1: np.ndarray, x2: np.ndarray, gamma: np.ndarray, epsilon=1e-6):
    """Upstream's supported_op_exec: fp16 sum, fp32 norm; y1 fp32, y2 = y1 in fp16."""
    x = (x1 + x2).astype(np.float32)
    rstd = 1 / np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + epsilon)
    y1 = x * rstd * gamma.astype(np.float32)
    return y1, y1.astype(np.float16), rstd, x.astype(np.float16)


def add_rms_norm_cast_contract(x1, x2, gamma, epsilon=1e-6):
    x = x1.float() + x2.float()
    rstd = 1 / torch.sqrt(x.square().mean(-1, keepdim=True) + epsilon)
    y1 = x * rstd * gamma.float()
    return y1, y1.to(x1.dtype), rstd, x.to(x1.dtype)


@pytest.mark.parametrize("dtype", [
    pytest.param(np.float16, id="test_add_rms_norm_cast_fp16"),
])
def test_add_rms_norm_cast(rng, dtype):
    x1 = uniform(rng, 0, 100, [ROWS, 12288], dtype)
    x2 = uniform(rng, 0, 100, [ROWS, 12288], dtype)
    gamma = uniform(rng, 0, 100, [12288], dtype)
    t1, t2, tg = map(torch.from_numpy, (x1, x2, gamma))

    outs = npu.npu_add_rms_norm_cast(t1, t2, tg, 1e-6)

    for gold, out in zip(add_rms_norm_cast_golden(x1, x2, gamma), outs):
        assert_rtol_equal(gold, out, 0.001)
    y1_c, y2_c, rstd_c, x_c = add_rms_norm_cast_contract(t1, t2, tg)
    y1, y2, rstd, x = outs
    torch.testing.assert_close(y1, y1_c, rtol=1e-5, atol=0)
    assert_within_ulps(y2, y2_c, 1, "y2 vs the contract's formula")
    torch.testing.assert_close(rstd, rstd_c, rtol=1e-5, atol=0)
    assert torch.equal(x, x_c)
