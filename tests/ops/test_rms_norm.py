"""npu_rms_norm: the native CPU kernel against the reference over dtype pairs, sizes,
multi-dimensional gamma, strided and empty inputs; values on hand-built cases."""

import pytest
import torch

from op_sdk.ops.rms_norm import rms_norm_reference
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
    "npu_rms_norm(Tensor input, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_rms_norm": "RmsNorm"}



def samples():
    h = 24
    return [
        ("npu_rms_norm", (rand(5, h, dtype=bf16), rand(h, dtype=fp32)), {}),
        ("npu_rms_norm", (rand(2, 3, h, grad=True), rand(h, grad=True)), {"epsilon": 1e-5}),
        ("npu_rms_norm", (rand(2, 3, 8, dtype=fp16), rand(3, 8, dtype=fp16)), {}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real): 2-D and 3-D inputs, every dtype pair,
    multi-dimensional gamma."""
    cases = []
    for lead in [(5,), (2, 3)]:
        for dt, gdt in [(fp16, fp32), (bf16, fp32), (fp16, fp16), (bf16, bf16), (fp32, fp32)]:
            cases.append(("npu_rms_norm", (rand(*lead, 24, dtype=dt), rand(24, dtype=gdt)), {"epsilon": 1e-5}))
        cases.append(("npu_rms_norm", (rand(*lead, 4, 6, dtype=bf16), rand(4, 6, dtype=bf16)), {}))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("rms/gamma-dtype-pair", "npu_rms_norm", (T(4, 8, dtype=fp16), T(8, dtype=bf16)), {}, "gamma", RuntimeError),
    ("rms/fp32-x-half-gamma", "npu_rms_norm", (T(4, 8), T(8, dtype=fp16)), {}, "gamma", RuntimeError),
    ("rms/gamma-shape", "npu_rms_norm", (T(4, 8), T(6)), {}, "gamma", RuntimeError),
    ("rms/gamma-too-many-dims", "npu_rms_norm", (T(8), T(1, 8)), {}, "gamma", RuntimeError),
]

BAD_CALLS = [
    bad("npu_rms_norm", "gamma", zeros(4, 8), zeros(8, dtype=fp16)),
    bad("npu_rms_norm", "gamma", zeros(4, 8), zeros(7)),
    bad("npu_rms_norm", "gamma", zeros(4, 8), zeros(2, 4, 8)),
]


# ---- the native kernel against the reference ------------------------------------------

@pytest.mark.parametrize("xdt,gdt", [(fp16, fp32), (bf16, fp32), (fp16, fp16), (bf16, bf16),
                                     (fp32, fp32)])
@pytest.mark.parametrize("shape,gdims", [((1, 96), 1), ((257, 96), 1), ((2, 3, 7), 1),
                                         ((4, 3, 7), 2), ((3, 7168), 1)])
def test_rms_norm(xdt, gdt, shape, gdims):
    torch.manual_seed(0)
    x = rand(*shape, dtype=xdt)
    g = rand(*shape[len(shape) - gdims:], dtype=gdt)
    assert_outputs_close(npu.npu_rms_norm(x, g, 1e-5), rms_norm_reference(x, g, 1e-5),
                         float_dtype=xdt)


def test_rms_norm_non_contiguous_and_empty():
    torch.manual_seed(0)
    x = strided(rand(33, 40, dtype=bf16))
    g = strided(rand(40, dtype=bf16))
    assert not x.is_contiguous() and not g.is_contiguous()
    y, rstd = npu.npu_rms_norm(x, g)
    assert_outputs_close((y, rstd), rms_norm_reference(x, g), float_dtype=bf16)
    assert y.stride() == torch.empty_like(x).stride()  # laid out as the fake promises
    y, rstd = npu.npu_rms_norm(torch.empty(0, 5, 40, dtype=bf16), torch.ones(40, dtype=bf16))
    assert y.shape == (0, 5, 40) and rstd.shape == (0, 5, 1)


# ---- semantics on hand-built cases ----------------------------------------------------------

def test_rms_norm_multi_dim_gamma_and_rstd_shape():
    x = torch.randn(2, 3, 4, 8)
    g = torch.randn(4, 8)
    y, rstd = npu.npu_rms_norm(x, g)
    assert rstd.shape == (2, 3, 1, 1)
    xf = x.double()
    r = 1 / torch.sqrt(xf.square().mean((-2, -1), keepdim=True) + 1e-6)
    torch.testing.assert_close(y.double(), xf * r * g.double(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [100_000, 1_000_000])
@pytest.mark.parametrize("op", ["npu_rms_norm", "npu_add_rms_norm"])
def test_rstd_stays_exact_on_long_rows(op, n):
    """The sum of squares is fp32 within 1024-element blocks, the blocks summed in fp64: rstd
    of a constant row stays within fp32 rounding at any length (a single fp32 chain per
    lane drifted 1.5e-5 relative at 1e5 elements and 1.5e-4 at 1e6)."""
    exact = 1.0 / (0.3 ** 2 + 1e-6) ** 0.5
    gamma = torch.ones(n)
    if op == "npu_rms_norm":
        rstd = npu.npu_rms_norm(torch.full((1, n), 0.3), gamma)[1]
    else:
        rstd = npu.npu_add_rms_norm(torch.full((1, n), 0.1), torch.full((1, n), 0.2), gamma)[1]
    assert abs(float(rstd) - exact) / exact < 2e-7, float(rstd)
    x = torch.randn(2, n)
    r = npu.npu_rms_norm(x, gamma)[1]
    want = 1.0 / torch.sqrt(x.double().square().mean(-1, keepdim=True) + 1e-6)
    assert torch.allclose(r.double(), want, rtol=1e-6, atol=0)
