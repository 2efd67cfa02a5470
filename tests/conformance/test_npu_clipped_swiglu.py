# Conformance port of the upstream unit test of npu_clipped_swiglu.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_clipped_swiglu.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21.
# Rewritten for op_sdk on CPU, not copied. Upstream skips its one case ("Skip
# test_npu_clipped_swiglu now"); it runs here, its [8192, 7808] float32 input cut to
# [256, 7808] (the group counts, 1 to 99 each of 5, stay within it), and beside it upstream's
# golden over the other split, another dim and the other dtypes.
"""npu_clipped_swiglu against upstream's golden (computed in x's dtype), with
assertRtolEqual's tolerance over the rows the groups cover; the rows past them are 0 here
(upstream's golden writes 0 there; the NPU leaves them unwritten and upstream does not
compare them)."""

import pytest
import torch

from tests.conformance._golden import assert_rtol_equal, npu


def clipped_swiglu_golden(input_x, group_index, dim, alpha, limit, bias, interleaved):
    """Upstream's golden: x merged to [before, after] at dim, the first min(sum, rows) rows,
    even / odd columns or halves, clamp, x_glu * sigmoid(alpha * x_glu) * (x_linear + bias)
    in x's dtype, zeros after."""
    d = dim % input_x.dim()
    x = input_x.reshape(int(torch.Size(input_x.shape[:d]).numel()), -1)
    total = min(int(group_index.sum()), x.shape[0]) if group_index is not None else x.shape[0]
    t = x[:total]
    if interleaved:
        glu, linear = t[..., ::2], t[..., 1::2]
    else:
        glu, linear = torch.chunk(t, 2, dim=-1)
    glu = glu.clamp(min=None, max=limit)
    linear = linear.clamp(min=-limit, max=limit)
    y = torch.zeros((x.shape[0], x.shape[1] // 2), dtype=input_x.dtype)
    y[:total] = glu * torch.sigmoid(alpha * glu) * (linear + bias)
    shape = list(input_x.shape)
    shape[d] //= 2
    return y.reshape(shape), total


def test_swiglu():
    """Upstream's case (skipped there), 256 of its 8192 rows."""
    input_x = torch.randn([256, 3904 * 2], dtype=torch.float32)
    group_index = torch.randint(1, 100, (5,), dtype=torch.int64)
    kw = {"dim": -1, "alpha": 0.7, "limit": 1.0, "bias": 1.2, "interleaved": True}
    out = npu.npu_clipped_swiglu(input_x, group_index=group_index, **kw)
    golden, total = clipped_swiglu_golden(input_x, group_index, **kw)
    assert_rtol_equal(golden[:total], out[:total])
    assert (out[total:] == 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dim,interleaved", [(-1, False), (1, True), (0, False)])
def test_swiglu_forms(dtype, dim, interleaved):
    """Upstream's golden over the forms its one case leaves out (float32 inside for float16
    / bfloat16, the golden in float32 then rounded: the operator's one rounding)."""
    input_x = torch.randn([64, 8, 32]).to(dtype)
    group_index = torch.randint(1, 20, (3,), dtype=torch.int64)
    kw = {"dim": dim, "alpha": 1.702, "limit": 7.0, "bias": 1.0, "interleaved": interleaved}
    out = npu.npu_clipped_swiglu(input_x, group_index=group_index, **kw)
    golden, total = clipped_swiglu_golden(input_x.float(), group_index, **kw)
    assert_rtol_equal(golden.to(dtype), out)
