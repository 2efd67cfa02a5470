"""The npugraph_ex backend by name: ``torch.compile(model, backend="npugraph_ex",
options={...})``, as vllm-ascend compiles with TorchAir's newer backend.

torch_npu registers ``npugraph_ex`` as a ``torch_dynamo_backends`` entry point; op_sdk
registers one of the same name, so the script runs unchanged where torch_npu is not
installed. Where torch_npu is installed and an NPU is visible, op_sdk's entry point hands
the compile to torch_npu's (``torch_npu.dynamo._npugraph_ex_backend_entrypoint``); two
installed packages with an entry point of one name leave torch the choice of which it loads,
so beside torch_npu pass ``op_sdk.compiler.npugraph_ex.npugraph_ex_backend`` itself to be
sure which runs.

``options`` are npugraph_ex's ``CompilerConfig`` (TorchAir npugraph_ex/configs/
compiler_config.py): its option names, defaults and validation (an unknown name raises
ValueError listing the supported ones; a value outside an option's list raises ValueError,
an int outside its range ValueError, a missing ``data_dump_dir`` FileNotFoundError, a
non-dict super-kernel option TypeError, as there). What each one does off the NPU
(docs/usage.md, "npugraph_ex"):

* runs as op_sdk's ``mode="npugraph_ex"`` (the graph runs as captured; CUDA graphs on CUDA
  inputs), with ``force_eager`` -> ``debug.run_eagerly``, ``frozen_parameter``,
  ``remove_noop_ops`` and ``pattern_fusion_pass`` -> ``experimental_config.<same>``, and the
  user's ``post_grad_custom_pre_pass`` / ``post_grad_custom_post_pass``, called with
  npugraph_ex's config object as their third argument, as npugraph_ex calls them;
* accepted and validated, with no effect here (they drive the NPU's graph capture, its
  static kernels, reinplace passes, super kernels and data dumps): the others; a compile
  with one of them set away from its default logs so at INFO (logger ``op_sdk``).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from op_sdk.compiler.backend import NpuBackend, NpuFxCompiler, get_npu_backend
from op_sdk.compiler.config import INT64_MAX, _torchair_existing_dir, _torchair_int_range
from op_sdk.compiler.config import CompilerConfig as OpSdkConfig
from op_sdk.compiler.named import _key, torch_npu_entrypoint

__all__ = ["CompilerConfig", "npugraph_ex_backend", "get_npu_backend_ex", "get_compiler_ex",
           "compile_fx", "backend_for"]

log = logging.getLogger("op_sdk")


class _Option:
    """One npugraph_ex option: its default and its rule (``check(v)`` raises as npugraph_ex's
    option classes raise)."""

    def __init__(self, default, check=None, effect: str | None = None):
        self.default = default
        self._check = check
        self.effect = effect  # the op_sdk option it sets, or None (no effect here)
        self._value = default

    @property
    def value(self):
        """As npugraph_ex reads it back: a bool, None, a dict, a list or a callable as set,
        anything else as a str (``capture_limit`` reads "64")."""
        v = self._value
        if v is None or isinstance(v, (bool, dict, list, tuple)) or callable(v):
            return v
        return str(v)

    @value.setter
    def value(self, v):
        if self._check is not None:
            self._check(v)
        self._value = v

    def __bool__(self):
        return bool(self._value)

    def __repr__(self):
        return repr(self._value)


def _one_of(*choices):
    def check(v):
        if v not in choices:
            raise ValueError(f"Value {v!r} (type: {type(v)}) not in optional list {list(choices)!r} "
                             f"(type: {type(choices[0])}).")
    return check


def _callable(v):
    if v is not None and not callable(v):
        raise TypeError(f"value must be Callable or None, got {type(v)}")  # CallableValue's words


def _dict_or_none(v):
    if v is not None and not isinstance(v, dict):
        raise TypeError(f"value must be dict or None, got {type(v)}")


def _int_list_or_none(v):
    if v is not None and not isinstance(v, (list, tuple)):
        raise TypeError(f"the set value must be None or list, got {type(v)}")
    if v is not None and not all(isinstance(x, int) for x in v):
        raise TypeError(f"the set value must be int list, got list type: {[type(x) for x in v]}")


_BOOL = _one_of(True, False)


class CompilerConfig:
    """npugraph_ex's CompilerConfig: flat options, their defaults and rules. Assigning an
    option validates the value (``config.capture_limit = 0`` raises)."""

    def __init__(self):
        opts = {
            "force_eager": _Option(False, _BOOL, "debug.run_eagerly"),
            "use_graph_pool": _Option(None),
            "reuse_graph_pool_in_same_fx": _Option(True, _BOOL),
            "capture_limit": _Option(64, _torchair_int_range(1, INT64_MAX)),
            "clone_input": _Option(True, _BOOL),
            "clone_output": _Option(False, _BOOL),
            "disable_static_kernel_compile_cache": _Option(False, _BOOL),
            "static_kernel_compile": _Option(False, _BOOL),
            "frozen_parameter": _Option(False, _BOOL, "experimental_config.frozen_parameter"),
            "remove_noop_ops": _Option(True, _BOOL, "experimental_config.remove_noop_ops"),
            "remove_cat_ops": _Option(True, _BOOL),
            "inplace_pass": _Option(True, _BOOL),
            "input_inplace_pass": _Option(True, _BOOL),
            "pattern_fusion_pass": _Option(True, _BOOL, "experimental_config.pattern_fusion_pass"),
            "post_grad_custom_pre_pass": _Option(None, _callable, "post_grad_custom_pre_pass"),
            "post_grad_custom_post_pass": _Option(None, _callable, "post_grad_custom_post_pass"),
            "dump_tensor_data": _Option(False, _BOOL),
            "data_dump_stage": _Option("optimized", _one_of("original", "optimized")),
            "data_dump_dir": _Option("./", _torchair_existing_dir),
            "super_kernel_optimize": _Option(False, _BOOL),
            "super_kernel_optimize_options": _Option(None, _dict_or_none),
            "super_kernel_debug_options": _Option(None, _dict_or_none),
            "deadlock_check": _Option(False, _BOOL),
            "capture_error_mode": _Option("global", _one_of("global", "thread_local", "relaxed")),
            "mode": _Option("npugraph_ex", _one_of("npugraph_ex")),
            "force_recapture": _Option(False, _BOOL),
            "unsafe_skip_npugraph_capture_validation": _Option(False, _BOOL),
            "record_statistics_debug_info": _Option(False, _BOOL),
            "_vllm_aclnn_static_kernel_sym_index": _Option(0, _torchair_int_range(0, INT64_MAX)),
            "_vllm_aclnn_static_kernel_sym_range": _Option(None, _int_list_or_none),
        }
        object.__setattr__(self, "_options", opts)

    def __getattr__(self, name):
        try:
            return self.__dict__["_options"][name]
        except KeyError:
            raise AttributeError(f"'CompilerConfig' object has no attribute '{name}'") from None

    def __setattr__(self, name, value):
        opt = self._options.get(name)
        if opt is None:
            raise AttributeError(f"'CompilerConfig' object has no attribute '{name}'")
        opt.value = value.value if isinstance(value, _Option) else value

    def options(self) -> dict[str, Any]:
        """{name: value} of every option, read back as npugraph_ex reads it."""
        return {n: o.value for n, o in self._options.items()}

    def no_effect_here(self) -> list[str]:
        """The options set away from their defaults that do nothing off the NPU."""
        return [n for n, o in self._options.items()
                if o.effect is None and o._value is not o.default and o._value != o.default]

    def to_op_sdk(self) -> OpSdkConfig:
        """op_sdk's CompilerConfig that runs these options (module docstring)."""
        cfg = OpSdkConfig()
        cfg.mode = "npugraph_ex"
        for name, opt in self._options.items():
            if opt.effect is None:
                continue
            value = opt._value
            if name.startswith("post_grad_custom_") and value is not None:
                value = _with_npugraph_ex_config(value, self)
            obj = cfg
            *sections, leaf = opt.effect.split(".")
            for s in sections:
                obj = getattr(obj, s)
            setattr(obj, leaf, value)
        return cfg


