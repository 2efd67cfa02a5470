"""npu_dtype_cast and _npu_dtype_cast: always a new tensor, float -> int truncation, NaN ->
0, complex casts both ways (torch_npu's documented contract beyond A2 / A3) and the
backward from a complex output."""

import itertools

import pytest
import torch

from tests.ops._helpers import T, bf16, fp16, fp32, npu, rand

SCHEMAS = [
    "npu_dtype_cast(Tensor input, int dtype, int? input_dtype=None) -> Tensor",
    "_npu_dtype_cast(Tensor input, ScalarType dtype) -> Tensor",
]


def samples():
    return [
        ("npu_dtype_cast", (rand(5, 7), torch.complex64), {}),
        ("npu_dtype_cast", (rand(5, 7), torch.int8), {}),
        ("npu_dtype_cast", (rand(5, 7, dtype=bf16), torch.float32), {"input_dtype": bf16}),
        ("_npu_dtype_cast", (rand(5, 7, grad=True), torch.float16), {}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real): complex casts, every float input to every
    output dtype, 2-D and 3-D inputs."""
    cases = []
    for src, dst in itertools.product((fp32, torch.complex64), (torch.complex64, torch.complex128, fp32)):
        cases.append(("npu_dtype_cast", (rand(3, 5).to(src), dst), {}))
    for src, dst in itertools.product((fp32, fp16, bf16), (torch.int8, torch.int32, fp16, bf16, fp32)):
        cases.append(("npu_dtype_cast", (rand(5, 7, dtype=src), dst), {}))
        cases.append(("_npu_dtype_cast", (rand(2, 3, 7, dtype=src), dst), {}))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("cast/dtype", "npu_dtype_cast", (T(4), 12), {}, "dtype", RuntimeError),
    ("cast/input-dtype", "npu_dtype_cast", (T(4), 5), {"input_dtype": 5}, "input_dtype", RuntimeError),
    ("_cast/dtype", "_npu_dtype_cast", (T(4), torch.qint8), {}, "dtype", RuntimeError),
]


# ---- semantics on hand-built cases ----------------------------------------------------------

def test_dtype_cast_is_a_new_tensor_and_truncates():
    x = torch.tensor([-1.7, -0.5, 0.5, 1.7, 2.9])
    y = npu.npu_dtype_cast(x, torch.int32)
    assert y.tolist() == [-1, 0, 0, 1, 2]
    same = npu.npu_dtype_cast(x, torch.float32)
    assert same.data_ptr() != x.data_ptr() and torch.equal(same, x)
    same2 = npu._npu_dtype_cast(x, torch.float32)
    assert same2.data_ptr() != x.data_ptr()


# ---- complex casts (the documented contract beyond A2 / A3) -----------------------------------

@pytest.mark.parametrize("src,dst", list(itertools.product(
    [fp32, fp16, torch.complex64, torch.complex128],
    [torch.complex64, torch.complex128, fp32, torch.int32])))
def test_dtype_cast_complex(src, dst):
    torch.manual_seed(0)
    x = torch.randn(4, 5, dtype=src) * 3
    for out in (npu.npu_dtype_cast(x, dst), npu._npu_dtype_cast(x, dst)):
        assert out.dtype == dst and out.data_ptr() != x.data_ptr()
        real = torch.real(x) if x.is_complex() else x
        if dst.is_complex:
            expect = x.to(dst)
        else:
            expect = real.to(dst)
        assert torch.equal(out, expect)


def test_dtype_cast_complex32_and_nan_to_zero():
    x = torch.tensor([1.5, -2.0, 0.25])
    c = npu.npu_dtype_cast(x, 8)
    assert c.dtype == torch.complex32 and torch.equal(npu.npu_dtype_cast(c, 9).real, x)
    assert npu.npu_dtype_cast(torch.tensor([float("nan"), 2.9, -2.9]), torch.int8).tolist() == [0, 2, -2]


def test_dtype_cast_backward_from_complex_is_the_real_part():
    x = torch.randn(3, requires_grad=True)
    npu.npu_dtype_cast(x, torch.complex64).abs().sum().backward()
    torch.testing.assert_close(x.grad, torch.sign(x.detach()))
