"""What each operator has for the NPU, and the verification level each piece reached.

The levels, in order, never claimed beyond what a test in this project checks: "source",
"compiles", "CPU-model tested", "registration-checked", "graph-checked". No piece is
verified on Ascend hardware ("hardware: not verified"), since no machine here has an NPU
or the CANN toolkit.

* Ascend C kernel: kernels/ascendc/<slice>/ (CANN's layout), shipped in the package next to
  the CPU kernel headers. Every such folder's kernel is compiled with g++ against the CPU
  model of the Ascend C API and run against the operator's reference by tests/ascendc
  (tests/ascendc/test_coverage.py fails for a folder without its test), hence "CPU-model
  tested"; its CANN build is not verified. Operators without a folder run CANN's own
  kernels on the NPU (torch_npu's aclnn calls): op_sdk ships none for them.
* OpPlugin eager binding: csrc/npu/<operator>.cpp, generated from the operator's aclnn=
  declaration (op_sdk.npu.binding) and checked against the pinned aclnn prototype table
  (op_sdk/npu/prototypes.py) by tests/npu/test_bindings.py; tests/npu/real/test_bindings.py
  compiles each on x86 against the torch_npu wheel's headers and registers it beside the
  stubbed torch_npu, hence "compiles (x86, against torch_npu headers), registration-checked".
  A binding is registered only for an operator the installed torch_npu lacks; what it did in
  this process is reported too. Operators without a declaration: torch_npu's own binding.
* GE converter: op_sdk/converters/<slice>.py (TorchAir's converter API). Each is checked
  against the pinned prototype table on every sample call and its GE IR text is parsed by
  the wheel's GE schema (tests/test_converters.py); for the operators TorchAir converts
  itself (``torchair_has_own=True`` at its registration, ``torchair_converts()``) it
  writes what TorchAir's converter writes for the same call
  (tests/npu/real/test_converters.py), and TorchAir keeps using its own; for the others it
  is registered with TorchAir and runs through TorchAir's builder there: "graph-checked".
"""

from __future__ import annotations

import os

__all__ = ["LEVELS", "HARDWARE", "BINDING_LEVEL", "torchair_converts", "ascendc_root",
           "opplugin_binding", "ge_converter", "npu_deliverables", "declared_bindings",
           "write_binding_sources"]

LEVELS = ("source", "compiles", "CPU-model tested", "registration-checked", "graph-checked")
HARDWARE = "not verified"
BINDING_LEVEL = "compiles (x86, against torch_npu headers), registration-checked"

def torchair_converts() -> frozenset[str]:
    """The operators TorchAir of torch-npu 2.13.0 has its own converter of: those whose
    converter module declares ``torchair_has_own=True`` (checked against the wheel by
    tests/npu/real/test_converters.py)."""
    from op_sdk.converters import converters
    from op_sdk.converters.registry import torchair_converts as declared

    converters()  # the slices' converter modules, loaded
    return declared()


def ascendc_root() -> str | None:
    """kernels/ascendc of this installation (the package's copy, or the source tree's in an
    editable install), or None when it is not there."""
    import op_sdk

    root = os.path.join(op_sdk.include_dirs()[0], "ascendc")
    return root if os.path.isdir(root) else None


def ascendc_kernel(opdef) -> str:
    """The level of ``opdef``'s Ascend C kernel, in words."""
    root = ascendc_root()
    if root is None:
        return "not installed"
    if os.path.isfile(os.path.join(root, opdef.slice, "op_kernel", f"{opdef.slice}.cpp")):
        return "source + CPU-model tested (CANN build: not verified)"
    if opdef.namespace == "op_sdk":
        return "none (op_sdk's CPU-only operator)"
    return "CANN's own kernel (none of op_sdk's)"


def opplugin_binding(opdef) -> str:
    """The level of ``opdef``'s OpPlugin-style eager binding, in words."""
    binding = getattr(opdef, "aclnn", None)
    if binding is None:
        if opdef.namespace == "op_sdk":
            return "none (op_sdk's CPU-only operator)"
        if opdef.namespace == "air":
            return "none (TorchAir's operator: on the NPU only in a GE graph)"
        return "none of op_sdk's (torch_npu's own binding serves it)"
    from op_sdk.npu.binding import source_path

    apis = " / ".join(binding.apis)  # more than one: selected by argument values
    if not os.path.isfile(source_path(opdef)):
        return f"{apis}: declared, source not generated (csrc/npu/{opdef.name}.cpp)"
    canns = " / ".join(dict.fromkeys(b.prototype.cann for b in binding.branches))
    plural = "s" if len(binding.apis) > 1 else ""
    here = opdef.binding_status or "not loaded (no torch_npu in this process)"
    return (f"{apis} (CANN {canns} prototype{plural}): {BINDING_LEVEL}; "
            f"in this process: {here}")


def ge_converter(opdef) -> str:
    """The level of ``opdef``'s GE converter, in words."""
    from op_sdk.converters import converter_for

    try:
        op = opdef.op
    except AttributeError:  # a declaration whose operator is not defined in this process
        return "none (operator not defined)"
    if converter_for(op) is None:
        return "none (runs at compile time)" if opdef.qualname == "op_sdk::pack_quant_weight" \
            else "none"
    if opdef.namespace == "op_sdk":
        return "graph-checked (CPU-only operator: op_sdk's GE graph only)"
    if opdef.qualname in torchair_converts():
        return "graph-checked (= TorchAir's converter, which TorchAir uses)"
    if opdef.namespace == "air":  # TorchAir's converter: in the module defining the operator
        return "graph-checked (TorchAir's operator; registered with TorchAir where its own is not loaded)"
    return "graph-checked (registered with TorchAir, which has none)"


def npu_deliverables(opdef) -> dict[str, str]:
    """{deliverable: its level} for one operator."""
    return {"ascendc_kernel": ascendc_kernel(opdef),
            "opplugin_binding": opplugin_binding(opdef),
            "ge_converter": ge_converter(opdef),
            "hardware": HARDWARE}


# ---------------------------------------------------------------------------------------
# The declared bindings, and their generated sources

def declared_bindings() -> list:
    """op_sdk's own operators with an aclnn= declaration (those its slices, op_sdk.ops.*,
    define; a user project's are its own, e.g. examples/silu_mul_quant/csrc/npu)."""
    from op_sdk import library

    return [o for o in library.registered_ops()
            if o.aclnn is not None and o.module.startswith("op_sdk.ops.")]


def write_binding_sources() -> list[str]:
    """(Re)generate csrc/npu/<operator>.cpp for every binding op_sdk declares; returns the paths."""
    from op_sdk.npu.binding import SOURCE_DIR, generate_source, source_path

    os.makedirs(SOURCE_DIR, exist_ok=True)
    paths = []
    for opdef in declared_bindings():
        path = source_path(opdef)
        with open(path, "w") as f:
            f.write(generate_source(opdef))
        paths.append(path)
    return paths
