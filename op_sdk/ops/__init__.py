"""The SDK's operators: every module of this package defines its operators when imported
(``define_op``), and importing the package imports them all, in name order. A new operator
is a new module here: nothing else lists it."""

from op_sdk._slices import import_slices
# the argument checks every slice raises with (operator, argument, rule)
from op_sdk.ops._common import OpArgumentError, check  # noqa: F401

import_slices(__name__)


# TorchAir's ``torchair.ops`` forms of the air event operators (op_sdk/_air.py); they are not
# npu operators and are not in op_sdk's operator registry.


def npu_wait_tensor(self, dependency):
    """``torchair.scope.npu_wait_tensor``: see ``op_sdk.scope.npu_wait_tensor``."""
    from op_sdk.scope import npu_wait_tensor as wait_tensor

    return wait_tensor(self, dependency)


def record():
    """``torchair.ops.record``: an event token of the work issued so far on this stream."""
    import torch

    return torch.ops.air.record()


def wait(tensors: list):
    """``torchair.ops.wait``: the work after this waits for the records ``tensors``."""
    import torch

    if not tensors:
        raise ValueError("op_sdk.ops.wait: requires at least one token (from op_sdk.ops.record())")
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"op_sdk.ops.wait: tensors[{i}] is a {type(t).__name__}, "
                             "not a torch.Tensor token")
    return torch.ops.air.wait(list(tensors))
