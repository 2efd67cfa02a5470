"""op_sdk: fused operators for PyTorch graph mode, and the compiler passes that use them."""

from op_sdk import ops  # noqa: F401  (defines torch.ops.npu.*, registers the native kernels)
from op_sdk.library import OpDef, define_op, functionalize_inplace, get_op, registered_ops  # noqa: E402

__version__ = "0.1.0"
__all__ = ["OpDef", "define_op", "functionalize_inplace", "get_op", "registered_ops",
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
