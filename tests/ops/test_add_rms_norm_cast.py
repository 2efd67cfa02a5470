"""npu_add_rms_norm_cast: the native CPU kernel against the reference over dtypes and
sizes (y2 is y1 rounded once; the sum output `x` exact), empty inputs; the outputs' dtypes
and values on a hand-built case."""

import pytest
import torch

from op_sdk.ops.add_rms_norm_cast import add_rms_norm_cast_reference
from tests.ops._helpers import T, assert_outputs_close, bad, bf16, fp16, fp32, npu, rand, zeros

SCHEMAS = [
    "npu_add_rms_norm_cast(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor, Tensor, Tensor)",  # noqa: E501
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_add_rms_norm_cast": "AddRmsNormCast"}



def samples():
    h = 24
    return [
        ("npu_add_rms_norm_cast", (rand(7, h, dtype=bf16), rand(7, h, dtype=bf16), rand(h, dtype=bf16)), {}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real): 2-D and 3-D inputs, every dtype."""
    cases = []
    for lead in [(5,), (2, 3)]:
        for dt in (fp16, bf16):
            cases.append(("npu_add_rms_norm_cast", (rand(*lead, 24, dtype=dt), rand(*lead, 24, dtype=dt),
                                                    rand(24, dtype=dt)), {}))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("cast/fp32-input", "npu_add_rms_norm_cast", (T(4, 8), T(4, 8), T(8)), {}, "x1", RuntimeError),
]

BAD_CALLS = [
    bad("npu_add_rms_norm_cast", "x1",
        zeros(4, 8, dtype=fp32), zeros(4, 8, dtype=fp32), zeros(8, dtype=fp32)),
]


# ---- the native kernel against the reference ------------------------------------------

@pytest.mark.parametrize("dtype", [fp16, bf16])
@pytest.mark.parametrize("shape", [(1, 96), (257, 96), (2, 5, 7), (3, 7168)])
def test_add_rms_norm_cast(dtype, shape):
    torch.manual_seed(0)
    x1, x2 = rand(*shape, dtype=dtype), rand(*shape, dtype=dtype)
    g = rand(shape[-1], dtype=dtype)
    out = npu.npu_add_rms_norm_cast(x1, x2, g)
    assert_outputs_close(out, add_rms_norm_cast_reference(x1, x2, g), exact=(3,),
                         float_dtype=dtype)
    assert torch.equal(out[1], out[0].to(dtype))  # y2 is y1 rounded once


def test_add_rms_norm_cast_empty():
    e = torch.empty(0, 24, dtype=bf16)
    out = npu.npu_add_rms_norm_cast(e, e, torch.ones(24, dtype=bf16))
    assert [tuple(o.shape) for o in out] == [(0, 24), (0, 24), (0, 1), (0, 24)]


# ---- semantics on hand-built cases ----------------------------------------------------------

def test_add_rms_norm_cast_outputs():
    x1, x2, g = torch.randn(5, 32, dtype=bf16), torch.randn(5, 32, dtype=bf16), torch.randn(32, dtype=bf16)
    y1, y2, rstd, x = npu.npu_add_rms_norm_cast(x1, x2, g)
    assert (y1.dtype, y2.dtype, rstd.dtype, x.dtype) == (fp32, bf16, fp32, bf16)
    assert torch.equal(y2, y1.to(bf16))
    yr, _, _ = npu.npu_add_rms_norm(x1, x2, g)
    torch.testing.assert_close(y2.float(), yr.float(), rtol=1e-2, atol=1e-2)
