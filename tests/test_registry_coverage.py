"""Every operator of op_sdk.ops (read from the registry) has its tests: a file
tests/ops/test_<slice>.py whose samples() call it and whose constraint tables (CASES,
BAD_CALLS) hold a call of it that must fail; every npu-namespace operator also has
meta_grid() calls (compared with torch_npu's Meta functions in tests/npu/real). Every
operator declared with a native CPU kernel dispatches to it, and on every sample call gives
the reference's output: integer (and 8-bit float) outputs bit for bit, float outputs within
the dtype's tolerance."""

import pytest
import torch

from tests.ops import HERE, gather, opdef, sdk_ops, slice_module
from tests.ops._helpers import TOL, assert_bits_equal, assert_float_close
from tests.test_ops_constraints import _build

OPS = sdk_ops()
NATIVE_OPS = [o for o in OPS if "cpu" in o.native]
NATIVE_SAMPLES = [s for s in gather("samples") if "cpu" in opdef(s[0]).native]


def _qualnames(names):
    return {opdef(name).qualname for name in names}


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.qualname)
def test_every_operator_has_its_test_file(op):
    assert (HERE / f"test_{op.slice}.py").is_file(), f"no tests/ops/test_{op.slice}.py"


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.qualname)
def test_every_operator_has_samples(op):
    names = [name for name, _, _ in slice_module(op.slice).samples()]
    assert op.qualname in _qualnames(names), f"test_{op.slice}.py: no sample calls {op.qualname}"


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.qualname)
def test_every_operator_has_constraint_cases(op):
    module = slice_module(op.slice)
    names = [case[1] for case in getattr(module, "CASES", ())]
    names += [call[0] for call in getattr(module, "BAD_CALLS", ())]
    if op.qualname in getattr(module, "NO_CONSTRAINTS", {}):  # it takes any call: the slice says why
        assert op.qualname not in _qualnames(names)
        return
    assert op.qualname in _qualnames(names), f"test_{op.slice}.py: no constraint case of {op.qualname}"


@pytest.mark.parametrize("op", [o for o in OPS if o.namespace == "npu"], ids=lambda o: o.qualname)
def test_every_npu_operator_has_meta_grid_calls(op):
    module = slice_module(op.slice)
    names = [name for name, _, _ in module.meta_grid()] if hasattr(module, "meta_grid") else []
    assert op.qualname in _qualnames(names), f"test_{op.slice}.py: no meta_grid() call of {op.qualname}"


@pytest.mark.parametrize("op", NATIVE_OPS, ids=lambda o: o.qualname)
def test_op_dispatches_to_native_cpu_kernel(op):
    assert op.kernel_devices()["cpu"] == "native"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op.qualname, "CPU")


def _call(fn, op, args, kwargs):
    if op.mutated_args:  # each call writes its own copies
        args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
    with torch.no_grad():
        out = fn(*args, **kwargs)
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("i", range(len(NATIVE_SAMPLES)),
                         ids=lambda i: f"{NATIVE_SAMPLES[i][0]}-{i}")
def test_native_kernel_matches_reference_on_samples(i):
    name, args, kwargs = NATIVE_SAMPLES[i]
    op = opdef(name)
    out = _call(op.op, op, args, kwargs)
    ref = _call(op.reference, op, args, kwargs)
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        if o.dtype in TOL:
            assert_float_close(o, r)
        else:
            assert_bits_equal(o, r)


ROUTING = [o for o in NATIVE_OPS if o.reference_op]


