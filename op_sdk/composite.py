"""Composite declarations: a fused operator's unfused spelling (``define_op(..., composite=)``).

A fused operator replaces a chain of unfused operators. Its declaration can carry that
chain as a plain function, and op_sdk derives the fusion's search patterns and its
replacement from it (``op_sdk.patterns.derive``): every spelling of the chain a graph may
hold, and the fused-operator call that replaces it.

``Composite(fn, ...)``:

* ``fn``: the unfused spelling over (a subset of) the fused operator's arguments, named
  as in its schema, written with the unfused operators. Positional parameters are the
  operator's arguments: those without a default are the pattern's inputs unless a fusion
  says otherwise (a parameter a fusion leaves out is passed as None). Keyword-only
  parameters are *steps*: places where the graph may spell something in more than one
  way (a cast via ``npu._npu_dtype_cast`` or ``.to()``, an interposed view); their
  defaults are what ``fn`` does when called directly. ``fn`` returns the fused
  operator's outputs it computes: a tuple in the operator's output order with None for
  an output it does not compute (rstd), a dict ``{output name: value}`` whose order is
  the order the graph's values are matched in, or a single tensor for a single-output
  operator.
* ``outputs``: the names of the fused operator's outputs, in order (its schema's
  returns are unnamed).
* ``optional_outputs``: outputs a graph may leave unused: a variant with and one without.
* ``defaults``: scalar arguments a graph spells explicitly or leaves to their default
  (epsilon): a variant with each; an explicit one is matched as a pattern scalar.
* ``markers``: ``{default: value}``, the value that marks an explicit scalar of ``defaults``
  in a traced pattern when the usual marker (the default + 7 for an int) is not a value the
  unfused operators take (npu_dynamic_mx_quant's dst_type); it must differ from the
  default and from every other int literal of the pattern (getitem indices).
* ``fixed``: arguments the replacement passes to the fused operator (and to ``fn`` when
  it takes them), e.g. ``output_mask=[True, False]``: only the first branch computed.
* ``spellings``: ``{step: {label: Spelling or callable}}``, the alternatives of each
  step; the label is the step's part of the variant name ("" adds none).

What a pattern cannot see (literal view sizes, dtypes, transpose dims, alignment) stays
the fusion's named checks (``op_sdk.patterns.checks``).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Composite", "Spelling", "same"]


def same(t):
    """The identity step: the spelling without an interposed view."""
    return t


@dataclasses.dataclass(frozen=True)
class Spelling:
    """One way a graph spells a step of a composite.

    ``fn`` is called where the composite calls the step. ``outputs`` maps fused-operator
    output names to what the replacement applies to them: a view interposed before a
    step that keeps its elements in place (``y.view(-1, h)`` before the cast is
    ``y1.view(-1, h)`` after the fused operator), or one applied to a result in both.
    ``inputs`` maps fused-operator argument names to what the replacement applies to them
    before the call: a view interposed after a step that works row by row, moved before it
    (a norm's output with its heads and tokens swapped is the norm of the swapped input:
    op_sdk::rms_norm_rope's ``heads`` step)."""

    fn: Callable
    outputs: Mapping[str, Callable] = dataclasses.field(default_factory=dict)
    inputs: Mapping[str, Callable] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Composite:
    """A fused operator's unfused spelling; see the module docstring."""

    fn: Callable
    outputs: tuple[str, ...] = ()
    optional_outputs: tuple[str, ...] = ()
    defaults: tuple[str, ...] = ()
    markers: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    fixed: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    spellings: Mapping[str, Mapping[str, Spelling | Callable]] = dataclasses.field(
        default_factory=dict)

    def __post_init__(self):
        params = inspect.signature(self.fn).parameters
        steps = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
        for step in self.spellings:
            if step not in steps:
                raise ValueError(f"op_sdk.Composite: spellings names the step {step!r}, which "
                                 f"is not a keyword-only parameter of {self.fn.__name__}; "
                                 f"its steps: {steps}")
        for step, alts in self.spellings.items():
            for label, alt in alts.items():
                moved = set(getattr(alt, "inputs", {})) - set(self.arguments)
                if moved:
                    raise ValueError(f"op_sdk.Composite: spelling {label!r} of step {step!r} "
                                     f"moves a view onto {sorted(moved)}, which are not "
                                     f"arguments of {self.fn.__name__}: {self.arguments}")
        for name in self.defaults:
            if name not in params or params[name].default is inspect.Parameter.empty:
                raise ValueError(f"op_sdk.Composite: defaults names {name!r}, which is not a "
                                 f"parameter with a default of {self.fn.__name__}")
        for name, value in self.markers.items():
            if name not in self.defaults or value == params[name].default:
                raise ValueError(f"op_sdk.Composite: markers gives {name!r} the marker "
                                 f"{value!r}; rule: a marker is for a scalar of defaults "
                                 f"{self.defaults}, other than its default")
        for name in self.optional_outputs:
            if name not in self.outputs:
                raise ValueError(f"op_sdk.Composite: optional output {name!r} is not one of "
                                 f"the outputs {self.outputs}")

    @property
    def arguments(self) -> list[str]:
        """The fused operator's arguments ``fn`` takes (its positional parameters)."""
        return [n for n, p in inspect.signature(self.fn).parameters.items()
                if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                              inspect.Parameter.POSITIONAL_OR_KEYWORD)]

    @property
    def required(self) -> list[str]:
        """Its parameters without a default: a fusion's pattern inputs unless it says."""
        params = inspect.signature(self.fn).parameters
        return [n for n in self.arguments if params[n].default is inspect.Parameter.empty]

    @property
    def steps(self) -> list[str]:
        return [n for n, p in inspect.signature(self.fn).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY]

    def named(self, result) -> list[tuple[str, Any]]:
        """``fn``'s result as (output name, value) pairs in matching order, None dropped."""
        return named_outputs(result, self.outputs)


def named_outputs(result, outputs: tuple[str, ...]) -> list[tuple[str, Any]]:
    """A composite's result as (output name, value) pairs in matching order, None dropped
    (``outputs``: the fused operator's output names)."""
    if isinstance(result, Mapping):
        unknown = [k for k in result if outputs and k not in outputs]
        if unknown:
            raise ValueError(f"op_sdk.Composite: the composite returns {unknown}, not outputs "
                             f"of the fused operator {outputs}")
        return [(k, v) for k, v in result.items() if v is not None]
    if isinstance(result, (tuple, list)):
        names = outputs or tuple(str(i) for i in range(len(result)))
        if len(result) != len(names):
            raise ValueError(f"op_sdk.Composite: the composite returns {len(result)} values; "
                             f"the fused operator has {len(names)} outputs")
        return [(n, v) for n, v in zip(names, result) if v is not None]
    return [(outputs[0] if outputs else "0", result)]
