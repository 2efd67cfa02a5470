"""A DeepSeek-style MoE block whose shared expert runs on a second stream beside the routed
experts: a custom pass (``assign_streams``) puts the shared expert's nodes in an air stream
scope, as the manual's custom-pass example does for mm / abs.

    python examples/moe_multistream.py                    # check + time single vs multi-stream
    python examples/moe_multistream.py --trace out/       # also a Chrome trace + HTML report
    python examples/moe_multistream.py --mode max-autotune  # each stream region an Inductor
                                                            # partition on its stream

The block: a router (softmax top-k over the experts), routed SwiGLU experts with a fixed
capacity per expert (each expert takes the tokens that rank it highest, at most
``capacity``; static shapes, so the whole block is one graph), and a shared SwiGLU expert
every token goes through. The shared expert does not depend on the routing, so it can run
concurrently with it: on CPU, on a worker thread of its own (docs/multistream.md).
"""

from __future__ import annotations

import argparse
import math
import os
import time

import torch
import torch.nn.functional as F
from torch import nn

import op_sdk

SHARED_STREAM = "shared_expert"


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, inter: int, gen: torch.Generator):
        super().__init__()
        self.w_gate_up = nn.Parameter(torch.randn(2 * inter, hidden, generator=gen)
                                      / math.sqrt(hidden), requires_grad=False)
        self.w_down = nn.Parameter(torch.randn(hidden, inter, generator=gen) / math.sqrt(inter),
                                   requires_grad=False)

    def forward(self, x):
        gate, up = F.linear(x, self.w_gate_up).chunk(2, dim=-1)
        return F.linear(F.silu(gate) * up, self.w_down)


