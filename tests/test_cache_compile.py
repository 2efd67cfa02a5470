"""``torchair.inference.cache_compile`` / ``readable_cache`` as op_sdk has them
(op_sdk.compiler.cache_compile): the compile saved by the first process and loaded by the
next without tracing the method again, in TorchAir's terms (its documented example, cache
path, warnings and argument checks)."""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import subprocess
import sys
import textwrap
import warnings
from typing import List

import pytest
import torch

import op_sdk as torchair
from op_sdk.compiler import cache_compile as cc


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Each test's models compile the same methods (one code object): Dynamo's per-code
    cache would fill up across tests (a process compiles each method once in use)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@dataclasses.dataclass
class InputMeta:  # the input structure of TorchAir's example (as vLLM passes its metadata)
    data: torch.Tensor
    is_prompt: bool


class Model(torch.nn.Module):
    """TorchAir's documented example: prompt / decode, each cached."""

    def __init__(self, cache_dir, config=None, dynamic=True):
        super().__init__()
        torch.manual_seed(0)
        self.linear1 = torch.nn.Linear(4, 3)
        self.linear2 = torch.nn.Linear(4, 3)
        self.register_buffer("scale", torch.tensor([0.5, 2.0, -1.0]))
        self.cached_prompt = torchair.inference.cache_compile(
            self.prompt, config=config, dynamic=dynamic, cache_dir=str(cache_dir))
        self.cached_decode = torchair.inference.cache_compile(
            self.decode, config=config, dynamic=dynamic, cache_dir=str(cache_dir))

    def forward(self, x: InputMeta, kv: List[torch.Tensor]):
        if x.is_prompt:
            return self.cached_prompt(x, kv)
        return self.cached_decode(x, kv)

    def _forward(self, x, kv):
        return (self.linear2(x.data) + self.linear1(kv[0])) * self.scale

    def prompt(self, x, y):
        return self._forward(x, y)

    def decode(self, x, y):
        return self._forward(x, y).relu()


def _inputs(rows, prompt=True):
    g = torch.Generator().manual_seed(rows)
    return InputMeta(torch.randn(rows, 4, generator=g), prompt), [torch.randn(rows, 4, generator=g)]


def _entries(method):
    return cc._entries(method.__func__.__code__)


def test_saved_by_the_first_model_loaded_by_the_next(tmp_path, caplog):
    first = Model(tmp_path)
    x, kv = _inputs(5)
    with torch.no_grad():
        want = first._forward(x, kv)
    torch.testing.assert_close(first(x, kv), want)
    assert first.cached_prompt.loaded is False
    path = first.cached_prompt.cache_bin
    # TorchAir's layout: {cache_dir}/{Class}_{dynamic}_{md5}/{method}/compiled_module, mode 600
    rel = os.path.relpath(path, tmp_path).split(os.sep)
    assert rel[0].startswith("Model_dynamic_") and len(rel[0].rsplit("_", 1)[1]) == 32
    assert rel[1:] == ["prompt", "compiled_module"]
    assert os.stat(path).st_mode & 0o777 == 0o600

    traced = len(_entries(first.prompt))
    second = Model(tmp_path)  # same model and options: the same cache
    assert second.cached_prompt.cache_bin == path
    with caplog.at_level(logging.INFO, logger="op_sdk"):
        torch.testing.assert_close(second(x, kv), want)
    assert second.cached_prompt.loaded is True
    assert any("loaded from" in r.getMessage() for r in caplog.records)
    # the loaded bytecode ran: Dynamo traced the method no further
    assert len(_entries(second.prompt)) == traced
    # dynamic=True: another row count is served by the same graph
    x7, kv7 = _inputs(7)
    with torch.no_grad():
        torch.testing.assert_close(second(x7, kv7), second._forward(x7, kv7))
    assert len(_entries(second.prompt)) == traced
    # decode: its own cache
    xd, kvd = _inputs(5, prompt=False)
    with torch.no_grad():
        torch.testing.assert_close(second(xd, kvd), second._forward(xd, kvd).relu())
    assert os.path.exists(second.cached_decode.cache_bin)


