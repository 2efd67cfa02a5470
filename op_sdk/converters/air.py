"""TorchAir's air.wait_tensor (op_sdk.scope.npu_wait_tensor) -> Identity of the tensor with a
control edge from the dependency's producer, as TorchAir converts it. (scope_enter /
scope_exit / record / wait become attributes and control edges: op_sdk.converters._Streams.)"""

import torch

from op_sdk.converters import ge, register_fx_node_ge_converter

if hasattr(torch.ops.air, "wait_tensor"):

    @register_fx_node_ge_converter(torch.ops.air.wait_tensor.default)
    def convert_wait_tensor(self, dependency, meta_outputs=None):
        out = ge.Identity(self)
        out.op.inputs.append(f"{dependency.op.name}:-1")
        return out
