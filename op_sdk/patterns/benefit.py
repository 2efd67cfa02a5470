"""The benefit model (op_sdk.benefit) applied to one pattern match: what the matched
operators move and launch, what the replacement moves and launches, and the fused
kernel's tiling, priced on the device the graph runs on (or the one planned for).

* before: the matched compute nodes (view ops and getitem aside), each reading its
  tensor inputs and writing all its outputs; one launch each. A transpose among the
  matched views (a permute that moves dims) counts as a copy, read and written with one
  launch: Ascend runs it as a Transpose kernel (its kernels read ND-contiguous tensors),
  and elsewhere the strided result is copied by the first consumer that needs its rows
  contiguous (a bmm of a transposed batch, a reshape merging the swapped dims); a fused
  operator that takes the permutation as an argument (npu_transpose_batchmatmul's
  perm_x1 / perm_y) moves nothing for it;
* before, when Inductor executes the graph (max-autotune) on the graph's own device: the
  matched pointwise / reduction aten ops are the one kernel Inductor generates for them
  (reading what flows in, writing what is used outside, one launch); only the others
  (npu operators, library GEMMs) are a kernel each. A torch-native RMSNorm then costs
  what npu_rms_norm costs, so the native_ops stage leaves it to Inductor on the CPU
  (measured: benchmarks/results/autofusion.json), while a plan for the NPU
  (fusion_benefit_device="npu") or the eager executor (reduce-overhead) prices every
  aten op as the kernel it is there;
* after: the replacement reads the match's tensor inputs and writes the matched outputs
  that have users outside the match; one launch per non-view operator of the
  replacement graph (normally 1), and a copy per transpose it holds;
* tiling: the fused operator's main input (its first tensor argument in the replacement
  graph): rows = numel / last dim, cols = last dim.

Symbolic sizes are priced at their hint (the size the graph was traced with); a size
with no hint (an unbacked, data-dependent symbol) at ``UNHINTED_SIZE``. Reading a hint
adds no guard.

The pipeline makes the compile's settings current (``planning``): the threshold in
microseconds (None: no model, every match that passes the checks applies) and the
device ("auto": the device of the match's tensors). Outside a compile the defaults
apply (threshold 0 us, "auto"), as with a default ``CompilerConfig``.

The CPU model is measured once per process (``op_sdk.benefit.DeviceModel.measured_cpu``),
at the first match planned for the CPU. Inductor's FX graph cache key holds the config
(threshold, device) but not that measurement: a cache hit reuses the decisions a
compile made with an earlier process's measurement of the same host. The measurement
varies by a few percent between runs; it only decides matches whose predicted benefit
sits that close to the threshold.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import operator

import torch

from op_sdk.benefit import Prediction, Side, Tiling, device_model, predict

__all__ = ["Planning", "planning", "PLANNING", "UNHINTED_SIZE", "size_hint", "nbytes",
           "match_sides", "predict_match", "match_device"]

# the size a symbolic dimension without a hint is priced at: a decode batch of a few
# hundred tokens, between the decode (1-16 rows) and prefill (thousands) extremes
UNHINTED_SIZE = 256


@dataclasses.dataclass(frozen=True)
class Planning:
    """A compile's benefit settings (CompilerConfig.experimental_config
    fusion_benefit_threshold_us / fusion_benefit_device)."""

    threshold_us: float | None = 0.0
    device: str = "auto"
    # Inductor executes the graph (max-autotune): on the graph's own device ("auto") the
    # unfused side's pointwise / reduction aten ops are priced as the kernel Inductor
    # generates for them, not one kernel each
    inductor: bool = False


PLANNING: contextvars.ContextVar[Planning] = contextvars.ContextVar(
    "op_sdk_benefit_planning", default=Planning())


@contextlib.contextmanager
def planning(threshold_us: float | None = 0.0, device: str = "auto", inductor: bool = False):
    token = PLANNING.set(Planning(threshold_us, device, inductor))
    try:
        yield
    finally:
        PLANNING.reset(token)


def size_hint(s) -> int:
    """An int for a size: itself, a SymInt's hint, or ``UNHINTED_SIZE``."""
    if isinstance(s, int):
        return s
    node = getattr(s, "node", None)
    hint = getattr(node, "hint", None)
    if hint is not None:
        try:
            return int(hint)
        except (TypeError, ValueError):
            pass
    return UNHINTED_SIZE


