"""CompilerConfig: TorchAir's option names and defaults, validated on assignment.

A TorchAir script sets options by attribute (``cfg.mode = "reduce-overhead"``,
``cfg.experimental_config.pattern_fusion_pass = False``) and reads them back through
``.value``; both work here. Assigning an unknown option or a value outside an option's
allowed set raises ``ValueError`` naming the valid choices.

Every option TorchAir accepts is accepted. The ones that configure Ascend's graph engine
(GE), ACL graphs or NPU dumps have no effect on CPU / CUDA: they are marked ``ge_only``
and ``get_npu_backend`` warns once, naming each one that was set to a non-default
value, so no option is silently misread. ``EFFECTIVE_OPTIONS`` lists the options that
do something here; the README's table is generated from the same data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from op_sdk._digest import callable_digest

__all__ = ["CompilerConfig", "OptionValue", "ConfigSection", "EFFECTIVE_OPTIONS"]

_ANY = object()  # "no fixed set of choices"


class OptionValue:
    """One option: a default, the allowed values, and whether it does anything here."""

    def __init__(self, default, choices=_ANY, *, doc: str = "", ge_only: bool = False,
                 check: Callable[[Any], str | None] | None = None, plain: bool = False,
                 normalize: Callable[[Any], Any] | None = None):
        self.default = default
        self.choices = choices
        self.doc = doc
        self.ge_only = ge_only
        self._check = check
        self._value = default
        self.path = ""  # set by the owning section
        # read back as the value itself (``config.debug.graph_dump.path`` is a str in
        # TorchAir), set through ``normalize`` (TorchAir: os.path.realpath)
        self.plain = plain
        self._normalize = normalize

    @property
    def value(self):
        """The value; a graph-engine option reads back as torch-npu 2.13.0's TorchAir
        OptionValue reads it: None, "1" / "0" for True / False, else a str
        (``static_model_ops_lower_limit`` 5 reads "5"). The options that act here read back
        as set (op_sdk's passes read them)."""
        v = self._value
        if not self.ge_only or v is None:
            return v
        if isinstance(v, bool):
            return "1" if v else "0"
        return str(v)

    @value.setter
    def value(self, v):
        if self._normalize is not None and v is not None:
            v = self._normalize(v)
        self.validate(v)
        self._value = v

    def validate(self, v) -> None:
        if self.choices is not _ANY and not any(v is c or (type(v) is type(c) and v == c)
                                                for c in self.choices):
            valid = ", ".join(repr(c) for c in self.choices)
            raise ValueError(f"CompilerConfig.{self.path}: {v!r} is not a valid value; "
                             f"valid choices: {valid}")
        if self._check is not None:
            try:
                problem = self._check(v)
            except (ValueError, TypeError, FileNotFoundError) as e:  # TorchAir's own type and words
                raise type(e)(f"CompilerConfig.{self.path}: {e}") from None
            if problem:
                raise ValueError(f"CompilerConfig.{self.path}: {problem}")

    @property
    def is_default(self) -> bool:
        return self._value is self.default or self._value == self.default

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other) -> bool:
        if isinstance(other, OptionValue):
            return self._value == other._value
        return self._value == other

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        return repr(self._value)


def _callable_or_none(v) -> str | None:
    if v is None or callable(v):
        return None
    return (f"must be a callable (gm, example_inputs, config) -> None, or None; "
            f"got {type(v).__name__}")


def _str_or_none(v) -> str | None:
    return None if v is None or isinstance(v, str) else f"must be a str or None, got {v!r}"


def _microseconds_or_none(v) -> str | None:
    import math

    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        return f"must be a finite number of microseconds >= 0 or None, got {v!r}"
    return None


_BOOL = (True, False)
INT64_MAX = 2 ** 63 - 1


def _torchair_int_range(lo: int, hi: int) -> Callable[[Any], None]:
    """TorchAir's IntRangeValue: an int in [lo, hi] (None, the default, cannot be set back)."""
    def check(v):
        if not isinstance(v, int):
            raise ValueError(f"Please set integer type, but got {type(v)}")
        if v < lo or v > hi:
            raise ValueError(f"Please set value in [{lo}, {hi}], {v} is out of range.")
    return check


def _torchair_existing_dir(v) -> None:
    """TorchAir's MustExistedPathValue."""
    import os

    if v is None or not (os.path.exists(v) and os.path.isdir(v)):
        raise FileNotFoundError(f"Please set legal dir path, {v} is not found or is not a file "
                                "directory!")


