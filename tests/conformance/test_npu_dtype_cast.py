# Conformance port of the upstream unit tests of npu_dtype_cast.
# Upstream (two files):
#   Ascend/op-plugin, test/test_base_ops/test_dtype_cast.py, read at commit
#     517f2e7d0f202f38b76310706cb977ca2388ad21 (the file's last change:
#     82d5cadf3567a3eab437f0c812c40d4cc405a05e);
#   Ascend/pytorch (torch_npu), test/custom_ops/test_npu_dtype_cast.py, read at commit
#     9e73e708ab9350d203475609f36f8a43f6a0c2ab (the file's last change:
#     859abd9be777d64514417d8c9050c6d06ed40af0).
# Rewritten for op_sdk on CPU, not copied.
"""npu_dtype_cast against Tensor.to (forward and the gradient of a ones backward),
assertRtolEqual.

Differs (docs/conformance.md): storage formats (4, 29) do not exist on CPU (ND);
create_graph double backward gives no graph when grad_outputs does not require grad (as
Tensor.to; upstream expects one); the multi-device
copy case is not about npu_dtype_cast and needs two devices (skipped); the complex
case's autograd node is not named NpuDtypeCastBackward (only its presence is checked).
"""

import numpy as np
import pytest
import torch

from tests.conformance._golden import NPU_INT4, assert_rtol_equal, npu, uniform


def cast_with_grad(x, dtype, cast):
    """Upstream's cpu_op_exec / npu_op_exec: cast, backward of ones, (output, input grad)."""
    x = x.clone().requires_grad_(True)
    out = cast(x, dtype)
    out.backward(torch.ones_like(out))
    return out.detach(), x.grad


# ---- op-plugin test/test_base_ops/test_dtype_cast.py -----------------------------------------

def test_dtype_base():
    a = torch.rand(2).requires_grad_(True)
    assert npu.npu_dtype_cast(a, torch.half).requires_grad


SHAPE_FORMATS = [
    # (shape, the NPU storage format upstream creates the input in; CPU tensors are ND)
    pytest.param(1, 0, id="1-nd"),
    pytest.param((64, 10), 0, id="64x10-nd"),
    pytest.param((32, 1, 3, 3), 4, id="32x1x3x3-format4"),
    pytest.param((10, 128), 29, id="10x128-nz"),
]


@pytest.mark.parametrize("np_dtype, dst", [
    pytest.param(np.float32, torch.half, id="test_dtype_cast_shape_format"),
    pytest.param(np.float16, torch.float, id="test_dtype_cast_shape_format_fp16"),
])
@pytest.mark.parametrize("shape, npu_format", SHAPE_FORMATS)
def test_dtype_cast_shape_format(rng, np_dtype, dst, shape, npu_format):
    x = torch.from_numpy(uniform(rng, -1, 1, shape, np_dtype))
    gold_out, gold_grad = cast_with_grad(x, dst, lambda t, d: t.to(d))
    out, grad = cast_with_grad(x, dst, npu.npu_dtype_cast)
    assert_rtol_equal(gold_out, out)
    assert_rtol_equal(gold_grad, grad)


@pytest.mark.skip(reason="needs two NPUs, and checks Tensor.copy_ across devices, not "
                         "npu_dtype_cast (docs/conformance.md)")
def test_dtype_cast_multidevice():
    pass


def test_dtype_cast_int4():
    # Ascend950: int32 [1, 2, 3, 4] -> torch_npu.int4, two per byte (element 2i in the low
    # nibble): uint8 [33, 67]
    x = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
    out = npu.npu_dtype_cast(x, dtype=NPU_INT4, input_dtype=torch.int32)
    assert out.dtype == torch.uint8 and out.tolist() == [33, 67]


# ---- torch_npu test/custom_ops/test_npu_dtype_cast.py ------------------------------------------

def test_npu_dtype_cast(rng):
    x = torch.from_numpy(uniform(rng, -1, 1, (64, 10), np.float32))
    assert_rtol_equal(x.to(torch.float16), npu.npu_dtype_cast(x, torch.float16))


def test_npu_dtype_cast_double_backward():
    x = torch.randn(3, 3, requires_grad=True)
    y = npu.npu_dtype_cast(x, torch.half)
    (z,) = torch.autograd.grad(outputs=y, inputs=x, grad_outputs=torch.ones_like(y))
    assert z.grad_fn is None
    (z,) = torch.autograd.grad(outputs=y, inputs=x, grad_outputs=torch.ones_like(y),
                               create_graph=True)
    # upstream expects a grad_fn here; op_sdk's backward is grad.to(input dtype), which, as
    # Tensor.to's, records nothing when grad_outputs does not require grad
    assert z.grad_fn is None
    # the backward is itself differentiable: with a grad_outputs that requires grad
    v = torch.ones_like(y).requires_grad_(True)
    (z,) = torch.autograd.grad(outputs=y, inputs=x, grad_outputs=v, create_graph=True)
    assert z.grad_fn is not None
    (w,) = torch.autograd.grad(z.sum(), v)
    assert torch.equal(w, torch.ones_like(v))


def test_npu_dtype_cast_complex():
    x = torch.randn([2, 3], dtype=torch.complex64).requires_grad_(True)
    y = npu.npu_dtype_cast(x, torch.complex128)
    assert y.dtype == torch.complex128 and torch.equal(y.detach(), x.detach().to(torch.complex128))
    # upstream checks that the node is named NpuDtypeCastBackward; op_sdk names it as
    # torch_npu's generated autograd does (NpuDtypeCastBackward0)
    assert "NpuDtypeCastBackward" in str(y.grad_fn)
    assert y.grad_fn.name() == "NpuDtypeCastBackward0"
    assert npu._npu_dtype_cast(x, torch.complex128).grad_fn.name() == "NpuDtypeCastBackward1"
    with pytest.raises(RuntimeError, match=r"grad can be implicitly created"):
        y.sum().backward()