def test_loaded_by_a_new_process(tmp_path):
    """TorchAir's example run twice as a script, ``import torchair`` resolved to op_sdk: the
    second process loads both caches and computes the same values."""
    script = tmp_path / "model.py"
    script.write_text(textwrap.dedent("""
        import dataclasses, logging, sys
        from typing import List
        import torch
        import torchair
        from torchair import logger
        from torchair.configs.compiler_config import CompilerConfig

        logging.basicConfig(stream=sys.stdout, format="%(message)s")
        logger.setLevel(logging.INFO)
        config = CompilerConfig()

        @dataclasses.dataclass
        class InputMeta:
            data: torch.Tensor
            is_prompt: bool

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.linear1 = torch.nn.Linear(2, 1)
                self.linear2 = torch.nn.Linear(2, 1)
                self.cached_prompt = torchair.inference.cache_compile(self.prompt, config=config)
                self.cached_decode = torchair.inference.cache_compile(self.decode, config=config)

            def forward(self, x: InputMeta, kv: List[torch.Tensor]):
                if x.is_prompt:
                    return self.cached_prompt(x, kv)
                return self.cached_decode(x, kv)

            def _forward(self, x, kv):
                return self.linear2(x.data) + self.linear2(kv[0])

            def prompt(self, x, y):
                return self._forward(x, y)

            def decode(self, x, y):
                return self._forward(x, y)

        torch.manual_seed(1)
        x = InputMeta(data=torch.randn(3, 2), is_prompt=True)
        kv = [torch.randn(3, 2)]
        model = Model()
        res_prompt = model(x, kv)
        x.is_prompt = False
        res_decode = model(x, kv)
        print("RESULT", res_prompt.flatten().tolist(), res_decode.flatten().tolist())
    """))

    def run():
        proc = subprocess.run([sys.executable, "-m", "op_sdk.as_torchair", str(script)],
                              cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    first, second = run(), run()
    cache = tmp_path / ".torchair_cache"
    assert sorted(p.name for p in cache.glob("Model_dynamic_*/*")) == ["decode", "prompt"]
    assert first.count("saved to") == 2 and "loaded from" not in first
    assert second.count("loaded from") == 2 and "saved to" not in second
    result = [line for line in first.splitlines() if line.startswith("RESULT")]
    assert result and result == [line for line in second.splitlines() if line.startswith("RESULT")]


def test_a_recompile_discards_the_cache(tmp_path):
    model = Model(tmp_path, dynamic=False)
    model(*_inputs(3))
    path = model.cached_prompt.cache_bin
    assert os.path.exists(path) and "Model_static_" in path
    with pytest.warns(UserWarning, match=r"Skip cache as Model.prompt\(x, y\) recompiled"):
        out = model(*_inputs(6))  # static: a new shape recompiles
    x, kv = _inputs(6)
    with torch.no_grad():
        torch.testing.assert_close(out, model._forward(x, kv))
    assert not os.path.exists(os.path.dirname(path))


@pytest.mark.parametrize("damage", ["garbage", "version", "class", "mode"])
def test_a_broken_cache_is_cleared_and_compiled_again(tmp_path, caplog, damage):
    Model(tmp_path)(*_inputs(3))
    path = Model(tmp_path).cached_prompt.cache_bin
    if damage == "garbage":
        with open(path, "wb") as f:
            f.write(b"not a cache")
    elif damage == "version":
        with open(path, "rb") as f:
            artefact = pickle.load(f)
        artefact["meta"]["versions"]["torch"] = "0.0.1"
        with open(path, "wb") as f:
            pickle.dump(artefact, f)
    elif damage == "class":  # a pickle that would build an object on loading
        with open(path, "wb") as f:
            pickle.dump({"meta": {}, "x": InputMeta(torch.ones(1), True)}, f)
    os.chmod(path, 0o644 if damage == "mode" else 0o600)
    model = Model(tmp_path)
    x, kv = _inputs(3)
    with caplog.at_level(logging.WARNING, logger="op_sdk"):
        out = model(x, kv)
    with torch.no_grad():
        torch.testing.assert_close(out, model._forward(x, kv))
    assert model.cached_prompt.loaded is False
    words = {"garbage": "", "version": "Version mismatch", "class": "holds no classes",
             "mode": "permissions must be 600"}[damage]
    assert any("Clear broken cache" in r.getMessage() and words in r.getMessage()
               for r in caplog.records)
    assert os.path.exists(path) and os.stat(path).st_mode & 0o777 == 0o600  # saved again


def test_argument_checks(tmp_path):
    model = torch.nn.Linear(2, 2)

    def function(x):
        return x

    with pytest.raises(ValueError, match="Only method can be cached now"):
        torchair.inference.cache_compile(function)

    class NotAModule:
        def method(self, x):
            return x

    with pytest.raises(ValueError, match="Only torch.nn.Module method can be cached now"):
        torchair.inference.cache_compile(NotAModule().method)
    config = torchair.CompilerConfig()
    other = torchair.CompilerConfig()
    other.mode = "reduce-overhead"
    with pytest.raises(ValueError, match="config in current backend is different"):
        torchair.inference.cache_compile(model.forward, config=config,
                                         backend=torchair.get_npu_backend(compiler_config=other))
    with pytest.raises(TypeError, match="unknown argument.*options_typo"):
        torchair.inference.cache_compile(model.forward, options_typo=1)
    with pytest.warns(UserWarning, match="ge_cache .* no effect"):
        torchair.inference.cache_compile(model.forward, ge_cache=True, cache_dir=str(tmp_path))
    # the backend's config is taken when no config is given
    cached = torchair.inference.cache_compile(
        model.forward, backend=torchair.get_npu_backend(compiler_config=other),
        cache_dir=str(tmp_path))
    assert cached.backend.config == other and "_aclgraphcache_" in cached.cache_bin


def test_the_options_and_the_model_key_the_cache(tmp_path):
    a = Model(tmp_path).cached_prompt.cache_bin
    config = torchair.CompilerConfig()
    config.experimental_config.frozen_parameter = True
    assert Model(tmp_path, config=config).cached_prompt.cache_bin != a
    changed = Model(tmp_path)
    changed.linear1 = torch.nn.Linear(4, 3, bias=False)  # another repr
    assert cc.cache_path(changed.prompt, cache_dir=str(tmp_path)) != a
    assert cc.cache_path(changed.prompt, cache_dir=str(tmp_path), tp_rank=1,
                         pp_rank=0).split(os.sep)[-3] == "tp_rank1_pp_rank0"


def test_reduce_overhead_mode(tmp_path):
    config = torchair.CompilerConfig()
    config.mode = "reduce-overhead"
    x, kv = _inputs(4)
    Model(tmp_path, config=config)(x, kv)
    model = Model(tmp_path, config=config)
    with torch.no_grad():
        torch.testing.assert_close(model(x, kv), model._forward(x, kv))
    assert model.cached_prompt.loaded is True and "_aclgraphcache_" in model.cached_prompt.cache_bin


class Norm(torch.nn.Module):
    def __init__(self, cache_dir, config):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, 64))
        self.cached = torchair.inference.cache_compile(self.norm, config=config,
                                                       cache_dir=str(cache_dir))

    def norm(self, x, r):
        h = x + r
        v = h.float().pow(2).mean(-1, keepdim=True)
        return (h.float() * torch.rsqrt(v + 1e-6)).to(x.dtype) * self.w, h