class MoEBlock(nn.Module):
    def __init__(self, hidden=1024, inter=1024, experts=8, top_k=2, shared_inter=2048,
                 capacity_factor=1.25, seed=0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.top_k, self.capacity_factor = top_k, capacity_factor
        self.router = nn.Parameter(torch.randn(experts, hidden, generator=gen) / math.sqrt(hidden),
                                   requires_grad=False)
        self.experts = nn.ModuleList(SwiGLU(hidden, inter, gen) for _ in range(experts))
        self.shared_expert = SwiGLU(hidden, shared_inter, gen)

    def forward(self, hidden):
        b, s, h = hidden.shape
        x = hidden.reshape(b * s, h)
        tokens, experts = x.shape[0], len(self.experts)
        probs = F.linear(x, self.router).softmax(dim=-1)
        weights, chosen = probs.topk(self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        combine = torch.zeros_like(probs).scatter(1, chosen, weights)      # (tokens, experts)
        capacity = min(tokens, math.ceil(tokens * self.top_k / experts * self.capacity_factor))
        gate, index = combine.t().topk(capacity, dim=-1)                   # (experts, capacity)
        routed = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            picked = x.index_select(0, index[e])
            routed = routed.index_add(0, index[e], expert(picked) * gate[e].unsqueeze(-1))
        shared = self.shared_expert(x)
        return (routed + shared).view(b, s, h)


def _is_shared(node: torch.fx.Node) -> bool:
    stack = node.meta.get("nn_module_stack") or {}
    return any("shared_expert" in str(path) for path, _ in stack.values())


def assign_streams(gm, example_inputs, config) -> None:
    """The custom pass (TorchAir's contract ``(gm, example_inputs, config) -> None``): move
    the shared expert's nodes into one block right after the last value they read from
    outside, open an air stream scope on ``shared_expert`` around them, record its end, and
    make the first node that reads the shared expert's result wait for that record."""
    graph = gm.graph
    shared = [n for n in graph.nodes if n.op == "call_function" and _is_shared(n)]
    if not shared:
        return
    members = set(shared)
    order = {n: i for i, n in enumerate(graph.nodes)}
    outside = [d for n in shared for d in n.all_input_nodes if d not in members]
    anchor = max(outside, key=order.__getitem__).next
    for node in shared:
        anchor.prepend(node)
    with graph.inserting_before(shared[0]):
        graph.call_function(torch.ops.air.scope_enter.default,
                            (["_user_stream_label"], [SHARED_STREAM]))
    with graph.inserting_after(shared[-1]):
        record = graph.call_function(torch.ops.air.record.default, ())
    with graph.inserting_after(record):
        graph.call_function(torch.ops.air.scope_exit.default, ())
    readers = [u for n in shared for u in n.users if u not in members]
    first = min(readers, key=lambda n: order.get(n, len(order)))
    with graph.inserting_before(first):
        graph.call_function(torch.ops.air.wait.default, ([record],))


def compile_block(block: nn.Module, multi_stream: bool, mode: str = "reduce-overhead"):
    config = op_sdk.CompilerConfig()
    config.mode = mode
    if multi_stream:
        config.post_grad_custom_pre_pass = assign_streams
    backend = op_sdk.get_npu_backend(compiler_config=config)
    return torch.compile(block, backend=backend, dynamic=False), backend


def time_call(fn, x, repeat: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        fn(x)
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(x)
        out.append(time.perf_counter() - start)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--mode", default="reduce-overhead",
                        choices=["reduce-overhead", "max-autotune"],
                        help="reduce-overhead: the graph's operators run on the streams; "
                             "max-autotune: each stream region is an Inductor partition")
    parser.add_argument("--trace", metavar="DIR", help="write a Chrome trace and an HTML report")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    block = MoEBlock().eval()
    x = torch.randn(1, args.tokens, 1024)
    with torch.no_grad():
        ref = block(x)
        single, _ = compile_block(block, multi_stream=False, mode=args.mode)
        multi, backend = compile_block(block, multi_stream=True, mode=args.mode)
        if args.mode == "reduce-overhead":
            assert torch.equal(single(x), ref)
        else:  # Inductor's generated code sums in its own order
            torch.testing.assert_close(single(x), ref, rtol=1e-5, atol=1e-5)
        first = multi(x)
        # the same every run; equal to the single-stream result up to the summation order of
        # matmuls run with fewer intra-op threads on the worker (bit-equal when
        # OP_SDK_STREAM_THREADS is the process's thread count)
        assert all(torch.equal(multi(x), first) for _ in range(5))
        torch.testing.assert_close(first, ref, rtol=1e-5, atol=1e-5)
        graph = op_sdk.explain(backend).reports[-1].graphs[0]
        lanes = graph.nodes_by_stream()
        print(f"{SHARED_STREAM}: {len(lanes.get(SHARED_STREAM, []))} nodes, "
              f"main: {len(lanes['main'])} nodes; max |multi - single| = "
              f"{float((first - ref).abs().max()):.3g}")
        for name, fn in (("single-stream", single), ("multi-stream", multi)):
            times = sorted(time_call(fn, x, args.repeat))
            print(f"{name}: median {times[len(times) // 2] * 1e3:.2f} ms, "
                  f"min {times[0] * 1e3:.2f} ms")
        if args.trace:
            from op_sdk.app.report import stream_data, trace_data
            from op_sdk.app.report_page import render_html, render_markdown

            os.makedirs(args.trace, exist_ok=True)
            traced = trace_data(lambda: multi(x), args.trace)
            data = {"title": "MoE block: shared expert on a second stream",
                    "facts": {"tokens": args.tokens, "torch": torch.__version__},
                    "streams": stream_data(op_sdk.explain(backend)), "trace": traced}
            for name, render in (("report.html", render_html), ("report.md", render_markdown)):
                with open(os.path.join(args.trace, name), "w") as f:
                    f.write(render(data))
            print(f"wrote {traced['path']}: operators of two threads overlapped "
                  f"{traced['overlap_us'] / 1e3:.2f} ms; report in {args.trace}/report.html")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
