"""Tracing for the pattern registries: search and replacement functions traced in the
canonical spelling, a per-graph memo of traces (a model's layers repeat the same shapes),
fake example inputs, and the trace of a replacement on a match's inputs (which also tells
whether the fused operator accepts them)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Sequence
from typing import Any

import torch

from op_sdk.patterns.canonical import canonicalize

__all__ = ["trace_canonical", "canonical_trace", "memoized", "spec", "as_fake",
           "trace_replacement", "replacement_rejects", "TRACE_MEMO"]


def trace_canonical(fn: Callable, args: Sequence[Any], *, get_decomp_fn=None,
                    **_: Any) -> torch.fx.GraphModule:
    """Trace ``fn`` without decompositions, in the canonical spelling (see canonical.py).

    The default fusions' search and replacement functions are written in terms of the
    operators the graph holds, so no decomposition table is applied; dead code goes.
    Signature-compatible with ``fwd_only`` (``get_decomp_fn`` is accepted and ignored).
    """
    from torch.fx.experimental.proxy_tensor import make_fx

    with torch.no_grad():
        gm = make_fx(fn, {}, tracing_mode="real")(*args)
    canonicalize(gm.graph)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def trace_decomposed(fn: Callable, args: Sequence[Any], **_: Any) -> torch.fx.GraphModule:
    """``fn`` traced with Inductor's decomposition table, in the canonical spelling: what
    Inductor's post-grad graph (max-autotune) holds for it."""
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    with torch.no_grad():
        gm = make_fx(fn, select_decomp_table(), tracing_mode="real")(*args)
    canonicalize(gm.graph)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def canonical_trace(trace_fn: Callable) -> Callable:
    if trace_fn is trace_canonical:
        return trace_canonical

    def traced(fn, args, **kwargs):
        gm = trace_fn(fn, args, **kwargs)
        if canonicalize(gm.graph):
            gm.recompile()
        return gm

    traced.__name__ = f"canonical_{getattr(trace_fn, '__name__', 'trace')}"
    return traced


def spec(value, grad: bool | None = None) -> Any:
    """Hashable metadata of a trace argument (``grad`` overrides requires_grad)."""
    if isinstance(value, torch.Tensor):
        return ("T", tuple(str(s) for s in value.shape), tuple(str(s) for s in value.stride()),
                value.dtype, value.device.type, value.requires_grad if grad is None else grad)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(spec(v, grad) for v in value))
    if isinstance(value, torch.SymInt):
        return ("S", str(value))
    return ("V", type(value).__name__, repr(value))


TRACE_MEMO: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "op_sdk_trace_memo", default=None)


def memoized(trace_fn: Callable) -> Callable:
    """Wrap a trace function so that, within one graph, identical argument metadata is
    traced once. A 61-layer model matches the same pattern 61 times with the same shapes;
    ``register_replacement`` re-traces the replacement (and the search function) for each.
    The memo lives only while one graph is processed (symbolic sizes are per graph)."""

    def traced(fn, args, **kwargs):
        memo = TRACE_MEMO.get()
        if memo is None:
            return trace_fn(fn, args, **kwargs)
        key = (id(trace_fn), id(fn), spec(list(args)))
        hit = memo.get(key)
        if hit is None:
            try:
                hit = (True, trace_fn(fn, args, **kwargs), fn)
            except Exception as exc:  # remembered too: the same inputs fail the same way
                hit = (False, exc, fn)
            memo[key] = hit  # holds fn, so its id cannot be reused while the memo lives
        ok, value, _ = hit
        if not ok:
            raise value
        return value

    traced.__wrapped__ = trace_fn
    return traced


def as_fake(example_inputs):
    """Example inputs as fake tensors (in their own fake mode when they already are fake).
    The same tensor object passed twice (``[t] * 2``) would trace as one input and lose a
    pattern argument, so repeats become distinct tensors of the same metadata."""
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode

    if not isinstance(example_inputs, (list, tuple)):
        raise TypeError(f"op_sdk.register_replacement: example_inputs must be a list or tuple, "
                        f"got {type(example_inputs).__name__}")
    mode = detect_fake_mode(list(example_inputs))
    fresh = mode is None
    if fresh:
        mode = FakeTensorMode()
    out, seen = [], set()
    with mode:
        for x in example_inputs:
            if isinstance(x, torch.Tensor):
                key = id(x)
                if key in seen:
                    x = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
                elif fresh:
                    x = mode.from_tensor(x)
                seen.add(key)
            out.append(x)
    return out, mode


def graph_fake_mode(match):
    from torch._guards import detect_fake_mode

    vals = [n.meta.get("val") for n in match.nodes]
    return detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])


def trace_replacement(match, replace_fn, argnames, trace):
    """(the replacement traced on the match's inputs, None) or (None, the exception).
    Memoized per input metadata: a model's layers repeat the same shapes."""
    vals = []
    for name in argnames:
        v = match.kwargs.get(name)
        vals.append(v.meta.get("val") if isinstance(v, torch.fx.Node) else v)
    memo = TRACE_MEMO.get()
    key = (id(getattr(trace, "__wrapped__", trace)), id(replace_fn), spec(vals, grad=False))
    hit = memo.get(key) if memo is not None else None
    if hit is None:
        fake_mode = graph_fake_mode(match)
        with fake_mode if fake_mode is not None else contextlib.nullcontext():
            args = [torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device)
                    if isinstance(a, torch.Tensor) else a for a in vals]
            try:
                return trace(replace_fn, args), None
            except Exception as exc:
                return None, exc
    ok, value, _ = hit
    return (value, None) if ok else (None, value)


def replacement_rejects(match, replace_fn, argnames, trace) -> str | None:
    """Whether the fused operator's own shape / dtype checks (run by tracing the
    replacement) reject the match's inputs: the error, or None."""
    _, error = trace_replacement(match, replace_fn, argnames, trace)
    if error is None:
        return None
    return f"the fused operator rejects these inputs: {error}".split("\n")[0]