def numel(val) -> int:
    n = 1
    for s in val.shape:
        n *= size_hint(s)
    return n


def nbytes(val) -> int:
    """Bytes of a tensor (0 for anything else), sizes at their hint."""
    if not isinstance(val, torch.Tensor):
        return 0
    return numel(val) * val.element_size()


def _is_view(n: torch.fx.Node) -> bool:
    """An operator returning a view (no kernel): by its schema, or _unsafe_view (a view
    whose schema says otherwise for autograd's sake)."""
    return getattr(n.target, "is_view", False) or \
        n.target is torch.ops.aten._unsafe_view.default


def _makes_tensors(n: torch.fx.Node) -> bool:
    """A kernel: a node producing tensors (not size arithmetic of symbolic shapes)."""
    val = n.meta.get("val")
    if val is None:
        return isinstance(n.target, torch._ops.OpOverload)
    if isinstance(val, (tuple, list)):
        return any(isinstance(v, torch.Tensor) for v in val)
    return isinstance(val, torch.Tensor)


def _compute(nodes) -> list[torch.fx.Node]:
    """The kernels among ``nodes``: call_functions making tensors, views and getitem
    aside."""
    return [n for n in nodes if n.op == "call_function" and n.target is not operator.getitem
            and not _is_view(n) and _makes_tensors(n)]


def _written(val) -> int:
    if isinstance(val, (tuple, list)):
        return sum(nbytes(v) for v in val)
    return nbytes(val)


def _is_transpose(n: torch.fx.Node) -> bool:
    """A permute / transpose that moves dims (not the identity)."""
    aten = torch.ops.aten
    if n.op != "call_function":
        return False
    if n.target is aten.permute.default:
        dims = n.args[1] if len(n.args) > 1 else n.kwargs.get("dims", ())
        return list(dims) != list(range(len(dims)))
    if n.target is aten.transpose.int:
        return n.args[1] != n.args[2]
    return n.target is aten.t.default and nbytes(n.meta.get("val")) > 0 and \
        n.meta["val"].dim() == 2


# aten ops Inductor calls as library kernels (never fused with their neighbours)
_EXTERN = frozenset({"mm", "bmm", "addmm", "baddbmm", "_int_mm", "convolution", "matmul",
                     "_scaled_dot_product_flash_attention_for_cpu",
                     "_scaled_dot_product_efficient_attention",
                     "_scaled_dot_product_flash_attention", "_grouped_mm", "_weight_int8pack_mm"})


def _inductor_fusable(n: torch.fx.Node) -> bool:
    """An aten / prims op Inductor generates code for, fusing it with its neighbours."""
    target = n.target
    return isinstance(target, torch._ops.OpOverload) and target.namespace in ("aten", "prims") \
        and target._opname not in _EXTERN


def _inductor_group(nodes, inside) -> tuple[int, int]:
    """(bytes, launches) of ``nodes`` (the fusable kernels of a match) run as the one
    kernel Inductor generates: it reads the values flowing in from outside the group and
    writes the values used outside it; intermediates stay in registers."""
    group = set(nodes)
    reads = {a for n in nodes for a in n.all_input_nodes if a not in group}
    total = sum(nbytes(a.meta.get("val")) for a in reads)
    for n in nodes:
        if any(u not in group for u in n.users):
            total += _written(n.meta.get("val"))
    return total, 1


def before_side(match, inductor: bool = False) -> Side:
    """The matched compute nodes: each reads its tensor inputs, writes its outputs; a
    transpose among the matched views is a copy (see the module doc). With
    ``inductor``, the pointwise / reduction aten ops among them are one generated
    kernel (``_inductor_group``), the others (npu operators, library GEMMs) as above."""
    nodes = _compute(match.nodes)
    total = launches = 0
    if inductor:
        fused = [n for n in nodes if _inductor_fusable(n)]
        if fused:
            total, launches = _inductor_group(fused, set(match.nodes))
            nodes = [n for n in nodes if n not in set(fused)]
    for n in nodes:
        total += sum(nbytes(a.meta.get("val")) for a in dict.fromkeys(n.all_input_nodes))
        total += _written(n.meta.get("val"))
    transposes = [n for n in match.nodes if _is_view(n) and _is_transpose(n)]
    total += sum(2 * nbytes(n.meta.get("val")) for n in transposes)
    return Side(total, launches + len(nodes) + len(transposes))


