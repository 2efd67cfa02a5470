"""Shared pieces of the rms-norm operators (rms_norm, add_rms_norm, add_rms_norm_cast and the
fused quantising norms): the gamma rule, the rstd shape, the fp32 normalisation and its
gradient."""

from __future__ import annotations

import torch

from op_sdk.ops._common import FLOAT_DTYPES, check, check_dtype, check_same_shape


def check_gamma(op: str, x: torch.Tensor, gamma: torch.Tensor, xname: str) -> None:
    check(1 <= gamma.dim() <= x.dim(), op, "gamma",
          f"must have 1 to {xname}.dim() = {x.dim()} dims, got {gamma.dim()}")
    check(tuple(x.shape[x.dim() - gamma.dim():]) == tuple(gamma.shape), op, "gamma",
          f"must match the trailing dims of '{xname}' {list(x.shape)}, got {list(gamma.shape)}")


def rstd_shape(x: torch.Tensor, gamma: torch.Tensor) -> list:
    k = x.dim() - gamma.dim()
    return list(x.shape[:k]) + [1] * gamma.dim()


def check_add_rms_norm(op, x1, x2, gamma, dtypes=FLOAT_DTYPES, max_dims=8, min_dims=1):
    check_dtype(x1, op, "x1", dtypes)
    check(min_dims <= x1.dim() <= max_dims, op, "x1",
          f"must have {min_dims} to {max_dims} dims, got {x1.dim()}")
    check_same_shape(x2, x1, op, "x2", "x1")
    check(x2.dtype == x1.dtype, op, "x2", f"must have the dtype of 'x1' ({x1.dtype}), got {x2.dtype}")
    check(gamma.dtype == x1.dtype, op, "gamma",
          f"must have the dtype of 'x1' ({x1.dtype}), got {gamma.dtype}")
    check_gamma(op, x1, gamma, "x1")


def gamma_weight(gamma: torch.Tensor, plus_one: bool = False) -> torch.Tensor:
    """The fp32 weight the norm multiplies by: gamma, or 1 + gamma (Gemma's rms-norm, the
    sum in fp32: ops-nn's kernel adds 1 to gamma up-cast). The native and Triton kernels of
    npu_gemma_rms_norm are given this tensor."""
    g = gamma.float()
    return g + 1.0 if plus_one else g


def _normalize(x: torch.Tensor, gamma: torch.Tensor, epsilon: float, plus_one: bool = False):
    """fp32 rms-norm over gamma's dims: returns (y fp32, rstd fp32 keep-dims); y = x * rstd
    * gamma, or x * rstd * (1 + gamma) with ``plus_one``."""
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    rstd = 1.0 / torch.sqrt(x.square().mean(dims, keepdim=True) + epsilon)
    return x * rstd * gamma_weight(gamma, plus_one), rstd



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
