"""npu_gemma_rms_norm: the native CPU kernel against the reference and the formula over
dtypes, sizes, multi-dimensional gamma, strided / expanded / empty inputs, NaN and inf, and
autograd; the registry-wide tables (samples, constraint cases, Meta grid, GE type)."""

import pytest
import torch

from op_sdk.ops.gemma_rms_norm import gemma_rms_norm_reference
from tests.ops._helpers import (
    T,
    assert_outputs_close,
    bad,
    bf16,
    fp16,
    fp32,
    npu,
    rand,
    strided,
    zeros,
)

SCHEMAS = [
    "npu_gemma_rms_norm(Tensor input, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_gemma_rms_norm": "GemmaRmsNorm"}

DTYPES = [fp32, fp16, bf16]


def samples():
    h = 24
    return [
        ("npu_gemma_rms_norm", (rand(5, h, dtype=bf16), rand(h, dtype=bf16)), {}),
        ("npu_gemma_rms_norm", (rand(2, 3, h, grad=True), rand(h, grad=True)), {"epsilon": 1e-5}),
        ("npu_gemma_rms_norm", (rand(2, 3, 8, dtype=fp16), rand(3, 8, dtype=fp16)), {}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real)."""
    cases = []
    for lead in [(5,), (2, 3), (2, 1, 3)]:
        for dt in DTYPES:
            cases.append(("npu_gemma_rms_norm", (rand(*lead, 24, dtype=dt), rand(24, dtype=dt)), {"epsilon": 1e-5}))
        cases.append(("npu_gemma_rms_norm", (rand(*lead, 4, 6, dtype=bf16), rand(4, 6, dtype=bf16)), {}))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("gemma/gamma-dtype", "npu_gemma_rms_norm", (T(4, 8, dtype=bf16), T(8, dtype=fp32)), {}, "gamma", RuntimeError),
    ("gemma/input-dtype", "npu_gemma_rms_norm", (T(4, 8, dtype=torch.float64), T(8, dtype=torch.float64)), {}, "input", RuntimeError),  # noqa: E501
    ("gemma/gamma-shape", "npu_gemma_rms_norm", (T(4, 8), T(6)), {}, "gamma", RuntimeError),
    ("gemma/gamma-too-many-dims", "npu_gemma_rms_norm", (T(8), T(1, 8)), {}, "gamma", RuntimeError),
    ("gemma/nine-dims", "npu_gemma_rms_norm", (T(*[1] * 9, 8), T(8)), {}, "input", RuntimeError),
]

BAD_CALLS = [
    bad("npu_gemma_rms_norm", "gamma", zeros(4, 8), zeros(8, dtype=fp16)),
    bad("npu_gemma_rms_norm", "gamma", zeros(4, 8), zeros(7)),
    bad("npu_gemma_rms_norm", "input", zeros(4, 8, dtype=torch.int32), zeros(8, dtype=torch.int32)),
]


def _formula(x, gamma, eps=1e-6):
    """ops-nn's golden in float64: x / sqrt(mean(x^2) + eps) * (1 + gamma)."""
    xd = x.double()
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    rstd = 1 / torch.sqrt(xd.square().mean(dims, keepdim=True) + eps)
    return xd * rstd * (1 + gamma.double()), rstd


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,gdims", [((1, 96), 1), ((257, 96), 1), ((2, 3, 7), 1),
                                         ((4, 3, 7), 2), ((3, 7168), 1), ((5,), 1)])
def test_matches_reference_and_formula(dtype, shape, gdims):
    torch.manual_seed(0)
    x = rand(*shape, dtype=dtype)
    g = rand(*shape[len(shape) - gdims:], dtype=dtype)
    got = npu.npu_gemma_rms_norm(x, g, 1e-5)
    assert_outputs_close(got, gemma_rms_norm_reference(x, g, 1e-5), float_dtype=dtype)
    y, rstd = _formula(x, g, 1e-5)
    assert got[1].dtype == fp32 and got[1].shape == rstd.shape
    torch.testing.assert_close(got[1].double(), rstd, rtol=1e-6, atol=0)
    # one rounding of the fp32 result to x's dtype: within half an ulp of x's dtype (plus the
    # fp32 error) of the exact value
    ulp = {fp32: 2e-6, fp16: 2 ** -10, bf16: 2 ** -7}[dtype]
    torch.testing.assert_close(got[0].double(), y, rtol=ulp, atol=1e-6)


