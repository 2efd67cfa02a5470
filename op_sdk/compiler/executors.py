"""What runs a graph once the passes are done.

* ``inductor``: ``compile_fx`` compiles the (Dynamo) graph; the passes run inside it as
  post-grad custom passes (see pipeline.py). The fused operators are custom ops, which
  Inductor keeps as opaque extern kernels; it fuses everything around them. A graph with
  several air streams is compiled one partition per stream region and run by the stream
  executors (partitions.py).
* ``eager``: the graph runs as captured, op by op (``debug.run_eagerly``, and
  reduce-overhead on CPU); a graph with air stream scopes runs each stream on a worker
  thread (CPU) or a side stream (CUDA), see streams.py.
* ``cudagraphs``: the same graph, recorded once and replayed as a CUDA graph
  (reduce-overhead with CUDA inputs), through PyTorch's CUDA-graph trees. Graphs CUDA
  graphs cannot hold (CPU tensors, input mutations, incompatible ops) fall back to eager,
  with PyTorch's usual "skipping cudagraphs" log line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["inductor", "eager", "cudagraphs", "uses_cuda", "CPP_WRAPPER_PATCHES"]

# Inductor's C++ wrapper, built apart from the kernels at low optimisation: as one
# translation unit, a 61-layer graph's wrapper takes g++ over 10 minutes.
CPP_WRAPPER_PATCHES = {"cpp_wrapper": True, "cpp_wrapper_build_separate": True}


def inductor(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
             config_patches: dict[str, Any], decompositions: dict | None):
    from torch._inductor.compile_fx import compile_fx

    from op_sdk.compiler import partitions

    return compile_fx(gm, example_inputs, inner_compile=partitions.inner_compile,
                      config_patches=config_patches, decompositions=decompositions)


def _lower_prims_for_eager(gm: torch.fx.GraphModule) -> None:
    """The canonical cast (prims.convert_element_type) runs through a Python reference in
    eager mode (~10x aten's cost): run aten._to_copy, which it stands for, instead."""
    prims, aten = torch.ops.prims, torch.ops.aten
    for node in gm.graph.find_nodes(op="call_function",
                                    target=prims.convert_element_type.default):
        node.target = aten._to_copy.default
        node.kwargs = {"dtype": node.args[1]}
        node.args = (node.args[0],)


def eager(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]):
    from torch._dynamo.backends.debugging import boxed_nop

    from op_sdk.compiler import streams

    _lower_prims_for_eager(gm)
    gm.graph.eliminate_dead_code()
    program = streams.executor_for(gm, example_inputs)  # air stream scopes: one per stream
    if program is not None:
        return program
    return boxed_nop(gm, list(example_inputs))


def uses_cuda(example_inputs: Sequence[Any]) -> bool:
    return any(isinstance(x, torch.Tensor) and x.device.type == "cuda" for x in example_inputs)


def cudagraphs(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], num_fixed: int,
               is_inference: bool):
    """Record-and-replay, as PyTorch's ``cudagraphs`` backend does for a forward graph."""
    from torch._dynamo.backends.cudagraphs import (
        check_for_skip,
        find_input_mutations,
        get_device_index,
        get_stack_traces,
    )
    from torch._inductor.cudagraph_trees import cudagraphify_impl
    from torch._inductor.cudagraph_utils import (
        get_placeholder_info,
        log_cudagraph_skip_and_bump_counter,
    )

    run = eager(gm, example_inputs)
    if skip := check_for_skip(gm, num_fixed):
        log_cudagraph_skip_and_bump_counter(f"skipping cudagraphs due to {skip}")
        return run
    out = cudagraphify_impl(
        run, list(example_inputs), range(num_fixed), device_index=get_device_index(gm),
        is_backward=False, is_inference=is_inference, stack_traces=get_stack_traces(gm),
        placeholders=get_placeholder_info(gm.graph),
        mutated_input_idxs=find_input_mutations(gm.graph))
    out._boxed_call = True
    return out