def _inputs(match) -> list[torch.fx.Node]:
    """The match's tensor inputs (the pattern's arguments bound to graph values)."""
    found = [v for v in match.kwargs.values() if isinstance(v, torch.fx.Node)]
    if not found:  # a pattern without named arguments: the values flowing into the match
        inside = set(match.nodes)
        found = [a for n in match.nodes for a in n.all_input_nodes if a not in inside]
    return [n for n in dict.fromkeys(found) if isinstance(n.meta.get("val"), torch.Tensor)]


def _used_outputs(match) -> int:
    """Bytes of the matched values that have users outside the match."""
    inside = set(match.nodes)
    total = 0
    for n in match.nodes:
        if n.op != "call_function" or not any(u not in inside for u in n.users):
            continue
        val = n.meta.get("val")
        if isinstance(val, (tuple, list)):  # users outside unpack it: count those outputs
            read = {u.args[1] for u in n.users if u not in inside
                    and u.target is operator.getitem}
            total += sum(nbytes(v) for i, v in enumerate(val) if i in read)
        else:
            total += nbytes(val)
    return total


def after_side(match, replacement: torch.fx.GraphModule | None) -> Side:
    """The replacement: reads the match's tensor inputs, writes the used outputs; its
    own transposes count as copies, as on the unfused side."""
    total = sum(nbytes(n.meta.get("val")) for n in _inputs(match)) + _used_outputs(match)
    if replacement is None:
        return Side(total, 1)
    nodes = replacement.graph.nodes
    transposes = [n for n in nodes if _is_view(n) and _is_transpose(n)]
    total += sum(2 * nbytes(n.meta.get("val")) for n in transposes)
    return Side(total, len(_compute(nodes)) + len(transposes))


def tiling_of(match, replacement: torch.fx.GraphModule | None) -> Tiling | None:
    """Rows / cols / itemsize of the fused operator's main input."""
    main = None
    if replacement is not None:
        for n in _compute(replacement.graph.nodes):
            for a in n.all_input_nodes:
                if isinstance(a.meta.get("val"), torch.Tensor):
                    main = a.meta["val"]
                    break
            if main is not None:
                break
    if main is None:
        inputs = _inputs(match)
        main = inputs[0].meta["val"] if inputs else None
    if main is None or main.dim() == 0:
        return None
    cols = size_hint(main.shape[-1])
    rows = numel(main) // cols if cols else 0
    return Tiling(rows, cols, main.element_size())


def match_sides(match, replacement=None, inductor: bool = False
                ) -> tuple[Side, Side, Tiling | None]:
    return (before_side(match, inductor), after_side(match, replacement),
            tiling_of(match, replacement))


def match_device(match) -> str | None:
    """The device type of the match's tensors ("cpu", "cuda", "npu"), None for others
    (meta, ...), which the model has no numbers for."""
    for n in _inputs(match) or [n for n in match.nodes if n.op == "call_function"]:
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor):
            kind = val.device.type
            return kind if kind in ("cpu", "cuda", "npu") else None
    return None


def predict_match(match, replacement=None, settings: Planning | None = None
                  ) -> Prediction | None:
    """The prediction for a match under ``settings`` (default: the current planning);
    None when the model is off (threshold None) or has no numbers for the device."""
    settings = settings or PLANNING.get()
    if settings.threshold_us is None:
        return None
    device = settings.device if settings.device != "auto" else match_device(match)
    if device is None:
        return None
    # Inductor's own fusion counts only where the graph really runs (not when planning
    # for another device, whose graph engine is not Inductor)
    before, after, tiling = match_sides(match, replacement,
                                        settings.inductor and settings.device == "auto")
    return predict(before, after, device_model(device), tiling,
                   threshold=settings.threshold_us * 1e-6)
