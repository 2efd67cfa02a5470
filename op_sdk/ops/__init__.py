"""The SDK's operators, one module per family; importing this package registers them."""

from op_sdk.ops import cast, matmul, norm_quant, quant, rms_norm, scatter  # noqa: F401
