"""torch_npu's TorchAir's ``dynamo_export`` with its two calls into CANN's graph engine left
out (initialising GE, and GE writing the ``.air``): everything it writes itself (the
``dynamo.pbtxt``, the ATC configuration) is as on an Ascend machine, and nothing reaches
ACL or GE."""

from __future__ import annotations


class _NoAirExport:
    """TorchAir's C++ module, but for ``export`` (GE's serialisation of the .air)."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        if name == "export":
            return lambda *args, **kwargs: None
        return getattr(self._real, name)


def exporter():
    """(TorchAir's dynamo_export, TorchAir's CompilerConfig), GE left out."""
    from torch_npu.dynamo import torchair  # (also importable as ``torchair`` from here on)
    import torchair._ge_concrete_graph.fx2ge_converter as fx2ge
    from torchair.configs.compiler_config import CompilerConfig

    fx2ge.initialize_graph_engine = lambda *args, **kwargs: None
    if not isinstance(fx2ge._torchair, _NoAirExport):
        fx2ge._torchair = _NoAirExport(fx2ge._torchair)
    return torchair.dynamo_export, CompilerConfig
