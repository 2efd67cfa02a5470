"""Shared by the per-operator tests: random inputs, the placeholders of the constraint
tables, and the comparisons of kernel outputs with references.

Float outputs are compared with per-dtype tolerances (the kernels sum in another order than
torch, so e.g. rstd differs in the last fp32 bits); integer outputs may differ by one step
in a tiny fraction of elements (a value that sits on a rounding boundary).
"""

import torch

from op_sdk.ops._common import unpack_int4

npu = torch.ops.npu
bf16, fp16, fp32, i8, i32 = torch.bfloat16, torch.float16, torch.float32, torch.int8, torch.int32

# (atol, rtol) of float outputs, per dtype
TOL = {fp32: (1e-5, 1e-5), fp16: (1e-3, 1e-3), bf16: (1e-2, 1e-2)}
# integer outputs: at most one step apart, in at most this fraction of elements
INT_FLIP_FRACTION = 1e-3


def rand(*shape, dtype=fp32, scale=1.0, grad=False):
    """Normal values (times `scale`) in `dtype`; a leaf that requires grad with grad=True."""
    t = (torch.randn(*shape) * scale).to(dtype)
    return t.requires_grad_() if grad else t


def rand_i8(*shape):
    """Uniform int8 values over the whole range."""
    return torch.randint(-128, 128, shape, dtype=torch.int8)


def strided(t):
    """A non-contiguous view with t's values: the transpose of a contiguous transpose."""
    if t.dim() < 2:
        return t.repeat_interleave(2)[::2]
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def rms_norm_fp64(x, gamma, eps=1e-6):
    """(y, rstd) of the rms norm over the last dim, in float64."""
    x = x.double()
    rstd = 1 / torch.sqrt(x.square().mean(-1, keepdim=True) + eps)
    return x * rstd * gamma.double(), rstd


# ---- constraint tables ------------------------------------------------------------------

def T(*shape, dtype=fp32):
    """A tensor argument of a CASES entry, built on the device under test (test_ops_constraints)."""
    return ("T", shape, dtype)


def zeros(*shape, dtype=bf16):
    return torch.zeros(*shape, dtype=dtype)


def bad(op, arg, *args, **kwargs):
    """A BAD_CALLS entry: (operator, argument the message must name, args, kwargs)."""
    return op, arg, args, kwargs


# ---- comparisons --------------------------------------------------------------------------

def assert_int_close(actual, expected, int4=False, max_fraction=INT_FLIP_FRACTION):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if int4:
        actual, expected = unpack_int4(actual), unpack_int4(expected)
    diff = (actual.long() - expected.long()).abs()
    if diff.numel() == 0:
        return
    assert int(diff.max()) <= 1, f"integer outputs differ by {int(diff.max())}"
    assert float((diff > 0).float().mean()) <= max_fraction


def assert_float_close(actual, expected, dtype=None):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    atol, rtol = TOL[dtype or actual.dtype]
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)


def assert_outputs_close(actual, expected, exact=(), int4=False, float_dtype=None):
    """Compare tuples of outputs; indices in `exact` must match bit for bit."""
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        if i in exact:
            assert a.dtype == e.dtype and a.shape == e.shape
            assert torch.equal(a, e), f"output {i} differs"
        elif a.dtype in (torch.int8, torch.uint8, torch.int32):
            assert_int_close(a, e, int4=int4 and a.dtype == torch.int32)
        else:
            assert_float_close(a, e, float_dtype if a.dtype != fp32 else fp32)


def assert_bits_equal(a, b):
    """Same dtype, shape and bits (float8 compared as its bytes)."""
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype in (torch.float8_e5m2, torch.float8_e4m3fn):
        a, b = a.view(torch.uint8), b.view(torch.uint8)
    assert torch.equal(a, b), (a.flatten()[:8], b.flatten()[:8])


# ---- layouts: the same values in other strides -------------------------------------------

def _padded_rows(t):
    """Rows padded to a longer stride (a slice of a wider buffer, as a fused qkv's part):
    non-dense, storage offset 1."""
    if t.dim() < 2 or t.shape[-1] == 0:
        return t
    buf = t.new_zeros((*t.shape[:-1], t.shape[-1] + 3))
    view = buf[..., 1:1 + t.shape[-1]]
    view.copy_(t)
    return view


def _permuted(t):
    """Dense but not contiguous: the outer two dims swapped in memory (3-D and up)."""
    if t.dim() < 3:
        return strided(t)
    return t.transpose(0, 1).contiguous().transpose(0, 1)


def _broadcast_rows(t):
    """A stride-0 dim: the first dim of size > 1 re-expressed as an expand of its first
    slice (the values along it become equal copies of that slice)."""
    for d in range(t.dim()):
        if t.shape[d] > 1:
            return t.narrow(d, 0, 1).expand(t.shape)
    return t


LAYOUTS = {
    "contiguous": lambda t: t,
    "strided": strided,
    "padded_rows": _padded_rows,
    "permuted": _permuted,
    "broadcast": _broadcast_rows,
}


def relayout(args, kwargs, layout: str, which=None):
    """(args, kwargs) with every tensor (or those whose position / name is in `which`)
    given `layout` (LAYOUTS): the values unchanged but for "broadcast"; requires_grad
    kept."""
    fn = LAYOUTS[layout]

    def one(key, v):
        if not isinstance(v, torch.Tensor) or (which is not None and key not in which):
            return v
        out = fn(v.detach())
        return out.requires_grad_() if v.requires_grad and out.is_floating_point() else out

    return (tuple(one(i, a) for i, a in enumerate(args)),
            {k: one(k, v) for k, v in kwargs.items()})


def significant_strides(t):
    """The strides that locate elements: those of dims of size > 1 (None when empty)."""
    if t.numel() == 0:
        return None
    return tuple(s if n > 1 else None for n, s in zip(t.shape, t.stride()))


def fake_outputs(op, args, kwargs) -> tuple:
    """The op's outputs under FakeTensorMode, its inputs faked with their exact strides (as
    Inductor sees them), as a tuple."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    to_fake = lambda v: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v  # noqa: E731
    fargs = tuple(to_fake(a) for a in args)
    fkwargs = {k: to_fake(v) for k, v in kwargs.items()}
    with mode:
        out = op(*fargs, **fkwargs)
    return out if isinstance(out, tuple) else (out,)
