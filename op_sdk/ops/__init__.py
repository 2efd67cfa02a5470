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


def npu_create_tagged_event(tag: str):
    """``torchair.ops.npu_create_tagged_event``: a process-wide event named ``tag`` (a str
    no other tagged event has; ValueError otherwise), for the graphs to record and wait for
    (op_sdk/_air.py, "tagged event")."""
    from op_sdk import _air

    return _air.create_tagged_event(tag)


def npu_tagged_event_record(event):
    """``torchair.ops.npu_tagged_event_record``: marks this point of the current stream as
    ``event``'s (``torch.ops.air.tagged_event_record``)."""
    import torch

    from op_sdk import _air

    return torch.ops.air.tagged_event_record(_air.tag_of(event))


def npu_tagged_event_wait(event):
    """``torchair.ops.npu_tagged_event_wait``: the current stream's work after this waits
    for ``event``'s last record before it in the graph (``torch.ops.air.tagged_event_wait``)."""
    import torch

    from op_sdk import _air

    return torch.ops.air.tagged_event_wait(_air.tag_of(event))


def npu_record_tagged_stream(input, tagged_stream: str):
    """``torchair.ops.npu_record_tagged_stream``: ``input`` is used on the stream
    ``tagged_stream`` ("default": the caller's); op_sdk's executors keep every tensor used on
    another stream than its producer's for that stream already, so this changes nothing
    (``torch.ops.air.record_tagged_stream_``, recorded in the graph)."""
    import torch

    return torch.ops.air.record_tagged_stream_(input, tagged_stream)


def npu_print(*args, summarize_size: int = 3, tensor_detail: bool = False) -> None:
    """``torchair.ops.npu_print``: prints ``args`` (tensors and str / bool / int / float, in
    order, space-separated) when the program runs: eager, and inside a graph compiled by
    op_sdk's backend (``torch.ops.air.print``, kept in order as a side-effecting operator).
    A tensor shows its first and last ``summarize_size`` entries per dim (-1: all);
    ``tensor_detail`` adds its shape and dtype: ``tensor([1 2 3], shape=[3],
    dtype=torch.int64)``."""
    import torch

    from op_sdk import _air

    for i, arg in enumerate(args):
        if not isinstance(arg, (torch.Tensor, str, bool, float, int)):
            raise TypeError(f"position arguments of npu_print() must be torch.Tensor or basic "
                            f"type in (str, bool, float, int), but got '{type(arg).__name__}' "
                            f"at position {i}")
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors:
        raise ValueError("npu_print() requires at least one tensor input")
    if not isinstance(summarize_size, int) or isinstance(summarize_size, bool):
        raise TypeError(f"summarize_size must be int, got {type(summarize_size).__name__}")
    if summarize_size < -1 or summarize_size == 0:
        raise ValueError(f"summarize_size must be positive or -1 for all elements, got "
                         f"{summarize_size}")
    if not isinstance(tensor_detail, bool):
        raise TypeError(f"tensor_detail must be bool, got {type(tensor_detail).__name__}")
    # a placeholder that no str argument contains
    text = " ".join("[]" if isinstance(a, torch.Tensor) else str(a) for a in args)
    placeholder, i = "{}", 0
    while placeholder in text:
        placeholder, i = f"{{{i}}}", i + 1
    if tensor_detail:
        parts = [f"tensor({placeholder}, shape={placeholder}, dtype={a.dtype})"
                 if isinstance(a, torch.Tensor) else str(a) for a in args]
    else:
        parts = [placeholder if isinstance(a, torch.Tensor) else str(a) for a in args]
    if not _air.PRINT_READY:  # torch_npu is installed: TorchAir's operator, imported now
        _air.define_print(True)
    torch.ops.air.print(tensors, " ".join(parts), placeholder, summarize_size, tensor_detail)


def npu_fused_infer_attention_score(*args, **kwargs):
    """``torchair.ops.npu_fused_infer_attention_score``: TorchAir's operator
    (``torch.ops.air.npu_fused_infer_attention_score``, its sequence lengths as tensors),
    computed on every device and in every mode (TorchAir's runs only in a max-autotune
    graph); see op_sdk/ops/fused_infer_attention_score.py."""
    import torch

    return torch.ops.air.npu_fused_infer_attention_score(*args, **kwargs)


def npu_fused_infer_attention_score_v2(*args, **kwargs):
    """``torchair.ops.npu_fused_infer_attention_score_v2``: TorchAir's v2 operator
    (``torch.ops.air.npu_fused_infer_attention_score_v2``), computed on every device and in
    every mode."""
    import torch

    return torch.ops.air.npu_fused_infer_attention_score_v2(*args, **kwargs)
