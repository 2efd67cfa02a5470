"""my_ops: fused operators for PyTorch written with op_sdk (`op-sdk new-op`), one slice
per operator in op_sdk's own layout. Importing it defines torch.ops.my_ops.* (ops/) and
registers their GE converters (converters/) and ONNX translations (onnx/)."""

from my_ops import ops  # noqa: F401  (first: the converters and translations name its operators)
from my_ops import converters, onnx  # noqa: F401
