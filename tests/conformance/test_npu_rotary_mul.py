# Conformance port of the upstream unit tests of npu_rotary_mul and its backward.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_rotary_mul.py and
#   test/test_custom_ops/test_npu_rotary_mul_backward.py, read at commit
#   517f2e7d0f202f38b76310706cb977ca2388ad21 (both files last changed in 7634a584).
# Rewritten for op_sdk on CPU, not copied.
"""npu_rotary_mul (forward and autograd) against upstream's torch goldens in the inputs'
dtype, with assertRtolEqual: the "half" and "interleave" modes over upstream's 4-D layouts,
its 3-D (TND) cases and the rotate-matrix case (both skipped upstream: "CI版本不支持"; they
run here), and the error case, which differs (below)."""

import pytest
import torch

from tests.conformance._golden import assert_rtol_equal, npu

# Upstream's 8192 / 2048 sequence lengths are cut to keep the suite fast on 2 CPU cores
# (every token is rotated independently; the head dims are upstream's).
CUT = {8192: 256, 2048: 128, 28800: 64}


def _cut(shape):
    return [CUT.get(d, d) for d in shape]


def rotary_half_golden(x, r1, r2):
    """Upstream's rotary_mul: cat(-x2, x1) of the halves, r1 * x + r2 * that."""
    x1, x2 = torch.chunk(x, 2, -1)
    return r1 * x + r2 * torch.cat((-x2, x1), dim=-1)


def rotary_interleave_golden(x, r1, r2):
    """Upstream's rotary_mul_mode: the pairs (x[2k], x[2k+1]) -> (-x[2k+1], x[2k])."""
    x_new = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).reshape(x.shape)
    return x * r1 + x_new * r2


def half_matrix(n, dtype):
    """Upstream's get_half_matrix: x @ it = cat(-x2, x1)."""
    m = torch.zeros(n, n, dtype=dtype)
    m[: n // 2, n // 2:] = torch.eye(n // 2)
    m[n // 2:, : n // 2] = -torch.eye(n // 2)
    return m


HALF_SHAPES = [
    [[2, 8192, 5, 128], [1, 8192, 1, 128], [1, 8192, 1, 128]],
    [[8192, 2, 5, 128], [8192, 1, 1, 128], [8192, 1, 1, 128]],
    [[2048, 4, 32, 64], [2048, 4, 1, 64], [2048, 4, 1, 64]],
]
MODE_SHAPES = [
    [[2, 2, 5, 128], [1, 2, 1, 128], [1, 2, 1, 128]],
    [[2, 24, 5, 128], [1, 1, 5, 128], [1, 1, 5, 128]],
    [[128, 4, 4, 256], [1, 1, 4, 256], [1, 1, 4, 256]],
    [[64, 8, 8, 512], [1, 1, 8, 512], [1, 1, 8, 512]],
]
HALF_DIM3 = [((2, 2, 4), (2, 2, 4), (2, 2, 4)), ((4, 8, 8), (4, 8, 8), (4, 8, 8)),
             ((5, 10, 32), (1, 1, 32), (1, 1, 32)), ((8, 4, 64), (1, 1, 64), (1, 1, 64)),
             ((16, 8, 256), (1, 1, 256), (1, 1, 256)), ((1, 128, 894), (1, 1, 894), (1, 1, 894)),
             ((1, 256, 512), (1, 1, 512), (1, 1, 512))]
MODE_DIM3 = [((1, 1, 2), (1, 1, 2), (1, 1, 2)), ((1, 1, 4), (1, 1, 4), (1, 1, 4)),
             ((1, 8, 2), (1, 1, 2), (1, 1, 2)), ((1, 8, 4), (1, 8, 4), (1, 8, 4)),
             ((16, 1, 2), (1, 1, 2), (1, 1, 2)), ((8, 1, 4), (8, 1, 4), (8, 1, 4)),
             ((16, 8, 2), (1, 1, 2), (1, 1, 2))]
DTYPES = [torch.float16, torch.float32]


def _data(shapes, dtype):
    return [torch.rand(_cut(list(s)), dtype=dtype) for s in shapes]


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "fp32"])
@pytest.mark.parametrize("shapes", HALF_SHAPES + HALF_DIM3,
                         ids=[f"half{i}" for i in range(len(HALF_SHAPES))]
                         + [f"half_dim3_{i}" for i in range(len(HALF_DIM3))])
