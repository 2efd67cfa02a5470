"""The passes every forward / inference graph goes through, in TorchAir's order:

    1. post_grad_custom_pre_pass   the user's pass (if set)
    2. remove_noop_ops             (experimental_config.remove_noop_ops)
    3. native_ops                  (experimental_config.native_ops): torch-native
                                   spellings (HF RMSNorm, F.rms_norm, residual add +
                                   norm, plain-torch int8 quantisation) become torch_npu
                                   operators (op_sdk/patterns/native.py)
    4. pattern_fusion              (experimental_config.pattern_fusion_pass): canonical
                                   spelling, then each enabled default fusion, then the
                                   user's patterns, then the near-miss diagnosis; a
                                   match is replaced where the benefit model predicts
                                   it pays (experimental_config.fusion_benefit_*)
    5. weight_prepack              (experimental_config.frozen_parameter, max-autotune on
                                   CPU): int8 matmul weights stored prepacked
                                   (op_sdk/compiler/prepack.py)
    6. post_grad_custom_post_pass  the user's pass (if set)

After each user pass and at the end, the air stream scopes (TorchAir's scope_enter /
scope_exit / record / wait, see streams.py) are checked: balanced, every wait after its
record, no node reading a later one; an error names the node.

A user pass follows the manual's contract ``(gm, example_inputs, config) -> None``: it
mutates ``gm`` in place, its return value is ignored; an exception it raises, or an
invalid graph it leaves, fails the compile with an error naming it.

Who runs the stages depends on the executor. For the eager / CUDA-graph executors the
backend's own AOTAutograd hands each graph to ``PassPipeline.run``. For Inductor the
stages are handed to ``compile_fx`` as its post-grad custom passes: 1-5 as
``post_grad_custom_pre_pass`` and 6 as ``post_grad_custom_post_pass`` (Inductor's own
post-grad passes run in between, as TorchAir's built-in ones run before the user's post
pass). Handing them to Inductor instead of running them first keeps Inductor's FX graph
cache working in full: its key is the graph *before* the passes plus each pass's
``uuid()``, a content hash of this package's pass and pattern sources, the config and the
user's patterns, so a cache hit skips the passes too. A compile with a user pass is not
cached: TorchAir calls the user's passes on every compile.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import hashlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
try:
    from torch._inductor.custom_graph_pass import CustomInferenceAwareGraphPass as _CustomPass
except ImportError:  # an older torch: its custom passes are not told whether the graph is
    # for inference (is_inference keeps its default, True)
    from torch._inductor.custom_graph_pass import CustomGraphPass as _CustomPass

from op_sdk.compiler.config import CompilerConfig
from op_sdk.compiler.dump import GraphDumper
from op_sdk.compiler.report import PARTITIONED, CompileReport, GraphReport, StageRecord

# each stage of each graph at DEBUG, in TorchAir's words ("[forward] before
# [post_grad_custom_pre_pass] execution")
stage_log = logging.getLogger("op_sdk.compiler")

__all__ = ["PassPipeline", "UserPassError", "STAGES", "fusion_plan"]

STAGES = ("post_grad_custom_pre_pass", "remove_noop_ops", "native_ops", "pattern_fusion",
          "weight_prepack", "inline_kernels", "post_grad_custom_post_pass")


class UserPassError(RuntimeError):
    """A user pass raised, or left an invalid graph."""


def fusion_plan(config: CompilerConfig) -> list[tuple[Any, str]]:
    """Each default fusion, in the order a compile applies them, with "" when this config
    runs it, else the reason it does not."""
    from op_sdk.patterns import APPLY_ORDER

    return [(fusion, _why_not(config, fusion)) for fusion in APPLY_ORDER]


def _why_not(config: CompilerConfig, fusion) -> str:
    """"" when ``config`` runs ``fusion`` (a Fusion), else the reason it does not."""
    if not config.experimental_config.pattern_fusion_pass.value:
        return "experimental_config.pattern_fusion_pass=False"
    policy = config.experimental_config.max_autotune_fusions.value
    if config.executes_with_inductor:
        if policy == "torchair" and not fusion.torchair_max_autotune:
            return "not applied in max-autotune (max_autotune_fusions='torchair')"
        if policy == "opaque" and not fusion.opaque_to_inductor:
            return ("not applied in max-autotune: Inductor handles these aten ops itself "
                    "(max_autotune_fusions='opaque'; 'all' applies it)")
    return ""


def _call_nodes(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")


def _is_backward(graph: torch.fx.Graph) -> bool:
    return any(str(n.target).startswith("tangents")
               for n in graph.find_nodes(op="placeholder"))


def _placeholder_values(gm: torch.fx.GraphModule) -> list:
    return [n.meta.get("val") for n in gm.graph.find_nodes(op="placeholder")]


@functools.lru_cache(1)
def _source_digest() -> str:
    """Hash of the sources that define what the passes do (compiler + patterns)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    for sub in ("compiler", "patterns"):
        folder = os.path.join(here, sub)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                with open(os.path.join(folder, name), "rb") as f:
                    h.update(name.encode() + b"\0" + f.read())
    h.update(torch.__version__.encode())
    return h.hexdigest()


