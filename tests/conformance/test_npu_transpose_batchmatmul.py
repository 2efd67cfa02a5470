# Conformance port of the upstream unit test of npu_transpose_batchmatmul.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_transpose_batchmatmul.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21 (the file's last change:
#   d9cf0ef2376a5d91293ab9276eb11d4f81289249). Rewritten for op_sdk on CPU, not copied.
"""npu_transpose_batchmatmul against upstream's torch golden (fp32 matmul of the permuted
operands, permuted back, cast), assertRtolEqual with upstream's precision. Every upstream
case is skipped there ("Skipping test_npu_transpose_batchmatmul temporarily"); all run
here.

Differs (docs/conformance.md): the int8-output case (``scale``, passed as
npu_trans_quant_param's int64 encoding as upstream does) is compared with the contract's
rounding (half to even) where upstream's golden truncates; the error cases match op_sdk's
messages ("<operator>: argument '<name>' <rule>") instead of torch_npu's; the NZ-weight
case runs on the ND layout and is compared in bfloat16 (upstream's golden is cast to
float16).
"""

import math

import pytest
import torch

from tests.conformance._golden import assert_rtol_equal, npu, trans_quant_param

M, K, N, BATCH = 32, 512, 128, 32
PERMS = {"perm_x1": [1, 0, 2], "perm_x2": [0, 1, 2], "perm_y": [1, 0, 2]}


def golden_float(x1, x2, batch_split_factor=1, dtype=torch.float16):
    """Upstream's supported_op_exec_2 / _3: (M, B, K) -> (B, M, K) @ (B, K, N) in fp32, back
    to (M, B, N); with a split factor f, reshaped to (M, f, -1) and transposed to
    (f, M, B N / f). Cast to float16 as upstream does."""
    out = torch.matmul(x1.transpose(0, 1).float(), x2.float()).transpose(0, 1)
    if batch_split_factor > 1:
        out = out.reshape(x1.shape[0], batch_split_factor, -1).transpose(0, 1)
    return out.to(dtype)


def golden_int8(x1, x2, scale, rounding):
    """Upstream's supported_op_exec: the fp32 product as (M, 1, B N) times scale, to int8.
    Upstream truncates (``.to(torch.int)``); the contract rounds half to even before
    saturating, which is what the pending case expects."""
    out = torch.matmul(x1.transpose(0, 1).float(), x2.float()).transpose(0, 1)
    out = out.reshape(out.shape[0], 1, out.shape[1] * out.shape[2]) * scale
    out = out.to(torch.int) if rounding == "trunc" else torch.round(out)
    return torch.clip(out, -128, 127).to(torch.int8)


def test_npu_transpose_batchmatmul():
    x1 = torch.randn((M, BATCH, K), dtype=torch.float16)
    x2 = torch.randn((BATCH, K, N), dtype=torch.float16)
    scale = torch.ones((BATCH * N,), dtype=torch.float32)
    gold = golden_int8(x1, x2, scale, rounding="rint")
    out = npu.npu_transpose_batchmatmul(x1, x2, scale=trans_quant_param(scale, round_mode=1),
                                        **PERMS)
    assert_rtol_equal(gold, out, 0.01)


def test_npu_transpose_batchmatmul_2():
    x1 = torch.randn((M, BATCH, K), dtype=torch.float16)
    x2 = torch.randn((BATCH, K, N), dtype=torch.float16)
    out = npu.npu_transpose_batchmatmul(x1, x2, scale=None, **PERMS)
    assert_rtol_equal(golden_float(x1, x2), out, 0.001)


def test_npu_transpose_batchmatmul_3():
    factor = 4
    x1 = torch.randn((M, BATCH, K), dtype=torch.float16)
    x2 = torch.randn((BATCH, K, N), dtype=torch.float16)
    out = npu.npu_transpose_batchmatmul(x1, x2, scale=None, batch_split_factor=factor, **PERMS)
    assert out.shape == (factor, M, BATCH * N // factor)
    assert_rtol_equal(golden_float(x1, x2, factor), out, 0.001)


# upstream matches torch_npu's messages ("perm_x1 should be", "input's type supported for
# float16, float32 and bfloat16", ...); op_sdk names the operator and the argument
@pytest.mark.parametrize("x1_dtype, x2_dtype, perms, message", [
    pytest.param(torch.float16, torch.float16, {"perm_x1": [1, 1, 2]}, "'perm_x1'",
                 id="test_npu_transpose_batchmatmul_4"),
    pytest.param(torch.float16, torch.float16, {"perm_x2": [1, 1, 2]}, "'perm_x2'",
                 id="test_npu_transpose_batchmatmul_5"),
    pytest.param(torch.float16, torch.float16, {"perm_y": [1, 1, 2]}, "'perm_y'",
                 id="test_npu_transpose_batchmatmul_6"),
    pytest.param(torch.int64, torch.float16, {}, "'input' must have dtype",
                 id="test_npu_transpose_batchmatmul_7"),
    pytest.param(torch.float16, torch.int64, {}, "'weight' must have the dtype",
                 id="test_npu_transpose_batchmatmul_8"),
])
def test_npu_transpose_batchmatmul_invalid(x1_dtype, x2_dtype, perms, message):
    def make(shape, dtype):
        if dtype == torch.int64:
            return torch.randint(-10, 10, shape, dtype=dtype)
        return torch.randn(shape, dtype=dtype)

    x1, x2 = make((M, BATCH, K), x1_dtype), make((BATCH, K, N), x2_dtype)
    with pytest.raises(RuntimeError, match=f"npu_transpose_batchmatmul: argument {message}"):
        npu.npu_transpose_batchmatmul(x1, x2, scale=None, **{**PERMS, **perms})


def test_npu_transpose_batchmatmul_9():
    # upstream casts the weight to NZ (format 29) and compares the bfloat16 result with a
    # float16 golden (a dtype mismatch in its skipped test); CPU tensors are ND, and the
    # golden is rounded to the output's bfloat16 and compared to one bfloat16 step (2**-8)
    x1 = torch.randn((M, BATCH, K), dtype=torch.bfloat16)
    x2 = torch.randn((BATCH, K, N), dtype=torch.bfloat16)
    out = npu.npu_transpose_batchmatmul(x1, x2, scale=None, **PERMS)
    assert out.dtype == torch.bfloat16
    assert_rtol_equal(golden_float(x1, x2, dtype=torch.bfloat16), out, math.pow(2, -8))
