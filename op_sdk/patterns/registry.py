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

import contextvars
import dataclasses
import hashlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

from op_sdk._digest import callable_digest
from op_sdk.patterns.canonical import canonicalize_pattern
from op_sdk.patterns.diagnostics import (REPORT, Check, NearMiss, PatternRecord, anchor_name,
                                         counting, extra_users, pattern_targets, presence,
                                         recording)
from op_sdk.patterns.tracing import (as_fake, canonical_trace, memoized, replacement_rejects,
                                     spec, trace_canonical, trace_replacement)

__all__ = ["PatternRegistry", "register_replacement", "user_registry", "current_registry",
           "trace_canonical", "Check", "recording", "DuplicatePatternError"]


class DuplicatePatternError(RuntimeError):
    """A registry already holds an identical pattern with a different replacement."""


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
        base_trace = canonical_trace(trace_fn)
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
            fake_inputs, fake_mode = as_fake(example_inputs)
            before = {id(e) for entries in self._pass.patterns.values() for e in entries}
            try:
                if search_fn_pattern is not None:
                    registered = self._register_pretraced(record, search_fn, replace_fn,
                                                          search_fn_pattern, check,
                                                          memoized(base_trace), skip_duplicates)
                else:
                    with fake_mode:
                        registered = pm.register_replacement(
                            search_fn, replace_fn, fake_inputs, memoized(base_trace),
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
            record.targets = pattern_targets(record.pattern)
            record.entries = [e for entries in self._pass.patterns.values() for e in entries
                              if id(e) not in before]
            for entry in record.entries:
                entry.apply = counting(entry.apply, record)
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
            graph, error = trace_replacement(match, replace_fn, argnames, trace)
            if graph is None:
                raise error  # the check traced it already: only without fused_op_check
            match.replacement_graph = graph
            return True

        def normalize_args(**kwargs):
            return [kwargs[name] for name in argnames]

        # pattern_name: newer torch's (Inductor's pattern-match logs name the entry)
        fields = {f.name for f in dataclasses.fields(pm.ReplacementPatternEntry)}
        named = {"pattern_name": record.name} if "pattern_name" in fields else {}
        entry = pm.ReplacementPatternEntry(pattern=pattern, extra_check=extra_check,
                                           normalize_args=normalize_args, **named)
        entry.register(self._pass)
        return pattern

    def _make_check(self, record, search_fn, replace_fn, extra_check, checks, fused_op_check,
                    base_trace):
        """The extra_check given to Inductor: TorchAir's same-stream veto, the named checks,
        the user's extra_check, whether the replacement accepts the inputs, then whether
        the benefit model predicts the replacement pays (op_sdk/patterns/benefit.py).
        Each refusal is recorded as a near miss in the current report."""
        import inspect

        argnames = list(inspect.signature(search_fn).parameters)
        memo_trace = memoized(base_trace)

        def near_miss(match, kind, check, reason):
            report = REPORT.get()
            if report is not None:
                report.record_near_miss(NearMiss(record.fusion, record.variant,
                                                 anchor_name(match), kind, check, reason))

        def check(match) -> bool:
            streams = {n.meta.get("stream_label") for n in match.nodes}
            if len(streams) > 1:
                near_miss(match, "stream", "same_stream",
                          f"the matched nodes span streams {sorted(map(str, streams))}")
                return False
            match.op_sdk_variant = record.variant  # the variant a check may read
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
                reason = replacement_rejects(match, replace_fn, argnames, memo_trace)
                if reason:
                    near_miss(match, "fused_op", "", reason)
                    return False
            return benefit(match)

        def benefit(match) -> bool:
            """The benefit model's verdict (op_sdk/patterns/benefit.py); the accepted
            prediction rides on the match to the report (``counting``)."""
            from op_sdk.patterns.benefit import PLANNING, predict_match

            settings = PLANNING.get()
            if settings.threshold_us is None:
                return True
            graph, _ = trace_replacement(match, replace_fn, argnames, memo_trace)
            prediction = predict_match(match, graph, settings)
            if prediction is None:
                return True
            if not prediction.accepted:
                near_miss(match, "benefit", "fusion_benefit_threshold_us", prediction.reason)
                return False
            match.op_sdk_prediction = prediction
            return True

        check.__name__ = f"check_{record.fusion}"
        return check

    # -- application ------------------------------------------------------------------------

    def apply(self, gm: torch.fx.GraphModule) -> int:
        """Apply every pattern once over the graph; returns the number of replacements.
        Skipped outright when no pattern's operators are all in the graph."""
        present = presence(gm.graph)
        if not any(r.could_match(present) for r in self.records):
            return 0
        return self._pass.apply(gm)

    def diagnose(self, gm: torch.fx.GraphModule, report) -> None:
        """Report where a pattern matched except for an intermediate with other users."""
        from torch._inductor import pattern_matcher as pm

        found: dict[str, tuple[int, NearMiss]] = {}  # anchor -> (violations, miss) per fusion
        present = presence(gm.graph)
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
                    extra = extra_users(m)
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
    key = hashlib.sha256(repr([fns_key, spec(list(example_inputs))]).encode()).hexdigest()
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

    As with the default fusions, every match that passes ``extra_check`` is replaced
    (TorchAir's behaviour); with ``experimental_config.fusion_benefit_scope = "all"`` only
    where the benefit model predicts a saving above
    ``experimental_config.fusion_benefit_threshold_us`` (a rewrite into more kernels than
    it removes does not pay).
    """
    return current_registry().register_replacement(
        search_fn, replace_fn, example_inputs, trace_fn, extra_check, search_fn_pattern,
        scalar_workaround, skip_duplicates)
