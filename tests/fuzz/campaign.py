"""A differential fuzz campaign over every operator of op_sdk.ops: random calls built from
each slice's own tables (``samples()``, ``meta_grid()``, ``CASES``, ``BAD_CALLS`` of
tests/ops/test_<slice>.py), mutated in shape (dims remapped consistently, 0-size and long
rows included), values (NaN, +-inf, huge, denormal, all-zero) and layout (contiguous,
dense-permuted, padded rows, stride 0), and now and then made invalid (a wrong dtype, a
dim dropped). Each call runs three ways: the operator (its native CPU kernel where it has
one), its plain-PyTorch reference, and its fake under FakeTensorMode. A finding is:

* ``mismatch``: both ran and an output differs (integer and 8-bit float outputs bit for bit,
  but for a one-step flip of a value on a rounding boundary where the operator sums in
  another order than its reference (``FLIP_OPS``); float outputs within the dtype's
  tolerance, NaN where NaN, inf where inf; a mutated input likewise);
* ``fake``: the fake's shape, dtype or strides (of dims of size > 1) differ from the kernel's
  outputs, or the fake raised where the kernel ran;
* ``one_raised``: the kernel and the reference disagree on whether the call is valid;
* ``unclear``: an error that does not name the operator and an argument
  (``"<op>: argument '<name>' <rule>"``), or an exception type other than RuntimeError /
  NotImplementedError / ValueError / TypeError / IndexError from the checks.

``python -m tests.fuzz --seed S --calls N`` runs it (docs/testing.md); tests/fuzz/test_fuzz.py
runs a fixed seed within a time budget in the suite.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
import time
import traceback

import torch

from op_sdk.library import _InplaceLayout, check_writable
from op_sdk.ops._common import unpack_int4
from op_sdk.ops._mx import FLOAT4_E1M2, FLOAT4_E2M1
from tests.ops import opdef, sdk_ops, slice_modules
from tests.ops._helpers import LAYOUTS, TOL, fake_outputs, significant_strides

# Operators whose integer outputs come after an fp32 value the kernel computes with other
# rounding than the reference (the norms' sum of squares in another order; npu_swiglu_quant's
# and npu_dequant_swiglu_quant's exp, within an ulp or two of torch's): a value on a rounding
# boundary may land one step apart.
FLIP_OPS = {"npu_add_rms_norm_quant", "npu_add_rms_norm_dynamic_quant", "npu_swiglu_quant",
            "npu_rms_norm_quant", "npu_dequant_swiglu_quant", "npu_rms_norm_dynamic_mx_quant",
            "npu_add_rms_norm_dynamic_mx_quant"}
# the MX operators' float4 y (their first output): two 4-bit codes a byte, a step is one
# step of a nibble (dst_type float4_e2m1 / float4_e1m2; float4_e2m1 the default)
MX_FP4_CODES = {FLOAT4_E2M1, FLOAT4_E1M2}
# int32 outputs that hold int4 values packed 8 per word, by the call's dtype argument
INT4_CODES = {16, 285, torch.quint4x2}
INT4_ARGS = ("dst_type", "y_dtype", "dtype", "dst_dtype")
ERROR_TYPES = (RuntimeError, NotImplementedError, ValueError, TypeError, IndexError)
SIZES = (0, 1, 2, 3, 5, 7, 8, 13, 16, 17, 24, 31, 32, 48, 64, 100, 127, 128, 256, 257)
SPECIALS = (float("nan"), float("inf"), float("-inf"), 1e30, -1e30, 1e-40, -1e-40, 0.0,
            65504.0, 3.0e38)


@dataclasses.dataclass
class Finding:
    kind: str
    op: str
    detail: str
    call: str


@dataclasses.dataclass
class Summary:
    seed: int
    calls: int = 0
    ran: int = 0          # both ran and were compared
    refused: int = 0      # both refused, naming operator and argument
    seconds: float = 0.0
    per_op: dict = dataclasses.field(default_factory=dict)
    findings: list = dataclasses.field(default_factory=list)

    def line(self) -> str:
        kinds = {}
        for f in self.findings:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        return (f"fuzz seed {self.seed}: {self.calls} calls in {self.seconds:.0f} s, {self.ran} "
                f"compared, {self.refused} refused by both, {len(self.findings)} findings "
                f"{kinds or ''}")


# ---- the templates ----------------------------------------------------------------------------

def _build(v):
    """A CASES placeholder ("T", shape, dtype) as a tensor (tests/test_ops_constraints.py)."""
    if isinstance(v, tuple) and len(v) == 3 and v[0] == "T":
        _, shape, dtype = v
        if dtype.is_floating_point:
            return (torch.rand(shape) + 0.5).to(dtype)
        return torch.zeros(shape, dtype=dtype)
    if isinstance(v, list):
        return [_build(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_build(x) for x in v)
    if isinstance(v, dict):
        return {k: _build(x) for k, x in v.items()}
    return v


def templates() -> dict[str, list]:
    """name -> [(args, kwargs)] from every slice's tables."""
    out: dict[str, list] = {}
    for module in slice_modules():
        rows = []
        for attr in ("samples", "meta_grid"):
            fn = getattr(module, attr, None)
            if fn is not None:
                torch.manual_seed(0)
                rows += [(n, a, k) for n, a, k in fn()]
        rows += [(c[1], _build(c[2]), _build(c[3])) for c in getattr(module, "CASES", ())]
        rows += [(b[0], b[2], b[3]) for b in getattr(module, "BAD_CALLS", ())]
        for name, args, kwargs in rows:
            out.setdefault(opdef(name).qualname, []).append((tuple(args), dict(kwargs)))
    return out


