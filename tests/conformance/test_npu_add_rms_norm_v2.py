# Conformance port of the upstream unit test of npu_add_rms_norm_v2 and its functional twin.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_add_rms_norm_v2.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21.
# Rewritten for op_sdk on CPU, not copied.
"""npu_add_rms_norm_v2_functional and npu_add_rms_norm_v2 against upstream's numpy golden,
with its assertRtolEqual(..., 0.0001): the functional results, and the in-place call's x1
(the normalised result) and x2 (the sum)."""

import numpy as np
import pytest
import torch

from tests.conformance._golden import assert_rtol_equal, npu, uniform

# Upstream normalises 1024 rows of 12288; the rows are cut to keep the suite fast on 2 CPU
# cores (each row is normalised independently; the reduced dim H = 12288 is upstream's).
ROWS = 64


def add_rms_norm_v2_golden(x1: np.ndarray, x2: np.ndarray, gamma: np.ndarray,
                           epsilon: float = 1e-6):
    """Upstream's golden: the sum in the inputs' dtype (float16 sums in float16, then up-casts),
    rstd = 1 / sqrt(mean(x^2) + eps), result = x * rstd * gamma; float16 results cast back."""
    ori_dtype = x1.dtype
    x = x1 + x2
    if ori_dtype == np.float16:
        x = x.astype(np.float32)
    variance = np.mean(np.power(x, 2), axis=-1, keepdims=True)
    rstd = np.divide(1, np.sqrt(variance + epsilon))
    result = x * rstd * gamma
    if ori_dtype == np.float16:
        x, result = x.astype(np.float16), result.astype(np.float16)
    return rstd, result, x


@pytest.mark.parametrize("dtype", [pytest.param(np.float32, id="fp32"),
                                   pytest.param(np.float16, id="fp16")])
def test_npu_add_rms_norm_v2(rng, dtype):
    x1 = uniform(rng, 0, 100, [ROWS, 12288], dtype)
    x2 = uniform(rng, 0, 100, [ROWS, 12288], dtype)
    gamma = uniform(rng, 0, 100, [12288], dtype)
    rstd, result, x = add_rms_norm_v2_golden(x1, x2, gamma)

    t1, t2, tg = torch.from_numpy(x1), torch.from_numpy(x2), torch.from_numpy(gamma)
    rstd_func, x1_inplace, x2_inplace = npu.npu_add_rms_norm_v2_functional(t1, t2, tg)
    assert_rtol_equal(rstd, rstd_func, 0.0001)
    assert_rtol_equal(result, x1_inplace, 0.0001)
    assert_rtol_equal(x, x2_inplace, 0.0001)

    rstd_npu = npu.npu_add_rms_norm_v2(t1, t2, tg)
    assert_rtol_equal(rstd, rstd_npu, 0.0001)
    assert_rtol_equal(result, t1, 0.0001)
    assert_rtol_equal(x, t2, 0.0001)
