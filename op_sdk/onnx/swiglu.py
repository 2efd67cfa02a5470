"""npu_swiglu -> op_sdk.npu.SwiGlu, npu_swiglu_backward -> op_sdk.npu.SwiGluGrad (ONNX
export): the custom nodes (CANN's: inputs x / y_grad, x, attribute dim), and the
standard-ONNX composites that compute them: the halves of x along dim (Split into two equal
outputs), in float32, rounded once to x's dtype."""

from __future__ import annotations

from op_sdk.onnx.translation import Call, dt, dtype_tag, overload_key, proto_inputs, silu_mul, translates


def _halves(b, x, dim):
    if b.opset is not None and b.opset < 18:  # equal parts from the output count
        return b("Split", b.to_float(x), _n=2, axis=dim)
    return b("Split", b.to_float(x), _n=2, axis=dim, num_outputs=2)


def _swiglu(b, x, dim):
    a, h = _halves(b, x, dim)
    return (b.cast(silu_mul(b, a, h), x.dtype),)


def _swiglu_grad(b, y_grad, x, dim):
    a, h = _halves(b, x, dim)
    g = b.to_float(y_grad)
    s = b("Sigmoid", a)
    ds = b("Mul", b("Mul", s, b("Sub", b.f32(1.0), s)), a)  # s * (1 - s) * a
    da = b("Mul", b("Mul", g, b("Add", s, ds)), h)
    db = b("Mul", g, b("Mul", s, a))
    return (b.cast(b("Concat", da, db, axis=dim), x.dtype),)


@translates("npu_swiglu")
def _swiglu_call(input, dim=-1):
    ins = proto_inputs("SwiGlu", {"x": input})
    key = overload_key(dtype_tag(dt(input)), f"dim{dim}")
    return Call("SwiGlu", ins, {"dim": int(dim)}, key, lambda b, x: _swiglu(b, x, dim), 1)


@translates("npu_swiglu_backward")
def _swiglu_backward_call(grad_output, input, dim=-1):
    ins = proto_inputs("SwiGluGrad", {"y_grad": grad_output, "x": input})
    key = overload_key(dtype_tag(dt(input)), f"dim{dim}")
    return Call("SwiGluGrad", ins, {"dim": int(dim)}, key, lambda b, g, x: _swiglu_grad(b, g, x, dim), 1)
