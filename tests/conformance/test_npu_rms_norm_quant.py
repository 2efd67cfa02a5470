# Conformance port of the upstream unit test of npu_rms_norm_quant.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_rms_norm_quant.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21.
# Rewritten for op_sdk on CPU, not copied. Upstream skips its int8 cases until a CANN update;
# here they run. Its float8 / hifloat8 cases (dst_dtype 290 - 292) are Ascend 950's
# (aclnnRmsNormQuant on Atlas A2 / A3 writes int8 or int4 only): not ported.
"""npu_rms_norm_quant against upstream's golden (torch.quantize_per_tensor of the fp32 norm,
which rounds before adding the offset), with upstream's compare(..., benchmark=1): x of 1 to 8
dims ending in 16, gamma / beta of [16] or [1, 16], float16 and bfloat16."""

import pytest
import torch

from tests.conformance._golden import benchmark_compare, npu


def rms_norm_quant_golden(x, gamma, beta, scale, offset, epsilon=1e-6):
    """Upstream's golden: fp32 rms-norm * gamma + beta, then quantize_per_tensor (scale, offset)
    to qint8, its integer representation."""
    x32 = x.float()
    variance = torch.mean(torch.pow(x32, 2), axis=-1, keepdims=True)
    rstd = 1 / torch.sqrt(variance + epsilon)
    y = (x32 * rstd) * gamma.float().reshape(-1) + beta.float().reshape(-1)
    q = torch.quantize_per_tensor(y, float(scale.float()), int(offset), torch.qint8)
    return q.int_repr().to(torch.float16).to(torch.int8)


SHAPES = [[16], [4, 16], [2, 3, 16], [2, 2, 2, 16], [1, 2, 1, 2, 16], [2, 1, 1, 1, 2, 16],
          [1, 1, 2, 1, 1, 2, 16], [2, 1, 1, 1, 1, 1, 2, 16]]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("gamma_2d", [False, True], ids=["gamma_1d", "gamma_2d"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{len(s)}d" for s in SHAPES])
def test_npu_rms_norm_quant(shape, gamma_2d, dtype):
    gshape = [1, 16] if gamma_2d else [16]
    x = torch.randn(shape, dtype=torch.float32).to(dtype)
    gamma = torch.randn(gshape, dtype=torch.float32).to(dtype)
    beta = torch.randn(gshape, dtype=torch.float32).to(dtype)
    scale = (torch.rand(1) * 0.8 + 0.2).to(dtype)
    offset = torch.randint(-5, 6, (1,), dtype=torch.int8)

    golden = rms_norm_quant_golden(x, gamma, beta, scale, offset)
    y = npu.npu_rms_norm_quant(x, gamma, beta, scale, offset, 1e-6)

    assert y.shape == golden.shape and y.dtype == torch.int8
    assert benchmark_compare(golden, y, 1)
    # beyond upstream's bound: the golden rounds before the offset, the kernel after it (and
    # through float16): at most one step apart
    assert int((y.int() - golden.int()).abs().max()) <= 1
