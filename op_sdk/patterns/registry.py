"""Scoped pattern registries over ``torch._inductor.pattern_matcher``.

TorchAir keeps one process-wide ``PatternMatcherPass`` for its defaults and the user's
patterns: a second model that registers its patterns again gets a duplicate-pattern
error, and a pattern registered for one model or mode applies to every later compile.
Here a ``PatternRegistry`` owns its own ``PatternMatcherPass``:

* each default fusion has its own registry, built lazily once per process; a compile
  picks the fusions its config enables, so nothing registered for one config leaks into
  another;
* ``op_sdk.register_replacement`` registers into the innermost ``with registry:`` scope,
  or the process-wide user registry (TorchAir's behaviour); ``get_npu_backend`` binds
  the registry that is current when it is called, so two models compile side by side
  with their own patterns;
* registering the same replacement twice in one registry is a no-op (no duplicate
  error); a *different* replacement for an identical pattern is an error unless
  ``skip_duplicates=True``.

Every registered pattern also records what happened to it during a compile: matches
(per fusion and variant) and near misses with the reason, into the ``GraphReport`` the
pipeline makes current while the fusion stage runs.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
import hashlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

from op_sdk.compiler.config import callable_digest
from op_sdk.compiler.report import GraphReport, NearMiss
from op_sdk.patterns.canonical import canonicalize, canonicalize_pattern, map_pattern

__all__ = ["PatternRegistry", "register_replacement", "user_registry", "current_registry",
           "trace_canonical", "Check", "recording", "DuplicatePatternError"]


class DuplicatePatternError(RuntimeError):
    """A registry already holds an identical pattern with a different replacement."""


# ---------------------------------------------------------------------------------------
# Tracing


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


def _spec(value, grad: bool | None = None) -> Any:
    """Hashable metadata of a trace argument (``grad`` overrides requires_grad)."""
    if isinstance(value, torch.Tensor):
        return ("T", tuple(str(s) for s in value.shape), tuple(str(s) for s in value.stride()),
                value.dtype, value.device.type, value.requires_grad if grad is None else grad)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_spec(v, grad) for v in value))
    if isinstance(value, torch.SymInt):
        return ("S", str(value))
    return ("V", type(value).__name__, repr(value))


_TRACE_MEMO: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "op_sdk_trace_memo", default=None)


def _memoized(trace_fn: Callable) -> Callable:
    """Wrap a trace function so that, within one graph, identical argument metadata is
    traced once. A 61-layer model matches the same pattern 61 times with the same shapes;
    ``register_replacement`` re-traces the replacement (and the search function) for each.
    The memo lives only while one graph is processed (symbolic sizes are per graph)."""

    def traced(fn, args, **kwargs):
        memo = _TRACE_MEMO.get()
        if memo is None:
            return trace_fn(fn, args, **kwargs)
        key = (id(trace_fn), id(fn), _spec(list(args)))
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


# ---------------------------------------------------------------------------------------
# Recording matches and near misses


_REPORT: contextvars.ContextVar[GraphReport | None] = contextvars.ContextVar(
    "op_sdk_pattern_report", default=None)


@contextlib.contextmanager
def recording(report: GraphReport | None):
    """Make ``report`` receive matches / near misses, with a fresh trace memo."""
    t1 = _REPORT.set(report)
    t2 = _TRACE_MEMO.set({})
    try:
        yield
    finally:
        _TRACE_MEMO.reset(t2)
        _REPORT.reset(t1)


@dataclasses.dataclass(frozen=True)
class Check:
    """A named extra check: ``fn(match)`` returns None when satisfied, else the reason
    (reported as a near miss), or False when the match is not a candidate at all (say a
    5-D permute where the fusion wants a 3-D transpose: refused without a report).
    ``kind`` is the near-miss category ("alignment", "dtype", "shape", "args")."""

    name: str
    kind: str
    fn: Callable[[Any], str | None]


def _anchor_name(match) -> str:
    try:
        node = match.output_nodes()[0]
        return node.name if node is not None else "?"
    except Exception:
        return "?"


def _graph_fake_mode(match):
    from torch._guards import detect_fake_mode

    vals = [n.meta.get("val") for n in match.nodes]
    return detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])


@dataclasses.dataclass
class PatternRecord:
    """One registered replacement and what the reports call it."""

    fusion: str
    variant: str
    key: str                       # identity within a registry (dedupe)
    fns_key: str                   # the same, without the example inputs
    digest: str | None             # content digest for cache keys (None: not hashable)
    pattern: Any = None            # the PatternExpr registered
    entries: list = dataclasses.field(default_factory=list)
    targets: frozenset = frozenset()  # the operators every match contains
    _relaxed: Any = None

    def could_match(self, present: Callable[[Any], bool]) -> bool:
        return all(present(t) for t in self.targets)

    @property
    def name(self) -> str:
        return f"{self.fusion}[{self.variant}]"

    def relaxed(self):
        """The pattern with every user count relaxed, to find where only an extra user of
        an intermediate blocked a match (and which one)."""
        if self._relaxed is None and self.pattern is not None:
            self._relaxed = _relax(self.pattern)
        return self._relaxed


def _pattern_targets(pattern) -> frozenset:
    """The call_function targets a match of ``pattern`` must contain (getitem aside)."""
    import operator

    from torch._inductor import pattern_matcher as pm

    found, seen = set(), set()

    def go(p):
        if isinstance(p, (list, tuple)):
            for x in p:
                go(x)
            return
        if not isinstance(p, pm.PatternExpr) or id(p) in seen:
            return
        seen.add(id(p))
        if isinstance(p, pm._TargetArgsExpr):
            if p.op == "call_function" and len(p.fns) == 1 and p.fns[0] is not operator.getitem:
                found.add(p.fns[0])
            go(p.args)
            go(list(p.kwargs.values()))
        elif isinstance(p, pm.MultiOutputPattern):
            go(p.outputs)
        elif isinstance(p, pm.ListOf):
            go(p.pattern)

    go(pattern)
    return frozenset(found)


def _presence(graph: torch.fx.Graph) -> Callable[[Any], bool]:
    cache: dict = {}

    def present(target) -> bool:
        if target not in cache:
            cache[target] = bool(graph.find_nodes(op="call_function", target=target))
        return cache[target]

    return present


def _relax(pattern):
    from torch._inductor import pattern_matcher as pm

    def rebuild(p, go):
        q = copy.copy(p)
        if isinstance(p, pm._TargetArgsExpr):
            q.original_users = p.users
            q.users = pm.MULTIPLE
            q.args = tuple(go(a) for a in p.args)
            q.kwargs = {k: go(v) for k, v in p.kwargs.items()}
            q.flat_args_kwargs = q.flatten(q.args, q.kwargs)
        elif isinstance(p, pm.MultiOutputPattern):
            q.outputs = [go(o) for o in p.outputs]
        elif isinstance(p, pm.ListOf):
            q.pattern = go(p.pattern)
        return q

    return map_pattern(pattern, rebuild)


# ---------------------------------------------------------------------------------------
# The registry


_SCOPES: contextvars.ContextVar[tuple] = contextvars.ContextVar("op_sdk_pattern_scopes",
                                                               default=())


class PatternRegistry:
    """A named set of replacement patterns with its own ``PatternMatcherPass``.

    Use as a context manager to make it the target of ``op_sdk.register_replacement``
    (and of ``get_npu_backend`` calls made inside the block).
    """

    def __init__(self, name: str):
        from torch._inductor.pattern_matcher import PatternMatcherPass

        self.name = name
        self.records: list[PatternRecord] = []
        self._keys: dict[str, PatternRecord] = {}
        self._pass = PatternMatcherPass(pass_name=f"op_sdk_{name}")
        self._lock = threading.RLock()
        self._tokens: list = []

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return f"PatternRegistry({self.name!r}, {len(self.records)} patterns)"

    # -- scope ------------------------------------------------------------------------------

    def __enter__(self) -> PatternRegistry:
        self._tokens.append(_SCOPES.set(_SCOPES.get() + (self,)))
        return self

    def __exit__(self, *exc) -> None:
        _SCOPES.reset(self._tokens.pop())

    # -- registration -----------------------------------------------------------------------

    def register_replacement(
        self,
        search_fn: Callable,
        replace_fn: Callable,
        example_inputs: Sequence[Any],
        trace_fn: Callable | None = None,
        extra_check: Callable[[Any], bool] | None = None,
        search_fn_pattern=None,
        scalar_workaround: dict[str, float | int] | None = None,
        skip_duplicates: bool = False,
        *,
        fusion: str | None = None,
        variant: str | None = None,
        checks: Sequence[Check] = (),
        fused_op_check: bool = True,
    ) -> bool:
        """Register ``search_fn -> replace_fn``; True when registered, False when this
        registry already holds it (or an equal pattern, with ``skip_duplicates``).

        Semantics of ``torch._inductor.pattern_matcher.register_replacement`` (and so of
        TorchAir's): ``example_inputs`` are traced once (as fake tensors, so any device and
        size works); at match time the pattern is re-checked with the graph's shapes unless
        ``search_fn_pattern`` is given; ``extra_check(match)`` can veto a match; floats /
        ints listed in ``scalar_workaround`` become pattern arguments.

        op_sdk additions: ``trace_fn`` defaults to ``fwd_only`` and its graphs are put in the
        canonical spelling, so a pattern matches whichever spelling AOTAutograd produced;
        ``checks`` are named checks whose failures are reported as near misses;
        ``fused_op_check`` vetoes (and reports) a match whose inputs the replacement's
        operators reject, where Inductor would fail the compile tracing it.
        """
        from torch._inductor import pattern_matcher as pm

        if trace_fn is None:
            trace_fn = pm.fwd_only
        base_trace = _canonical_trace(trace_fn)
        if search_fn_pattern is not None:
            search_fn_pattern = canonicalize_pattern(search_fn_pattern)
        fusion = fusion or f"user:{getattr(search_fn, '__name__', 'pattern')}"
        variant = variant or getattr(replace_fn, "__name__", "replacement")
        key, fns_key, digest = _pattern_key(search_fn, replace_fn, example_inputs, trace_fn,
                                            extra_check, search_fn_pattern, scalar_workaround,
                                            checks)
        with self._lock:
            if key in self._keys:
                return False  # the same registration again: registered once
            record = PatternRecord(fusion, variant, key, fns_key, digest)
            check = self._make_check(record, search_fn, replace_fn, extra_check, checks,
                                     fused_op_check, base_trace)
            fake_inputs, fake_mode = _as_fake(example_inputs)
            before = {id(e) for entries in self._pass.patterns.values() for e in entries}
            try:
                if search_fn_pattern is not None:
                    registered = self._register_pretraced(record, search_fn, replace_fn,
                                                          search_fn_pattern, check,
                                                          _memoized(base_trace), skip_duplicates)
                else:
                    with fake_mode:
                        registered = pm.register_replacement(
                            search_fn, replace_fn, fake_inputs, _memoized(base_trace),
                            self._pass, extra_check=check, scalar_workaround=scalar_workaround,
                            skip_duplicates=skip_duplicates)
            except RuntimeError as exc:
                if "Duplicate pattern" in str(exc):
                    if any(r.fns_key == fns_key for r in self.records):
                        return False  # same functions, other example sizes: already here
                    raise DuplicatePatternError(
                        f"op_sdk.register_replacement: registry {self.name!r} already has a "
                        f"pattern equal to {getattr(search_fn, '__name__', search_fn)!r} with a "
                        "different replacement. Pass skip_duplicates=True to keep the first, or "
                        "register it inside its own `with op_sdk.PatternRegistry(name):` "
                        "scope") from exc
                raise
            if not registered:
                return False
            record.pattern = registered if not isinstance(registered, bool) else search_fn_pattern
            record.targets = _pattern_targets(record.pattern)
            record.entries = [e for entries in self._pass.patterns.values() for e in entries
                              if id(e) not in before]
            for entry in record.entries:
                entry.apply = _counting(entry.apply, record)
            self._keys[key] = record
            self.records.append(record)
            return True

    def _register_pretraced(self, record, search_fn, replace_fn, pattern, check, trace,
                            skip_duplicates):
        """``register_replacement`` with a given ``search_fn_pattern``, minus its per-match
        costs: Inductor's check function re-creates fake inputs for every match before
        tracing the replacement; here the replacement graph comes from the per-graph memo
        (one trace per distinct input metadata), which makes a 61-layer model's passes
        about twice as fast. Semantics are those of the pre-traced path of
        ``register_replacement``: the pattern is not re-traced, ``check`` may veto, the
        replacement is traced with the match's input metadata."""
        import inspect

        from torch._inductor import pattern_matcher as pm

        argnames = list(inspect.signature(search_fn).parameters)
        if pm.check_and_add_duplicate_pattern(pattern, None, self._pass.seen_patterns,
                                              skip_duplicates=skip_duplicates):
            return False

        def extra_check(match) -> bool:
            if not check(match):
                return False
            graph, error = _trace_replacement(match, replace_fn, argnames, trace)
            if graph is None:
                raise error  # the check traced it already: only without fused_op_check
            match.replacement_graph = graph
            return True

        def normalize_args(**kwargs):
            return [kwargs[name] for name in argnames]

        entry = pm.ReplacementPatternEntry(pattern=pattern, extra_check=extra_check,
                                           normalize_args=normalize_args,
                                           pattern_name=record.name)
        entry.register(self._pass)
        return pattern

    def _make_check(self, record, search_fn, replace_fn, extra_check, checks, fused_op_check,
                    base_trace):
        """The extra_check given to Inductor: TorchAir's same-stream veto, the named checks,
        the user's extra_check, then whether the replacement accepts the inputs. Each
        refusal is recorded as a near miss in the current report."""
        import inspect

        argnames = list(inspect.signature(search_fn).parameters)
        memo_trace = _memoized(base_trace)

        def near_miss(match, kind, check, reason):
            report = _REPORT.get()
            if report is not None:
                report.record_near_miss(NearMiss(record.fusion, record.variant,
                                                 _anchor_name(match), kind, check, reason))

        def check(match) -> bool:
            streams = {n.meta.get("stream_label") for n in match.nodes}
            if len(streams) > 1:
                near_miss(match, "stream", "same_stream",
                          f"the matched nodes span streams {sorted(map(str, streams))}")
                return False
            for c in checks:
                reason = c.fn(match)
                if reason is False:
                    return False
                if reason:
                    near_miss(match, c.kind, c.name, reason)
                    return False
            if extra_check is not None and not extra_check(match):
                near_miss(match, "check", getattr(extra_check, "__name__", "extra_check"),
                          "the pattern's extra_check returned False")
                return False
            if fused_op_check:
                reason = _replacement_rejects(match, replace_fn, argnames, memo_trace)
                if reason:
                    near_miss(match, "fused_op", "", reason)
                    return False
            return True

        check.__name__ = f"check_{record.fusion}"
        return check

    # -- application ------------------------------------------------------------------------

    def apply(self, gm: torch.fx.GraphModule) -> int:
        """Apply every pattern once over the graph; returns the number of replacements.
        Skipped outright when no pattern's operators are all in the graph."""
        present = _presence(gm.graph)
        if not any(r.could_match(present) for r in self.records):
            return 0
        return self._pass.apply(gm)

    def diagnose(self, gm: torch.fx.GraphModule, report: GraphReport) -> None:
        """Report where a pattern matched except for an intermediate with other users."""
        from torch._inductor import pattern_matcher as pm

        found: dict[str, tuple[int, NearMiss]] = {}  # anchor -> (violations, miss) per fusion
        present = _presence(gm.graph)
        for record in self.records:
            if not record.could_match(present):
                continue
            relaxed = record.relaxed()
            if relaxed is None:
                continue
            anchor_fns = relaxed.fns if hasattr(relaxed, "fns") else ()
            for fn in anchor_fns:
                for node in gm.graph.find_nodes(op=relaxed.op, target=fn):
                    m = relaxed.match(node)
                    if not pm.is_match(m):
                        continue
                    extra = _extra_users(m)
                    if not extra:
                        continue
                    slot = f"{record.fusion}@{node.name}"
                    if any(x.fusion == record.fusion and x.node == node.name
                           for x in report.near_misses):
                        continue
                    reason = "; ".join(extra)
                    miss = NearMiss(record.fusion, record.variant, node.name, "other_user", "",
                                    reason)
                    if slot not in found or len(extra) < found[slot][0]:
                        found[slot] = (len(extra), miss)
        for _, miss in found.values():
            report.record_near_miss(miss)

    # -- identity ---------------------------------------------------------------------------

    def uuid(self) -> str | None:
        """Digest of the registered patterns (None when one of them cannot be hashed)."""
        h = hashlib.sha256(self.name.encode())
        for record in self.records:
            if record.digest is None:
                return None
            h.update(record.digest.encode())
        return h.hexdigest()


