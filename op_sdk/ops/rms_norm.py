"""npu_rms_norm, npu_add_rms_norm, npu_add_rms_norm_cast.

Native CPU kernels: csrc/rms_norm.cpp (over kernels/rms_norm.h).
"""

from __future__ import annotations

import torch

from op_sdk.library import define_op
from op_sdk.ops._common import (
    FLOAT_DTYPES,
    HALF_DTYPES,
    check,
    check_dtype,
    check_same_shape,
)

_RMS_NORM_DTYPES = {
    (torch.float16, torch.float32), (torch.bfloat16, torch.float32),
    (torch.float16, torch.float16), (torch.bfloat16, torch.bfloat16),
    (torch.float32, torch.float32),
}


def _check_gamma(op: str, x: torch.Tensor, gamma: torch.Tensor, xname: str) -> None:
    check(1 <= gamma.dim() <= x.dim(), op, "gamma",
          f"must have 1 to {xname}.dim() = {x.dim()} dims, got {gamma.dim()}")
    check(tuple(x.shape[x.dim() - gamma.dim():]) == tuple(gamma.shape), op, "gamma",
          f"must match the trailing dims of '{xname}' {list(x.shape)}, got {list(gamma.shape)}")


def rstd_shape(x: torch.Tensor, gamma: torch.Tensor) -> list:
    k = x.dim() - gamma.dim()
    return list(x.shape[:k]) + [1] * gamma.dim()


def check_rms_norm(input, gamma):
    op = "npu_rms_norm"
    check(input.dim() >= 1, op, "input", "must have at least 1 dim")
    check((input.dtype, gamma.dtype) in _RMS_NORM_DTYPES, op, "gamma",
          "dtype must pair with 'input' as (float16, float32), (bfloat16, float32), "
          "(float16, float16), (bfloat16, bfloat16) or (float32, float32); got "
          f"({input.dtype}, {gamma.dtype})")
    _check_gamma(op, input, gamma, "input")


def check_add_rms_norm(op, x1, x2, gamma, dtypes=FLOAT_DTYPES, max_dims=8, min_dims=1):
    check_dtype(x1, op, "x1", dtypes)
    check(min_dims <= x1.dim() <= max_dims, op, "x1",
          f"must have {min_dims} to {max_dims} dims, got {x1.dim()}")
    check_same_shape(x2, x1, op, "x2", "x1")
    check(x2.dtype == x1.dtype, op, "x2", f"must have the dtype of 'x1' ({x1.dtype}), got {x2.dtype}")
    check(gamma.dtype == x1.dtype, op, "gamma",
          f"must have the dtype of 'x1' ({x1.dtype}), got {gamma.dtype}")
    _check_gamma(op, x1, gamma, "x1")


def _normalize(x: torch.Tensor, gamma: torch.Tensor, epsilon: float):
    """fp32 rms-norm over gamma's dims: returns (y fp32, rstd fp32 keep-dims)."""
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    rstd = 1.0 / torch.sqrt(x.square().mean(dims, keepdim=True) + epsilon)
    return x * rstd * gamma.float(), rstd


# ---- npu_rms_norm ------------------------------------------------------------------------

def rms_norm_reference(input, gamma, epsilon=1e-6):
    check_rms_norm(input, gamma)
    y, rstd = _normalize(input.float(), gamma, epsilon)
    return y.to(input.dtype), rstd


def rms_norm_fake(input, gamma, epsilon=1e-6):
    check_rms_norm(input, gamma)
    return torch.empty_like(input), input.new_empty(rstd_shape(input, gamma), dtype=torch.float32)


def _rms_norm_grad(x, gamma, rstd, dy, drstd):
    """Gradients of y = x * rstd * gamma (and of rstd itself) in fp32."""
    n = gamma.numel()
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    lead = tuple(range(x.dim() - gamma.dim()))
    x = x.float()
    dyg = dy.float() * gamma.float()
    dx = rstd * dyg - x * rstd.pow(3) * (dyg * x).sum(dims, keepdim=True) / n
    if drstd is not None:
        dx = dx - drstd.float() * rstd.pow(3) * x / n
    dgamma = (dy.float() * x * rstd).sum(lead) if lead else dy.float() * x * rstd
    return dx, dgamma


