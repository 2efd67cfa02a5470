"""TorchAir's scope.limit_core_num on CPU: the operators inside run with at most
op_aicore_num intra-op threads, eagerly and in graphs compiled by op_sdk's backend (the
stream executor caps each node of the region on the main stream and on side streams;
max-autotune compiles the region as a partition whose kernels are generated for that many
threads), nested scopes take the innermost cap, and the count comes back afterwards."""

from __future__ import annotations

import pytest
import torch
from torch._inductor.utils import run_and_get_code

import op_sdk
from op_sdk import scope
from op_sdk.compiler import partitions, streams
from tests.test_multistream import MODES, _compile

_LOG: list[tuple[str, int]] = []
_lib = torch.library.Library("op_sdk_captest", "DEF")  # noqa: TOR901
_lib.define("threads(Tensor x, str name) -> Tensor")


def _threads(x, name):
    _LOG.append((name, torch.get_num_threads()))
    return x.clone()


_lib.impl("threads", _threads, "CPU")
torch.library.register_fake("op_sdk_captest::threads", lambda x, n: torch.empty_like(x), lib=_lib)
T = torch.ops.op_sdk_captest

pytestmark = pytest.mark.skipif(torch.get_num_threads() < 2,
                                reason="needs 2 or more intra-op threads to see a cap of 1")


def fn(x):
    a = T.threads(x.sin(), "before")
    with scope.limit_core_num(1, 0):
        b = T.threads(a.cos() * 2, "inside")
    return T.threads(b + 1, "after")


def test_eager_block_runs_capped_and_gives_the_count_back():
    n = torch.get_num_threads()
    _LOG.clear()
    fn(torch.randn(8))
    assert _LOG == [("before", n), ("inside", 1), ("after", n)]
    with pytest.raises(ValueError, match="boom"):
        with scope.limit_core_num(1, 0):
            raise ValueError("boom")
    assert torch.get_num_threads() == n


def test_nested_scopes_take_the_innermost_cap():
    n = torch.get_num_threads()
    with scope.limit_core_num(1, 0):
        with scope.limit_core_num(n + 4, 0):          # a cap above the count changes nothing
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    with scope.limit_core_num(n + 4, 0):
        with scope.limit_core_num(1, 0):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == n


@pytest.mark.parametrize("mode", MODES)
def test_compiled_region_runs_capped(mode):
    n = torch.get_num_threads()
    opt, backend = _compile(fn, mode)
    x = torch.randn(64)
    _LOG.clear()
    out = opt(x)
    assert _LOG == [("before", n), ("inside", 1), ("after", n)]
    assert torch.allclose(out, ((x.sin().cos() * 2) + 1), atol=1e-6)
    assert torch.get_num_threads() == n
    graph = op_sdk.explain(backend).reports[-1].graphs[0]
    if mode == "max-autotune":
        assert graph.executor.endswith("+streams")    # compiled as partitions


def test_side_stream_nodes_are_capped_too():
    def side(x):
        with scope.npu_stream_switch("capside"):
            with scope.limit_core_num(1, 0):
                y = T.threads(x.sin(), "side_inside")
            z = T.threads(x.cos(), "side_outside")
        return y, z

    opt, _ = _compile(side)
    _LOG.clear()
    opt(torch.randn(8))
    assert dict(_LOG)["side_inside"] == 1
    assert dict(_LOG)["side_outside"] == streams.stream_threads()


def test_the_capped_partitions_kernels_are_generated_for_one_thread():
    """Inductor fixes a kernel's OpenMP threads when it generates it: the region's
    reduction is generated without a parallel region, the same reduction outside with one."""
    def two(x):
        a = (x.sin() * 3).sum(-1)
        with scope.limit_core_num(1, 0):
            b = (x.cos() * 2).sum(-1)
        return a + b

    opt, _ = _compile(two, "max-autotune")
    x = torch.randn(256, 4096)
    out, codes = run_and_get_code(opt, x)
    assert torch.allclose(out, two(x), rtol=1e-4, atol=1e-3)
    cos = [c for c in codes if "cos(" in c and "sin(" not in c]
    sin = [c for c in codes if "sin(" in c and "cos(" not in c]
    assert cos and sin
    assert all("omp parallel" not in c for c in cos)
    assert any("omp parallel" in c for c in sin)


def test_split_gives_each_segment_its_cap():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.ops.aten.sin.default, (x,))
    g.call_function(torch.ops.air.scope_enter.default, (["_op_aicore_num", "_op_vectorcore_num"], ["3", "0"]))
    b = g.call_function(torch.ops.aten.cos.default, (a,))
    g.call_function(torch.ops.air.scope_exit.default, ())
    c = g.call_function(torch.ops.aten.neg.default, (b,))
    g.output((c,))
    for n in (x, a, b, c):
        n.meta["val"] = torch.empty(4)
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    assert streams.thread_caps(g) == {b: 3}
    _, segments = partitions.split(gm)
    assert [s.cap for s in segments] == [None, 3, None]
    assert isinstance(streams.executor_for(gm, [torch.empty(4)]), streams.CpuStreamProgram)
