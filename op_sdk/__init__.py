"""op_sdk: fused operators for PyTorch graph mode, and the compiler passes that use them."""

from op_sdk import ops  # noqa: F401  (defines torch.ops.npu.*, registers the native kernels)
from op_sdk.library import Benchmark, OpDef, define_op, functionalize_inplace, get_op, registered_ops  # noqa: E402
from op_sdk.npu.binding import AclnnBinding, BindingError  # noqa: E402
from op_sdk.composite import Composite, Spelling  # noqa: E402
from op_sdk import _air as _air  # noqa: E402
from op_sdk.library import torch_npu_module as _torch_npu_module  # noqa: E402

_air.define(_torch_npu_module() is not None)  # torch.ops.air.scope_enter / scope_exit / record / wait

from op_sdk._version import __version__  # noqa: E402,F401
from op_sdk._slices import import_slices  # noqa: E402
from op_sdk._native import cpu_output_pool  # noqa: E402,F401

import logging as _logging  # noqa: E402

# TorchAir's ``torchair.logger``: at DEBUG the pipeline logs the graph each user pass leaves
logger = _logging.getLogger("op_sdk")
__all__ = ["include_dirs", "AclnnBinding", "BindingError", "Benchmark", "OpDef", "define_op", "functionalize_inplace", "get_op", "registered_ops",  # noqa: E501
           "CompilerConfig", "get_npu_backend", "register_replacement", "verify_replacement",
           "PatternRegistry", "explain", "scope", "logger", "quantize_w8a8", "W8A8Linear",
           "W8A8GatedMLP", "use_internal_format_weight", "npu_format_cast_via_cpu",
           "export_onnx", "Composite", "Spelling", "register_fusion", "cpu_output_pool",
           "import_slices", "get_compiler", "dynamo_export", "register_fx_node_ge_converter",
           "patch_for_hcom", "ge", "inference", "npugraph_ex", "llm_datadist"]

# The compiler API is imported on first use: `import op_sdk` stays free of torch._dynamo /
# torch._inductor and registers no fusion pattern.
_LAZY = {
    "CompilerConfig": "op_sdk.compiler.config",
    "get_npu_backend": "op_sdk.compiler.backend",
    "get_compiler": "op_sdk.compiler.backend",
    "dynamo_export": "op_sdk.compiler.export",
    "patch_for_hcom": "op_sdk.compiler.export",
    "register_fx_node_ge_converter": "op_sdk.converters",
    "ge": "op_sdk.ge",
    "inference": "op_sdk.inference",
    "npugraph_ex": "op_sdk.npugraph_ex",
    "llm_datadist": "op_sdk.llm_datadist",
    "register_replacement": "op_sdk.patterns.registry",
    "register_fusion": "op_sdk.patterns.derive",
    "PatternRegistry": "op_sdk.patterns.registry",
    "verify_replacement": "op_sdk.patterns.verify",
    "explain": "op_sdk.compiler.explain",
    "scope": "op_sdk.scope",
    "quantize_w8a8": "op_sdk.quantization",
    "W8A8Linear": "op_sdk.quantization",
    "W8A8GatedMLP": "op_sdk.quantization",
    "use_internal_format_weight": "op_sdk.quantization",  # TorchAir's top-level names
    "npu_format_cast_via_cpu": "op_sdk.ops.format_cast",
    "export_onnx": "op_sdk.onnx.export",  # imports onnx / onnxscript on first use only
}


def include_dirs() -> list[str]:
    """The directories of op_sdk's torch-free kernel headers (kernels/) and of its C++
    helpers (csrc/), for code that compiles against them: inside the installed package
    (op_sdk/include/), or the source tree's in an editable install."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    for base in (os.path.join(here, "include"), os.path.dirname(here)):
        dirs = [os.path.join(base, "kernels"), os.path.join(base, "csrc")]
        if os.path.isfile(os.path.join(dirs[0], "simd.h")):
            return dirs
    raise FileNotFoundError(f"op_sdk's kernel headers are not installed next to {here}")


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'op_sdk' has no attribute {name!r}")
    import importlib

    imported = importlib.import_module(module)
    value = imported if module == f"op_sdk.{name}" else getattr(imported, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def _register_converters_with_torchair() -> None:
    """TorchAir already imported: give it op_sdk's GE converters of the operators it has
    none of (otherwise op_sdk.converters.register_with_torchair() does it when called)."""
    import sys

    if "torchair" in sys.modules or "torch_npu.dynamo.torchair" in sys.modules:
        from op_sdk.converters import register_with_torchair

        register_with_torchair()


_register_converters_with_torchair()
