"""Shared by the compiler / pattern tests and benchmarks/bench_compile.py: compile a
function with op_sdk's backend, capture the graph the passes leave, compare numerics.

Small shapes on purpose: torch.compile on CPU is slow; "reduce-overhead" (no Inductor
codegen) is the default here, Inductor runs where the test is about it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import operator
from collections.abc import Callable, Sequence

import torch

import op_sdk
from op_sdk.compiler import CompilerConfig, get_npu_backend
from op_sdk.patterns.tracing import trace_canonical
from op_sdk.patterns.verify import INT_STEPS, TOLERANCES, close


@dataclasses.dataclass
class Compiled:
    outputs: object
    backend: object
    graphs: list  # per graph after every pass: the call_function targets

    @property
    def report(self):
        return self.backend.last_report

    @property
    def targets(self) -> list:
        return [t for g in self.graphs for t in g]

    def has(self, target) -> bool:
        return target in self.targets


def config(mode: str = "reduce-overhead", **options) -> CompilerConfig:
    """A CompilerConfig; options are dotted paths with '__' (debug__run_eagerly=True)."""
    cfg = CompilerConfig()
    cfg.mode = mode
    for path, value in options.items():
        *sections, leaf = path.split("__")
        obj = cfg
        for s in sections:
            obj = getattr(obj, s)
        setattr(obj, leaf, value)
    return cfg


@contextlib.contextmanager
def no_inductor_caches():
    """Compile for real, whatever the on-disk caches hold."""
    import torch._functorch.config as fconfig
    import torch._inductor.config as iconfig

    with iconfig.patch(fx_graph_cache=False), fconfig.patch(enable_autograd_cache=False):
        yield


def compile_and_run(fn: Callable, inputs: Sequence, cfg: CompilerConfig | None = None, *,
                    dynamic: bool = False, backend=None) -> Compiled:
    cfg = cfg if cfg is not None else config()
    graphs: list = []
    user_post = cfg.post_grad_custom_post_pass.value

    def capture(gm, example_inputs, c):
        if user_post is not None:
            user_post(gm, example_inputs, c)
        graphs.append([n.target for n in gm.graph.nodes if n.op == "call_function"])

    cfg.post_grad_custom_post_pass = capture
    try:
        torch._dynamo.reset()
        backend = backend or get_npu_backend(compiler_config=cfg)
        with no_inductor_caches(), torch.no_grad():
            out = torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=True)(*inputs)
    finally:
        cfg.post_grad_custom_post_pass = user_post
    return Compiled(out, backend, graphs)


def flat(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [y for o in out for y in flat(o)]
    return [out]


def lowest_dtype(inputs) -> torch.dtype:
    floats = [x.dtype for x in inputs if isinstance(x, torch.Tensor) and x.dtype in TOLERANCES]
    return max(floats, key=lambda d: TOLERANCES[d][1]) if floats else torch.float32


def assert_fused_close(actual, expected, inputs) -> None:
    """Outputs agree within the tolerance of the inputs' lowest precision (the fused kernels
    keep fp32 inside): floating ones within TOLERANCES, integer ones within INT_STEPS."""
    atol, rtol = TOLERANCES[lowest_dtype(inputs)]
    steps = INT_STEPS[lowest_dtype(inputs)]
    a, e = flat(actual), flat(expected)
    assert len(a) == len(e)
    for i, (x, y) in enumerate(zip(a, e)):
        assert x.shape == y.shape and x.dtype == y.dtype, (i, x.shape, y.shape, x.dtype, y.dtype)
        if y.is_floating_point():  # (8-bit floats within one step of their format)
            ok = close(x, y, atol, rtol)
            assert bool(ok.all()), (f"output {i}: {int((~ok).sum())} of {ok.numel()} values "
                                    f"differ, max {(x.float() - y.float()).abs().max()}")
        else:
            diff = (x.long() - y.long()).abs().max().item() if y.numel() else 0
            assert diff <= steps, f"output {i} differs by {diff} int steps (at most {steps})"


def variant_targets(fusion, variant) -> tuple[set, set]:
    """(ops that must be gone, ops that must be present) after the variant fires, read
    from its own search / replacement graphs in the canonical spelling."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    values = fusion.example_inputs(fusion.dtypes[0], variant)
    args = [mode.from_tensor(values[n]) if isinstance(values[n], torch.Tensor) else values[n]
            for n in variant.argnames]

    def targets(fn):
        with mode:
            gm = trace_canonical(fn, args)
        return {n.target for n in gm.graph.nodes
                if n.op == "call_function" and n.target is not operator.getitem}

    search, replace = targets(variant.search_fn), targets(variant.replace_fn)
    return search - replace, replace - search


class Wrapped(torch.nn.Module):
    """A search function as a module: the activations are inputs, the rest parameters
    (static shapes under dynamic=True, as weights are in a real model)."""

    def __init__(self, fn: Callable, values: dict, activations: Sequence[str]):
        super().__init__()
        self.fn = fn
        self.names = list(inspect.signature(fn).parameters)
        self.activations = list(activations)
        self.consts = {}
        for name in self.names:
            if name in activations:
                continue
            v = values[name]
            if isinstance(v, torch.Tensor):
                self.register_parameter(name, torch.nn.Parameter(v, requires_grad=False))
            else:
                self.consts[name] = v

    def forward(self, *acts):
        given = dict(zip(self.activations, acts))
        args = [given[n] if n in given else self.consts[n] if n in self.consts
                else getattr(self, n) for n in self.names]
        return self.fn(*args)


__all__ = ["Compiled", "config", "compile_and_run", "assert_fused_close", "variant_targets",
           "Wrapped", "no_inductor_caches", "op_sdk"]