# ---- mutations --------------------------------------------------------------------------------

def _tensors(args, kwargs):
    yield from ((i, a) for i, a in enumerate(args) if isinstance(a, torch.Tensor))
    yield from ((k, v) for k, v in kwargs.items() if isinstance(v, torch.Tensor))


def _map(args, kwargs, fn):
    return (tuple(fn(i, a) if isinstance(a, torch.Tensor) else a for i, a in enumerate(args)),
            {k: fn(k, v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()})


def _fresh(t: torch.Tensor, shape, rng: random.Random) -> torch.Tensor:
    """New values of t's kind in `shape`: floats normal, integers within t's own range
    (an index or group tensor stays plausible), bools random."""
    g = torch.Generator().manual_seed(rng.randrange(2**31))
    if t.dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if t.dtype.is_floating_point:
        if t.dtype in (torch.float8_e5m2, torch.float8_e4m3fn):
            return torch.randn(shape, generator=g).to(t.dtype)
        return (torch.randn(shape, generator=g) * rng.choice((1.0, 1.0, 0.1, 10.0))).to(t.dtype)
    if t.numel() > 0:
        lo, hi = int(t.min()), int(t.max())
    else:
        lo, hi = (-128, 127) if t.dtype == torch.int8 else (0, 8)
    if hi - lo > 2**40:  # packed scales and the like: reuse the template's values
        return t.flatten()[torch.randint(0, t.numel(), shape, generator=g)] if t.numel() else \
            torch.zeros(shape, dtype=t.dtype)
    return torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64).to(t.dtype)


def mutate_shapes(args, kwargs, rng: random.Random):
    """Remap the dim sizes >= 2 consistently across the call's tensors (equal sizes stay
    equal; a size 8x another stays so when both are remapped from the same base), with
    fresh values where a shape changed; now and then a single long row."""
    sizes = sorted({s for _, t in _tensors(args, kwargs) for s in t.shape if s >= 2})
    if not sizes:
        return args, kwargs
    remap = {}
    for s in sizes:
        if rng.random() < 0.5:
            continue
        if rng.random() < 0.03:
            remap[s] = rng.choice((100000, 65536, 4099))
        else:
            new = rng.choice(SIZES)
            if s % 8 == 0 and rng.random() < 0.7:
                new = max(8, new // 8 * 8) if new else 0
            remap[s] = new
    # keep one call bounded: its tensors' elements, and the product of its distinct sizes
    # (a reference's intermediates can be cubic: m * k * n products of a matmul in fp64)
    def shape_of(t):
        return tuple(remap.get(s, s) for s in t.shape)
    total = sum(math.prod(shape_of(t)) for _, t in _tensors(args, kwargs))
    distinct = math.prod({remap.get(s, s) for s in sizes} - {0})
    if total > 4_000_000 or distinct > 2**26:
        return args, kwargs

    def fn(_, t):
        shape = shape_of(t)
        if shape == tuple(t.shape):
            return t
        return _fresh(t, shape, rng).requires_grad_(t.requires_grad and t.is_floating_point())
    return _map(args, kwargs, fn)


def mutate_values(args, kwargs, rng: random.Random):
    """NaN / inf / huge / denormal / zero values in one float tensor, or a scaled copy."""
    floats = [(k, t) for k, t in _tensors(args, kwargs)
              if t.dtype in (torch.float32, torch.float16, torch.bfloat16) and t.numel() > 0]
    if not floats:
        return args, kwargs
    key, t = rng.choice(floats)
    t = t.detach().clone()
    flat = t.view(-1)
    how = rng.random()
    if how < 0.6:
        for _ in range(rng.randint(1, 4)):
            flat[rng.randrange(flat.numel())] = rng.choice(SPECIALS)
    elif how < 0.75:
        t.zero_()
    elif how < 0.9:
        t.mul_(rng.choice((1e4, 1e-4, 1e20, 1e-30)))
    else:
        t.fill_(rng.choice(SPECIALS))
    return _map(args, kwargs, lambda k, v: t if k == key else v)


def mutate_layout(args, kwargs, rng: random.Random):
    names = list(LAYOUTS)

    def fn(_, t):
        out = LAYOUTS[rng.choice(names)](t.detach())
        return out.requires_grad_() if t.requires_grad and out.is_floating_point() else out
    return _map(args, kwargs, fn)


_OTHER_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int32,
                 torch.int64, torch.uint8)


