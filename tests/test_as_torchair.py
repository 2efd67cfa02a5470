"""``python -m op_sdk.as_torchair``: a TorchAir script run unchanged, ``import torchair`` /
``import npugraph_ex`` (and the module paths TorchAir's documentation imports from)
resolved to op_sdk; TorchAir's internals refused by name."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types

import pytest

from op_sdk import as_torchair


def test_what_the_names_resolve_to():
    assert as_torchair.target("torchair") == "op_sdk"
    assert as_torchair.target("torchair.ge") == "op_sdk.ge"
    assert as_torchair.target("torchair.ge.attr") == "op_sdk.ge.attr"
    assert as_torchair.target("torchair.inference") == "op_sdk.inference"
    assert as_torchair.target("npugraph_ex") == "op_sdk.npugraph_ex"
    assert as_torchair.target("npugraph_ex.inference") == "op_sdk.npugraph_ex.inference"
    assert as_torchair.target("npugraph_ex.scope") == "op_sdk.scope"
    config = as_torchair.target("torchair.configs.compiler_config")
    assert isinstance(config, types.ModuleType)
    from op_sdk.compiler import npugraph_ex
    from op_sdk.compiler.config import CompilerConfig

    assert config.CompilerConfig is CompilerConfig
    assert as_torchair.target("npugraph_ex.configs.compiler_config").CompilerConfig \
        is npugraph_ex.CompilerConfig
    import op_sdk

    assert as_torchair.target("torchair.core.utils").logger is op_sdk.logger
    assert as_torchair.target("numpy") is None
    for internal in ("torchair._ge_concrete_graph", "torchair.core._backend",
                     "torchair.no_such_module", "torchair._air"):
        with pytest.raises(ModuleNotFoundError, match=f"'{internal}'.*op_sdk"):
            as_torchair.target(internal)


def test_install_refuses_a_real_torchair_imported_already(monkeypatch):
    fake = types.ModuleType("torchair")
    fake.__file__ = "/site-packages/torch_npu/dynamo/torchair/__init__.py"
    monkeypatch.setitem(sys.modules, "torchair", fake)
    with pytest.raises(RuntimeError, match="'torchair' is imported already"):
        as_torchair.install()
    assert not as_torchair.installed()


def _run(tmp_path, *args):
    proc = subprocess.run([sys.executable, "-m", "op_sdk.as_torchair", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def test_a_torchair_script_runs_unchanged(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 3\n")  # the script's folder is importable
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import sys
        import torch
        import torchair
        import torchair.ge as ge
        import npugraph_ex
        from torchair import logger
        from torchair.configs.compiler_config import CompilerConfig
        from torchair.core.utils import logger as core_logger
        from torchair.ge import DataType
        from npugraph_ex.configs.compiler_config import CompilerConfig as ExConfig
        import helper

        assert logger is core_logger and DataType.DT_FLOAT == 0 == ge.DataType.DT_FLOAT
        config = CompilerConfig()
        config.mode = "reduce-overhead"
        model = torch.nn.Linear(4, 4)
        x = torch.randn(2, 4)
        out = torch.compile(model, backend=torchair.get_npu_backend(compiler_config=config))(x)
        torch.testing.assert_close(out, model(x))
        assert type(ExConfig()).__module__ == "op_sdk.compiler.npugraph_ex"
        try:
            from torchair._ge_concrete_graph.fx2ge_converter import GeConcreteGraph
        except ModuleNotFoundError as e:
            print("REFUSED", e.name)
        print("ARGS", sys.argv[1:], helper.VALUE, __name__)
    """))
    rc, out, err = _run(tmp_path, str(script), "--flag", "1")
    assert rc == 0, err[-3000:]
    assert "REFUSED torchair._ge_concrete_graph" in out
    assert "ARGS ['--flag', '1'] 3 __main__" in out


def test_dash_m_runs_a_module(tmp_path):
    (tmp_path / "mod.py").write_text("import sys, torchair\nprint('MOD', torchair.__name__, "
                                     "sys.argv[1:])\n")
    rc, out, err = _run(tmp_path, "-m", "mod", "a")
    assert rc == 0, err[-3000:]
    assert "MOD op_sdk ['a']" in out
    rc, out, err = _run(tmp_path)
    assert rc == 2 and "usage" in (out + err)
