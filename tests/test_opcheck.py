"""torch.library.opcheck on every sample call of every operator (the samples() of
tests/ops/test_<slice>.py): schema (mutation / aliasing), autograd registration, fake tensor,
and AOT dispatch with dynamic shapes; and the fake function against the kernel."""

import pytest
import torch

from tests.ops import gather, opdef, slice_modules

SAMPLES = gather("samples")
# operators whose slice runs only some of opcheck's checks (it says why)
TEST_UTILS = {name: utils for module in slice_modules()
              for name, utils in getattr(module, "OPCHECK_TEST_UTILS", {}).items()}


def _id(i):
    name, args, kwargs = SAMPLES[i]
    return f"{name}-{i}"


@pytest.mark.parametrize("i", range(len(SAMPLES)), ids=_id)
def test_opcheck(i):
    name, args, kwargs = SAMPLES[i]
    # opcheck mutates in-place inputs: give it its own copies
    args = tuple(a.clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
                 for a in args)
    only = {"test_utils": TEST_UTILS[name]} if name in TEST_UTILS else {}
    torch.library.opcheck(opdef(name).op, args, kwargs, **only)


@pytest.mark.parametrize("i", range(len(SAMPLES)), ids=_id)
def test_fake_matches_kernel(i):
    """The fake function promises exactly the shapes, dtypes and strides' rank the kernel gives."""
    name, args, kwargs = SAMPLES[i]
    op = opdef(name).op
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
