"""npu_clipped_swiglu: the native CPU kernel against the reference and against the document's
formula in float64, over dtypes, odd sizes, every dim, both splits (interleaved pairs of the
merged row when dim is not the last), groups (the rows past their sum 0), strided / expanded /
empty inputs, NaN and inf, dynamic shapes, GPT-OSS's spelling; the ONNX translation; the
registry-wide tables (samples, constraint cases, Meta grid, GE type)."""

import pytest
import torch

from op_sdk.ops.clipped_swiglu import _unfused, clipped_swiglu_reference
from tests.ops._helpers import T, assert_outputs_close, bad, bf16, fp16, fp32, npu, rand, strided, zeros

SCHEMAS = [
    "npu_clipped_swiglu(Tensor x, *, Tensor? group_index=None, int dim=-1, float alpha=1.702, "
    "float limit=7., float bias=1., bool interleaved=True) -> Tensor",
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_clipped_swiglu": "ClippedSwiglu"}

DTYPES = [fp32, fp16, bf16]
I64 = torch.int64


def samples():
    return [
        ("npu_clipped_swiglu", (rand(7, 34, scale=8),), {}),
        ("npu_clipped_swiglu", (rand(2, 6, 10, dtype=bf16, scale=8),),
         {"dim": 1, "interleaved": False, "alpha": 0.7, "limit": 1.0, "bias": 1.2}),
        ("npu_clipped_swiglu", (rand(9, 16, dtype=fp16, scale=8),),
         {"group_index": torch.tensor([2, 3], dtype=I64)}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real)."""
    cases = []
    for shape, dim in [((5, 34), -1), ((2, 4, 5), 1), ((4, 6), 0), ((3, 2, 4, 8), 2)]:
        for dt in DTYPES:
            cases.append(("npu_clipped_swiglu", (rand(*shape, dtype=dt),), {"dim": dim}))
        cases.append(("npu_clipped_swiglu", (rand(*shape, dtype=bf16),),
                      {"dim": dim, "interleaved": False, "group_index": torch.tensor([1, 1], dtype=I64)}))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("clipped/dtype", "npu_clipped_swiglu", (T(4, 8, dtype=torch.float64),), {}, "x", RuntimeError),
    ("clipped/odd", "npu_clipped_swiglu", (T(4, 7),), {}, "x", RuntimeError),
    ("clipped/dim", "npu_clipped_swiglu", (T(4, 8),), {"dim": 2}, "dim", RuntimeError),
    ("clipped/nine-dims", "npu_clipped_swiglu", (T(*[1] * 8, 2),), {}, "x", RuntimeError),
    ("clipped/limit", "npu_clipped_swiglu", (T(4, 8),), {"limit": 0.0}, "limit", RuntimeError),
    ("clipped/group-dtype", "npu_clipped_swiglu", (T(4, 8),), {"group_index": T(2, dtype=torch.int32)},
     "group_index", RuntimeError),
    ("clipped/group-dims", "npu_clipped_swiglu", (T(4, 8),), {"group_index": T(2, 1, dtype=I64)},
     "group_index", RuntimeError),
]

BAD_CALLS = [
    bad("npu_clipped_swiglu", "x", zeros(4, 7)),
    bad("npu_clipped_swiglu", "limit", zeros(4, 8), limit=-1.0),
    bad("npu_clipped_swiglu", "group_index", zeros(4, 8), group_index=torch.tensor([2, -1])),
    bad("npu_clipped_swiglu", "group_index", zeros(4, 8), group_index=torch.tensor([2, 3], dtype=torch.int32)),
]


def _formula(x, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0, interleaved=True):
    """The document's steps in float64: x merged to [pre, n] around dim, A / B its even / odd
    columns or its halves, rows past sum(group_index) 0."""
    d = dim % x.dim()
    pre = 1
    for s in x.shape[:d]:
        pre *= s
    v = x.double().reshape(pre, -1)
    n = v.shape[1]
    a, b = (v[:, 0::2], v[:, 1::2]) if interleaved else (v[:, :n // 2], v[:, n // 2:])
    a = a.clamp(max=limit)
    b = b.clamp(-limit, limit)
    y = a * torch.sigmoid(alpha * a) * (b + bias)
    if group_index is not None:
        y[min(int(group_index.sum()), pre):] = 0
    shape = list(x.shape)
    shape[d] //= 2
    return y.reshape(shape)


def _close_to_formula(got, x, **kw):
    ulp = {fp32: 1e-5, fp16: 2 ** -10, bf16: 2 ** -7}[x.dtype]
    torch.testing.assert_close(got.double(), _formula(x, **kw), rtol=2 * ulp, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", [((1, 2), -1), ((7, 34), -1), ((257, 96), -1), ((2, 4, 5), 1),
                                       ((4, 6), 0), ((3, 2, 4, 6), 2), ((5, 2), 1), ((3, 4, 1026), -1)])
@pytest.mark.parametrize("interleaved", [True, False])
def test_matches_reference_and_formula(dtype, shape, dim, interleaved):
    torch.manual_seed(0)
    x = rand(*shape, dtype=dtype, scale=10)  # beyond the limit both ways
    kw = {"dim": dim, "interleaved": interleaved, "alpha": 1.702, "limit": 7.0, "bias": 1.0}
    got = npu.npu_clipped_swiglu(x, **kw)
    assert_outputs_close((got,), (clipped_swiglu_reference(x, **kw),), float_dtype=dtype)
    _close_to_formula(got, x, **kw)
    assert got.is_contiguous() and got.dtype == dtype


def test_interleaved_pairs_are_adjacent_in_the_merged_row():
    """With dim not the last, the kernel's pairs are adjacent elements of the merged row, not
    pairs along dim (ops-nn's gather over [pre, cut * after])."""
    x = torch.arange(24, dtype=fp32).reshape(2, 4, 3) / 10
    got = npu.npu_clipped_swiglu(x, dim=1, limit=100.0, alpha=1.0, bias=0.0)
    flat = x.reshape(2, 12)
    a, b = flat[:, 0::2], flat[:, 1::2]
    torch.testing.assert_close(got, (a * torch.sigmoid(a) * b).reshape(2, 2, 3))
    along_dim = x[:, 0::2] * torch.sigmoid(x[:, 0::2]) * x[:, 1::2]
    assert not torch.allclose(got, along_dim)


def test_clamps_and_attributes():
    x = torch.tensor([[100.0, 100.0, -100.0, -100.0, 3.0, -3.0]])
    got = npu.npu_clipped_swiglu(x, limit=7.0, alpha=1.702, bias=1.0)
    a = torch.tensor([7.0, -100.0, 3.0])
    b = torch.tensor([7.0, -7.0, -3.0])
    torch.testing.assert_close(got[0], a * torch.sigmoid(1.702 * a) * (b + 1), rtol=1e-6, atol=1e-6)
    x = rand(4, 8, scale=3)
    for kw in ({"alpha": 0.7, "limit": 1.0, "bias": 1.2}, {"alpha": -2.0, "limit": 0.5, "bias": 0.0}):
        _close_to_formula(npu.npu_clipped_swiglu(x, **kw), x, **kw)


@pytest.mark.parametrize("counts,want_rows", [([2, 3], 5), ([0], 0), ([], 0), ([4, 100], 9), ([9], 9)])
def test_groups_compute_their_rows_and_zero_the_rest(counts, want_rows):
    torch.manual_seed(0)
    x = rand(9, 16, dtype=bf16, scale=8)
    g = torch.tensor(counts, dtype=I64)
    got = npu.npu_clipped_swiglu(x, group_index=g)
    full = npu.npu_clipped_swiglu(x)
    assert torch.equal(got[:want_rows], full[:want_rows])
    assert (got[want_rows:] == 0).all()
    assert_outputs_close((got,), (clipped_swiglu_reference(x, group_index=g),), float_dtype=bf16)
    # rows are the dims before dim: a 3-D x with dim 2 has 2 * 3 of them
    x3 = rand(2, 3, 8)
    got = npu.npu_clipped_swiglu(x3, group_index=torch.tensor([4], dtype=I64))
    assert (got.reshape(6, 4)[4:] == 0).all() and torch.equal(got.reshape(6, 4)[:4],
                                                              npu.npu_clipped_swiglu(x3).reshape(6, 4)[:4])


def test_layouts_empty_and_nonfinite():
    torch.manual_seed(0)
    x = strided(rand(33, 40, dtype=bf16, scale=8))
    assert not x.is_contiguous()
    assert_outputs_close((npu.npu_clipped_swiglu(x),), (clipped_swiglu_reference(x),), float_dtype=bf16)
    e = rand(1, 40, dtype=fp16).expand(5, 40)
    assert_outputs_close((npu.npu_clipped_swiglu(e, interleaved=False),),
                         (clipped_swiglu_reference(e, interleaved=False),), float_dtype=fp16)
    assert npu.npu_clipped_swiglu(torch.empty(0, 8)).shape == (0, 4)
    assert npu.npu_clipped_swiglu(torch.empty(3, 0, 4), dim=1).shape == (3, 0, 4)
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[nan, 1.0, 1.0, nan, inf, 1.0, -inf, 1.0, 1.0, inf, 1.0, -inf]])
    got, want = npu.npu_clipped_swiglu(x), clipped_swiglu_reference(x)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert torch.isnan(got[0, :2]).all()  # a NaN in A or B propagates (torch.clamp's rule)
    a1 = torch.sigmoid(torch.tensor(1.702))
    torch.testing.assert_close(got[0, 2:], torch.stack([7.0 * torch.sigmoid(torch.tensor(7.0 * 1.702)) * 2.0,
                                                        torch.tensor(nan), 8.0 * a1, -6.0 * a1]), equal_nan=True)
    # A = inf clamped to limit; A = -inf: -inf / (exp(inf) + 1) = -inf / inf, NaN (as torch's silu);
    # B = +-inf clamped to +-limit, then + bias


def test_gpt_oss_spelling_is_the_operator():
    """transformers' GptOssExperts activation (the Benchmark's unfused baseline)."""
    torch.manual_seed(0)
    x = rand(6, 64, scale=10)
    torch.testing.assert_close(npu.npu_clipped_swiglu(x), _unfused(x), rtol=1e-5, atol=1e-5)


def test_compiles_with_dynamic_rows():
    f = torch.compile(lambda x: npu.npu_clipped_swiglu(x, limit=3.0) * 2, dynamic=True, fullgraph=True)
    for rows in (3, 9):
        x = rand(rows, 24, dtype=bf16, scale=6)
        assert torch.equal(f(x), npu.npu_clipped_swiglu(x, limit=3.0) * 2)


@pytest.mark.parametrize("kw", [{}, {"dim": 1, "interleaved": False}, {"dim": 1},
                                {"groups": True, "alpha": 0.7, "limit": 1.0, "bias": 1.2}])
def test_onnx_export_runs_in_onnxruntime(tmp_path, kw):
    """The custom node ClippedSwiglu (its local function) and the composite-only export, run
    by onnxruntime, against eager (tests/test_onnx_export.py's harness)."""
    from tests.test_onnx_export import Op, _check

    x = rand(6, 4, 10, scale=8)
    if kw.pop("groups", False):
        g = torch.tensor([2, 1], dtype=I64)
        _check(tmp_path, Op(lambda a, b: npu.npu_clipped_swiglu(a, group_index=b, **kw)), (x, g),
               ["ClippedSwiglu"], tol=1e-5)
    else:
        _check(tmp_path, Op(lambda a: npu.npu_clipped_swiglu(a, **kw)), (x,), ["ClippedSwiglu"], tol=1e-5)
