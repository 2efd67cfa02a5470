"""``get_npu_backend``: TorchAir's entry point, for CPU and CUDA.

    torch.compile(model, backend=op_sdk.get_npu_backend(compiler_config=cfg))

One compile, top to bottom (``NpuBackend.__call__``):

    config ─ mode "max-autotune" ─────────► compile_fx: AOTAutograd (Inductor's
           │                                decompositions + custom_decompositions)
           │                                → pipeline stages as post-grad custom passes
           │                                → Inductor codegen (C++ wrapper on CPU); a
           │                                  graph with several air streams: one
           │                                  partition per stream region, on the stream
           │                                  executors (partitions.py)
           └ "reduce-overhead" / "npugraph_ex" / debug.run_eagerly
                                          ► aot_module_simplified (custom_decompositions
                                            only: the graph runs as captured)
                                            → pipeline.run on each forward / inference
                                              graph → eager, or CUDA graphs on CUDA inputs

Each call leaves a ``CompileReport`` in ``backend.reports`` (and ``recent_reports()``).
The backend binds the pattern registry that is current when it is made (see
``op_sdk.PatternRegistry``), so models made in different registry scopes compile with
their own patterns.
"""

from __future__ import annotations

import functools
import logging
import time
import warnings
from collections.abc import Sequence
from typing import Any

import torch

from op_sdk.compiler import collectives, executors, gears, record_store
from op_sdk.library import inline_calls
from op_sdk.compiler.config import CompilerConfig
from op_sdk.compiler.dump import GraphDumper, check_dump_type
from op_sdk.compiler.pipeline import PassPipeline
from op_sdk.compiler.report import CompileReport, remember

# what each compile fused and why the rest did not, one INFO line per graph
outcome_log = logging.getLogger("op_sdk")

__all__ = ["get_npu_backend", "NpuBackend", "get_compiler", "NpuFxCompiler"]


class NpuBackend:
    """A torch.compile backend: AOTAutograd -> the pass pipeline -> an executor."""

    def __init__(self, compiler_config: CompilerConfig | None = None,
                 custom_decompositions: dict | None = None):
        from op_sdk.patterns.registry import current_registry

        config = compiler_config if compiler_config is not None else CompilerConfig()
        if not isinstance(config, CompilerConfig):
            raise TypeError(f"op_sdk.get_npu_backend: compiler_config must be an "
                            f"op_sdk.CompilerConfig, got {type(config).__name__}")
        check_dump_type(config.debug.graph_dump.type.value)
        # torch.distributed's send / recv / broadcast / all_to_all traced as TorchAir maps them
        collectives.install()
        ignored = config.ineffective_options()
        if ignored:
            warnings.warn("op_sdk.get_npu_backend: these options configure Ascend's graph "
                          "engine and have no effect on CPU / CUDA: " + ", ".join(ignored),
                          stacklevel=3)
        self.config = config
        self.custom_decompositions = dict(custom_decompositions or {})
        self.patterns = current_registry()
        self.reports: list[CompileReport] = []

    def __repr__(self) -> str:
        return (f"NpuBackend(mode={self.config.mode.value!r}, patterns={self.patterns!r}, "
                f"{len(self.reports)} compiles)")

    @property
    def last_report(self) -> CompileReport | None:
        return self.reports[-1] if self.reports else None

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]):
        cfg = self.config
        check_dump_type(cfg.debug.graph_dump.type.value)  # the config may have changed since
        geared = gears.guard(gm, example_inputs,
                             cfg.inference_config.dynamic_gears_merge_policy.value)
        report, pipeline = self._begin()
        if pipeline.dumper.per_stage:  # TorchAir's dump of Dynamo's graph, before decompositions
            pipeline.dumper.safe_dump(gm, f"dynamo_original_graph_{report.index}")
        start = time.perf_counter()
        try:
            if cfg.executes_with_inductor:
                cpp = cfg.cpp_wrapper_for(example_inputs)
                patches = pipeline.inductor_config_patches(
                    report, "inductor-cpp" if cpp else "inductor")
                if cpp:
                    patches.update(executors.CPP_WRAPPER_PATCHES)
                if _has_stream_scopes(gm):
                    # Inductor's locality reordering would move nodes across the scope
                    # boundaries (scope_enter / exit have no data edges)
                    patches["reorder_for_locality"] = False
                if cfg.experimental_config.frozen_parameter.value:
                    pipeline.frozen_inputs = list(example_inputs)
                # the passes' record is stored beside Inductor's cache entry (a hit runs
                # no pass: the report then shows the stored record)
                record_key = record_store.key(gm, example_inputs, pipeline.uuid(),
                                              "inductor-cpp" if cpp else "inductor")
                try:
                    # the operators kept calls for the fusion passes, traced through after
                    # them (the inline_kernels stage)
                    with inline_calls(False):
                        compiled = executors.inductor(gm, example_inputs, patches,
                                                      self._inductor_decompositions())
                finally:
                    pipeline.frozen_inputs = None
                _keep_record(report, record_key)
            else:
                compiled = self._aot(gm, example_inputs, pipeline, report)
        finally:
            report.seconds = time.perf_counter() - start
        compiled = gears.checked(compiled, geared)
        # one line per graph: what fused, and why the rest did not (composed only when
        # the line is logged)
        if not outcome_log.isEnabledFor(logging.INFO):
            return compiled
        if report.cache_note():
            outcome_log.info("op_sdk compile #%d: %s", report.index, report.cache_note())
        for g in report.graphs:
            outcome_log.info("op_sdk compile #%d, %s graph: %s", report.index, g.graph,
                             g.outcome())
        return compiled

    def _begin(self) -> tuple[CompileReport, PassPipeline]:
        """A new compile's report (recorded) and the pass pipeline that fills it."""
        cfg = self.config
        report = CompileReport(index=len(self.reports), mode=cfg.mode.value)
        self.reports.append(report)
        remember(report)
        return report, PassPipeline(cfg, self.patterns, GraphDumper(
            cfg.debug.graph_dump.type.value, cfg.debug.graph_dump.path))

    # -- reduce-overhead / run_eagerly --------------------------------------------------------

    def _aot(self, gm, example_inputs, pipeline: PassPipeline, report: CompileReport):
        from torch._functorch.aot_autograd import aot_module_simplified

        compile_graph = functools.partial(self._compile_graph, pipeline, report,
                                          len(example_inputs))
        with inline_calls(False):  # no Inductor here to compile a traced-through operator
            return aot_module_simplified(
                gm, example_inputs,
                fw_compiler=functools.partial(compile_graph, "forward"),
                bw_compiler=executors.eager,
                inference_compiler=functools.partial(compile_graph, "inference"),
                decompositions=self.custom_decompositions,
                keep_inference_input_mutations=bool(
                    self.config.experimental_config.keep_inference_input_mutations.value))

    def _compile_graph(self, pipeline: PassPipeline, report: CompileReport,
                       num_dynamo_inputs: int, kind: str, gm: torch.fx.GraphModule,
                       example_inputs: Sequence[Any]):
        cuda = (not self.config.debug.run_eagerly.value and kind == "inference"
                and executors.uses_cuda(example_inputs))
        graph_report = pipeline.new_graph_report(report, kind,
                                                 "cudagraphs" if cuda else "eager")
        pipeline.run(gm, example_inputs, graph_report, label=f"graph_{report.index}_{kind}")
        if cuda:
            from torch._inductor.utils import num_fw_fixed_arguments

            fixed = num_fw_fixed_arguments(num_dynamo_inputs, len(example_inputs))
            return executors.cudagraphs(gm, example_inputs, fixed, is_inference=True)
        return executors.eager(gm, example_inputs)

    # -- max-autotune -------------------------------------------------------------------------

    def _inductor_decompositions(self) -> dict | None:
        if not self.custom_decompositions:
            return None  # compile_fx's own table
        from torch._inductor.decomposition import select_decomp_table

        return {**select_decomp_table(), **self.custom_decompositions}


