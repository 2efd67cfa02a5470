"""op_sdk's backend by name: ``torch.compile(model, backend="op_sdk", options={...})``,
registered with torch through the ``torch_dynamo_backends`` entry point (as torch_npu
registers its backends), so a script needs no ``get_npu_backend`` call; and by torch_npu's
name for TorchAir's backend, ``backend="npu"`` (TorchAir's default CompilerConfig, as
torch_npu's ``npu`` entry point compiles with ``torchair.get_npu_backend()``; options and
mode as for ``op_sdk``). Where torch_npu is installed and an NPU is visible, ``npu`` hands the
compile to torch_npu's own entry point of that name.

``options`` are CompilerConfig options by their dotted paths (``{"mode": "reduce-overhead",
"experimental_config.frozen_parameter": True}``), validated as attribute assignment
validates them; ``torch.compile``'s ``mode=`` sets ``mode`` ("default" is TorchAir's default,
max-autotune). One backend (its reports, its pattern registries) serves each distinct set
of options.
"""

from __future__ import annotations

from typing import Any

from op_sdk.compiler.backend import NpuBackend, get_npu_backend
from op_sdk.compiler.config import CompilerConfig, ConfigSection

_BACKENDS: dict[str, NpuBackend] = {}


def config_from_options(options: dict[str, Any] | None, mode: str | None = None) -> CompilerConfig:
    """A CompilerConfig with ``options`` (dotted paths) and torch.compile's ``mode`` set; a
    path that names no option or a value an option refuses raises, naming it."""
    cfg = CompilerConfig()
    if mode is not None and mode != "default":
        cfg.mode = mode
    for path, value in (options or {}).items():
        if not isinstance(path, str) or not path:
            raise ValueError(f"op_sdk backend: option names are dotted paths of CompilerConfig "
                             f"(\"experimental_config.frozen_parameter\"), got {path!r}")
        *sections, leaf = path.split(".")
        obj = cfg
        for name in sections:
            item = obj._fields.get(name)
            if not isinstance(item, ConfigSection):
                where = f"CompilerConfig.{obj._path}" if obj._path else "CompilerConfig"
                raise ValueError(f"op_sdk backend: option {path!r}: {where} has no group of "
                                 f"options {name!r}; valid: {', '.join(sorted(obj._fields))}")
            obj = item
        setattr(obj, leaf, value)  # validated: an unknown leaf or bad value raises, naming it
    return cfg


def _key(options, mode) -> str:
    return repr((mode, sorted((options or {}).items(), key=lambda kv: str(kv[0]))))


def op_sdk_backend(gm, example_inputs, options: dict[str, Any] | None = None,
                   mode: str | None = None):
    """The ``torch_dynamo_backends`` entry point ``op_sdk``."""
    key = _key(options, mode)
    backend = _BACKENDS.get(key)
    if backend is None:
        backend = _BACKENDS[key] = get_npu_backend(compiler_config=config_from_options(options, mode))
    return backend(gm, example_inputs)


def torch_npu_entrypoint(name: str):
    """torch_npu's ``torch_dynamo_backends`` entry point ``name`` (its function in
    torch_npu.dynamo) where torch_npu is installed and an NPU is visible, else None: there the
    compile is torch_npu's."""
    from op_sdk.npu.runtime import torch_npu_module

    if torch_npu_module() is None:
        return None
    import torch

    npu = getattr(torch, "npu", None)
    if npu is None or not npu.is_available():
        return None
    import torch_npu.dynamo

    return getattr(torch_npu.dynamo, name)


def npu_backend(gm, example_inputs, options: dict[str, Any] | None = None,
                mode: str | None = None, **kwargs):
    """The ``torch_dynamo_backends`` entry point ``npu``: op_sdk's backend with TorchAir's
    default CompilerConfig (and ``options`` / ``mode`` as ``op_sdk`` takes them); torch_npu's
    own where an NPU is visible."""
    real = torch_npu_entrypoint("_npu_backend_entrypoint")
    if real is not None:
        extra = {k: v for k, v in (("options", options), ("mode", mode)) if v is not None}
        return real(gm, example_inputs, **extra, **kwargs)
    return op_sdk_backend(gm, example_inputs, options, mode)


def backend_for(options: dict[str, Any] | None = None, mode: str | None = None) -> NpuBackend:
    """The backend ``torch.compile(..., backend="op_sdk", options=options, mode=mode)`` uses
    (its reports: ``op_sdk.explain(backend_for(...))``)."""
    return _BACKENDS[_key(options, mode)]
