"""op_sdk and ONNX, both ways:

* ``export``: models that call op_sdk's operators to ONNX (``op_sdk.export_onnx``; one
  custom-domain node per operator call plus its standard-operator function,
  docs/onnx_export.md);
* ``fuse``: ONNX graph fusion (``op-sdk fuse``): find fusible operator groups in an ONNX
  model, price them with ``op_sdk.benefit``, replace the ones that pay (docs/onnx.md);
* ``functions``: the custom domain (``op_sdk.npu``) and the model-local functions of the
  fused groups.

onnx, onnxscript and onnxruntime are imported on first use, never by ``import op_sdk``."""

from op_sdk.onnx.export import UnsupportedOnnxExport, export_onnx, translation_table
from op_sdk.onnx.fuse import DEFAULT_DIM, KINDS, FuseReport, Group, check, fuse_model

__all__ = ["fuse_model", "FuseReport", "Group", "check", "DEFAULT_DIM", "KINDS", "export_onnx",
           "translation_table", "UnsupportedOnnxExport"]
