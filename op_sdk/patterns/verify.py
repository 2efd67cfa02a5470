"""verify_replacement: does a replacement compute what its pattern computes?

TorchAir leaves the equivalence of a user's replacement to the user. This runs both
functions eagerly on random inputs derived from the example inputs (several shapes,
several dtypes, several seeds) and compares every output within the fused operators'
tolerances. The contract (ops.md) lets a fused kernel keep fp32 where the unfused chain
rounds to fp16 / bf16 in between, so:

* floating outputs: ``TOLERANCES[dtype]`` of the lowest-precision floating input;
* integer (quantised) outputs: at most ``INT_STEPS[dtype]`` int8 steps apart (of the same
  lowest-precision input dtype);
* 8-bit float (quantised) outputs: within one step of their format (``FLOAT8_STEP``: a
  value's relative spacing, or the smallest subnormal near 0);
* shapes and dtypes must match exactly.

Shapes are varied by scaling every distinct example size consistently (so sizes that
must agree keep agreeing, and multiples stay multiples: 32-byte or 128-element
alignment survives); dtypes by moving the example's activation dtype (that of its first
floating input) to the other floating dtypes. A case the pattern itself rejects is not a
counterexample; one the replacement rejects is skipped and reported (in a compile the
fusion's checks veto such a match), but at least one case must run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["verify_replacement", "VerificationReport", "ReplacementMismatch", "TOLERANCES",
           "INT_STEPS", "FLOAT8_STEP", "close"]

# (atol, rtol) per compute dtype; the tests read the same table
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
    torch.float32: (1e-5, 1.3e-5),
}
# int8 steps per compute dtype. A bf16 pattern rounds its intermediates (each to 2^-8
# relative) before it quantises; two such roundings move a value of 127 steps by up to one
# step, and the quantiser's own rounding adds one: 2. fp16 (2^-11) and fp32 stay within one.
INT_STEPS: dict[torch.dtype, int] = {torch.float16: 1, torch.bfloat16: 2, torch.float32: 1}
# (atol, rtol) of one step of each 8-bit float format: its smallest subnormal, its spacing
FLOAT8_STEP: dict[torch.dtype, tuple[float, float]] = {
    torch.float8_e4m3fn: (2.0 ** -9, 2.0 ** -3), torch.float8_e5m2: (2.0 ** -16, 2.0 ** -2)}


def close(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Elementwise agreement of a floating output: within (atol, rtol), or within one step
    of an 8-bit float format (FLOAT8_STEP), NaN equal to NaN."""
    atol, rtol = FLOAT8_STEP.get(expected.dtype, (atol, rtol))
    return torch.isclose(actual.float(), expected.float(), atol=atol, rtol=rtol, equal_nan=True)
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
SIZE_SCALES = (1, 3, 2)  # scale factors of every distinct example size, one per shape set


class ReplacementMismatch(AssertionError):
    """A replacement computed something other than its pattern."""


@dataclasses.dataclass
class Case:
    shapes: list[tuple[int, ...] | None]
    dtype: torch.dtype | None
    seed: int
    status: str = "ok"            # "ok", "mismatch", "skipped"
    detail: str = ""


@dataclasses.dataclass
class VerificationReport:
    cases: list[Case]

    @property
    def ok(self) -> bool:
        return any(c.status == "ok" for c in self.cases) and not self.failures

    @property
    def failures(self) -> list[Case]:
        return [c for c in self.cases if c.status == "mismatch"]

    def __str__(self) -> str:
        ran = sum(c.status == "ok" for c in self.cases)
        lines = [f"{ran} cases agree, {len(self.failures)} disagree, "
                 f"{sum(c.status == 'skipped' for c in self.cases)} skipped"]
        for c in self.cases:
            if c.status != "ok":
                lines.append(f"  {c.status}: shapes {c.shapes} dtype {c.dtype} seed {c.seed}: "
                             f"{c.detail}")
        return "\n".join(lines)


def _activation_dtype(inputs) -> torch.dtype | None:
    return next((x.dtype for x in inputs if isinstance(x, torch.Tensor)
                 and x.dtype in FLOAT_DTYPES), None)


def _size_map(inputs, scale: int) -> dict[int, int]:
    sizes = sorted({s for x in inputs if isinstance(x, torch.Tensor) for s in x.shape})
    return {s: s * scale for s in sizes}


def _random_like(x: torch.Tensor, shape, dtype, gen: torch.Generator) -> torch.Tensor:
    if x.dtype.is_floating_point:
        # same sign pattern as the example (positive scales stay positive), random values
        sign_free = bool((x >= 0).all()) and x.numel() > 0
        lo, hi = (float(x.min()), float(x.max())) if x.numel() else (0.0, 1.0)
        if sign_free:
            v = torch.rand(shape, generator=gen) * (hi - lo if hi > lo else 1.0) + lo
        else:
            v = torch.randn(shape, generator=gen)
        return v.to(dtype)
    if x.dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    lo = int(x.min()) if x.numel() else 0
    hi = int(x.max()) + 1 if x.numel() else 2
    return torch.randint(lo, max(hi, lo + 1), shape, generator=gen, dtype=torch.int64).to(x.dtype)


