"""examples/plugin_fused_op.py (my_ops::silu_mul_quant), imported once per process under the
module name ``plugin_fused_op``, for the tests that use the plugin operator."""

import importlib.util
import pathlib
import sys

PATH = pathlib.Path(__file__).resolve().parent.parent / "examples" / "plugin_fused_op.py"


def load():
    mod = sys.modules.get("plugin_fused_op")
    if mod is None:
        spec = importlib.util.spec_from_file_location("plugin_fused_op", PATH)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["plugin_fused_op"] = mod
        spec.loader.exec_module(mod)
    return mod
