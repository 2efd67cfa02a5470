"""Triton kernels of npu_swiglu and npu_swiglu_backward (ops/swiglu.py's contract).

``input`` is read as (outer, 2, inner) around ``dim`` (``inner``: half the size along
``dim`` times the elements after it), so
any ``dim`` is one elementwise pass: ``a`` and ``b`` of an output element sit ``inner``
apart. float32 inside, rounded once. sigmoid is ``1 / (1 + exp(-a))`` with Triton's exp
(the reference's torch silu on CPU uses another exp: results agree within the dtype's
tolerance, not bit for bit; docs/triton.md).
"""

from __future__ import annotations

import triton
import triton.language as tl

from op_sdk.triton_kernels._common import Outputs, div, elementwise, mul, offsets


@triton.jit
def _halves(i, inner):
    o = i // inner
    return o * 2 * inner + (i - o * inner)


@triton.jit
def _swiglu(x_ptr, y_ptr, total, inner, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    i = offsets(BLOCK, WIDE)
    m = i < total
    at = _halves(i, inner)
    a = tl.load(x_ptr + at, mask=m, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + at + inner, mask=m, other=0.0).to(tl.float32)
    s = div(1.0, 1.0 + tl.exp(-a))
    tl.store(y_ptr + i, (a * s * b).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _swiglu_backward(g_ptr, x_ptr, dx_ptr, total, inner, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    i = offsets(BLOCK, WIDE)
    m = i < total
    at = _halves(i, inner)
    g = tl.load(g_ptr + i, mask=m, other=0.0).to(tl.float32)
    a = tl.load(x_ptr + at, mask=m, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + at + inner, mask=m, other=0.0).to(tl.float32)
    s = div(1.0, 1.0 + tl.exp(-a))
    da = g * (s + mul(s * (1.0 - s), a, m)) * b
    db = g * s * a
    tl.store(dx_ptr + at, da.to(dx_ptr.dtype.element_ty), mask=m)
    tl.store(dx_ptr + at + inner, db.to(dx_ptr.dtype.element_ty), mask=m)


def _geometry(input, dim):
    """Elements of one half per slice before ``dim``: half the size along it times the
    elements after it."""
    inner = input.shape[dim] // 2
    for s in input.shape[dim + 1:]:
        inner *= s
    return inner


def run(input, out, dim):
    """npu_swiglu of ``input`` along ``dim`` (wrapped) into ``out`` (its fake's
    allocation); returns it."""
    o = Outputs(out)
    elementwise(_swiglu, out.numel(), input.contiguous(), o.bufs[0], out.numel(),
                _geometry(input, dim))
    return o.done()[0]


def run_backward(grad_output, input, out, dim):
    """npu_swiglu_backward into ``out`` (its fake's allocation); returns it."""
    o = Outputs(out)
    elementwise(_swiglu_backward, grad_output.numel(), grad_output.contiguous(),
                input.contiguous(), o.bufs[0], grad_output.numel(), _geometry(input, dim))
    return o.done()[0]