def _with_npugraph_ex_config(fn, config: CompilerConfig):
    """The user's pass, called with npugraph_ex's config as its third argument (as npugraph_ex
    calls it); wrapped so that op_sdk's cache key reads the pass's own code."""
    @functools.wraps(fn)
    def user_pass(gm, example_inputs, _op_sdk_config):
        return fn(gm, example_inputs, config)
    return user_pass


def config_from_options(options: dict[str, Any] | None) -> CompilerConfig:
    """npugraph_ex's CompilerConfig with ``options`` set (npugraph_ex's
    ``_process_kwargs_options``: an unknown name raises ValueError listing the supported)."""
    config = CompilerConfig()
    for name, value in (options or {}).items():
        if name not in config._options:
            supported = sorted(config._options)
            raise ValueError(f"Invalid option '{name}'. The 'CompilerConfig' object does not have "
                             f"attribute '{name}'. Supported attributes are: {supported}")
        setattr(config, name, value)
    return config


_BACKENDS: dict[str, NpuBackend] = {}


def npugraph_ex_backend(gm, example_inputs, options: dict[str, Any] | None = None, **kwargs):
    """The ``torch_dynamo_backends`` entry point ``npugraph_ex``."""
    real = torch_npu_entrypoint("_npugraph_ex_backend_entrypoint")
    if real is not None:
        return real(gm, example_inputs, **({"options": options} if options else {}), **kwargs)
    key = _key(options, "npugraph_ex")
    backend = _BACKENDS.get(key)
    if backend is None:
        config = config_from_options(options)
        idle = config.no_effect_here()
        if idle:
            log.info("npugraph_ex backend: %s accepted; no effect off the NPU (docs/usage.md)",
                     ", ".join(f"{n}={getattr(config, n).value!r}" for n in idle))
        backend = _BACKENDS[key] = get_npu_backend(compiler_config=config.to_op_sdk())
    return backend(gm, example_inputs)