def test_the_fusions_apply_to_the_cached_graph(tmp_path):
    """The loaded graph goes through op_sdk's passes: the RMSNorm is fused."""
    config = torchair.CompilerConfig()
    config.mode = "reduce-overhead"
    x, r = torch.randn(8, 64), torch.randn(8, 64)
    Norm(tmp_path, config).cached(x, r)
    model = Norm(tmp_path, config)
    out, h = model.cached(x, r)
    assert model.cached.loaded is True
    with torch.no_grad():
        want, _ = model.norm(x, r)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(h, x + r)
    report = model.cached.backend.reports[-1]
    assert report.graphs[-1].match_count("native_rms_norm") == 1, report.graphs[-1].outcome()


def test_readable_cache(tmp_path, capsys):
    model = Model(tmp_path)
    model(*_inputs(3))
    path = model.cached_prompt.cache_bin
    text = torchair.inference.readable_cache(path)
    printed = capsys.readouterr().out
    assert printed.strip() == text.strip()
    assert "ModelCacheMeta(name='Model.prompt(x, y)'" in text
    assert "graph module" in text and "torch._C._nn.linear" in text
    assert "compile options" in text and "mode=max-autotune" in text
    assert "caller frame" in text and "__compiled_fn" in text
    assert "stored compile: yes, called for the inputs where L['t" in text
    out = tmp_path / "prompt.py"
    assert torchair.inference.readable_cache(path, print_output=False, file=str(out)) == text
    assert capsys.readouterr().out == ""
    written = out.read_text()
    assert written.startswith("# ====") and "def forward(self" in written
    assert os.stat(out).st_mode & 0o777 == 0o600
    with pytest.raises(ValueError, match="is not exists"):
        torchair.inference.readable_cache(str(tmp_path / "none"))
    link = tmp_path / "link"
    link.symlink_to(path)
    with pytest.raises(ValueError, match="can not be a symlink"):
        torchair.inference.readable_cache(str(link))


