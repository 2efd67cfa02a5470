"""TorchAir's air scope operators beside op_sdk's (run by tests/npu/test_torch_npu_real.py in
the stubbed environment). TorchAir's files that define them (torchair/ops/_record_wait.py,
torchair/scope/_scope.py, torchair/scope/_wait_tensor.py) run as they are; the GE-side
helpers they import, which need protobuf and GE, are empty stand-ins. In either order the
process keeps one definition of each operator (TorchAir's ``wait_tensor`` is defined
unconditionally, so op_sdk leaves it to TorchAir), and the manual's multi-stream example and
``op_sdk.scope`` run under op_sdk's backend on CPU with the single-stream result."""

import os
import subprocess
import sys
import textwrap

import pytest

_LOAD_TORCHAIR = textwrap.dedent('''
    import importlib.util, os, sys, types
    import torch, torch_npu

    ROOT = os.path.join(os.path.dirname(torch_npu.__file__), "dynamo", "torchair")

    def _module(name, **attrs):
        m = types.ModuleType(name)
        m.__path__ = []
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m

    def load_torchair_air():
        """Run TorchAir's definitions of the air operators, with stand-ins for GE."""
        _module("_torchair_air")
        for sub in ("ops", "scope"):
            _module(f"_torchair_air.{sub}").__path__ = [os.path.join(ROOT, sub)]
        _module("_torchair_air.scope._scope_attr", scope_enter=lambda keys, values: None,
                scope_exit=lambda: None)
        # what scope/_wait_tensor.py imports for its GE converter
        ge_names = ("torchair._ge_concrete_graph", "torchair._ge_concrete_graph.fx2ge_converter",
                    "torchair.ge", "torchair.ge._ge_graph")
        saved = {n: sys.modules.get(n) for n in ge_names}
        _module("torchair._ge_concrete_graph",
                ge_apis=types.SimpleNamespace(Identity=lambda x: x))
        _module("torchair._ge_concrete_graph.fx2ge_converter",
                register_fx_node_ge_converter=lambda op: (lambda fn: fn))
        _module("torchair.ge")
        _module("torchair.ge._ge_graph", Tensor=object, ControlTensor=object, TensorSpec=object)
        try:
            for name in ("ops._lib", "ops._record_wait", "scope._lib", "scope._scope",
                         "scope._wait_tensor"):
                full = f"_torchair_air.{name}"
                path = os.path.join(ROOT, *name.split(".")) + ".py"
                spec = importlib.util.spec_from_file_location(full, path)
                mod = importlib.util.module_from_spec(spec)
                sys.modules[full] = mod
                spec.loader.exec_module(mod)
        finally:
            for n, m in saved.items():
                if m is None:
                    sys.modules.pop(n, None)
                else:
                    sys.modules[n] = m
''')

_CHECK = textwrap.dedent('''
    import op_sdk
    from op_sdk.scope import npu_stream_switch, npu_wait_tensor

    for name in ("scope_enter", "scope_exit", "record", "wait", "wait_tensor"):
        assert hasattr(torch.ops.air, name), name
    schema = str(torch.ops.air.scope_enter.default._schema)
    assert schema == "air::scope_enter(str[] keys, str[] values, bool need_execute=False) -> NoneType", schema
    # TorchAir's kernels (BackendSelect) are there only where TorchAir defined the operator
    owner = "torchair" if torch._C._dispatch_has_kernel_for_dispatch_key(
        "air::record", "BackendSelect") else "op_sdk"
    print("owner", owner)

    class Model(torch.nn.Module):
        def forward(self, x):
            mm = torch.mm(x, x)
            abs = torch.abs(mm)
            add = torch.add(abs, 1)
            sub = torch.sub(x, mm)
            return add, sub

    def custom_pass(gm, example_inputs, config):
        g = gm.graph
        for node in g.nodes:
            if node.op == "call_function" and node.target == torch.ops.aten.mm.default:
                with g.inserting_before(node):
                    g.call_function(torch.ops.air.scope_enter.default,
                                    args=(["_user_stream_label"], ["stream_1"]))
            if node.op == "call_function" and node.target == torch.ops.aten.abs.default:
                with g.inserting_after(node):
                    record_node = g.call_function(torch.ops.air.record.default, args=())
                with g.inserting_after(record_node):
                    g.call_function(torch.ops.air.scope_exit.default, args=())
            if node.op == "call_function" and node.target == torch.ops.aten.sub.Tensor:
                with g.inserting_before(node):
                    g.call_function(torch.ops.air.wait.default, args=([record_node],))

    cfg = op_sdk.CompilerConfig()
    cfg.mode = "reduce-overhead"
    cfg.post_grad_custom_pre_pass = custom_pass
    backend = op_sdk.get_npu_backend(compiler_config=cfg)
    model = Model()
    x = torch.randn(3, 3)
    for a, b in zip(torch.compile(model, backend=backend)(x), model(x)):
        assert torch.equal(a, b)
    graph = op_sdk.explain(backend).reports[-1].graphs[0]
    assert graph.streams["mm"] == "stream_1" and graph.streams["sub"] == "main", graph.streams

    def fn(x):
        with npu_stream_switch("side"):
            y = torch.relu(x @ x)
        return npu_wait_tensor(x.sin(), y) + y

    cfg = op_sdk.CompilerConfig()
    cfg.mode = "reduce-overhead"
    backend = op_sdk.get_npu_backend(compiler_config=cfg)
    torch._dynamo.reset()
    assert torch.equal(torch.compile(fn, backend=backend)(x), x.sin() + torch.relu(x @ x))
    print("ok")
''')


@pytest.mark.parametrize("order, owner", [("torchair_first", "torchair"),
                                          ("op_sdk_first", "op_sdk")])
def test_torchair_air_ops_and_op_sdk_coexist(order, owner):
    if order == "torchair_first":
        code = _LOAD_TORCHAIR + "load_torchair_air()\n" + _CHECK
    else:
        code = _LOAD_TORCHAIR + "import op_sdk\nload_torchair_air()\n" + _CHECK
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, env=dict(os.environ))
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), \
        out.stdout[-2000:] + out.stderr[-6000:]
    assert f"owner {owner}" in out.stdout