def _extra_users(match) -> list[str]:
    """Intermediates of a relaxed match whose user count differs from the pattern's."""
    from torch._inductor import pattern_matcher as pm

    out = []
    ctx = match.ctx
    for p, node in ctx.pattern_to_node.items():
        if node is None or not isinstance(p, pm._TargetExpr) or p in ctx.outputs:
            continue
        want = getattr(p, "original_users", None)
        if not isinstance(want, int) or len(node.users) == want:
            continue
        others = [u.name for u in node.users if u not in match.nodes]
        what = _describe(node)
        out.append(f"intermediate {what} has {len(node.users)} users where the fusion needs "
                   f"{want}" + (f" (also used by {', '.join(others)})" if others else "")
                   + "; it would disappear after fusion")
    return out


def _describe(node: torch.fx.Node) -> str:
    import operator

    if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        src = node.args[0]
        return f"'{node.name}' (output {node.args[1]} of {_short(src.target)})"
    return f"'{node.name}' ({_short(node.target)})"


def _short(target) -> str:
    name = getattr(target, "__name__", str(target))
    return str(target).replace("torch.ops.", "") if "." in str(target) else name


def _trace_replacement(match, replace_fn, argnames, trace):
    """(the replacement traced on the match's inputs, None) or (None, the exception).
    Memoized per input metadata: a model's layers repeat the same shapes."""
    vals = []
    for name in argnames:
        v = match.kwargs.get(name)
        vals.append(v.meta.get("val") if isinstance(v, torch.fx.Node) else v)
    memo = _TRACE_MEMO.get()
    key = (id(getattr(trace, "__wrapped__", trace)), id(replace_fn), _spec(vals, grad=False))
    hit = memo.get(key) if memo is not None else None
    if hit is None:
        fake_mode = _graph_fake_mode(match)
        with fake_mode if fake_mode is not None else contextlib.nullcontext():
            args = [torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device)
                    if isinstance(a, torch.Tensor) else a for a in vals]
            try:
                return trace(replace_fn, args), None
            except Exception as exc:
                return None, exc
    ok, value, _ = hit
    return (value, None) if ok else (None, value)


