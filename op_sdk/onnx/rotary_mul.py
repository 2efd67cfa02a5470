"""npu_rotary_mul -> op_sdk.npu.RotaryPositionEmbedding, npu_rotary_mul_backward ->
op_sdk.npu.RotaryPositionEmbeddingGrad (ONNX export): the custom nodes (CANN's inputs x, cos,
sin, rotate / dy, cos, sin, x; attribute mode) and the standard-ONNX composites that compute
them: the mode's permutations and signs (ops.rotary_mul.rotation) as Gather indices and a
constant, or a MatMul by rotate; float32 inside, rounded once to x's dtype. The last dim
(and, for the backward, the broadcast dims of cos) must be static."""

from __future__ import annotations

from op_sdk.onnx.translation import Call, dt, dtype_tag, overload_key, proto_inputs, translates
from op_sdk.ops.rotary_mul import MODES, _inverse, rotation


def _static(v, what, op="npu_rotary_mul"):
    dims = [d if isinstance(d, int) else None for d in (v.shape or ())]
    if not dims or None in dims:
        raise NotImplementedError(f"{op} ONNX export: {what} needs a static shape, "
                                  f"got {v.shape}")
    return dims


def _parts(b, x, cos, sin, mode, d, rotate=None, dtype=None):
    """dtype: x's (default: x.dtype; a value a composite computed may not carry one)."""
    dtype = dtype or x.dtype
    xf = b.to_float(x)
    c, s = (b.to_float(b.cast(t, dtype)) for t in (cos, sin))
    if rotate is not None:
        return xf, b("MatMul", xf, b.to_float(rotate)), c, s
    pa, pb, sb = rotation(mode, d)
    a = xf if pa is None else b("Gather", xf, b.i64(pa.tolist()), axis=-1)
    return a, b("Mul", b("Gather", xf, b.i64(pb.tolist()), axis=-1), b.f32(sb.tolist())), c, s


def _forward(b, x, cos, sin, rotate, mode, d, dtype=None):
    a, r, c, s = _parts(b, x, cos, sin, mode, d, rotate, dtype)
    return (b.cast(b("Add", b("Mul", a, c), b("Mul", r, s)), dtype or x.dtype),)


def _sum_to(b, v, axes):
    return b("ReduceSum", v, b.i64(axes), keepdims=1) if axes else v


def _backward(b, dy, cos, sin, x, mode, d, axes):
    a, r, c, s = _parts(b, x, cos, sin, mode, d)
    g = b.to_float(b.cast(dy, x.dtype))
    pa, pb, sb = rotation(mode, d)
    ga = b("Mul", g, c)
    gb = b("Mul", b("Mul", g, s), b.f32(sb.tolist()))
    dx = b("Add", ga if pa is None else b("Gather", ga, b.i64(_inverse(pa).tolist()), axis=-1),
           b("Gather", gb, b.i64(_inverse(pb).tolist()), axis=-1))
    return tuple(b.cast(v, x.dtype) for v in
                 (dx, _sum_to(b, b("Mul", g, a), axes), _sum_to(b, b("Mul", g, r), axes)))


@translates("npu_rotary_mul")
def _rotary_mul_call(input, r1, r2, rotary_mode="half", rotate=None):
    d = _static(input, "input")[-1]
    ins = proto_inputs("RotaryPositionEmbedding", {"x": input, "cos": r1, "sin": r2,
                                                   "rotate": rotate})
    key = overload_key(dtype_tag(dt(input)), dtype_tag(dt(r1)), MODES[rotary_mode], f"d{d}",
                       "rotate" if rotate is not None else "")
    if rotate is None:
        return Call("RotaryPositionEmbedding", ins, {"mode": MODES[rotary_mode]}, key,
                    lambda b, x, c, s: _forward(b, x, c, s, None, rotary_mode, d), 1)
    return Call("RotaryPositionEmbedding", ins, {"mode": MODES[rotary_mode]}, key,
                lambda b, x, c, s, rot: _forward(b, x, c, s, rot, rotary_mode, d), 1)


@translates("npu_rotary_mul_backward")
def _rotary_mul_backward_call(grad, input, r1, r2, rotary_mode="half"):
    shape, rshape = _static(input, "input"), _static(r1, "r1")
    axes = [i for i, (a, r) in enumerate(zip(shape, rshape)) if r == 1 and a != 1]
    ins = proto_inputs("RotaryPositionEmbeddingGrad", {"dy": grad, "cos": r1, "sin": r2,
                                                       "x": input})
    key = overload_key(dtype_tag(dt(input)), dtype_tag(dt(r1)), dtype_tag(dt(grad)),
                       MODES[rotary_mode], f"d{shape[-1]}", "sum" + "".join(map(str, axes)))
    return Call("RotaryPositionEmbeddingGrad", ins, {"mode": MODES[rotary_mode]}, key,
                lambda b, g, c, s, x: _backward(b, g, c, s, x, rotary_mode, shape[-1], axes), 3)
