"""TorchAir's air.wait_tensor (op_sdk.scope.npu_wait_tensor) -> Identity of the tensor with a
control edge from the dependency's producer, and air.print (op_sdk.ops.npu_print) ->
StringFormat + PrintV2, as TorchAir converts them. (scope_enter /
scope_exit / record / wait become attributes and control edges: op_sdk.converters._Streams.)"""

import torch

from op_sdk import _air
from op_sdk.converters import attr as ge_attr
from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.library import torch_npu_module

if hasattr(torch.ops.air, "wait_tensor"):

    @register_fx_node_ge_converter(torch.ops.air.wait_tensor.default)
    def convert_wait_tensor(self, dependency, meta_outputs=None):
        out = ge.Identity(self)
        out.op.inputs.append(f"{dependency.op.name}:-1")
        return out


# -- air.print (op_sdk.ops.npu_print) -> StringFormat + PrintV2, as TorchAir converts it -------

ir.declare("StringFormat", "x*", "y", [("template", "String", "%s"),
                                       ("placeholder", "String", "%s"), ("summarize", "Int", 3)],
           source="ops-math")
ir.declare("PrintV2", "x", "", [("output_stream", "String", "stderr")], source="ops-math")

_air.define_print(torch_npu_module() is not None)  # (defined on first use; converted here)


@register_fx_node_ge_converter(torch.ops.air.print.default)
def convert_print(tensors, msg_format, placeholder, summarize_size, tensor_detail,
                  meta_outputs=None):
    """The tensors (bfloat16 cast to float; with ``tensor_detail`` each followed by its Shape)
    formatted by StringFormat into one string that PrintV2 prints (attribute ``_kernel`` =
    "extend", as TorchAir marks it)."""
    printable = []
    for t in tensors:
        t = ge.Cast(t, dst_type=ir.GE_DTYPE["DT_FLOAT"]) if t.dtype == ir.GE_DTYPE["DT_BF16"] else t
        printable += [t, ge.Shape(t)] if tensor_detail else [t]
    msg = ge.StringFormat(printable, template=msg_format, placeholder=placeholder,
                          summarize=summarize_size)
    ge.custom_op("PrintV2", inputs={"x": msg}, outputs=None,
                 attrs={"_kernel": ge_attr.Str("extend")})
