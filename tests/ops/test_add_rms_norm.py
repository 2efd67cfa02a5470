"""npu_add_rms_norm: the native CPU kernel against the reference over dtypes, sizes,
multi-dimensional gamma, strided and empty inputs (the sum output `x` exact); values on
hand-built cases; the backward against autograd of the formula."""

import pytest
import torch

from op_sdk.ops.add_rms_norm import add_rms_norm_reference
from tests.ops._helpers import (
    T,
    assert_outputs_close,
    bad,
    bf16,
    fp16,
    fp32,
    npu,
    rand,
    rms_norm_fp64,
    strided,
    zeros,
)

SCHEMAS = [
    "npu_add_rms_norm(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor, Tensor)",
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_add_rms_norm": "AddRmsNorm"}



def samples():
    h = 24
    return [
        ("npu_add_rms_norm", (rand(7, h, dtype=fp16), rand(7, h, dtype=fp16), rand(h, dtype=fp16)), {}),
        ("npu_add_rms_norm", (rand(3, 5, h, grad=True), rand(3, 5, h, grad=True), rand(h, grad=True)), {}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real): 2-D and 3-D inputs, every dtype."""
    cases = []
    for lead in [(5,), (2, 3)]:
        for dt in (fp16, bf16, fp32):
            cases.append(("npu_add_rms_norm", (rand(*lead, 24, dtype=dt), rand(*lead, 24, dtype=dt),
                                               rand(24, dtype=dt)), {}))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("add/x2-shape", "npu_add_rms_norm", (T(4, 8), T(5, 8), T(8)), {}, "x2", RuntimeError),
    ("add/x2-dtype", "npu_add_rms_norm", (T(4, 8, dtype=fp16), T(4, 8, dtype=bf16), T(8, dtype=fp16)), {},
     "x2", RuntimeError),
    ("add/gamma-dtype", "npu_add_rms_norm", (T(4, 8, dtype=fp16), T(4, 8, dtype=fp16), T(8)), {},
     "gamma", RuntimeError),
    ("add/x1-dtype", "npu_add_rms_norm", (T(4, 8, dtype=torch.float64), T(4, 8, dtype=torch.float64),
                                          T(8, dtype=torch.float64)), {}, "x1", RuntimeError),
    ("add/x1-9-dims", "npu_add_rms_norm", (T(*[1] * 8 + [8]), T(*[1] * 8 + [8]), T(8)), {}, "x1", RuntimeError),
    ("add/gamma-shape", "npu_add_rms_norm", (T(4, 8), T(4, 8), T(4)), {}, "gamma", RuntimeError),
]

BAD_CALLS = [
    bad("npu_add_rms_norm", "x1",
        zeros(4, 8, dtype=torch.int32), zeros(4, 8, dtype=torch.int32), zeros(8, dtype=torch.int32)),
    bad("npu_add_rms_norm", "x2", zeros(4, 8), zeros(4, 9), zeros(8)),
    bad("npu_add_rms_norm", "x2", zeros(4, 8), zeros(4, 8, dtype=fp16), zeros(8)),
    bad("npu_add_rms_norm", "gamma", zeros(4, 8), zeros(4, 8), zeros(8, dtype=fp32)),
    bad("npu_add_rms_norm", "x1", zeros(*[1] * 9), zeros(*[1] * 9), zeros(1)),
]


# ---- the native kernel against the reference ------------------------------------------

@pytest.mark.parametrize("dtype", [fp16, bf16, fp32])
@pytest.mark.parametrize("shape", [(1, 96), (257, 96), (2, 5, 7), (3, 7168)])
def test_add_rms_norm(dtype, shape):
    torch.manual_seed(0)
    x1, x2 = rand(*shape, dtype=dtype), rand(*shape, dtype=dtype)
    g = rand(shape[-1], dtype=dtype)
    # x, the rounded fp32 sum, is exact
    assert_outputs_close(npu.npu_add_rms_norm(x1, x2, g), add_rms_norm_reference(x1, x2, g),
                         exact=(2,), float_dtype=dtype)


def test_add_rms_norm_non_contiguous_multi_dim_gamma_and_empty():
    torch.manual_seed(0)
    x1, x2 = strided(rand(6, 5, 24, dtype=fp16)), rand(6, 5, 24, dtype=fp16)
    g = rand(5, 24, dtype=fp16)
    assert_outputs_close(npu.npu_add_rms_norm(x1, x2, g), add_rms_norm_reference(x1, x2, g),
                         exact=(2,), float_dtype=fp16)
    e = torch.empty(0, 24, dtype=bf16)
    out = npu.npu_add_rms_norm(e, e, torch.ones(24, dtype=bf16))
    assert [tuple(o.shape) for o in out] == [(0, 24), (0, 1), (0, 24)]


# ---- semantics on hand-built cases ----------------------------------------------------------

@pytest.mark.parametrize("dtype", [bf16, fp16, fp32])
def test_add_rms_norm_uses_unrounded_sum(dtype):
    torch.manual_seed(4)
    x1, x2 = torch.randn(9, 64, dtype=dtype), torch.randn(9, 64, dtype=dtype)
    g = torch.randn(64, dtype=dtype)
    y, rstd, x = npu.npu_add_rms_norm(x1, x2, g)
    s = x1.double() + x2.double()
    y64, r64 = rms_norm_fp64(s, g)
    assert torch.equal(x, (x1.float() + x2.float()).to(dtype))
    torch.testing.assert_close(rstd.double(), r64, rtol=1e-5, atol=1e-6)
    tol = {bf16: 1e-2, fp16: 1e-3, fp32: 1e-5}[dtype]
    torch.testing.assert_close(y.double(), y64.to(dtype).double(), rtol=tol, atol=tol)


# ---- autograd ---------------------------------------------------------------------------------

def test_backward_of_add_rms_norm_matches_autograd_of_reference():
    torch.manual_seed(0)
    x1 = torch.randn(4, 3, 16, dtype=torch.float64, requires_grad=True)
    x2 = torch.randn(4, 3, 16, dtype=torch.float64, requires_grad=True)
    g = torch.randn(16, dtype=torch.float64, requires_grad=True)

    # the norm ops accept fp32 only among full-precision types; use fp32 against an fp64
    # autograd of the same formula
    def ref(a, b, c):
        x = a + b
        rstd = 1 / torch.sqrt(x.square().mean(-1, keepdim=True) + 1e-6)
        return x * rstd * c, rstd, x

    fx1, fx2, fg = (t.detach().float().requires_grad_() for t in (x1, x2, g))
    y, rstd, x = torch.ops.npu.npu_add_rms_norm(fx1, fx2, fg)
    yr, rr, xr = ref(x1, x2, g)
    w = torch.randn_like(yr)
    ((y * w.float()).sum() + rstd.sum() + x.sum()).backward()
    ((yr * w).sum() + rr.sum() + xr.sum()).backward()
    for a, b in ((fx1, x1), (fx2, x2), (fg, g)):
        torch.testing.assert_close(a.grad.double(), b.grad, rtol=1e-4, atol=1e-4)