def test_differs_from_rms_norm_by_the_plus_one():
    """Gemma's weight is 1 + gamma: with gamma = w - 1 it computes npu_rms_norm with w, bit for
    bit where w - 1 and its sum with 1 are exact."""
    x = rand(6, 32)
    w = torch.arange(32, dtype=fp32) / 8 + 0.5  # w - 1 exact in fp32
    got = npu.npu_gemma_rms_norm(x, w - 1)
    want = npu.npu_rms_norm(x, w)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_layouts_empty_and_nonfinite():
    torch.manual_seed(0)
    x, g = strided(rand(33, 40, dtype=bf16)), strided(rand(40, dtype=bf16))
    assert not x.is_contiguous() and not g.is_contiguous()
    y, rstd = npu.npu_gemma_rms_norm(x, g)
    assert_outputs_close((y, rstd), gemma_rms_norm_reference(x, g), float_dtype=bf16)
    assert y.stride() == torch.empty_like(x).stride()  # laid out as the fake promises
    e = rand(1, 40, dtype=fp16).expand(5, 40)  # stride-0 rows
    assert_outputs_close(npu.npu_gemma_rms_norm(e, g.half()),
                         gemma_rms_norm_reference(e, g.half()), float_dtype=fp16)
    y, rstd = npu.npu_gemma_rms_norm(torch.empty(0, 5, 40, dtype=bf16), torch.ones(40, dtype=bf16))
    assert y.shape == (0, 5, 40) and rstd.shape == (0, 5, 1)
    x = torch.tensor([[1.0, float("nan"), 2.0, 3.0], [1.0, float("inf"), 2.0, 3.0],
                      [1.0, 2.0, 3.0, 4.0]])
    g = torch.tensor([0.0, 1.0, -1.0, float("inf")])
    got, want = npu.npu_gemma_rms_norm(x, g), gemma_rms_norm_reference(x, g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, equal_nan=True)
    assert torch.isnan(got[0][0]).all() and got[1][1].item() == 0.0


def test_autograd_matches_the_formula():
    torch.manual_seed(0)
    x, g = rand(3, 5, 16, grad=True), rand(16, grad=True)
    y, rstd = npu.npu_gemma_rms_norm(x, g)
    (y * torch.linspace(-1, 1, 16)).sum().backward()
    xd, gd = x.detach().double().requires_grad_(), g.detach().double().requires_grad_()
    (_formula(xd, gd)[0] * torch.linspace(-1, 1, 16).double()).sum().backward()
    torch.testing.assert_close(x.grad.double(), xd.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g.grad.double(), gd.grad, rtol=1e-5, atol=1e-5)


def test_compiles_with_dynamic_rows():
    f = torch.compile(lambda x, g: npu.npu_gemma_rms_norm(x, g)[0] * 2, dynamic=True, fullgraph=True)
    g = rand(24, dtype=bf16)
    for rows in (3, 9):
        x = rand(rows, 24, dtype=bf16)
        assert torch.equal(f(x, g), npu.npu_gemma_rms_norm(x, g)[0] * 2)


@pytest.mark.parametrize("dt,tol", [(None, 1e-5), (bf16, 1e-2)])
def test_onnx_export_runs_in_onnxruntime(tmp_path, dt, tol):
    """The custom node GemmaRmsNorm (its local function) and the composite-only export, run
    by onnxruntime, against eager (tests/test_onnx_export.py's harness)."""
    from tests.test_onnx_export import Op, _check

    x, g = rand(2, 7, 33), rand(33)
    _check(tmp_path, Op(lambda a, b: npu.npu_gemma_rms_norm(a, b, 1e-5), (dt, dt)), (x, g),
           ["GemmaRmsNorm"], tol=tol)