def _replacement_rejects(match, replace_fn, argnames, trace) -> str | None:
    """Whether the fused operator's own shape / dtype checks (run by tracing the
    replacement) reject the match's inputs: the error, or None."""
    _, error = _trace_replacement(match, replace_fn, argnames, trace)
    if error is None:
        return None
    return f"the fused operator rejects these inputs: {error}".split("\n")[0]


# regions drawn per (fusion, variant) and graph: enough to show each variant, cheap enough
# that a 61-layer graph pays nothing for them
REGIONS_PER_VARIANT = 2


def _counting(apply, record: PatternRecord):
    def counted(match, graph, node):
        report = _REPORT.get()
        if report is None:
            apply(match, graph, node)
            return
        from op_sdk.compiler.effects import match_effect, region_picture

        matched = [n for n in match.nodes if n.op == "call_function"]
        saved = match_effect(match)
        size = len(graph.nodes)
        draw = sum(1 for r in report.regions if r["fusion"] == record.fusion
                   and r["variant"] == record.variant) < REGIONS_PER_VARIANT
        before = set(graph.nodes) if draw else None
        picture = region_picture(match) if draw else None
        apply(match, graph, node)
        after = len(matched) - (size - len(graph.nodes))
        report.record_match(record.fusion, record.variant, len(matched), after, saved)
        if draw:
            new_nodes = [n for n in graph.nodes if n not in before]
            report.regions.append({"fusion": record.fusion, "variant": record.variant,
                                   "anchor": _anchor_name_of(node), "before": picture,
                                   "after": region_picture(None, new_nodes)})

    return counted


