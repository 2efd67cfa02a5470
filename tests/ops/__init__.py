"""The per-operator tests: tests/ops/test_<slice>.py holds everything about the operators of
one slice of op_sdk.ops (the name an operator's files share, ``OpDef.slice``), and declares
what the registry-driven tests at tests/ level read from every slice:

* ``SCHEMAS``: the contract's schema strings of its npu-namespace operators
  (tests/test_ops_schema.py);
* ``samples()``: sample calls ``(name, args, kwargs)`` (tests/test_opcheck.py, and the native
  kernels against the references in tests/test_registry_coverage.py);
* ``CASES``: constraint violations, raised on cpu and meta alike; ``BAD_CALLS``: calls the
  native kernels' own checks reject, as the references do (tests/test_ops_constraints.py);
* ``NO_ACLNN_BINDING``: an npu operator with no OpPlugin binding, and why
  (tests/npu/test_bindings.py);
* ``NO_CONSTRAINTS``: an operator no call of its schema can break, and why;
* ``GE_TYPES``: the Ascend IR operator(s) each operator converts to; ``GE_REFUSED``: words of
  the error with which the converter refuses a sample call it does not write;
  ``NO_GE_CONVERTER``: an operator with no converter, and why (tests/test_converters.py);
* ``meta_grid()``: a grid of calls ``(name, args, kwargs)`` of its npu-namespace operators
  (2-D and 3-D inputs, odd sizes, every dtype the contract lists, every option that changes an
  output's shape or dtype) on which op_sdk's CPU kernels, op_sdk's fakes and torch_npu's Meta
  functions must agree on output shapes and dtypes (tests/npu/real/test_registry.py).

An operator outside the npu namespace is named ``"<namespace>::<name>"`` in these tables.
tests/test_registry_coverage.py checks that every operator has its file, samples and
constraint cases, and every npu-namespace operator its meta_grid() calls.
"""

import importlib
import pathlib

import torch

import op_sdk

HERE = pathlib.Path(__file__).parent


def slice_modules() -> list:
    """The tests/ops/test_<slice>.py modules, in name order."""
    return [importlib.import_module(f"{__name__}.{p.stem}") for p in sorted(HERE.glob("test_*.py"))]


def slice_module(slice_name: str):
    return importlib.import_module(f"{__name__}.test_{slice_name}")


def gather(attr: str) -> list:
    """The entries of table `attr` of every slice (absent: none), concatenated; a function
    (``samples``, ``meta_grid``) is called, with torch seeded first, so its inputs do not
    depend on order."""
    out = []
    for module in slice_modules():
        table = getattr(module, attr, ())
        if callable(table):
            torch.manual_seed(0)
            table = table()
        out.extend(table)
    return out


def gather_dict(attr: str) -> dict:
    """Table ``attr`` (a dict) of every slice, merged; an operator named by two slices is an
    error."""
    out: dict = {}
    for module in slice_modules():
        table = getattr(module, attr, {})
        both = set(out) & set(table)
        assert not both, f"{attr}: {sorted(both)} declared by two slices"
        out.update(table)
    return out


def sdk_ops() -> list:
    """The operators op_sdk.ops defines (not the plugins that tests and examples define)."""
    return [o for o in op_sdk.registered_ops() if o.module.startswith("op_sdk.ops.")]


def opdef(name: str):
    """The OpDef of an operator as the tables name it."""
    namespace, _, bare = name.rpartition("::")
    return op_sdk.get_op(bare, namespace or "npu")