@dataclasses.dataclass
class PassPipeline:
    """The ordered stages for one backend (config + pattern registry)."""

    config: CompilerConfig
    user_patterns: Any  # PatternRegistry
    dumper: GraphDumper

    def __post_init__(self):
        self.plan = fusion_plan(self.config)
        if self.config.experimental_config.pattern_fusion_pass.value:
            from op_sdk.patterns.derive import materialize

            materialize(self.user_patterns)  # fusions op_sdk.register_fusion deferred to here
        # the real example inputs of the compile in progress (weight_prepack reads the
        # parameters / buffers among them); set by the backend around compile_fx
        self.frozen_inputs: list | None = None

    # -- identity (the Inductor cache key part) ---------------------------------------------

    def uuid(self) -> str | None:
        """Content hash of everything that decides what the stages do; None (no caching)
        when the user set a pass (TorchAir calls the user's passes on every compile; a
        cache hit would skip them, and a pass that records or inspects the graph would see
        nothing), when a user pattern cannot be hashed by content, or when weight_prepack
        runs: its packed constants are computed from the weights' values, which the cache
        key (the graph, with weights as inputs) does not see."""
        if self.config.experimental_config.frozen_parameter.value and \
                self.config.executes_with_inductor:
            return None
        if any(getattr(self.config, slot).value is not None
               for slot in ("post_grad_custom_pre_pass", "post_grad_custom_post_pass")):
            return None
        user = ""
        if self.config.experimental_config.pattern_fusion_pass.value and len(self.user_patterns):
            user = self.user_patterns.uuid()
            if user is None:
                return None
        parts = [_source_digest(), self.config.fingerprint(),
                 [(f.name, why) for f, why in self.plan], user]
        return hashlib.sha256(repr(parts).encode()).hexdigest()

    # -- running ----------------------------------------------------------------------------

    def new_graph_report(self, compile_report: CompileReport, kind: str, executor: str,
                         ) -> GraphReport:
        report = GraphReport(graph=f"{kind}", mode=self.config.mode.value, executor=executor)
        report.fusions_enabled = tuple(f.name for f, why in self.plan if not why)
        report.fusions_skipped = {f.name: why for f, why in self.plan if why}
        compile_report.graphs.append(report)
        return report

    def run(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], report: GraphReport,
            stages: Sequence[str] = STAGES, label: str = "graph") -> None:
        """Run ``stages`` (in the fixed order) on ``gm`` in place, recording into ``report``."""
        with _gc_paused():
            self._run(gm, example_inputs, report, stages, label)

    def _run(self, gm, example_inputs, report, stages, label) -> None:
        record = None
        for index, name in enumerate(STAGES):
            if name not in stages:
                continue
            record = StageRecord(name)
            report.stages.append(record)
            record.nodes_before = record.nodes_after = _call_nodes(gm)
            run = self._stage(name)
            if isinstance(run, str):
                record.skipped = run
                stage_log.debug("[%s] skip [%s]: %s", report.graph, name, run)
                continue
            if self.dumper.per_stage:
                self._dump(gm, f"{label}_{index}_{name}_before", record)
            stage_log.debug("[%s] before [%s] execution", report.graph, name)
            start = time.perf_counter()
            run(gm, example_inputs, report)
            record.seconds = time.perf_counter() - start
            stage_log.debug("[%s] after [%s] execution", report.graph, name)
            record.nodes_after = _call_nodes(gm)
            if self.dumper.per_stage:
                self._dump(gm, f"{label}_{index}_{name}_after", record)
        if self.dumper.per_stage and STAGES[-1] in stages and record is not None:
            # TorchAir's name of the graph its passes leave
            self._dump(gm, f"dynamo_optimized_{label}", record)
        if self.dumper.enabled and not self.dumper.per_stage and STAGES[-1] in stages \
                and record is not None:
            self._dump(gm, f"{label}_ge", record)  # the converted graph, after the last pass
        self._streams(gm, report, stages)

    def _streams(self, gm, report, stages) -> None:
        """The air stream scopes: checked (an error names the node), recorded in the report.
        For Inductor, after the last stage, a graph with several streams is handed back to
        be compiled one partition per stream region (partitions.py); scopes naming no second
        stream are removed (streams.lower_for_inductor)."""
        from op_sdk.compiler import streams

        if not streams.has_streams(gm.graph):
            return
        stream_plan = streams.plan(gm.graph)  # checks the scopes
        report.streams = stream_plan.by_name()
        report.scopes = streams.scope_regions(gm.graph)
        if not report.executor.startswith("inductor") or STAGES[-1] not in stages:
            return
        values = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
        if streams.needs_program(stream_plan, streams.on_cuda(values) is not None):
            from op_sdk.compiler.partitions import PartitionRequest

            if not report.executor.endswith(PARTITIONED):
                report.executor += PARTITIONED
            raise PartitionRequest(gm)
        streams.lower_for_inductor(gm.graph)
        gm.recompile()

    def _dump(self, gm, name, record) -> None:
        file = self.dumper.safe_dump(gm, name)
        if file:
            record.dumps.append(file)

    def _stage(self, name: str) -> Callable | str:
        """The stage's function, or why it does not run."""
        cfg = self.config
        if name in ("post_grad_custom_pre_pass", "post_grad_custom_post_pass"):
            fn = getattr(cfg, name).value
            return functools.partial(self._user_pass, name, fn) if fn else "not set"
        if name == "remove_noop_ops":
            return self._remove_noop_ops if cfg.experimental_config.remove_noop_ops.value \
                else "experimental_config.remove_noop_ops=False"
        if name == "native_ops":
            return self._native_ops_skipped() or self._native_ops
        if name == "pattern_fusion":
            return self._pattern_fusion if cfg.experimental_config.pattern_fusion_pass.value \
                else "experimental_config.pattern_fusion_pass=False"
        if name == "weight_prepack":
            if not cfg.experimental_config.frozen_parameter.value:
                return "experimental_config.frozen_parameter=False"
            if not cfg.executes_with_inductor:
                return "max-autotune only"
            return self._weight_prepack
        if name == "inline_kernels":
            if not cfg.executes_with_inductor:
                return "no Inductor compiles the graph"
            return self._inline_kernels
        raise AssertionError(name)

    def _inline_kernels(self, gm, example_inputs, report) -> None:
        """The op_sdk operators left after the fusions, traced through on CUDA
        (compiler/inline.py)."""
        from op_sdk.compiler.inline import inline_operators

        inline_operators(gm)

    def _user_pass(self, slot: str, fn: Callable, gm, example_inputs, report) -> None:
        what = f"config.{slot} ({getattr(fn, '__qualname__', repr(fn))})"
        try:
            fn(gm, example_inputs, self.config)  # the return value is ignored (the contract)
        except Exception as exc:
            raise UserPassError(f"op_sdk: the user pass {what} raised "
                                f"{type(exc).__name__}: {exc}") from exc
        try:
            gm.graph.lint()
            gm.recompile()
        except Exception as exc:
            raise UserPassError(f"op_sdk: the graph left by the user pass {what} is invalid: "
                                f"{exc}") from exc
        from op_sdk.compiler import streams

        log = logging.getLogger("op_sdk")
        if log.isEnabledFor(logging.DEBUG):
            log.debug("graph after the user pass %s:\n%s", what, gm.graph)
        try:
            streams.check(gm.graph)
        except streams.ScopeError as exc:
            raise UserPassError(f"op_sdk: the graph left by the user pass {what} has malformed "
                                f"stream scopes: {exc}") from exc

    def _remove_noop_ops(self, gm, example_inputs, report) -> None:
        from op_sdk.compiler.noop_removal import remove_noop_ops

        remove_noop_ops(gm)
        gm.recompile()

    def _pattern_fusion(self, gm, example_inputs, report) -> None:
        registries = [f.registry() for f, why in self.plan if not why]
        if len(self.user_patterns):
            registries.append(self.user_patterns)
        # TorchAir applies its pattern fusions with no cost model: the benefit model decides
        # them only with fusion_benefit_scope="all"
        gated = self.config.experimental_config.fusion_benefit_scope.value == "all"
        self._apply(gm, report, registries, gated=gated)

    def _apply(self, gm, report, registries, merge=None, gated=True) -> None:
        """Apply ``registries`` in turn (canonical spelling first; each node's air stream
        in ``meta["stream_label"]`` so no match spans streams; the benefit model as
        configured where ``gated``, else none), then diagnose near misses.
        ``merge(graph) -> int``, when given, runs before and after the registries (the
        native_ops stage's common calls)."""
        from op_sdk.compiler import streams
        from op_sdk.patterns.benefit import planning
        from op_sdk.patterns.canonical import canonicalize
        from op_sdk.patterns.diagnostics import recording

        canonicalize(gm.graph)
        scoped = streams.has_streams(gm.graph)

        def label_streams():  # again before each step: replacements add unlabelled nodes
            if scoped:
                for node, stream in streams.stream_of(gm.graph).items():
                    node.meta["stream_label"] = stream

        exp = self.config.experimental_config
        with recording(report), planning(exp.fusion_benefit_threshold_us.value if gated else None,
                                         exp.fusion_benefit_device.value,
                                         report.executor.startswith("inductor")):
            merged = 0
            if merge is not None:
                label_streams()
                merged += merge(gm.graph)
            for registry in registries:
                label_streams()
                registry.apply(gm)
            if merge is not None:
                label_streams()
                merged += merge(gm.graph)
                for _ in range(merged):
                    report.record_match("common_calls", "merged", 1, 0)
            for registry in registries:
                registry.diagnose(gm, report)
        gm.recompile()

    def _native_ops_skipped(self) -> str:
        """Why the native_ops stage does not run ('' when it runs): its switch, then the
        rules' own plan, as for the default fusions."""
        if not self.config.experimental_config.native_ops.value:
            return "experimental_config.native_ops=False"
        from op_sdk.patterns.native import NATIVE_RULES

        return next(filter(None, (_why_not(self.config, r) for r in NATIVE_RULES)), "")

    def _native_ops(self, gm, example_inputs, report) -> None:
        from op_sdk.patterns.native import merge_common_calls, native_registries

        self._apply(gm, report, native_registries(), merge=merge_common_calls)

    def _weight_prepack(self, gm, example_inputs, report) -> None:
        from op_sdk.compiler.prepack import prepack_weights

        prepack_weights(gm, report, self.frozen_inputs)

    # -- Inductor ---------------------------------------------------------------------------

    def inductor_config_patches(self, compile_report: CompileReport,
                                executor: str = "inductor") -> dict[str, Any]:
        """The stages as Inductor post-grad custom passes (config patches for compile_fx);
        ``executor`` names the executor in the graph reports."""
        return {
            "post_grad_custom_pre_pass": _InductorStages(
                self, compile_report, executor, ("post_grad_custom_pre_pass",
                                                 "remove_noop_ops", "native_ops",
                                                 "pattern_fusion", "weight_prepack",
                                                 "inline_kernels")),
            "post_grad_custom_post_pass": _InductorStages(
                self, compile_report, executor, ("post_grad_custom_post_pass",)),
        }


