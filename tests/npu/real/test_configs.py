"""op_sdk's configs against those of the real torch-npu 2.13.0 wheel (run by
tests/npu/test_torch_npu_real.py in the stubbed environment): TorchAir's CompilerConfig
(torch_npu/dynamo/torchair/configs) and npugraph_ex's (torch_npu/dynamo/npugraph_ex/configs)
have the same option names and defaults as op_sdk's, read back the same way, and refuse a
non-callable pass with the same words."""

import pytest
import torch_npu  # noqa: F401  (the real wheel, before op_sdk)
from torch_npu.dynamo.npugraph_ex.configs.compiler_config import CompilerConfig as ExConfig
from torch_npu.dynamo.torchair.configs.compiler_config import CompilerConfig as AirConfig

import op_sdk
from op_sdk.compiler import npugraph_ex

# op_sdk's own options (no TorchAir counterpart), the two that TorchAir's newer tree has and
# the 2.13.0 wheel's does not, and TorchAir's export section (its _ExportConfig does not
# call its base's __init__, so it has no _fixed_attrs and the walk below does not see it)
OWN_OPTIONS = {
    "experimental_config.fusion_benefit_device", "experimental_config.fusion_benefit_scope",
    "experimental_config.fusion_benefit_threshold_us", "experimental_config.inductor_cpp_wrapper",
    "experimental_config.max_autotune_fusions", "experimental_config.native_ops",
    "experimental_config.enable_single_stream", "debug.data_dump.filter",
    "aclgraph_config.disable_reinplace_input_mutated_ops_pass", "aclgraph_config.use_custom_pool",
    "export.export_mode", "export.export_name", "export.export_path_dir",
    "export.experimental.enable_record_nn_module_stack",
    "export.experimental.auto_atc_config_generated", "export.experimental.enable_lite_export",
}


def _leaves(obj, prefix=""):
    """TorchAir's options: {dotted path: value as read back} (its classes come from the
    wheel's modules under two names, so by shape, not by class)."""
    out = {}
    for name, v in vars(obj).items():
        if name.startswith("_"):
            continue
        if hasattr(v, "_fixed_attrs"):
            out.update(_leaves(v, f"{prefix}{name}."))
        elif hasattr(type(v), "value"):
            out[prefix + name] = v.value
    return out


def test_torchair_options_and_defaults_read_back_the_same():
    air = AirConfig()
    theirs = _leaves(air)
    # properties: the dump folders, read back as strs
    theirs["debug.graph_dump.path"] = air.debug.graph_dump.path
    theirs["debug.data_dump.path"] = air.debug.data_dump.path
    theirs["debug.fx_summary.path"] = air.debug.fx_summary._path.value
    cfg = op_sdk.CompilerConfig()
    ours = {o.path: o for o in cfg.options()}
    assert set(theirs) <= set(ours), sorted(set(theirs) - set(ours))
    assert set(ours) - set(theirs) == OWN_OPTIONS
    for path, value in theirs.items():
        o = ours[path]
        got = o.value
        if not o.ge_only and isinstance(got, bool):  # an option that acts here reads as set
            got = "1" if got else "0"
        assert got == value, (path, got, value)
    assert cfg.debug.graph_dump.path == air.debug.graph_dump.path  # a property, not an option


def test_npugraph_ex_options_and_defaults_read_back_the_same():
    theirs = ExConfig()
    ours = npugraph_ex.CompilerConfig()
    names = {n for n, v in vars(theirs).items() if hasattr(type(v), "value")}
    assert names == set(ours.options()) - {"use_graph_pool"}  # (a plain attribute there)
    for n in names:
        assert ours.options()[n] == getattr(theirs, n).value, n


@pytest.mark.parametrize("name,value", [("post_grad_custom_pre_pass", 3), ("post_grad_custom_post_pass", "f")])
def test_npugraph_ex_callable_options_refuse_with_the_wheels_words(name, value):
    theirs, ours = ExConfig(), npugraph_ex.CompilerConfig()
    with pytest.raises(TypeError) as want:
        setattr(theirs, name, value)
    with pytest.raises(TypeError) as got:
        setattr(ours, name, value)
    # the wheel's error wrapper appends its traceback and error code
    assert str(want.value).startswith(str(got.value) + "\n"), (str(got.value), str(want.value))
