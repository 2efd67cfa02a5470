# Conformance port of the upstream unit test of npu_add_rms_norm.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_add_rms_norm.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21 (the file's last change:
#   529b54cd45b49a56136351b717c6619bb14f33fc). Rewritten for op_sdk on CPU, not copied.
"""npu_add_rms_norm against upstream's numpy golden (assertRtolEqual, prec 1e-4 for fp32
and 1e-3 for fp16), and, for fp16, against the contract's formula.

Known difference (docs/conformance.md): upstream's fp16 golden adds x1 + x2 in fp16, so
the norm sees the rounded sum; the contract (Ascend 950 behaviour) normalises the
unrounded fp32 sum. Both agree within upstream's tolerance; the fp16 case also checks
op_sdk against the contract's formula to 1 ulp.
"""

import numpy as np
import pytest
import torch

from tests.conformance._golden import assert_rtol_equal, assert_within_ulps, npu, uniform

# Upstream normalises 1024 rows of 12288; the rows are cut to keep the suite fast on 2 CPU
# cores (each row is normalised independently; the reduced dim H = 12288 is upstream's).
ROWS = 64


def add_rms_norm_golden(x1: np.ndarray, x2: np.ndarray, gamma: np.ndarray, epsilon=1e-6):
    """Upstream's supported_op_exec: the sum in the input dtype (rounded for fp16), the
    norm in fp32, y and x cast back to fp16."""
    x = x1 + x2
    if x1.dtype == np.float16:
        x = x.astype(np.float32)
    rstd = 1 / np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + epsilon)
    y = x * rstd * gamma
    if x1.dtype == np.float16:
        x, y = x.astype(np.float16), y.astype(np.float16)
    return y, rstd, x


def add_rms_norm_contract(x1: torch.Tensor, x2: torch.Tensor, gamma: torch.Tensor,
                          epsilon=1e-6):
    """The contract (docs/operators.md): rstd and y from the unrounded fp32 sum."""
    x = x1.float() + x2.float()
    rstd = 1 / torch.sqrt(x.square().mean(-1, keepdim=True) + epsilon)
    return (x * rstd * gamma.float()).to(x1.dtype), rstd, x.to(x1.dtype)


@pytest.mark.parametrize("dtype, prec", [
    pytest.param(np.float32, 1e-4, id="test_add_rms_norm_fp32"),
    pytest.param(np.float16, 1e-3, id="test_add_rms_norm_fp16"),
])
def test_add_rms_norm(rng, dtype, prec):
    x1 = uniform(rng, 0, 100, [ROWS, 12288], dtype)
    x2 = uniform(rng, 0, 100, [ROWS, 12288], dtype)
    gamma = uniform(rng, 0, 100, [12288], dtype)
    t1, t2, tg = map(torch.from_numpy, (x1, x2, gamma))

    y, rstd, x = npu.npu_add_rms_norm(t1, t2, tg, 1e-6)

    for gold, out in zip(add_rms_norm_golden(x1, x2, gamma), (y, rstd, x)):
        assert_rtol_equal(gold, out, prec)
    if dtype == np.float16:
        # the contract's unrounded-sum formula, to the last bit but for summation order
        y_c, rstd_c, x_c = add_rms_norm_contract(t1, t2, tg)
        assert torch.equal(x, x_c)
        torch.testing.assert_close(rstd, rstd_c, rtol=1e-5, atol=0)
        assert_within_ulps(y, y_c, 1, "y vs the contract's formula")
