"""npu_dtype_cast and _npu_dtype_cast: a cast that always returns a new tensor."""

from __future__ import annotations

import torch

from op_sdk.library import define_op
from op_sdk.npu_binding import AclnnBinding
from op_sdk.ops._common import check

# ScalarType codes a cast may target (the plain numeric dtypes; quantized ones are not
# value types and raise).
_CAST_TARGETS = {
    0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64,
    5: torch.float16, 6: torch.float32, 7: torch.float64, 8: torch.complex32,
    9: torch.complex64, 10: torch.complex128, 11: torch.bool, 15: torch.bfloat16,
}


def _target(op: str, dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        check(dtype in _CAST_TARGETS.values(), op, "dtype", f"cannot be {dtype}")
        return dtype
    check(dtype in _CAST_TARGETS, op, "dtype",
          f"must be a numeric dtype code {sorted(_CAST_TARGETS)}, got {dtype}")
    return _CAST_TARGETS[dtype]


def _check_input_dtype(input, input_dtype):
    if input_dtype is not None:
        check(_target("npu_dtype_cast", input_dtype) == input.dtype, "npu_dtype_cast",
              "input_dtype", f"must match the input's dtype {input.dtype}, got {input_dtype}")


def _cast(input, dtype):
    """aclnnCast's value rules: complex -> real keeps the real part, real -> complex has a
    zero imaginary part, float -> integer truncates toward zero and NaN becomes 0. Always a
    new tensor (``copy=True`` when the dtype matches)."""
    x = input
    if x.is_complex() and not dtype.is_complex:
        x = torch.real(x)
    if x.is_floating_point() and not (dtype.is_floating_point or dtype.is_complex
                                      or dtype == torch.bool):
        x = torch.nan_to_num(x, nan=0.0, posinf=float("inf"), neginf=float("-inf"))
    return x.to(dtype, copy=True)


def dtype_cast_reference(input, dtype, input_dtype=None):
    _check_input_dtype(input, input_dtype)
    return _cast(input, _target("npu_dtype_cast", dtype))


def dtype_cast_fake(input, dtype, input_dtype=None):
    _check_input_dtype(input, input_dtype)
    return torch.empty_like(input, dtype=_target("npu_dtype_cast", dtype))


def _cast_setup(ctx, inputs, output):
    ctx.in_dtype = inputs[0].dtype


def _grad_back(ctx, grad):
    if grad.is_complex() and not ctx.in_dtype.is_complex:
        grad = torch.real(grad)  # the input was real: its gradient is the real part
    return grad.to(ctx.in_dtype)


def _cast_backward(ctx, grad):
    return _grad_back(ctx, grad), None, None


def _private_cast_backward(ctx, grad):
    return _grad_back(ctx, grad), None


npu_dtype_cast = define_op(
    "npu_dtype_cast(Tensor input, int dtype, int? input_dtype=None) -> Tensor",
    # dtype chooses y's dtype (the Meta function), which aclnnCast casts to; input_dtype
    # can only restate the input's dtype (the Meta function checks it)
    aclnn=AclnnBinding("aclnnCast", outputs=("y",), rename={"self": "input"},
                       dtype_of={"dtype": "y"}, meta_only=("dtype", "input_dtype")),
    reference=dtype_cast_reference, fake=dtype_cast_fake,
    backward=_cast_backward, setup_context=_cast_setup,
    doc="Cast to dtype (complex too); always a new tensor; float -> int truncates toward "
        "zero, NaN -> 0.",
)


def private_dtype_cast_reference(input, dtype):
    return _cast(input, _target("_npu_dtype_cast", dtype))


def private_dtype_cast_fake(input, dtype):
    return torch.empty_like(input, dtype=_target("_npu_dtype_cast", dtype))


_npu_dtype_cast = define_op(
    "_npu_dtype_cast(Tensor input, ScalarType dtype) -> Tensor",
    aclnn=AclnnBinding("aclnnCast", outputs=("y",), rename={"self": "input"}),
    reference=private_dtype_cast_reference, fake=private_dtype_cast_fake,
    backward=_private_cast_backward, setup_context=_cast_setup,
    doc="The ScalarType spelling of npu_dtype_cast, as torch_npu's .to() lowers to.",
)