def test_rotary_mul(shapes, dtype):
    x, r1, r2 = _data(shapes, dtype)
    assert_rtol_equal(rotary_half_golden(x, r1, r2), npu.npu_rotary_mul(x, r1, r2))


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "fp32"])
@pytest.mark.parametrize("shapes", MODE_SHAPES + MODE_DIM3,
                         ids=[f"mode{i}" for i in range(len(MODE_SHAPES))]
                         + [f"mode_dim3_{i}" for i in range(len(MODE_DIM3))])
def test_rotary_mul_mode(shapes, dtype):
    x, r1, r2 = _data(shapes, dtype)
    assert_rtol_equal(rotary_interleave_golden(x, r1, r2),
                      npu.npu_rotary_mul(x, r1, r2, rotary_mode="interleave"))


def test_rotary_mul_mode_matrix():
    """The rotate matrix of the half rotation: the same result as the half mode. bfloat16
    (upstream's dtype here): assertRtolEqual compares it through float32 with float32's
    1e-4, below one bfloat16 step of the golden's own roundings; compared within one step
    (2^-7 relative)."""
    x, r1, r2 = _data([[2, 24, 28800, 128], [1, 1, 28800, 128], [1, 1, 28800, 128]],
                      torch.bfloat16)
    out = npu.npu_rotary_mul(x, r1, r2, rotary_mode="half", rotate=half_matrix(128, torch.bfloat16))
    assert_rtol_equal(rotary_half_golden(x, r1, r2), out, prec=2 ** -7)


def test_rotary_mul_error_param():
    """Upstream expects 'quarter' refused ("should be half or interleave"): op-plugin's Atlas
    A2 / A3 kernel has two modes. op_sdk's contract is aclnnRotaryPositionEmbeddingV2's, which
    also documents "quarter" and "interleave-half" (docs/operators.md): accepted here. An
    unknown mode is refused, naming the argument."""
    x, r1, r2 = torch.rand(2, 2, 5, 128), torch.rand(1, 2, 1, 128), torch.rand(1, 2, 1, 128)
    assert npu.npu_rotary_mul(x, r1, r2, "quarter").shape == x.shape
    with pytest.raises(RuntimeError, match="npu_rotary_mul.*rotary_mode"):
        npu.npu_rotary_mul(x, r1, r2, "third")


def _grads(fn, x, r1, r2):
    x, r1, r2 = (t.clone().requires_grad_() for t in (x, r1, r2))
    out = fn(x, r1, r2)
    out.backward(torch.ones_like(out))
    return x.grad, r1.grad, r2.grad


@pytest.mark.parametrize("shapes", HALF_SHAPES, ids=[f"half{i}" for i in range(len(HALF_SHAPES))])
def test_rotary_mul_backward(shapes):
    x, r1, r2 = _data(shapes, torch.float32)
    for want, got in zip(_grads(rotary_half_golden, x, r1, r2),
                         _grads(lambda *a: npu.npu_rotary_mul(*a), x, r1, r2)):
        assert_rtol_equal(want, got)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "fp32"])
@pytest.mark.parametrize("shapes", MODE_SHAPES, ids=[f"mode{i}" for i in range(len(MODE_SHAPES))])
def test_rotary_mul_mode_backward(shapes, dtype):
    x, r1, r2 = _data(shapes, dtype)
    for want, got in zip(_grads(rotary_interleave_golden, x, r1, r2),
                         _grads(lambda *a: npu.npu_rotary_mul(*a, "interleave"), x, r1, r2)):
        assert_rtol_equal(want, got)


@pytest.mark.parametrize("shapes", HALF_DIM3[:5], ids=[f"dim3_{i}" for i in range(5)])
def test_rotary_mul_backward_dim3(shapes):
    x, r1, r2 = _data(shapes, torch.float32)
    for want, got in zip(_grads(rotary_half_golden, x, r1, r2),
                         _grads(lambda *a: npu.npu_rotary_mul(*a), x, r1, r2)):
        assert_rtol_equal(want, got)
