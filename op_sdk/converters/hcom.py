"""torch's functional collectives (``_c10d_functional``, what Dynamo traces
torch.distributed's collectives into) as the graph engine's HCCL operators, as TorchAir
converts them: all_reduce -> HcomAllReduce, reduce_scatter_tensor -> HcomReduceScatter,
all_gather_into_tensor -> HcomAllGather, wait_tensor -> Identity. A collective's ``group``
attribute names its process group by tag and ranks (``tag=<tag>;rank_list=0,1``, TorchAir's
name for a group off the NPU, where no HCCL communicator exists) and the graph records the
group (GeGraph.process_groups; an export's ATC configuration lists them)."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.converters.graph import ConversionError, current_graph

ir.register_prototype(ir._proto(
    "HcomAllReduce", "x", "y", [("reduction", "String"), ("group", "String"),
                                ("fusion", "Int", 1), ("fusion_id", "Int", -1)],
    source="hcomm"))
ir.register_prototype(ir._proto(
    "HcomReduceScatter", "x", "y", [("reduction", "String"), ("group", "String"),
                                    ("rank_size", "Int"), ("fusion", "Int", 0),
                                    ("fusion_id", "Int", -1)], source="hcomm"))
ir.register_prototype(ir._proto(
    "HcomAllGather", "x", "y", [("rank_size", "Int"), ("group", "String"),
                                ("fusion", "Int", 0), ("fusion_id", "Int", -1)],
    source="hcomm"))

_REDUCTIONS = {"sum": "sum", "min": "min", "max": "max", "product": "prod"}

c10d = torch.ops._c10d_functional


def reduction(reduce_op: str) -> str:
    """The graph engine's name of a reduce operation (sum / min / max / prod)."""
    name = str(reduce_op).lower()
    if name not in _REDUCTIONS:
        raise ConversionError(f"GE conversion: HCCL collectives do not support the reduce "
                              f"operation {reduce_op!r} (supported: sum, min, max, product)")
    return _REDUCTIONS[name]


def group(group_name: str) -> str:
    """The GE group name of the process group ``group_name`` names, recorded in the graph
    being built."""
    from torch.distributed import distributed_c10d as c10d_

    pg = c10d_._resolve_process_group(group_name)
    ranks = torch.distributed.get_process_group_ranks(pg)
    tag = c10d_._get_group_tag(pg)
    name = f"tag={tag};rank_list={','.join(str(r) for r in ranks)}"
    current_graph().process_groups[name] = (ranks, tag)
    return name


@register_fx_node_ge_converter(c10d.all_reduce.default)
def convert_all_reduce(self, reduce_op, group_name, meta_outputs=None):
    return ge.HcomAllReduce(self, reduction=reduction(reduce_op), group=group(group_name),
                            fusion=0)


@register_fx_node_ge_converter(c10d.reduce_scatter_tensor.default)
def convert_reduce_scatter(self, reduce_op, group_size, group_name, meta_outputs=None):
    return ge.HcomReduceScatter(self, reduction=reduction(reduce_op),
                                group=group(group_name), rank_size=group_size)


@register_fx_node_ge_converter(c10d.all_gather_into_tensor.default)
def convert_all_gather(self, group_size, group_name, meta_outputs=None):
    return ge.HcomAllGather(self, group=group(group_name), rank_size=group_size)


@register_fx_node_ge_converter(c10d.wait_tensor.default)
def convert_wait(self, meta_outputs=None):
    return ge.Identity(self)