def _derive(example_inputs, size_map, act, new_act, gen):
    out, shapes = [], []
    for x in example_inputs:
        if not isinstance(x, torch.Tensor):
            out.append(x)
            shapes.append(None)
            continue
        shape = tuple(size_map.get(s, s) for s in x.shape)
        dtype = new_act if (act is not None and x.dtype == act and new_act is not None) else x.dtype
        out.append(_random_like(x, shape, dtype, gen))
        shapes.append(shape)
    return out, shapes


def _flat(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [y for o in out for y in _flat(o)]
    return [out]


def _compare(expected, actual, tol_dtype) -> str | None:
    exp, act = _flat(expected), _flat(actual)
    if len(exp) != len(act):
        return f"{len(exp)} outputs from the pattern, {len(act)} from the replacement"
    atol, rtol = TOLERANCES.get(tol_dtype, TOLERANCES[torch.float32])
    for i, (e, a) in enumerate(zip(exp, act)):
        if not isinstance(e, torch.Tensor):
            if e != a:
                return f"output {i}: {e!r} != {a!r}"
            continue
        if not isinstance(a, torch.Tensor) or a.shape != e.shape or a.dtype != e.dtype:
            got = (tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else type(a).__name__
            return f"output {i}: pattern gives {(tuple(e.shape), e.dtype)}, replacement {got}"
        if e.numel() == 0:
            continue
        if e.dtype.is_floating_point:
            ok = close(a, e, atol, rtol)
            if not bool(ok.all()):
                diff = (a.float() - e.float()).abs().max().item()
                return (f"output {i} ({e.dtype}): max abs difference {diff:.3g} beyond "
                        f"atol={atol}, rtol={rtol}")
        else:
            diff = (a.long() - e.long()).abs().max().item()
            steps = INT_STEPS.get(tol_dtype, 1)
            if diff > steps:
                return f"output {i} ({e.dtype}): differs by {diff} steps (at most {steps})"
    return None


def verify_replacement(search_fn: Callable, replace_fn: Callable,
                       example_inputs: Sequence[Any], *,
                       dtypes: Sequence[torch.dtype] | None = None,
                       size_scales: Sequence[int] = SIZE_SCALES, seeds: Sequence[int] = (0, 1),
                       raise_on_failure: bool = True) -> VerificationReport:
    """Run ``search_fn`` and ``replace_fn`` on random inputs shaped like ``example_inputs``
    (scaled by each of ``size_scales``, in the activation dtype and each of ``dtypes``,
    default all of fp16 / bf16 / fp32) and compare. Raises ``ReplacementMismatch`` on a
    disagreement (or when no case could run) unless ``raise_on_failure=False``."""
    example_inputs = list(example_inputs)
    act = _activation_dtype(example_inputs)
    if dtypes is None:
        dtypes = [act] + [d for d in FLOAT_DTYPES if d != act] if act else [None]
    cases = []
    for dtype in dtypes:
        for scale in size_scales:
            for seed in seeds:
                gen = torch.Generator().manual_seed(seed * 1000 + scale)
                inputs, shapes = _derive(example_inputs, _size_map(example_inputs, scale), act,
                                         dtype, gen)
                case = Case(shapes, dtype, seed)
                cases.append(case)
                try:
                    with torch.no_grad():
                        expected = search_fn(*inputs)
                except Exception as exc:  # outside the pattern's own domain: not a case
                    case.status, case.detail = "skipped", f"the pattern rejects it: {exc}"
                    continue
                try:
                    with torch.no_grad():
                        actual = replace_fn(*inputs)
                except Exception as exc:
                    case.status = "skipped"
                    case.detail = f"the replacement rejects it (a fusion check must veto): {exc}"
                    continue
                tol_dtype = _lowest(inputs)
                problem = _compare(expected, actual, tol_dtype)
                if problem:
                    case.status, case.detail = "mismatch", problem
    report = VerificationReport(cases)
    if raise_on_failure and not report.ok:
        name = getattr(replace_fn, "__name__", "replacement")
        raise ReplacementMismatch(f"verify_replacement({name}): {report}")
    return report


def _lowest(inputs) -> torch.dtype:
    """The lowest-precision floating dtype among the inputs (its tolerance applies)."""
    floats = [x.dtype for x in inputs if isinstance(x, torch.Tensor) and x.dtype in FLOAT_DTYPES]
    return max(floats, key=lambda d: TOLERANCES[d][1]) if floats else torch.float32