def _keep_record(report: CompileReport, record_key: str) -> None:
    """After an Inductor compile: the passes' record stored beside Inductor's cache entry, or,
    when the cache served the graph (no pass ran), the stored record shown in the report."""
    if report.graphs:
        record_store.save(record_key, report.graphs)
    else:
        report.cache = "hit"
        report.graphs = record_store.load(record_key)


def _has_stream_scopes(gm: torch.fx.GraphModule) -> bool:
    return any(n.op == "call_function" and str(n.target).startswith("air.scope_enter")
               for n in gm.graph.nodes)


def get_npu_backend(compiler_config: CompilerConfig | None = None,
                    custom_decompositions: dict | None = None) -> NpuBackend:
    """TorchAir's ``get_npu_backend``: a torch.compile backend configured by
    ``compiler_config`` (default ``CompilerConfig()``); ``custom_decompositions`` are added
    to AOTAutograd's decompositions."""
    return NpuBackend(compiler_config, custom_decompositions)


class NpuFxCompiler:
    """TorchAir's ``get_compiler``: the compiler of one AOTAutograd graph (an ATen forward or
    inference graph), for a backend the user assembles, e.g.
    ``aot_module_simplified(gm, example_inputs, fw_compiler=op_sdk.get_compiler(cfg))``.

    Each call runs op_sdk's pass pipeline on the graph and returns what runs it: Inductor
    (``compile_fx_inner``, the passes as its post-grad custom passes) in mode
    "max-autotune", else the graph as captured (CUDA graphs on CUDA inputs in
    reduce-overhead), as :class:`NpuBackend` does after its own AOTAutograd step. A report
    per call is in ``reports`` (and ``op_sdk.compiler.recent_reports()``)."""

    def __init__(self, compiler_config: CompilerConfig | None = None):
        self.backend = NpuBackend(compiler_config)

    @property
    def config(self) -> CompilerConfig:
        return self.backend.config

    @property
    def reports(self) -> list[CompileReport]:
        return self.backend.reports

    def __repr__(self) -> str:
        return f"NpuFxCompiler(mode={self.config.mode.value!r}, {len(self.reports)} compiles)"

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]):
        backend, cfg = self.backend, self.config
        check_dump_type(cfg.debug.graph_dump.type.value)
        report, pipeline = backend._begin()
        start = time.perf_counter()
        try:
            if cfg.executes_with_inductor:
                from torch._inductor import config as inductor_config
                from torch._inductor.compile_fx import compile_fx_inner

                patches = pipeline.inductor_config_patches(report, "inductor")
                record_key = record_store.key(gm, example_inputs, pipeline.uuid(), "inductor")
                with inductor_config.patch(patches), inline_calls(False):
                    compiled = compile_fx_inner(gm, example_inputs)
                _keep_record(report, record_key)
                return compiled
            with inline_calls(False):
                return backend._compile_graph(pipeline, report, len(example_inputs), "forward",
                                              gm, example_inputs)
        finally:
            report.seconds = time.perf_counter() - start


def get_compiler(compiler_config: CompilerConfig | None = None) -> NpuFxCompiler:
    """TorchAir's ``get_compiler``: the graph compiler :func:`get_npu_backend` uses, for a
    backend of the user's own (see :class:`NpuFxCompiler`)."""
    return NpuFxCompiler(compiler_config)
