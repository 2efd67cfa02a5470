# Conformance port of the upstream unit test of npu_rms_norm.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_rms_norm.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21 (the file's last change:
#   081cfabcf19590032c2c13e6743eb1fcac9d96d4),
# and test/test_custom_ops/test_npu_rms_norm_backward.py at the same commit (the file's
#   last change: 7634a584ca17b8ce54fc077749472a64a4c3a584).
# Rewritten for op_sdk on CPU, not copied.
"""npu_rms_norm (forward and backward) against upstream's numpy goldens, with
assertRtolEqual's tolerance."""

import numpy as np
import pytest
import torch

from tests.conformance._golden import assert_rtol_equal, npu, uniform

# Upstream normalises 1024 rows of 12288; the rows are cut to keep the suite fast on 2 CPU
# cores (each row is normalised independently; the reduced dim H = 12288 is upstream's).
ROWS = 64


def rms_norm_golden(x: np.ndarray, gamma: np.ndarray, epsilon: float = 1e-6):
    """Upstream's supported_op_exec: everything in fp32 numpy, y cast back to x's dtype."""
    x32 = x.astype(np.float32)
    variance = np.mean(np.square(x32), axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(variance + epsilon)
    y = x32 * rstd * gamma.astype(np.float32)
    return y.astype(x.dtype), rstd


@pytest.mark.parametrize("x_dtype, gamma_dtype", [
    pytest.param(np.float32, np.float32, id="test_rms_norm"),
    pytest.param(np.float16, np.float32, id="test_rms_norm_mix_dtype"),
])
def test_rms_norm(rng, x_dtype, gamma_dtype):
    x = uniform(rng, 0, 100, [ROWS, 12288], x_dtype)
    gamma = uniform(rng, 0, 100, [12288], gamma_dtype)
    y_gold, rstd_gold = rms_norm_golden(x, gamma)

    y, rstd = npu.npu_rms_norm(torch.from_numpy(x), torch.from_numpy(gamma))

    assert_rtol_equal(y_gold, y)
    assert_rtol_equal(rstd_gold, rstd)


def rms_norm_backward_golden(x: np.ndarray, gamma: np.ndarray, grad_y: np.ndarray,
                             epsilon: float = 1e-6):
    """Upstream's backward golden (2-D x, 1-D gamma of n = 128):
    dgamma = sum_rows(dy * x * rstd), dx = dy * gamma * rstd - x * sum(rstd^3 dy gamma x) / n."""
    n = x.shape[-1]
    rstd = 1 / np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + epsilon)
    dgamma = np.sum(grad_y * x * rstd, 0)
    dx = grad_y * gamma * rstd - x * np.sum(rstd ** 3 * grad_y * gamma * x, 1, keepdims=True) / n
    return dx, dgamma


def test_npu_rms_norm_backward(rng):
    x = uniform(rng, 0, 100, [10, 128], np.float32)
    gamma = uniform(rng, 0, 100, [128], np.float32)
    grad_y = uniform(rng, 0, 100, [10, 128], np.float32)
    dx_gold, dgamma_gold = rms_norm_backward_golden(x, gamma, grad_y)

    tx = torch.from_numpy(x).requires_grad_(True)
    tg = torch.from_numpy(gamma).requires_grad_(True)
    npu.npu_rms_norm(tx, tg)[0].backward(torch.from_numpy(grad_y))

    assert_rtol_equal(dx_gold, tx.grad)
    assert_rtol_equal(dgamma_gold, tg.grad)