def _torchair_json_file(v) -> None:
    """TorchAir's MustExistedFileAddr (a .json file, or None)."""
    import os

    if v is None:
        return
    if v == "":
        raise ValueError("File path cannot be empty!")
    if not (os.path.exists(v) and v.endswith(".json") and os.path.isfile(v)):
        raise FileNotFoundError(f"Please set legal file path, {v} is not found or is not '.json' file!")


def _torchair_regex(regex: str, example: str) -> Callable[[Any], None]:
    """TorchAir's RegexValue (re.match of the whole rule: a str that matches it)."""
    import re

    def check(v):
        if not isinstance(v, str) or not re.match(regex, v):
            raise ValueError(f"Please set legal regex value format match {regex}, {v} is Illegal "
                             f"format, correct example:{example}.")
    return check


def _realpath(v):
    import os

    return os.path.realpath(v) if isinstance(v, str) else v


class ConfigSection:
    """A group of options; attribute assignment is validated."""

    _name = ""

    def __init__(self, path: str = ""):
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_fields", {})

    def _add(self, name: str, item) -> None:
        full = f"{self._path}.{name}" if self._path else name
        if isinstance(item, OptionValue):
            item.path = full
        self._fields[name] = item
        if not (isinstance(item, OptionValue) and item.plain):
            object.__setattr__(self, name, item)

    def __getattr__(self, name):  # a plain option: its value (TorchAir's properties)
        item = self.__dict__.get("_fields", {}).get(name)
        if isinstance(item, OptionValue) and item.plain:
            return item.value
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __setattr__(self, key, value):
        fields = self._fields
        if key not in fields:
            where = f"CompilerConfig.{self._path}" if self._path else "CompilerConfig"
            raise ValueError(f"{where} has no option {key!r}; valid options: "
                             f"{', '.join(sorted(fields))}")
        item = fields[key]
        if isinstance(item, ConfigSection):
            raise ValueError(f"CompilerConfig.{item._path} is a group of options; set one of "
                             f"its options instead: {', '.join(sorted(item._fields))}")
        item.value = value

    def options(self) -> Iterator[OptionValue]:
        for item in self._fields.values():
            if isinstance(item, ConfigSection):
                yield from item.options()
            else:
                yield item

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._fields.items())
        return f"{type(self).__name__}({inner})"


def _section(_path: str, **options) -> ConfigSection:
    section = ConfigSection(_path)
    for name, item in options.items():
        section._add(name, item)
    return section


def _ge(default, choices=_ANY, check=None) -> OptionValue:
    return OptionValue(default, choices, ge_only=True, check=check,
                       doc="Ascend graph engine / ACL graph option; no effect on CPU / CUDA.")