class _InductorStages(_CustomPass):
    """Some pipeline stages as an Inductor custom pass, with a content ``uuid``."""

    def __init__(self, pipeline: PassPipeline, compile_report: CompileReport, executor: str,
                 stages: tuple[str, ...]):
        self.pipeline = pipeline
        self.compile_report = compile_report
        self.executor = executor
        self.stages = stages

    def __call__(self, graph: torch.fx.Graph, is_inference: bool = True) -> None:
        gm = graph.owning_module
        if _is_backward(graph):
            return  # the passes run on forward / inference graphs only
        report = gm.meta.get("op_sdk_report")
        if report is None:  # the first of the two slots to run on this graph
            kind = "inference" if is_inference else "forward"
            report = self.pipeline.new_graph_report(self.compile_report, kind, self.executor)
            gm.meta["op_sdk_report"] = report
        label = f"graph_{self.compile_report.index}_{report.graph}"
        self.pipeline.run(gm, _placeholder_values(gm), report, self.stages, label)

    def uuid(self) -> str | None:
        base = self.pipeline.uuid()
        return None if base is None else hashlib.sha256(
            (base + repr(self.stages)).encode()).hexdigest()


@contextlib.contextmanager
def _gc_paused():
    """Pause Python's cyclic GC while the passes run. Matching allocates many short-lived
    objects, and each generational collection then walks the whole (large) graph: about
    30% of the pass time on a 61-layer graph. The collector runs again right after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