def _anchor_name_of(node) -> str:
    return getattr(node, "name", "?")


def _canonical_trace(trace_fn: Callable) -> Callable:
    if trace_fn is trace_canonical:
        return trace_canonical

    def traced(fn, args, **kwargs):
        gm = trace_fn(fn, args, **kwargs)
        if canonicalize(gm.graph):
            gm.recompile()
        return gm

    traced.__name__ = f"canonical_{getattr(trace_fn, '__name__', 'trace')}"
    return traced


def _as_fake(example_inputs):
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


def _pattern_key(search_fn, replace_fn, example_inputs, trace_fn, extra_check,
                 search_fn_pattern, scalar_workaround, checks) -> tuple[str, str, str | None]:
    """(identity in this process, the same without the example inputs, content digest
    or None when some function cannot be hashed by content)."""
    parts = [callable_digest(search_fn), callable_digest(replace_fn),
             callable_digest(trace_fn), callable_digest(extra_check) if extra_check else "",
             repr(search_fn_pattern), repr(sorted((scalar_workaround or {}).items())),
             repr([(c.name, callable_digest(c.fn)) for c in checks])]
    stable = None not in parts and "None)" not in parts[-1]
    if not stable:  # identify by object instead (kept alive by the registry's entries)
        parts += [id(search_fn), id(replace_fn)]
    fns_key = hashlib.sha256(repr(parts).encode()).hexdigest()
    key = hashlib.sha256(repr([fns_key, _spec(list(example_inputs))]).encode()).hexdigest()
    return key, fns_key, (key if stable else None)