@pytest.mark.parametrize("op", ROUTING, ids=lambda o: o.qualname)
def test_routed_forms_run_the_reference(op):
    """An operator whose launcher routes forms to its reference (reference_op=True): the
    reference operator has the operator's schema, some sample or constraint case takes the
    route, a routed call computes exactly what the reference does, and a routed invalid
    call raises the reference's error."""
    ours = torch._C._get_schema(op.qualname, "")
    theirs = torch._C._get_schema(f"op_sdk_reference::{op.name}", "")
    assert str(theirs).split("::", 1)[1] == str(ours).split("::", 1)[1]
    routed = 0
    for name, args, kwargs in gather("samples"):
        if opdef(name) is not op:
            continue
        with torch.profiler.profile() as prof:
            out = _call(op.op, op, args, kwargs)
        if f"op_sdk_reference::{op.name}" not in {e.name for e in prof.events()}:
            continue
        routed += 1
        for o, r in zip(out, _call(op.reference, op, args, kwargs)):
            assert o.dtype == r.dtype and o.shape == r.shape, (o.dtype, r.dtype)
            if o.is_floating_point():  # bit for bit, NaN included
                o, r = (t.contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32,
                                             8: torch.int64}[t.element_size()]) for t in (o, r))
            assert torch.equal(o, r)
    # a launcher that routes only invalid calls (their rules and messages in the reference
    # alone): each constraint case of the operator raises from the reference, same message
    for _, name, args, kwargs, _, exc in gather("CASES"):
        if opdef(name) is not op:
            continue
        args, kwargs = _build(args, "cpu"), _build(kwargs, "cpu")
        with torch.profiler.profile() as prof, pytest.raises(exc) as ours_error:
            op.op(*args, **kwargs)
        if f"op_sdk_reference::{op.name}" not in {e.name for e in prof.events()}:
            continue
        routed += 1
        with pytest.raises(exc) as reference_error:
            op.reference(*args, **kwargs)
        assert str(reference_error.value) in str(ours_error.value)
    assert routed, (f"no sample or constraint case of {op.qualname} takes a form its launcher "
                    "routes to the reference")


def _rope_call(d):
    return (torch.randn(1, 2, 3, d), torch.randn(1, 1, 3, d), torch.randn(1, 1, 3, d)), {}


# (operator, a call with the limited size as its argument, the Python rule's limit, the
# smallest step past it): the C++ fast forms restate these limits (csrc/rotary_mul.cpp,
# csrc/swiglu_quant.cpp), so the launcher must take the call at the limit and route the
# next one to the reference, which refuses it
_FAST_FORM_LIMITS = [
    ("npu_rotary_mul", _rope_call, "rotary_mul.MAX_D", 2),
    ("npu_interleave_rope", _rope_call, "interleave_rope.D", 2),
    ("npu_swiglu_quant", lambda d: ((torch.randn(2, d),), {"quant_mode": 1}),
     "swiglu_quant.MAX_LAST_DIM", 2),
]


@pytest.mark.parametrize("name,make,limit,step", _FAST_FORM_LIMITS, ids=lambda v: str(v))
def test_native_fast_forms_end_where_the_rules_do(name, make, limit, step):
    import importlib

    module, attr = limit.split(".")
    size = getattr(importlib.import_module(f"op_sdk.ops.{module}"), attr)
    op = opdef(name)
    if op.kernel_devices()["cpu"] != "native":
        pytest.skip(f"{name}: no native CPU kernel here")

    def routed(d, raises=None):
        args, kwargs = make(d)
        with torch.profiler.profile() as prof:
            if raises is None:
                op.op(*args, **kwargs)
            else:
                with pytest.raises(raises, match=f"{name}: argument"):
                    op.op(*args, **kwargs)
        return f"op_sdk_reference::{name}" in {e.name for e in prof.events()}

    assert not routed(size), f"{name}: the kernel refuses the rule's limit {size}"
    assert routed(size + step, RuntimeError), f"{name}: the kernel takes {size + step}"


def test_apply_rotary_pos_emb_fast_form_takes_every_layout():
    """csrc/rotary_mul.cpp names the layouts and their head-dim positions again
    (apply_fast_form): each layout of the Python rule (apply_rotary_pos_emb.LAYOUTS) runs
    the kernel, a layout the rule refuses routes to the reference and its error."""
    from op_sdk.ops.apply_rotary_pos_emb import LAYOUTS

    op = opdef("npu_apply_rotary_pos_emb")
    if op.kernel_devices()["cpu"] != "native":
        pytest.skip("no native CPU kernel here")

    def call(layout):
        _, rank, n = LAYOUTS.get(layout, (0, 4, 2))
        q = [2, 3, 5, 64][4 - rank:]
        k, r = list(q), list(q)
        k[n], r[n] = 2, 1
        args = (torch.randn(q), torch.randn(k), torch.randn(r), torch.randn(r), layout)
        with torch.profiler.profile() as prof:
            try:
                op.op(*args)
            except RuntimeError as exc:
                assert "npu_apply_rotary_pos_emb: argument 'layout'" in str(exc)
        return "op_sdk_reference::npu_apply_rotary_pos_emb" in {e.name for e in prof.events()}

    assert [name for name in LAYOUTS if call(name)] == []
    assert call("BHSD")
