"""CompilerConfig: TorchAir's names and defaults, validated assignment, GE-only options,
and the cheap ``import op_sdk``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import op_sdk
from op_sdk.compiler.config import EFFECTIVE_OPTIONS, CompilerConfig


def test_torchair_defaults():
    cfg = op_sdk.CompilerConfig()
    assert cfg.mode.value == "max-autotune"
    assert cfg.experimental_config.pattern_fusion_pass.value is True
    assert cfg.experimental_config.remove_noop_ops.value is True
    assert cfg.experimental_config.keep_inference_input_mutations.value is True
    assert cfg.post_grad_custom_pre_pass.value is None
    assert cfg.post_grad_custom_post_pass.value is None
    assert cfg.debug.graph_dump.type.value is None and cfg.debug.graph_dump.path is None
    assert cfg.debug.run_eagerly.value is False
    assert cfg.experimental_config.max_autotune_fusions.value == "all"
    assert cfg.experimental_config.inductor_cpp_wrapper.value == "auto"


def test_assignment_and_reading_like_torchair():
    cfg = CompilerConfig()
    cfg.mode = "reduce-overhead"
    cfg.experimental_config.pattern_fusion_pass = False
    cfg.debug.graph_dump.type = "py"
    cfg.debug.graph_dump.path = "/tmp/x"
    assert cfg.mode == "reduce-overhead" and cfg.mode.value == "reduce-overhead"
    assert cfg.debug.graph_dump.path == os.path.realpath("/tmp/x")  # a str, as TorchAir reads it
    assert not cfg.experimental_config.pattern_fusion_pass
    cfg.mode = "npugraph_ex"
    assert cfg.mode.value == "npugraph_ex"
    assert not cfg.executes_with_inductor


@pytest.mark.parametrize("path,value,choices", [
    ("mode", "fast", "'max-autotune', 'reduce-overhead', 'npugraph_ex'"),
    ("experimental_config.pattern_fusion_pass", 1, "True, False"),
    ("experimental_config.remove_noop_ops", "yes", "True, False"),
    ("debug.graph_dump.type", "png", "None, 'txt', 'pbtxt', 'py'"),
    ("debug.run_eagerly", None, "True, False"),
    ("experimental_config.max_autotune_fusions", "some", "'all', 'opaque', 'torchair'"),
    ("experimental_config.inductor_cpp_wrapper", "yes", "'auto', True, False"),
    ("experimental_config.topology_sorting_strategy", "XYZ", "'BFS', 'DFS', 'RDFS'"),
])
def test_invalid_value_lists_valid_choices(path, value, choices):
    cfg = CompilerConfig()
    *sections, leaf = path.split(".")
    obj = cfg
    for s in sections:
        obj = getattr(obj, s)
    before = getattr(obj, leaf).value
    with pytest.raises(ValueError, match="valid choices") as info:
        setattr(obj, leaf, value)
    assert choices in str(info.value) and path in str(info.value)
    assert getattr(obj, leaf).value == before  # unchanged


@pytest.mark.parametrize("section,name", [("", "modee"), ("experimental_config", "fusion"),
                                          ("debug.graph_dump", "format")])
def test_unknown_option_lists_valid_options(section, name):
    cfg = CompilerConfig()
    obj = cfg
    for s in filter(None, section.split(".")):
        obj = getattr(obj, s)
    with pytest.raises(ValueError, match="has no option") as info:
        setattr(obj, name, True)
    valid = info.value.args[0].split("valid options: ")[1]
    assert set(valid.split(", ")) == set(obj._fields)


def test_sections_and_passes_are_checked():
    cfg = CompilerConfig()
    with pytest.raises(ValueError, match="group of options"):
        cfg.debug = None
    with pytest.raises(ValueError, match="callable"):
        cfg.post_grad_custom_pre_pass = "my_pass"
    cfg.post_grad_custom_pre_pass = lambda gm, example_inputs, config: None
    cfg.post_grad_custom_pre_pass = None


def test_ge_only_options_accepted_and_warned_not_misread():
    cfg = CompilerConfig()
    cfg.ge_config.optimization_switch = "AutomaticUbFusion:off"
    cfg.experimental_config.cc_parallel_enable = True
    cfg.experimental_config.frozen_parameter = True  # effective here: not listed
    cfg.inference_config.dynamic_gears_merge_policy = "product"
    assert cfg.ineffective_options() == ["experimental_config.cc_parallel_enable",
                                         "ge_config.optimization_switch",
                                         "inference_config.dynamic_gears_merge_policy"]
    with pytest.warns(UserWarning, match="no effect on CPU / CUDA") as record:
        op_sdk.get_npu_backend(compiler_config=cfg)
    message = str(record[0].message)
    assert "ge_config.optimization_switch" in message and "cc_parallel_enable" in message
    assert "frozen_parameter" not in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        op_sdk.get_npu_backend(compiler_config=CompilerConfig())


def test_effective_options_are_documented():
    paths = {o.path for o in EFFECTIVE_OPTIONS}
    assert {"mode", "post_grad_custom_pre_pass", "post_grad_custom_post_pass",
            "experimental_config.pattern_fusion_pass", "experimental_config.remove_noop_ops",
            "debug.graph_dump.type", "debug.graph_dump.path", "debug.run_eagerly",
            "experimental_config.frozen_parameter"} <= paths
    assert all(o.doc for o in EFFECTIVE_OPTIONS)


def test_equality_and_fingerprint():
    a, b = CompilerConfig(), CompilerConfig()
    assert a == b
    b.experimental_config.remove_noop_ops = False
    assert a != b
    a.post_grad_custom_pre_pass = _named_pass
    fp = dict(a.fingerprint())
    assert isinstance(fp["post_grad_custom_pre_pass"], str)


def _named_pass(gm, example_inputs, config):
    pass


def test_import_is_cheap_and_registers_nothing():
    code = textwrap.dedent("""
        import sys
        import op_sdk
        heavy = [m for m in sys.modules if m.startswith(("torch._inductor", "torch._dynamo"))]
        assert not heavy, heavy
        assert "op_sdk.patterns" not in sys.modules
        cfg = op_sdk.CompilerConfig()            # the config is cheap too
        cfg.mode = "reduce-overhead"
        heavy = [m for m in sys.modules if m.startswith(("torch._inductor", "torch._dynamo"))]
        assert not heavy, heavy
        import op_sdk.patterns                   # the table, without registering
        assert op_sdk.patterns.built_fusions() == {}
        assert "torch._inductor" not in sys.modules
        assert callable(op_sdk.get_npu_backend) and callable(op_sdk.register_replacement)
        assert callable(op_sdk.verify_replacement)
        print("ok")
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=root)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_paths_read_back_as_torchairs_strings(tmp_path):
    cfg = CompilerConfig()
    cfg.debug.graph_dump.path = str(tmp_path / "a" / ".." / "b")
    assert isinstance(cfg.debug.graph_dump.path, str)
    assert cfg.debug.graph_dump.path == os.path.realpath(tmp_path / "b")
    cfg.debug.data_dump.path = "rel"
    assert cfg.debug.data_dump.path == os.path.realpath("rel")
    assert "debug.graph_dump.path" in {o.path for o in cfg.options()}


