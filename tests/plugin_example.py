"""The worked example's operator, my_ops::silu_mul_quant (the user project
examples/silu_mul_quant, in the layout `op-sdk new-op` writes), imported once per process as
its package ``my_ops``, for the tests that use a plugin operator."""

import importlib
import pathlib
import sys

PROJECT = pathlib.Path(__file__).resolve().parent.parent / "examples" / "silu_mul_quant"


def load():
    """The example's ops module (my_ops.ops.silu_mul_quant); its converters and ONNX
    translation are registered too."""
    if "my_ops" not in sys.modules:
        sys.path.insert(0, str(PROJECT))
        try:
            importlib.import_module("my_ops")
        finally:
            sys.path.remove(str(PROJECT))
    return importlib.import_module("my_ops.ops.silu_mul_quant")
