"""TorchAir's dimension gears (``torchair.inference.set_dim_gears``), off the NPU.

``set_dim_gears(t, {dim: [gear, ...]})`` marks those dims of the input ``t`` dynamic and
gives each its gears, the only sizes it may take (TorchAir's checks and words). When a graph
is compiled with such an input (:func:`guard`, called by the backend on Dynamo's inputs):

* each geared dim is guarded to the gears' range [min, max] (a size outside recompiles),
  and its size must be one of the gears: at the compile, and on every call of the compiled
  graph (a size within the range is no recompile), refused otherwise with TorchAir's
  AssertionError ("... is not within the range ..."); one graph serves every gear;
* every dim of the graph's other tensor inputs (and the ungeared dims) is guarded static,
  as TorchAir makes them;
* the gears combine by ``inference_config.dynamic_gears_merge_policy`` ("zip": the i-th gear
  of each dim together, all dims with as many gears; "product": every combination), at most
  100 combinations, checked with TorchAir's words.

On the NPU, GE compiles one graph per combination; here one dynamic graph serves them all.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

__all__ = ["set_dim_gears", "get_dim_gears", "guard", "checked"]


def set_dim_gears(t: torch.Tensor, dim_gears: dict[int, list[int] | tuple[int, ...]]) -> None:
    if get_dim_gears(t) is not None and get_dim_gears(t) != dim_gears:
        raise AssertionError(f"Tensor {t} already has set dim gears, and it is not supported to "
                             f"set it again.")
    for dim_index, gears in dim_gears.items():
        if not isinstance(dim_index, int):
            raise AssertionError(f"Dim index in dim_gears must be an integer, but got "
                                 f"{type(dim_index)}.")
        if dim_index < 0 or dim_index >= len(t.shape):
            raise AssertionError(f"Dim index in dim_gears must be in range [0, "
                                 f"{len(t.shape) - 1}], but got {dim_index}.")
        if not isinstance(gears, (list, tuple)):
            raise AssertionError(f"Gears for dim index {dim_index} in dim_gears must be a list "
                                 f"or tuple, but got {type(gears)}.")
        for index, gear in enumerate(gears):
            if not isinstance(gear, int):
                raise AssertionError(f"Element at index {index} of value for dim index "
                                     f"{dim_index} in dim_gears must be an integer, but got "
                                     f"{type(gear)}.")
            if gear == 0:
                raise AssertionError(f"Gear value at index {index} for dim index {dim_index} "
                                     f"must not be 0, but got {gear}.")
        if not 2 <= len(gears) <= 100:
            raise AssertionError(f"Length of gears for dim index {dim_index} in dim_gears must "
                                 f"be in range [2, 100], but got {len(gears)}.")
        torch._dynamo.mark_dynamic(t, dim_index)
    t.dim_gears = dim_gears


def get_dim_gears(t: Any):
    return getattr(t, "dim_gears", None)


def _refuse(size: int, gears) -> None:
    raise AssertionError(f"The index {int(size)} of the current tensor shape is not within the "
                         f"range {gears}")


def _guard_dim(dim, gears) -> None:
    """The dim's size lies in the gears' range (two guards: a size outside recompiles) and is
    one of them (checked here, and by :func:`checked` on every call of the graph)."""
    from torch.fx.experimental.symbolic_shapes import guard_bool, guarding_hint_or_throw

    ordered = sorted(set(gears))
    size = guarding_hint_or_throw(dim) if isinstance(dim, torch.SymInt) else dim
    if size not in ordered:  # (int(dim) would specialise the dim)
        _refuse(size, gears)
    for check in (dim >= ordered[0], dim <= ordered[-1]):
        guard_bool(check)


def _merged(gear_list: list[tuple], policy: str) -> list[tuple]:
    if policy == "zip":
        if not all(len(g) == len(gear_list[0]) for g in gear_list):
            raise AssertionError("when dynamic_gears_merge_policy is zip, input gears len must "
                                 "same.")
        dims = list(zip(*gear_list))
    elif policy == "product":
        dims = list(itertools.product(*gear_list))
    else:
        raise AssertionError("dynamic_gears_merge_policy only support zip and product.")
    unique = list(set(dims))
    if len(unique) > 100:
        raise AssertionError(f"The total number of gears set cannot exceed 100, and the current "
                             f"number of gears is: {len(unique)}")
    return unique


def guard(gm: torch.fx.GraphModule, example_inputs, merge_policy: str) -> list[tuple] | None:
    """Guard Dynamo's graph ``gm`` to the gears of its inputs (module docstring); returns
    the geared dims, ``[(input position, dim, gears), ...]``, for :func:`checked`, or None
    when no input has gears."""
    from torch.fx.experimental.symbolic_shapes import guard_int

    if not any(isinstance(t, torch.Tensor) and get_dim_gears(t) for t in example_inputs):
        return None
    values = [n.meta.get("example_value") for n in gm.graph.find_nodes(op="placeholder")]
    if len(values) != len(example_inputs):
        return None
    geared, gear_list = [], []
    for pos, (t, fake) in enumerate(zip(example_inputs, values)):
        if not isinstance(t, torch.Tensor) or not isinstance(fake, torch.Tensor):
            continue
        gears = get_dim_gears(t) or {}
        for i, size in enumerate(fake.size()):
            if i in gears:  # (a size Dynamo specialised, 0 / 1, is checked the same)
                _guard_dim(size, gears[i])
                geared.append((pos, i, tuple(gears[i])))
                gear_list.append(tuple(gears[i]))
            else:
                guard_int(size)
    _merged(gear_list, merge_policy)
    return geared


def checked(compiled, geared: list[tuple] | None):
    """``compiled`` (what the backend returns for the graph) refusing a call whose geared
    dims are not gears: a size within the gears' range shares the graph's guards, so the
    check runs on each call (one integer lookup per geared dim)."""
    if not geared:
        return compiled

    def run(*args):
        for pos, dim, gears in geared:
            size = args[pos].shape[dim]
            if size not in gears:
                _refuse(size, list(gears))
        return compiled(*args)

    run.__wrapped__ = compiled
    return run
