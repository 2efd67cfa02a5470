"""torch.library.opcheck on every sample call of every operator (the samples() of
tests/ops/test_<slice>.py): schema (mutation / aliasing), autograd registration, fake tensor,
and AOT dispatch with dynamic shapes; and the fake function against the kernel."""

import pytest
import torch

from tests.ops import gather, opdef, slice_modules
from tests.ops._helpers import LAYOUTS, fake_outputs, relayout, significant_strides

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


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("i", range(len(SAMPLES)), ids=_id)
def test_fake_matches_kernel(i, layout):
    """The fake function promises exactly the shapes, dtypes and strides the kernel gives
    (the strides of every dim of size > 1: what Inductor trusts), for every sample with its
    tensors in each layout of tests/ops/_helpers.LAYOUTS (contiguous, dense-permuted,
    padded rows, stride 0)."""
    name, args, kwargs = SAMPLES[i]
    op = opdef(name).op
    args = tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args)
    args, kwargs = relayout(args, kwargs, layout)
    try:
        real = op(*args, **kwargs)
    except RuntimeError:
        if layout == "contiguous":
            raise
        return  # the broadcast values (or an in-place write to an expanded tensor) refused
    fake = fake_outputs(op, args, kwargs)
    real = real if isinstance(real, tuple) else (real,)
    assert len(real) == len(fake)
    for j, (r, f) in enumerate(zip(real, fake)):
        if not isinstance(r, torch.Tensor):  # an int (get_npu_format)
            assert r == f, (name, j, r, f)
            continue
        assert r.shape == f.shape and r.dtype == f.dtype, (name, j, r.shape, f.shape, r.dtype, f.dtype)
        assert significant_strides(r) == significant_strides(f), (name, j, r.stride(), f.stride())
