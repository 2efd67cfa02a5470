"""npu_swiglu -> op_sdk.npu.SwiGlu (ONNX export): the custom node (CANN's SwiGlu: input x,
attribute dim), and the standard-ONNX composite that computes it: the halves of x along dim
(Split into two equal outputs), silu(a) * b in float32, rounded once to x's dtype."""

from __future__ import annotations

from op_sdk.onnx.translation import Call, dt, dtype_tag, overload_key, proto_inputs, silu_mul, translates


def _swiglu(b, x, dim):
    if b.opset is not None and b.opset < 18:  # equal parts from the output count
        a, h = b("Split", b.to_float(x), _n=2, axis=dim)
    else:
        a, h = b("Split", b.to_float(x), _n=2, axis=dim, num_outputs=2)
    return (b.cast(silu_mul(b, a, h), x.dtype),)


@translates("npu_swiglu")
def _swiglu_call(input, dim=-1):
    ins = proto_inputs("SwiGlu", {"x": input})
    key = overload_key(dtype_tag(dt(input)), f"dim{dim}")
    return Call("SwiGlu", ins, {"dim": int(dim)}, key, lambda b, x: _swiglu(b, x, dim), 1)
