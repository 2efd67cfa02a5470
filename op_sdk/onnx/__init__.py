"""ONNX graph fusion (``op-sdk fuse``): find fusible operator groups in an ONNX model,
price them with ``op_sdk.benefit``, replace the ones that pay (docs/onnx.md).

onnx and onnxruntime are imported on first use, never by ``import op_sdk``."""

from op_sdk.onnx.fuse import DEFAULT_DIM, KINDS, FuseReport, Group, check, fuse_model

__all__ = ["fuse_model", "FuseReport", "Group", "check", "DEFAULT_DIM", "KINDS"]
