"""npu_rotary_mul -> RotaryMul (rotary_mode "half", no rotate: what TorchAir writes for the
Atlas A2 / A3 graph) or RotaryPositionEmbedding (the other modes, or a rotate matrix: mode as
an integer); npu_rotary_mul_backward -> RotaryMulGrad ("half") or RotaryPositionEmbeddingGrad.
TorchAir converts both too; unlike TorchAir's, these converters never write RotaryMul for a
mode other than "half" (TorchAir's A2 / A3 path drops the mode). r1 / r2 of another dtype
than input's are cast to it first (op-plugin's rule)."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.ops.rotary_mul import MODES

# the Ascend IR prototypes (ops-transformer posembedding/rotary_position_embedding*; RotaryMul
# and RotaryMulGrad: CANN's built-in nn_other.h)
ir.declare("RotaryMul", "x r1 r2", "y", source="ops-transformer")
ir.declare("RotaryMulGrad", "x r1 r2 dy", "dx dr1 dr2", [("need_backward", "Bool", True)],
           source="ops-transformer")
ir.declare("RotaryPositionEmbedding", "x cos sin rotate?", "y", [("mode", "Int", 0)],
           source="ops-transformer")
ir.declare("RotaryPositionEmbeddingGrad", "dy cos sin x?", "dx dcos dsin", [("mode", "Int", 0)],
           source="ops-transformer")


def _as(t, like):
    return t if t.dtype == like.dtype else ge.Cast(t, dst_type=like.dtype)


@register_fx_node_ge_converter(torch.ops.npu.npu_rotary_mul.default, torchair_has_own=True)
def convert_npu_rotary_mul(input, r1, r2, rotary_mode="half", rotate=None, meta_outputs=None):
    r1, r2 = _as(r1, input), _as(r2, input)
    if rotary_mode == "half" and rotate is None:
        return ge.RotaryMul(input, r1, r2)
    return ge.RotaryPositionEmbedding(input, r1, r2, rotate=rotate, mode=MODES[rotary_mode])


@register_fx_node_ge_converter(torch.ops.npu.npu_rotary_mul_backward.default,
                               torchair_has_own=True)
def convert_npu_rotary_mul_backward(grad, input, r1, r2, rotary_mode="half", meta_outputs=None):
    grad, r1, r2 = _as(grad, input), _as(r1, input), _as(r2, input)
    if rotary_mode == "half":
        return ge.RotaryMulGrad(input, r1, r2, grad, need_backward=True)
    return ge.RotaryPositionEmbeddingGrad(grad, r1, r2, input, mode=MODES[rotary_mode])