def test_npugraph_ex_cache_compile(tmp_path):
    from op_sdk.npugraph_ex import inference

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cached = inference.cache_compile(self.run, options={"remove_noop_ops": False},
                                                  cache_dir=str(tmp_path))

        def run(self, x):
            return (x * 2).sum(-1)

    x = torch.randn(3, 5)
    M().cached(x)
    model = M()
    torch.testing.assert_close(model.cached(x), (x * 2).sum(-1))
    assert model.cached.loaded is True and "_aclgraphcache_" in model.cached.cache_bin
    with pytest.raises(ValueError, match="Invalid option 'nope'"):
        inference.cache_compile(model.run, options={"nope": 1})


def test_not_cacheable_graph_warns_and_runs(tmp_path, monkeypatch):
    """A graph op_sdk cannot store (a module call kept in Dynamo's graph) runs compiled and
    warns that it is not cached, as TorchAir's 'Skip cache as ...'."""
    artefact_error = cc.NotCacheable("the graph calls the module m")

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cached = torchair.inference.cache_compile(self.run, cache_dir=str(tmp_path))

        def run(self, x):
            return x + 1

    model = M()

    def refuse(gm, example_inputs):
        raise artefact_error

    monkeypatch.setattr(cc, "_graph_artefact", refuse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = model.cached(torch.ones(2))
    torch.testing.assert_close(out, torch.full((2,), 2.0))
    assert any("Skip cache" in str(w.message) and "calls the module" in str(w.message)
               for w in caught)
    assert not os.path.exists(model.cached.cache_bin)


def test_a_loaded_cache_calls_the_stored_compile(tmp_path):
    """max-autotune: the saving process stores the compile itself (AOTAutograd's bundled
    artefact of Inductor's code) with its shape guards; a loading process calls it with no
    compile at all (no backend call, no report) for the inputs the guards accept, and
    compiles the stored graph for the others (here another row count, which Dynamo's trace
    related to a size argument of the graph)."""
    first = Model(tmp_path)
    first(*_inputs(5))
    assert len(first.cached_prompt.backend.reports) == 1
    second = Model(tmp_path)
    for seed in (5, 105):  # other values, the same sizes
        g = torch.Generator().manual_seed(seed)
        x = InputMeta(torch.randn(5, 4, generator=g), True)
        kv = [torch.randn(5, 4, generator=g)]
        with torch.no_grad():
            torch.testing.assert_close(second(x, kv), second._forward(x, kv))
    assert second.cached_prompt.loaded is True
    assert second.cached_prompt.backend.reports == []  # never compiled
    x, kv = _inputs(9)
    with torch.no_grad():
        torch.testing.assert_close(second(x, kv), second._forward(x, kv))
    assert len(second.cached_prompt.backend.reports) == 1
    # inputs that share memory are never given to the stored compile
    x = InputMeta(torch.randn(5, 4), True)
    with torch.no_grad():
        torch.testing.assert_close(second(x, [x.data]), second._forward(x, [x.data]))


def test_inputs_the_guards_refuse_take_the_compile(tmp_path):
    """dynamic=False: the stored compile is for 3 rows; a loading process called with 6
    rows (the guards refuse them) compiles the stored graph for them, and with another dtype
    too: the results stay right."""
    Model(tmp_path, dynamic=False)(*_inputs(3))
    model = Model(tmp_path, dynamic=False)
    x, kv = _inputs(3)
    with torch.no_grad():
        torch.testing.assert_close(model(x, kv), model._forward(x, kv))
    assert model.cached_prompt.backend.reports == []
    x, kv = _inputs(6)
    with torch.no_grad():
        torch.testing.assert_close(model(x, kv), model._forward(x, kv))
    assert len(model.cached_prompt.backend.reports) == 1  # compiled for 6 rows
    x64 = InputMeta(x.data.double(), True)
    model.double()
    with torch.no_grad():
        torch.testing.assert_close(model(x64, [kv[0].double()]), model._forward(x64, [kv[0].double()]))


def test_a_cache_that_cannot_be_written_is_skipped(tmp_path, monkeypatch):
    """The call's result stands; a warning says the cache was skipped."""
    def refuse(path, artefact):
        raise PermissionError(f"{path}: read-only file system")

    monkeypatch.setattr(cc, "_write", refuse)
    model = Model(tmp_path)
    x, kv = _inputs(3)
    with pytest.warns(UserWarning, match="Skip cache Model.prompt.*cannot be written"):
        out = model(x, kv)
    with torch.no_grad():
        torch.testing.assert_close(out, model._forward(x, kv))
    assert not os.path.exists(model.cached_prompt.cache_bin)