def mutate_invalid(args, kwargs, rng: random.Random):
    """One argument made wrong: another dtype, a dim dropped or added, or an int / dtype
    argument replaced."""
    items = [(k, v) for k, v in list(enumerate(args)) + list(kwargs.items())
             if isinstance(v, (torch.Tensor, int)) and not isinstance(v, bool)]
    if not items:
        return args, kwargs
    key, v = rng.choice(items)
    if isinstance(v, torch.Tensor):
        how = rng.random()
        if how < 0.5:
            new = v.detach().to(rng.choice(_OTHER_DTYPES))
        elif how < 0.75 and v.dim() > 0:
            new = v.detach().select(0, 0) if v.shape[0] > 0 else v.detach().sum(0)
        else:
            new = v.detach().unsqueeze(0)
    else:
        new = rng.choice((-1, 0, 2, 3, 7, 64, 291, 10**6))
    if isinstance(key, int):
        args = tuple(new if i == key else a for i, a in enumerate(args))
    else:
        kwargs = dict(kwargs, **{key: new})
    return args, kwargs


def make_call(template, rng: random.Random):
    args, kwargs = template
    args = tuple(a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor)
                 else a for a in args)
    kwargs = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v
              for k, v in kwargs.items()}
    if rng.random() < 0.6:
        args, kwargs = mutate_shapes(args, kwargs, rng)
    if rng.random() < 0.35:
        args, kwargs = mutate_values(args, kwargs, rng)
    if rng.random() < 0.5:
        args, kwargs = mutate_layout(args, kwargs, rng)
    if rng.random() < 0.1:
        args, kwargs = mutate_invalid(args, kwargs, rng)
    return args, kwargs


# ---- running and comparing ------------------------------------------------------------------

def _clone(args, kwargs):
    """Independent copies with the same strides (each run mutates its own in-place inputs)."""
    def one(_, t):
        c = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype) if t.numel() else \
            torch.empty(t.shape, dtype=t.dtype)
        if t.numel():
            c = t.detach().clone() if _overlapping(t) else c.copy_(t.detach())
        return c.requires_grad_(t.requires_grad and t.is_floating_point())
    return _map(args, kwargs, one)


def _overlapping(t):
    return any(s == 0 and n > 1 for n, s in zip(t.shape, t.stride()))


def _keep_expanded(args, kwargs, src_args, src_kwargs):
    """Stride-0 inputs stay expanded views in every copy (their layout is the point)."""
    def fn(k, t):
        s = src_args[k] if isinstance(k, int) else src_kwargs[k]
        if _overlapping(s):
            return s.detach()
        return t
    return _map(args, kwargs, fn)


def describe(args, kwargs) -> str:
    def d(v):
        if isinstance(v, torch.Tensor):
            dt = str(v.dtype).replace("torch.", "")
            return f"T({list(v.shape)}, {dt}, stride={list(v.stride())})"
        return repr(v)
    return ", ".join([d(a) for a in args] + [f"{k}={d(v)}" for k, v in kwargs.items()])


_ERR = re.compile(r"argument '(\w+)'")


def _clear(op_name: str, exc: BaseException) -> bool:
    msg = str(exc)
    return isinstance(exc, ERROR_TYPES) and op_name.split(".")[0].rstrip("_") in msg and \
        _ERR.search(msg) is not None


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _int4_call(kwargs) -> bool:
    return any(kwargs.get(k) in INT4_CODES for k in INT4_ARGS)


def _fp4_call(name, kwargs) -> bool:
    return "mx_quant" in name and kwargs.get("dst_type", FLOAT4_E2M1) in MX_FP4_CODES