_USER: list[PatternRegistry] = []
_USER_LOCK = threading.Lock()


def user_registry() -> PatternRegistry:
    """The process-wide registry of user patterns (TorchAir's behaviour)."""
    with _USER_LOCK:
        if not _USER:
            _USER.append(PatternRegistry("user"))
        return _USER[0]


def current_registry() -> PatternRegistry:
    """The innermost ``with registry:`` scope, else the process-wide user registry."""
    scopes = _SCOPES.get()
    return scopes[-1] if scopes else user_registry()


def register_replacement(search_fn, replace_fn, example_inputs, trace_fn=None,
                         extra_check=None, search_fn_pattern=None, scalar_workaround=None,
                         skip_duplicates: bool = False) -> bool:
    """TorchAir's ``register_replacement``: add a user fusion pattern.

    ``search_fn(*inputs)`` is the subgraph to find, ``replace_fn`` (same signature) what
    replaces it; the user is responsible for their equivalence (``verify_replacement``
    checks it on random inputs). ``trace_fn`` defaults to ``fwd_only``. The pattern goes to
    the current registry scope (see ``PatternRegistry``); ``pattern_fusion_pass=False``
    disables it with the defaults. Returns True when newly registered.
    """
    return current_registry().register_replacement(
        search_fn, replace_fn, example_inputs, trace_fn, extra_check, search_fn_pattern,
        scalar_workaround, skip_duplicates)
