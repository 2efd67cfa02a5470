"""op_sdk: fused operators for PyTorch graph mode, and the compiler passes that use them."""

from op_sdk import _native

_native.load()  # registers the C++ kernels before the schemas look for them

from op_sdk import ops  # noqa: E402,F401  (defines torch.ops.npu.*)
from op_sdk.library import OpDef, define_op, functionalize_inplace, get_op, registered_ops  # noqa: E402

__version__ = "0.1.0"
__all__ = ["OpDef", "define_op", "functionalize_inplace", "get_op", "registered_ops"]