def compare(name, a: torch.Tensor, e: torch.Tensor, int4: bool, bound=None,
            nibbles: bool = False) -> str | None:
    """None when kernel output a agrees with reference output e, else why not. `bound`: an
    extra per-element absolute error bound of float outputs (a slice's fuzz_bound); where
    it is infinite any value agrees. An output that is no tensor (get_npu_format's int) must
    be equal."""
    if not isinstance(a, torch.Tensor) or not isinstance(e, torch.Tensor):
        return None if a == e else f"{a!r} vs {e!r}"
    if a.dtype != e.dtype or a.shape != e.shape:
        return f"dtype / shape {a.dtype} {list(a.shape)} vs {e.dtype} {list(e.shape)}"
    if a.numel() == 0:
        return None
    if a.dtype in (torch.float8_e5m2, torch.float8_e4m3fn):
        a, e = a.view(torch.uint8), e.view(torch.uint8)
    if a.is_complex():
        a, e = torch.view_as_real(a), torch.view_as_real(e)
    if not a.dtype.is_floating_point:
        if torch.equal(a, e):
            return None
        if int4 and a.dtype == torch.int32:
            a, e = unpack_int4(a), unpack_int4(e)
        if nibbles and a.dtype == torch.uint8:
            a, e = torch.stack((a & 15, a >> 4)), torch.stack((e & 15, e >> 4))
        diff = (a.long() - e.long()).abs()
        bad = int((diff > 0).sum())
        if name in FLIP_OPS and int(diff.max()) <= 1 and bad <= max(2, a.numel() // 1000):
            return None
        i = int(diff.flatten().argmax())
        return (f"{bad} of {a.numel()} integers differ (max {int(diff.max())}; e.g. "
                f"{int(a.flatten()[i])} vs {int(e.flatten()[i])} at {i})")
    a32, e32 = a.float(), e.float()
    if bound is not None:
        free = bound.isinf()
        a32, e32, bound = a32[~free], e32[~free], bound[~free]
    an, en = a32.isnan(), e32.isnan()
    if not torch.equal(an, en):
        i = int((an != en).flatten().nonzero()[0])
        return f"NaN differs at {i}: {float(a32.flatten()[i])} vs {float(e32.flatten()[i])}"
    ai, ei = a32.isinf(), e32.isinf()
    if not torch.equal(ai, ei) or not torch.equal(a32[ai], e32[ei]):
        i = int(((ai != ei) | (a32 != e32) & ai).flatten().nonzero()[0])
        return f"inf differs at {i}: {float(a32.flatten()[i])} vs {float(e32.flatten()[i])}"
    fin = ~(an | ai)
    atol, rtol = TOL.get(a.dtype, (1e-5, 1e-5))
    err = (a32[fin] - e32[fin]).abs()
    lim = atol + rtol * e32[fin].abs()
    if bound is not None:
        lim = lim + bound[fin].float()
    if bool((err > lim).any()):
        k = int((err - lim).argmax())
        return (f"float outputs differ: {float(a32[fin][k])} vs {float(e32[fin][k])} "
                f"({int((err > lim).sum())} of {a.numel()})")
    return None


_BOUNDS = {}


def _bounds(d, args, kwargs):
    """The slice's fuzz_bound(name, args, kwargs) (tests/ops/test_<slice>.py), if any."""
    if d.slice not in _BOUNDS:
        module = next((m for m in slice_modules() if m.__name__.endswith(f"test_{d.slice}")), None)
        _BOUNDS[d.slice] = getattr(module, "fuzz_bound", None)
    fn = _BOUNDS[d.slice]
    return fn(d.name, args, kwargs) if fn is not None else None


def _reference(d):
    """The plain-PyTorch reference of d; for an in-place operator declared with functional=,
    the functional twin's after the in-place rule of op_sdk.library.check_writable for each
    argument it writes: the twin's new values are written into the reference's own copies of
    those arguments (compared with the kernel's), and its returns are the in-place
    operator's (op_sdk.library._InplaceLayout: an alias return is the new value)."""
    if not d.functional:
        return d.reference
    layout = _InplaceLayout(d.op._schema)

    def ref(*args, **kwargs):
        targets = layout.targets(args, kwargs)
        for name, dst in zip(layout.mutated, targets):
            check_writable(d.name, name, dst)
        values, new_values = layout.split(d.reference(*args, **kwargs))
        for dst, new in zip(targets, new_values):
            dst.copy_(new)
        return layout.result(targets, values)
    return ref


def check_call(d, args, kwargs, summary: Summary, call_desc=None) -> None:
    """Run one call three ways; record what disagrees."""
    name = d.name
    desc = call_desc or describe(args, kwargs)

    def finding(kind, detail):
        summary.findings.append(Finding(kind, name, detail, desc))

    if d.mutated_args:  # each run mutates its own copies
        ka, kk = _keep_expanded(*_clone(args, kwargs), args, kwargs)
        ra, rk = _keep_expanded(*_clone(args, kwargs), args, kwargs)
    else:  # the same tensors (an operator may record its input's address: pack_quant_weight)
        ka, kk = ra, rk = args, kwargs
    kexc = rexc = None
    try:
        with torch.no_grad():
            kout = _as_tuple(d.op(*ka, **kk))
    except Exception as exc:  # noqa: BLE001 - every exception is a result here
        kexc = exc
    try:
        with torch.no_grad():
            rout = _as_tuple(_reference(d)(*ra, **rk))
    except Exception as exc:  # noqa: BLE001
        rexc = exc
    if kexc is not None or rexc is not None:
        for who, exc in (("kernel", kexc), ("reference", rexc)):
            if exc is not None and not _clear(name, exc):
                finding("unclear", f"{who}: {type(exc).__name__}: {str(exc)[:300]}")
        if (kexc is None) != (rexc is None):
            exc = kexc or rexc
            finding("one_raised", f"{'kernel' if kexc else 'reference'} raised: "
                                  f"{type(exc).__name__}: {str(exc)[:300]}")
        elif _clear(name, kexc) and _clear(name, rexc):
            summary.refused += 1
        return
    summary.ran += 1
    int4 = _int4_call(kwargs)
    if len(kout) != len(rout):
        finding("mismatch", f"{len(kout)} outputs vs {len(rout)}")
        return
    bounds = _bounds(d, args, kwargs)
    for j, (o, r) in enumerate(zip(kout, rout)):
        why = compare(name, o, r, int4, bounds[j] if bounds and j < len(bounds) else None,
                      nibbles=j == 0 and _fp4_call(name, kwargs))
        if why:
            finding("mismatch", f"output {j}: {why}")
    # every argument an in-place operator writes (its reference writes the expected values
    # into its own copies)
    for key in d.mutated_args:
        pos = [a.name for a in d.op._schema.arguments].index(key)
        mk = ka[pos] if pos < len(ka) else kk[key]
        mr = ra[pos] if pos < len(ra) else rk[key]
        why = compare(name, mk, mr, False)
        if why:
            finding("mismatch", f"mutated {key}: {why}")
    try:
        fout = fake_outputs(d.op, args, kwargs)
    except Exception as exc:  # noqa: BLE001
        if not _clear(name, exc):
            finding("fake", f"fake raised {type(exc).__name__}: {str(exc)[:300]}")
        return  # a value-dependent rule the fake cannot see: named, fine
    if len(fout) != len(kout):
        finding("fake", f"{len(fout)} fake outputs vs {len(kout)}")
        return
    for j, (o, f) in enumerate(zip(kout, fout)):
        if not isinstance(o, torch.Tensor):
            if o != f:
                finding("fake", f"output {j}: kernel {o!r}, fake {f!r}")
        elif o.shape != f.shape or o.dtype != f.dtype:
            finding("fake", f"output {j}: kernel {o.dtype} {list(o.shape)}, fake {f.dtype} "
                            f"{list(f.shape)}")
        elif significant_strides(o) != significant_strides(f):
            finding("fake", f"output {j}: kernel strides {list(o.stride())}, fake "
                            f"{list(f.stride())}")


def run(seed: int = 0, calls: int | None = None, seconds: float | None = None,
        ops: list[str] | None = None, log=None) -> Summary:
    """Fuzz until `calls` calls or `seconds` seconds, whichever comes first."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    pool = templates()
    defs = [d for d in sdk_ops() if (ops is None or d.name in ops) and d.qualname in pool]
    summary = Summary(seed)
    start = time.monotonic()
    while (calls is None or summary.calls < calls) and \
            (seconds is None or time.monotonic() - start < seconds):
        d = defs[summary.calls % len(defs)]
        template = rng.choice(pool[d.qualname])
        summary.calls += 1
        summary.per_op[d.name] = summary.per_op.get(d.name, 0) + 1
        try:
            args, kwargs = make_call(template, rng)
        except Exception:  # noqa: BLE001 - a mutation that torch cannot build: skip
            continue
        try:
            check_call(d, args, kwargs, summary)
        except Exception:  # noqa: BLE001 - the harness itself: report, go on
            summary.findings.append(Finding("harness", d.name, traceback.format_exc()[-500:],
                                            describe(args, kwargs)))
        if log is not None and summary.calls % 1000 == 0:
            log(summary.line())
    summary.seconds = time.monotonic() - start
    return summary
