"""op_sdk: fused operators for PyTorch graph mode, and the compiler passes that use them."""

from op_sdk import ops  # noqa: F401  (defines torch.ops.npu.*, registers the native kernels)
from op_sdk.library import Benchmark, OpDef, define_op, functionalize_inplace, get_op, registered_ops  # noqa: E402
from op_sdk.npu_binding import AclnnBinding, BindingError  # noqa: E402

from op_sdk._version import __version__  # noqa: E402,F401
__all__ = ["include_dirs", "AclnnBinding", "BindingError", "Benchmark", "OpDef", "define_op", "functionalize_inplace", "get_op", "registered_ops",
           "CompilerConfig", "get_npu_backend", "register_replacement", "verify_replacement",
           "PatternRegistry", "explain"]

# The compiler API is imported on first use: `import op_sdk` stays free of torch._dynamo /
# torch._inductor and registers no fusion pattern.
_LAZY = {
    "CompilerConfig": "op_sdk.compiler.config",
    "get_npu_backend": "op_sdk.compiler.backend",
    "register_replacement": "op_sdk.patterns.registry",
    "PatternRegistry": "op_sdk.patterns.registry",
    "verify_replacement": "op_sdk.patterns.verify",
    "explain": "op_sdk.compiler.explain",
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

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
