"""The definition API: plugin operators, in-place functionalization, torch_npu deference,
and a cheap import."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from op_sdk.library import define_op

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code: str, env_extra=None, cwd=None) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, (env_extra or {}).pop("PYTHONPATH", "")]))
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env=env, cwd=cwd or ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


# ---- plugin operators --------------------------------------------------------------------

def test_define_op_rejects_duplicates_and_unknown_devices():
    with pytest.raises(RuntimeError, match="already defined"):
        define_op("npu_rms_norm(Tensor input, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
                  reference=lambda *a: a)
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        define_op("odd_device(Tensor x) -> Tensor", namespace="op_sdk_test_ns",
                  reference=lambda x: x.clone(), kernels={"tpu": lambda x: x})


def test_reference_op_registers_the_reference_under_its_own_name():
    calls = []

    def reference(x, *, alpha=2.0):
        calls.append(alpha)
        return x * alpha

    define_op("scaled_ref(Tensor x, *, float alpha=2.0) -> Tensor", namespace="op_sdk_test_refop",
              reference=reference, reference_op=True)
    x = torch.arange(4.0)
    # the operator of the reference namespace: the same schema, the reference as its kernel
    schema = torch._C._get_schema("op_sdk_reference::scaled_ref", "")
    assert str(schema) == "op_sdk_reference::scaled_ref(Tensor x, *, float alpha=2.) -> Tensor"
    assert torch.equal(torch.ops.op_sdk_reference.scaled_ref(x, alpha=3.0), x * 3.0)
    assert calls == [3.0]
    # and its fake is the operator's
    with torch._subclasses.fake_tensor.FakeTensorMode():
        assert torch.ops.op_sdk_reference.scaled_ref(torch.empty(5)).shape == (5,)


def test_user_inplace_pair_through_define_op():
    ns = "op_sdk_test_inplace"
    define_op("add_one(Tensor x, Tensor mask) -> Tensor", namespace=ns,
              reference=lambda x, mask: torch.where(mask, x + 1, x))
    define_op("add_one_(Tensor(a!) x, Tensor mask) -> Tensor(a!)", namespace=ns,
              reference=None, functional="add_one")
    x = torch.zeros(6)
    mask = torch.arange(6) % 2 == 0
    assert getattr(torch.ops, ns).add_one_(x, mask) is x and x.tolist() == [1, 0, 1, 0, 1, 0]

    def f(x, m):
        getattr(torch.ops, ns).add_one_(x, m)
        return x.sum()

    torch._dynamo.reset()
    x = torch.zeros(6)
    total = torch.compile(f, fullgraph=True)(x, mask)
    assert total.item() == 3 and x.tolist() == [1, 0, 1, 0, 1, 0]


# ---- the in-place scatter pair in graph mode -----------------------------------------------

@pytest.mark.parametrize("dynamic", [False, True])
def test_scatter_inplace_mutates_graph_input_under_compile(dynamic):
    def step(cache, idx, upd):
        torch.ops.npu.npu_scatter_nd_update_(cache, idx, upd)
        return cache * 2

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, dynamic=dynamic)
    for rows in (7, 9):
        cache = torch.zeros(rows, 4, 8, dtype=torch.bfloat16)
        ref = cache.clone()
        idx = torch.tensor([[rows - 1], [2]])
        upd = torch.randn(2, 4, 8, dtype=torch.bfloat16)
        out = compiled(cache, idx, upd)
        expect = step(ref, idx, upd)
        assert torch.equal(cache, ref) and torch.equal(out, expect)
        assert cache[rows - 1].abs().sum() > 0


def test_scatter_inplace_graph_is_functional_with_copy_back():
    from torch._functorch.aot_autograd import aot_function
    from torch._functorch.aot_autograd import make_boxed_func

    graphs = []

    def capture(gm, _):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    def step(cache, idx, upd):
        return torch.ops.npu.npu_scatter_nd_update_(cache, idx, upd) + 1

    cache = torch.zeros(5, 3)
    aot_function(step, capture)(cache, torch.tensor([[1]]), torch.ones(1, 3))
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert torch.ops.npu.npu_scatter_nd_update.default in targets
    assert torch.ops.npu.npu_scatter_nd_update_.default not in targets
    assert cache[1].tolist() == [1, 1, 1]


# ---- torch_npu deference -----------------------------------------------------------------

STANDIN = '''
import torch
ORDER.append("torch_npu")
lib = torch.library.Library("npu", "DEF")
lib.define("npu_rms_norm(Tensor input, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)")
lib.define("npu_dynamic_quant(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None, int? dst_type=None, str quant_mode=\\"pertoken\\", float dst_type_max=0.0) -> (Tensor, Tensor)")
def meta_rms(input, gamma, epsilon=1e-6):
    META_CALLS.append("rms")
    return torch.empty_like(input), input.new_empty(input.shape[:-1] + (1,), dtype=torch.float32)
lib.impl("npu_rms_norm", meta_rms, "Meta")
'''  # noqa: E501


def _standin_dir(tmp_path, body):
    pkg = tmp_path / "torch_npu"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import builtins\nORDER = builtins.__dict__.setdefault('ORDER', [])\n"
        "META_CALLS = builtins.__dict__.setdefault('META_CALLS', [])\n" + body)
    return str(tmp_path)


def test_torch_npu_present_owns_its_ops(tmp_path):
    path = _standin_dir(tmp_path, STANDIN)
    out = _run('''
        import builtins, torch
        import op_sdk
        from op_sdk.library import get_op
        assert builtins.ORDER == ["torch_npu"], builtins.ORDER
        rms = get_op("npu_rms_norm")
        assert not rms.owned and get_op("npu_dynamic_quant").owned is False
        assert get_op("npu_add_rms_norm").owned
        # op_sdk added CPU and AutogradCPU kernels, but no Meta: torch_npu's stays
        x = torch.randn(3, 8)
        y, r = torch.ops.npu.npu_rms_norm(x, torch.ones(8))
        assert y.shape == x.shape
        torch.ops.npu.npu_rms_norm(x.to("meta"), torch.ones(8, device="meta"))
        assert builtins.META_CALLS == ["rms"], builtins.META_CALLS
        assert torch._C._dispatch_has_kernel_for_dispatch_key("npu::npu_rms_norm", "AutogradCPU")
        print("ok", rms.kernel_devices()["cpu"])
    ''', {"PYTHONPATH": path})
    assert out.startswith("ok")


def test_broken_torch_npu_is_treated_as_absent(tmp_path):
    path = _standin_dir(tmp_path, "raise ImportError('libascendcl.so: cannot open shared object file')\n")
    out = _run('''
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import op_sdk
        from op_sdk.library import get_op
        assert get_op("npu_rms_norm").owned
        assert any("torch_npu" in str(x.message) for x in w)
        print("ok")
    ''', {"PYTHONPATH": path})
    assert out.startswith("ok")


# ---- import cost ---------------------------------------------------------------------------

def test_import_is_cheap_and_touches_no_device_or_compiler():
    """No compiler, Triton or CUDA at import, and no work that takes long: the import's
    best of three fresh processes (about 0.25 s on an idle 2-core machine; one process
    under the suite's parallel load can take longer, so one is not the measure) stays
    well below what importing Inductor or compiling anything costs (a second or more)."""
    costs = []
    for _ in range(3):
        out = _run('''
            import sys, time
            t0 = time.perf_counter(); import torch; t1 = time.perf_counter()
            import op_sdk; t2 = time.perf_counter()
            heavy = [m for m in ("torch._inductor", "torch._dynamo", "triton") if m in sys.modules]
            print(t2 - t1, torch.cuda.is_initialized(), heavy)
        ''')
        cost, cuda_init, heavy = out.split(maxsplit=2)
        assert cuda_init == "False"
        assert heavy.strip() == "[]", heavy
        costs.append(float(cost))
    assert min(costs) < 0.5, costs