def _rms_norm_setup(ctx, inputs, output):
    input, gamma = inputs[0], inputs[1]
    ctx.save_for_backward(input, gamma, output[1])


def _rms_norm_backward(ctx, dy, drstd):
    input, gamma, rstd = ctx.saved_tensors
    dx, dgamma = _rms_norm_grad(input, gamma, rstd, dy, drstd)
    return dx.to(input.dtype), dgamma.to(gamma.dtype), None


npu_rms_norm = define_op(
    "npu_rms_norm(Tensor input, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
    reference=rms_norm_reference, fake=rms_norm_fake, native=("cpu",),
    backward=_rms_norm_backward, setup_context=_rms_norm_setup,
    doc="y = x * rstd * gamma over gamma's dims; rstd = 1/sqrt(mean(x^2) + eps).",
)


# ---- npu_add_rms_norm --------------------------------------------------------------------

def add_rms_norm_reference(x1, x2, gamma, epsilon=1e-6):
    check_add_rms_norm("npu_add_rms_norm", x1, x2, gamma)
    x = x1.float() + x2.float()
    y, rstd = _normalize(x, gamma, epsilon)
    return y.to(x1.dtype), rstd, x.to(x1.dtype)


def add_rms_norm_fake(x1, x2, gamma, epsilon=1e-6):
    check_add_rms_norm("npu_add_rms_norm", x1, x2, gamma)
    rstd = x1.new_empty(rstd_shape(x1, gamma), dtype=torch.float32)
    return torch.empty_like(x1), rstd, torch.empty_like(x1)


def _add_rms_norm_setup(ctx, inputs, output):
    x1, x2, gamma = inputs[0], inputs[1], inputs[2]
    ctx.save_for_backward(x1, x2, gamma, output[1])


def _add_rms_norm_backward(ctx, dy, drstd, dx_out):
    x1, x2, gamma, rstd = ctx.saved_tensors
    dx, dgamma = _rms_norm_grad(x1.float() + x2.float(), gamma, rstd, dy, drstd)
    if dx_out is not None:
        dx = dx + dx_out.float()
    return dx.to(x1.dtype), dx.to(x2.dtype), dgamma.to(gamma.dtype), None


npu_add_rms_norm = define_op(
    "npu_add_rms_norm(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) "
    "-> (Tensor, Tensor, Tensor)",
    reference=add_rms_norm_reference, fake=add_rms_norm_fake, native=("cpu",),
    backward=_add_rms_norm_backward, setup_context=_add_rms_norm_setup,
    doc="x = x1 + x2 (fp32); (y, rstd, x) with y, rstd from the unrounded sum.",
)


# ---- npu_add_rms_norm_cast ---------------------------------------------------------------

def add_rms_norm_cast_reference(x1, x2, gamma, epsilon=1e-6):
    check_add_rms_norm("npu_add_rms_norm_cast", x1, x2, gamma, dtypes=HALF_DTYPES)
    x = x1.float() + x2.float()
    y, rstd = _normalize(x, gamma, epsilon)
    return y, y.to(x1.dtype), rstd, x.to(x1.dtype)


def add_rms_norm_cast_fake(x1, x2, gamma, epsilon=1e-6):
    check_add_rms_norm("npu_add_rms_norm_cast", x1, x2, gamma, dtypes=HALF_DTYPES)
    rstd = x1.new_empty(rstd_shape(x1, gamma), dtype=torch.float32)
    return (torch.empty_like(x1, dtype=torch.float32), torch.empty_like(x1), rstd,
            torch.empty_like(x1))


npu_add_rms_norm_cast = define_op(
    "npu_add_rms_norm_cast(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
    reference=add_rms_norm_cast_reference, fake=add_rms_norm_cast_fake, native=("cpu",),
    doc="(y1 fp32, y2 = y1 in x1.dtype, rstd, x) of add_rms_norm; fp16/bf16 inputs.",
)

__all__ = ["npu_rms_norm", "npu_add_rms_norm", "npu_add_rms_norm_cast"]