def backend_for(options: dict[str, Any] | None = None) -> NpuBackend:
    """The op_sdk backend ``torch.compile(..., backend="npugraph_ex", options=options)`` ran
    (its reports: ``op_sdk.explain(backend_for(...))``)."""
    return _BACKENDS[_key(options, "npugraph_ex")]


def get_npu_backend_ex(*, compiler_config: CompilerConfig | None = None,
                       custom_decompositions: dict | None = None) -> NpuBackend:
    """npugraph_ex's ``get_npu_backend(*, compiler_config=None, custom_decompositions={})``:
    op_sdk's backend for its CompilerConfig."""
    ours = op_sdk_config(compiler_config, "npugraph_ex.get_npu_backend: compiler_config")
    return get_npu_backend(ours, custom_decompositions)


def op_sdk_config(config: CompilerConfig | None, what: str) -> OpSdkConfig:
    """op_sdk's config for npugraph_ex's ``config`` (its default when None); ``what`` names
    the argument in the TypeError raised for anything else."""
    config = config if config is not None else CompilerConfig()
    if not isinstance(config, CompilerConfig):
        raise TypeError(f"{what} must be an npugraph_ex CompilerConfig, got "
                        f"{type(config).__name__}")
    return config.to_op_sdk()


def get_compiler_ex(compiler_config: CompilerConfig | None = None) -> NpuFxCompiler:
    """npugraph_ex's ``get_compiler``: the graph compiler of its backend, for a backend of the
    user's own (op_sdk.compiler.backend.NpuFxCompiler)."""
    return NpuFxCompiler((compiler_config if compiler_config is not None
                          else CompilerConfig()).to_op_sdk())


def compile_fx(gm, example_inputs=None, options=None):
    """npugraph_ex's ``compile_fx(gm, example_inputs, options)``: the graph compiled with
    these options; returns the callable that runs it."""
    return get_npu_backend(compiler_config=config_from_options(options).to_op_sdk())(
        gm, example_inputs)