class CompilerConfig(ConfigSection):
    """TorchAir's ``CompilerConfig``, for op_sdk's CPU / CUDA backend.

    Effective options (everything else is accepted and has no effect, see module doc):

    * ``mode``: "max-autotune" (default; Inductor compiles the graph after the passes),
      "reduce-overhead" (the graph runs as captured, CUDA graphs on CUDA inputs),
      "npugraph_ex" (TorchAir's newer name for reduce-overhead; same behaviour).
    * ``post_grad_custom_pre_pass`` / ``post_grad_custom_post_pass``: user passes
      ``(gm, example_inputs, config) -> None``, run before / after the built-in passes.
    * ``experimental_config.pattern_fusion_pass``: the fusion passes, default and user
      patterns alike. ``experimental_config.remove_noop_ops``: no-op removal.
    * ``experimental_config.keep_inference_input_mutations``: passed to AOTAutograd.
    * ``experimental_config.max_autotune_fusions`` (op_sdk): which default fusions run in
      max-autotune: "all" (default), "opaque" (those whose unfused operators are all
      custom ops, opaque to Inductor: every fusion but bmm+transpose, which Inductor can
      also handle itself), or "torchair" (TorchAir's rule: not bmm+transpose, not
      add_rms_norm+quantize).
    * ``experimental_config.inductor_cpp_wrapper`` (op_sdk): in max-autotune, compile
      Inductor's wrapper code to C++ (Inductor's ``cpp_wrapper``), so the graph runs as
      one compiled function with no Python between kernels, as GE runs a whole graph in
      TorchAir's max-autotune. "auto" (default): on when every tensor input of the graph
      is on the CPU; True / False force it. The wrapper is built apart from the kernels
      (Inductor's ``cpp_wrapper_build_separate``), which keeps the C++ compile roughly
      linear in the graph's size. It costs compile time (seconds per graph) and saves
      the per-kernel Python call on every run, which matters at decode sizes.
    * ``experimental_config.frozen_parameter``: parameters and buffers will not change
      after the compile (TorchAir: GE may then fix their addresses and formats). In
      max-autotune on CPU the ``weight_prepack`` stage then stores each int8
      npu_quant_matmul weight that is a module parameter / buffer in the layout of
      op_sdk's AMX / VNNI kernels (op_sdk/compiler/prepack.py), as GE stores NPU matmul
      weights in FRACTAL_NZ. A weight changed in place after the compile is not seen (the
      contract); a weight replaced by another tensor is (the packed operator checks).
      Such compiles bypass Inductor's FX graph cache (the packed constants depend on the
      weights' values, which its key does not see). Default False, as in TorchAir.
    * ``experimental_config.fusion_benefit_threshold_us`` (op_sdk): a match the benefit
      model decides (``fusion_benefit_scope``) is replaced only when the model
      (op_sdk.benefit, op_sdk/patterns/benefit.py) predicts it saves more than this many
      microseconds: bytes moved and kernel launches of the unfused operators against the
      fused one, less the fused kernel's tiling loss. Default 0.0 (it must save time);
      None turns the model off (every match that passes the pattern's checks is
      replaced). A refused match is reported as a near miss of kind "benefit" with the
      prediction.
    * ``experimental_config.fusion_benefit_scope`` (op_sdk): which matches the model
      decides. "native_ops" (default): the automatic rewrites of torch-native code
      (``native_ops``, which TorchAir does not have); the default fusions and the user's
      patterns (``register_fusion``, ``register_replacement``) apply wherever their checks
      pass, as TorchAir applies its pattern fusions, with no cost model. "all": every
      match, the fusions too.
    * ``experimental_config.fusion_benefit_device`` (op_sdk): the device the model prices
      a match on. "auto" (default): the device of the graph's tensors (the CPU model is
      measured on this host once per process, at the first match it prices; CUDA and NPU
      use planning numbers); "cpu", "npu" (Atlas A2) or "cuda" (H100) plan for that
      device whatever the graph runs on, e.g. "npu" to see on a CPU host which fusions
      would pay on the NPU. A cached compile (Inductor's FX graph cache: its key holds
      these options, not the CPU measurement) keeps the decisions of the compile that
      filled the cache.
    * ``debug.graph_dump.type`` ("txt" | "py": the FX graph before / after each pass;
      "pbtxt": the graph converted to Ascend IR, as GE protobuf text, after the last) and
      ``debug.graph_dump.path``; ``debug.run_eagerly``: run the passed graph eagerly
      (no Inductor, no CUDA graphs).
    """

    def __init__(self):
        super().__init__("")
        self._add("mode", OptionValue(
            "max-autotune", ("max-autotune", "reduce-overhead", "npugraph_ex"),
            doc="max-autotune: Inductor executes; reduce-overhead / npugraph_ex: the graph "
                "runs as captured, with CUDA graphs on CUDA inputs."))
        self._add("post_grad_custom_pre_pass", OptionValue(
            None, check=_callable_or_none, doc="user pass run before the built-in passes"))
        self._add("post_grad_custom_post_pass", OptionValue(
            None, check=_callable_or_none, doc="user pass run after the built-in passes"))
        self._add("debug", _section(
            "debug",
            graph_dump=_section(
                "debug.graph_dump",
                type=OptionValue(None, (None, "txt", "pbtxt", "py"),
                                 doc="txt / py: the FX graph before / after each pass; "
                                     "pbtxt: the graph as Ascend IR (GE protobuf text) "
                                     "after the last pass"),
                path=OptionValue(None, check=_str_or_none, plain=True, normalize=_realpath,
                                 doc="dump folder (default .); read back as the real path, "
                                     "a str (TorchAir's property)"),
            ),
            run_eagerly=OptionValue(False, _BOOL, doc="run the passed graph eagerly"),
            data_dump=_section("debug.data_dump", type=_ge(None, (None, "npy")),
                               path=OptionValue(None, check=_str_or_none, ge_only=True,
                                                plain=True, normalize=_realpath,
                                                doc="Ascend graph engine / ACL graph option; "
                                                    "no effect on CPU / CUDA."),
                               filter=_ge(None)),
            fx_summary=_section("debug.fx_summary", type=_ge(None, (None, "csv")),
                                path=_ge(None, check=_str_or_none),
                                skip_compile=_ge(True, _BOOL)),
            aclgraph=_section("debug.aclgraph",
                              disable_reinplace_input_mutated_ops_pass=_ge(False, _BOOL),
                              disable_reinplace_inplaceable_ops_pass=_ge(False, _BOOL),
                              disable_mempool_reuse_in_same_fx=_ge(False, _BOOL),
                              enable_output_clone=_ge(False, _BOOL),
                              static_capture_size_limit=_ge(
                                  64, check=_torchair_int_range(1, INT64_MAX)),
                              clone_input=_ge(True, _BOOL),
                              remove_cat_ops=_ge(True, _BOOL)),
            deadlock_check=_ge(False, _BOOL),
        ))
        self._add("experimental_config", _section(
            "experimental_config",
            pattern_fusion_pass=OptionValue(True, _BOOL,
                                            doc="run the fusion passes (default and user)"),
            remove_noop_ops=OptionValue(True, _BOOL, doc="remove no-op views, casts, copies"),
            native_ops=OptionValue(
                True, _BOOL,
                doc="op_sdk: before the fusions, torch-native spellings (HF RMSNorm, "
                    "F.rms_norm, residual add + norm, plain-torch int8 quantisation) become "
                    "torch_npu operators (needs pattern_fusion_pass; in max-autotune only "
                    "with max_autotune_fusions='all')"),
            keep_inference_input_mutations=OptionValue(
                True, _BOOL, doc="keep input mutations inside inference graphs (AOTAutograd)"),
            max_autotune_fusions=OptionValue(
                "all", ("all", "opaque", "torchair"),
                doc="op_sdk: which default fusions run in max-autotune (see class doc)"),
            inductor_cpp_wrapper=OptionValue(
                "auto", ("auto", True, False),
                doc="op_sdk: max-autotune compiles Inductor's wrapper to C++ (see class doc)"),
            frozen_parameter=OptionValue(
                False, _BOOL,
                doc="parameters and buffers will not change after the compile: "
                    "max-autotune on CPU prepacks their int8 matmul weights (see class doc)"),
            fusion_benefit_threshold_us=OptionValue(
                0.0, check=_microseconds_or_none,
                doc="op_sdk: a fusion applies only where the benefit model predicts it "
                    "saves more than this (us); None: every match applies (see class doc)"),
            fusion_benefit_device=OptionValue(
                "auto", ("auto", "cpu", "npu", "cuda"),
                doc="op_sdk: the device the benefit model prices fusions on; auto: the "
                    "graph's tensors' device (see class doc)"),
            fusion_benefit_scope=OptionValue(
                "native_ops", ("native_ops", "all"),
                doc="op_sdk: which matches the benefit model decides: native_ops (the "
                    "automatic rewrites of torch-native code; the fusions apply as "
                    "TorchAir applies them) or all (see class doc)"),
            cc_parallel_enable=_ge(False, _BOOL),
            memory_efficiency=_ge(False, _BOOL),
            static_model_ops_lower_limit=_ge(None, check=_torchair_int_range(-1, INT64_MAX)),
            jit_compile=_ge("auto", ("auto",)),
            npu_fx_pass=_ge(False, _BOOL),
            aot_config_enable_joint_graph=_ge(False, _BOOL),
            aot_config_output_loss_index=_ge(0),
            enable_single_stream=_ge(False, _BOOL),
            topology_sorting_strategy=_ge("DFS", ("BFS", "DFS", "RDFS", "StableRDFS")),
            enable_ref_data=_ge(False, _BOOL),
            enable_view_optimize=_ge(True, _BOOL),
            tiling_schedule_optimize=_ge(False, _BOOL),
        ))
        self._add("ge_config", _section(
            "ge_config",
            optimization_switch=_ge(None, check=_str_or_none),
            enable_single_stream=_ge(False, _BOOL),
            oo_level=_ge("O3", ("O1", "O3")),
            oo_constant_folding=_ge(None, (None, True, False)),
            oo_dead_code_elimination=_ge(None, (None, True, False)),
            export_compile_stat=_ge("2", ("0", "1", "2")),
            multistream_parallel_mode=_ge(None),
            aicore_num=_ge(None, check=_str_or_none),
        ))
        self._add("inference_config", _section(
            "inference_config",
            dynamic_gears_merge_policy=_ge("zip", ("zip", "product")),
        ))
        self._add("fusion_config", _section(
            "fusion_config", fusion_switch_file=_ge(None, check=_str_or_none)))
        self._add("aclgraph_config", _section(
            "aclgraph_config", use_custom_pool=_ge(None), disable_reinplace_input_mutated_ops_pass=
            _ge(False, _BOOL)))
        export = _section(
            "export", export_mode=_ge(False, _BOOL), export_path_dir=_ge(None, check=_str_or_none),
            export_name=_ge(None, check=_str_or_none))
        export._add("experimental", _section(
            "export.experimental",
            enable_record_nn_module_stack=OptionValue(
                False, _BOOL, doc="dynamo_export: each operator of the exported graph carries "
                                  "its FX node's nn_module_stack as the string attribute "
                                  "nn_module_stack (TorchAir's)"),
            auto_atc_config_generated=OptionValue(
                False, _BOOL, doc="dynamo_export in a process group whose graph has "
                                  "collectives: rank 0 writes ATC's model_relation_config.json "
                                  "and numa_config.json into the export path (TorchAir's)"),
            enable_lite_export=_ge(False, _BOOL)))
        self._add("export", export)
        self._add("dump_config", _section(  # TorchAir's _DataDumpConfig, its rules and words
            "dump_config", enable_dump=_ge(False, _BOOL),
            dump_path=_ge("./", check=_torchair_existing_dir),
            dump_mode=_ge("all", ("input", "output", "all")),
            quant_dumpable=_ge(False, _BOOL),
            dump_step=_ge("", check=_torchair_regex(r"^(((\d+)|(\d+-{0,1}\d+))\|{0,1})*$",
                                                    "0|1|2-5|6")),
            dump_layer=_ge("", check=_torchair_regex(r'^[0-9a-zA-Z_" "/\\.]*$',
                                                     "Mul_1 Add1 Conv2D_1")),
            dump_data=_ge("tensor", ("tensor", "stats")),
            dump_config_path=_ge(None, check=_torchair_json_file),
            data_dump_stage=_ge("optimized", ("original", "optimized"))))
        self._add("aoe_config", _section(
            "aoe_config", aoe_mode=_ge(None, (None, "2")), work_path=_ge("./", check=_str_or_none),
            aoe_config_file=_ge(None, check=_str_or_none)))

    # -- reading ---------------------------------------------------------------------------

    @property
    def executes_with_inductor(self) -> bool:
        return self.mode.value == "max-autotune" and not self.debug.run_eagerly.value

    def cpp_wrapper_for(self, example_inputs) -> bool:
        """Whether a max-autotune compile of a graph with these inputs uses Inductor's C++
        wrapper (``experimental_config.inductor_cpp_wrapper``)."""
        import torch

        choice = self.experimental_config.inductor_cpp_wrapper.value
        if choice != "auto":
            return bool(choice)
        tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
        return bool(tensors) and all(x.device.type == "cpu" for x in tensors)

    def ineffective_options(self) -> list[str]:
        """The options set to a non-default value that have no effect on CPU / CUDA."""
        return [o.path for o in self.options() if o.ge_only and not o.is_default]

    def fingerprint(self) -> list[tuple[str, Any]]:
        """(path, value) of every option, user passes as source digests; feeds cache keys.
        A user pass without retrievable source yields None (the caller disables caching)."""
        out = []
        for o in self.options():
            v = o.value
            if callable(v):
                v = callable_digest(v)
            out.append((o.path, v if v is None or isinstance(v, (bool, int, float, str))
                        else repr(v)))
        return out

    def __eq__(self, other) -> bool:
        return isinstance(other, CompilerConfig) and self.fingerprint() == other.fingerprint()

    __hash__ = None


@dataclasses.dataclass(frozen=True)
class _EffectiveOption:
    path: str
    default: Any
    doc: str


def _effective_options() -> list[_EffectiveOption]:
    cfg = CompilerConfig()
    return [_EffectiveOption(o.path, o.default, o.doc) for o in cfg.options() if not o.ge_only]


EFFECTIVE_OPTIONS = _effective_options()