def test_graph_engine_options_read_back_as_torchair_stores_them():
    """TorchAir's OptionValue reads a value back as a str unless it is a bool or None."""
    cfg = CompilerConfig()
    cfg.experimental_config.static_model_ops_lower_limit = 5
    assert cfg.experimental_config.static_model_ops_lower_limit.value == "5"
    assert cfg.debug.aclgraph.static_capture_size_limit.value == "64"
    assert cfg.dump_config.enable_dump.value == "0" and cfg.dump_config.dump_config_path.value is None
    cfg.dump_config.enable_dump = True
    assert cfg.dump_config.enable_dump.value == "1" and cfg.dump_config.enable_dump  # truthy as set
    assert cfg.experimental_config.frozen_parameter.value is False  # an option that acts here: as set


@pytest.mark.parametrize("path,value,exc,words", [
    ("experimental_config.static_model_ops_lower_limit", -2, ValueError,
     "Please set value in [-1, 9223372036854775807], -2 is out of range."),
    ("experimental_config.static_model_ops_lower_limit", "5", ValueError, "Please set integer type"),
    ("debug.aclgraph.static_capture_size_limit", 0, ValueError, "Please set value in [1, "),
    ("dump_config.dump_path", "/no/such/dir", FileNotFoundError, "Please set legal dir path, /no/such/dir"),
    ("dump_config.dump_step", "0ad", ValueError, "Please set legal regex value format"),
    ("dump_config.dump_step", "--", ValueError, "correct example:0|1|2-5|6."),
    ("dump_config.dump_layer", "Add|", ValueError, "correct example:Mul_1 Add1 Conv2D_1."),
    ("dump_config.dump_config_path", "", ValueError, "File path cannot be empty!"),
    ("dump_config.dump_config_path", "/no/such.json", FileNotFoundError, "is not '.json' file!"),
    ("dump_config.dump_data", "bytes", ValueError, "'tensor', 'stats'"),
    ("dump_config.data_dump_stage", "late", ValueError, "'original', 'optimized'"),
])
def test_torchairs_validation_and_words(path, value, exc, words):
    cfg = CompilerConfig()
    *sections, leaf = path.split(".")
    obj = cfg
    for s in sections:
        obj = getattr(obj, s)
    with pytest.raises(exc) as info:
        setattr(obj, leaf, value)
    assert words in str(info.value) and path in str(info.value)


def test_torchairs_valid_dump_values_are_taken(tmp_path):
    cfg = CompilerConfig()
    cfg.dump_config.dump_path = str(tmp_path)
    cfg.dump_config.dump_step = "0|1|2-5|6"
    cfg.dump_config.dump_layer = "Mul_1 Add1 Conv2D_1"
    cfg.dump_config.dump_data = "stats"
    (tmp_path / "acl.json").write_text("{}")
    cfg.dump_config.dump_config_path = str(tmp_path / "acl.json")
    cfg.debug.deadlock_check = True
    cfg.debug.aclgraph.remove_cat_ops = False
    assert cfg.dump_config.dump_step.value == "0|1|2-5|6"
    assert {"dump_config.dump_step", "debug.deadlock_check"} <= set(cfg.ineffective_options())
