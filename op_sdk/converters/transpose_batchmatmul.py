"""npu_transpose_batchmatmul -> TransposeBatchMatMul (the permutations TorchAir assumes
when an argument is absent: x1 and x2 as given, y transposed (1, 0, 2))."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter

# the Ascend IR prototype(s) this slice builds (op_graph/<op>_proto.h)
ir.declare("TransposeBatchMatMul", "x1 x2 bias? scale?", "y",
           [("perm_x1", "ListInt", []), ("perm_x2", "ListInt", []), ("perm_y", "ListInt", []),
            ("enable_hf32", "Bool", False), ("batch_split_factor", "Int", 1)])


@register_fx_node_ge_converter(torch.ops.npu.npu_transpose_batchmatmul.default, torchair_has_own=True)
def convert_npu_transpose_batchmatmul(input, weight, *, bias=None, scale=None,
                                      perm_x1=(0, 1, 2), perm_x2=(0, 1, 2), perm_y=(1, 0, 2),
                                      batch_split_factor=1, meta_outputs=None):
    def perm(p):
        return None if p is None else list(p)

    return ge.TransposeBatchMatMul(input, weight, bias=bias, scale=scale, perm_x1=perm(perm_x1),
                                   perm_x2=perm(perm_x2), perm_y=perm(perm_y),
                                   enable_hf32=False, batch_split_factor=batch_split_factor)
