"""One rank of tests/test_collectives.py's two-process run (gloo, CPU): a function calling
torch.distributed.broadcast / all_to_all / send / recv, eager and compiled by op_sdk's
backend with fullgraph=True in both modes; writes what it saw to ``{out_dir}/rank{r}.json``."""

from __future__ import annotations

import json
import os


def run(rank: int, world: int, port: int, out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    import op_sdk
    from torch._dynamo.utils import counters

    def fn(x):
        y = x * 2 + rank
        dist.broadcast(y, src=0)
        outs = [torch.empty_like(y) for _ in range(world)]
        dist.all_to_all(outs, [y + 10 * r for r in range(world)])
        z = outs[0] + outs[1]
        if rank == 0:
            dist.send(z, dst=1)
            got = torch.tensor(0)
            w = z
        else:
            w = torch.empty_like(z)
            got = torch.tensor(dist.recv(w, src=0))
        return w.sin(), got

    def any_source(x):             # recv from any source: no functional form, eager
        if rank == 0:
            dist.send(x + 1, dst=1)
            return x
        w = torch.empty_like(x)
        dist.recv(w)
        return w

    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    ref = fn(x.clone())
    result = {}
    for mode in ("reduce-overhead", "max-autotune"):
        cfg = op_sdk.CompilerConfig()
        cfg.mode = mode
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(fn, backend=op_sdk.get_npu_backend(compiler_config=cfg),
                                 fullgraph=True)
        out = compiled(x.clone())
        result[mode] = {"equal": all(torch.allclose(a, b) for a, b in zip(out, ref)),
                        "graphs": counters["stats"]["unique_graphs"]}
    torch._dynamo.reset()
    counters.clear()
    backend = op_sdk.get_npu_backend()
    out = torch.compile(any_source, backend=backend)(x.clone())
    result["any_source"] = {"equal": torch.equal(out, x + 1 if rank == 1 else x)}
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
