"""torch.library.opcheck on every operator: schema (mutation / aliasing), autograd
registration, fake tensor, and AOT dispatch with dynamic shapes."""

import pytest
import torch

import op_sdk  # noqa: F401
from tests.samples import samples

SAMPLES = samples()


def _id(i):
    name, args, kwargs = SAMPLES[i]
    return f"{name}-{i}"


@pytest.mark.parametrize("i", range(len(SAMPLES)), ids=_id)
def test_opcheck(i):
    name, args, kwargs = SAMPLES[i]
    op = getattr(torch.ops.npu, name).default
    # opcheck mutates in-place inputs: give it its own copies
    args = tuple(a.clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
                 for a in args)
    torch.library.opcheck(op, args, kwargs)


@pytest.mark.parametrize("i", range(len(SAMPLES)), ids=_id)
def test_fake_matches_kernel(i):
    """The fake function promises exactly the shapes, dtypes and strides' rank the kernel gives."""
    name, args, kwargs = SAMPLES[i]
    op = getattr(torch.ops.npu, name).default
    args = tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args)
    real = op(*args, **kwargs)
    meta_args = tuple(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args)
    meta_kwargs = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    fake = op(*meta_args, **meta_kwargs)
    real = real if isinstance(real, tuple) else (real,)
    fake = fake if isinstance(fake, tuple) else (fake,)
    assert len(real) == len(fake)
    for r, f in zip(real, fake):
        assert r.shape == f.shape and r.dtype == f.dtype, (name, r.shape, f.shape, r.dtype, f.dtype)


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


def test_non_differentiable_op_fails_at_backward_naming_it():
    x = torch.randn(4, 16, requires_grad=True)
    y, scale = torch.ops.npu.npu_dynamic_quant(x)
    assert y.dtype == torch.int8
    with pytest.raises(RuntimeError, match="npu_dynamic_quant"):
        scale.sum().backward()
