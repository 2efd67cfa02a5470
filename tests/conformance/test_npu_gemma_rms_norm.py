# Conformance port of the upstream unit test of npu_gemma_rms_norm.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_gemma_rms_norm.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21.
# Rewritten for op_sdk on CPU, not copied. Upstream skips its value cases on the NPU (only its
# Meta-shape cases run there); here both run: the golden is ops-nn's formula.
"""npu_gemma_rms_norm against upstream's numpy golden, with assertRtolEqual's tolerance, and
upstream's shape checks."""

import numpy as np
import pytest
import torch

from tests.conformance._golden import assert_rtol_equal, npu, uniform


def gemma_rms_norm_golden(x: np.ndarray, gamma: np.ndarray, epsilon: float = 1e-6):
    """Upstream's golden: fp32 numpy, rstd = 1 / sqrt(mean(x^2) + eps), y = x * rstd *
    (gamma + 1), y cast back to x's dtype."""
    x32, g32 = x.astype(np.float32), gamma.astype(np.float32)
    variance = np.mean(np.power(x32, 2), axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(variance + epsilon)
    y = (x32 * rstd) * (g32 + 1)
    return y.astype(x.dtype), rstd


@pytest.mark.parametrize("dtype", [pytest.param(np.float32, id="test_npu_gemma_rms_norm_fp32"),
                                   pytest.param(np.float16, id="test_npu_gemma_rms_norm_fp16")])
def test_npu_gemma_rms_norm(rng, dtype):
    x = uniform(rng, 0, 100, [256, 512], dtype)
    gamma = uniform(rng, 0, 100, [512], dtype)
    y_gold, rstd_gold = gemma_rms_norm_golden(x, gamma)

    y, rstd = npu.npu_gemma_rms_norm(torch.from_numpy(x), torch.from_numpy(gamma))

    assert_rtol_equal(y_gold, y)
    assert_rtol_equal(rstd_gold, rstd)


@pytest.mark.parametrize("shape, gamma_shape", [([20, 10, 64], [64]), ([2, 3, 4, 8], [4, 8])])
def test_npu_gemma_rms_norm_meta(shape, gamma_shape):
    """Upstream's Meta cases: y of x's shape and dtype, rstd float32 with gamma's dims set
    to 1, on the Meta device as on CPU."""
    for device in ("meta", "cpu"):
        x = torch.randn(shape, dtype=torch.float16, device=device)
        gamma = torch.randn(gamma_shape, dtype=torch.float16, device=device)
        y, rstd = npu.npu_gemma_rms_norm(x, gamma)
        want = shape[:len(shape) - len(gamma_shape)] + [1] * len(gamma_shape)
        assert y.shape == x.shape and y.dtype == torch.float16
        assert list(rstd.shape) == want and rstd.dtype == torch.float32
