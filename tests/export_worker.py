"""One rank of a two-process (gloo, CPU) export of models with collectives, the exports of
TorchAir's torchair_export_st.py (test_export_with_allreduce / _atc_config_generated), by
op_sdk's dynamo_export or (in the real torch_npu environment) by TorchAir's own; each export
into ``{out_dir}/<name>``."""

from __future__ import annotations

import os


def _models():
    import torch
    import torch.distributed._functional_collectives as funcol

    class AllReduceOneGroup(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(torch.tensor([[1.1, 1.1], [1.1, 1.1]]))
            self.p2 = torch.nn.Parameter(torch.tensor([[2.2, 2.2], [3.3, 3.3]]))

        def forward(self, x, y):
            x = x + y + self.p + self.p2
            torch.distributed.all_reduce(x)
            return x

    class AllReduceGroups(torch.nn.Module):
        def forward(self, x):
            for tag in ("test1", "test2", "test3", "test1"):  # a group used twice
                x = funcol.all_reduce(x, reduceOp="SUM", group=[0, 1], tag=tag)
            return x

    class ReduceScatterInto(torch.nn.Module):
        def forward(self, x, output):
            from torch.distributed.distributed_c10d import _world

            torch.distributed.reduce_scatter_tensor(output, x, group=_world.default_pg)
            return x

    return AllReduceOneGroup, AllReduceGroups, ReduceScatterInto


def run(rank: int, world: int, port: int, side: str, out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    if side == "torchair":
        from tests.npu.real.torchair_export import exporter

        export, CompilerConfig = exporter()
    else:
        import op_sdk

        export, CompilerConfig = op_sdk.dynamo_export, op_sdk.CompilerConfig
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    for tag in ("test1", "test2", "test3"):
        dist.distributed_c10d._find_or_create_pg_by_ranks_and_tag(tag, [0, 1], 2)
    one, groups, scatter = _models()
    atc = CompilerConfig()
    atc.export.experimental.auto_atc_config_generated = True
    x, y = torch.ones([2, 2], dtype=torch.int32), torch.ones([2, 2], dtype=torch.int32)
    xx = torch.ones([3], dtype=torch.int32)
    out = lambda name: os.path.join(out_dir, name)  # noqa: E731
    export(x, y, model=one(), export_path=out("one_group"))
    export(xx, model=groups(), dynamic=False, export_path=out("groups"))
    export(xx, model=groups(), dynamic=True, export_path=out("groups_dynamic_atc"), config=atc)
    export(torch.tensor([0, 1, 2, 3], dtype=torch.int32), torch.empty([2], dtype=torch.int32),
           model=scatter(), dynamic=True, export_path=out("scatter"))
    export(x, y, model=one(), export_path=out("one_group_atc"), config=atc)
    dist.barrier()
    dist.destroy_process_group()
