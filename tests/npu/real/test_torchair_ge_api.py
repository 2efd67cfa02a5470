"""op_sdk.ge against TorchAir's torchair.ge, inside the real torch_npu environment: the same
calls (custom_op in both forms, Const, Cast, Clone, every ge.attr type, dependencies) made
through TorchAir's builder and op_sdk's write the same operators: op_sdk's GE IR text, read
by the GE schema (ge_ir.proto's ModelDef), equals TorchAir's protobuf message for message
(node names and the descriptors TorchAir fills from its Data nodes aside). A converter
written against op_sdk.ge and registered with TorchAir writes through TorchAir's builder."""

from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("google.protobuf", reason="protobuf is installed by "
                    "tests/npu/ge_schema.py beside the torch_npu environment")

import torchair  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from torchair._ge_concrete_graph import compat_ir  # noqa: E402
from torchair._ge_concrete_graph.ge_ir_pb2 import ModelDef  # noqa: E402
from torchair.ge._ge_graph import Data as TaData  # noqa: E402
from torchair.ge._ge_graph import GeGraph as TaGraph  # noqa: E402

import op_sdk  # noqa: E402
from op_sdk import ge  # noqa: E402
from op_sdk.converters import GeGraph, convert_fx, register_with_torchair  # noqa: E402
from tests.test_converters import fx_of_call  # noqa: E402

compat_ir.is_cann_compat = lambda *args, **kwargs: ""  # CANN's prototype registry is not here
compat_ir.ge_op.__globals__["is_cann_compat"] = compat_ir.is_cann_compat


def _attrs(api):
    a = api.attr
    return {"i": a.Int(2), "f": a.Float(0.5), "b": a.Bool(True), "s": a.Str("hi"),
            "dt": a.DataType(27), "li": a.ListInt([1, 2]), "lf": a.ListFloat([1.5]),
            "lb": a.ListBool([True, False]), "ls": a.ListStr(["a", "b"]),
            "ldt": a.ListDataType([0, 2]), "lli": a.ListListInt([[1, 2], [3]]),
            "llf": a.ListListFloat([[0.25]])}


def _program(api, x, y, custom_op):
    """The same calls, written against ``api`` (torchair.ge or op_sdk.ge)."""
    c = api.Const([[1.0, 2.0], [3.0, 4.0]], dtype=api.DataType.DT_FLOAT16)
    i = api.Const([1, 2, 3])
    cast = api.Cast(x, dst_type=api.DataType.DT_FLOAT, dependencies=[c])
    clone = api.Clone(cast, dependencies=[i])
    a, b = custom_op("MyOp", inputs={"x": clone, "xs": [x, y], "opt": None},
                         outputs=["y", ("z", 2)], attrs=_attrs(api))
    return [a, b[1]]


def _ops(ops) -> list:
    """The operators, Data nodes left out and each descriptor reduced to its name (TorchAir
    fills an input's from its Data node, op_sdk from the FX value)."""
    out = []
    for op in ops:
        if op.type in ("Data", "NetOutput"):
            continue
        op = type(op).FromString(op.SerializeToString())
        for d in list(op.input_desc) + list(op.output_desc):
            if op.type != "Const":
                keep = {k: v for k, v in d.attr.items() if k == "_is_unfed_optional"}
                name = d.name
                d.Clear()
                d.name = name
                for k, v in keep.items():
                    d.attr[k].CopyFrom(v)
        out.append(op)
    return out


def test_the_same_calls_write_the_same_operators():
    with TaGraph() as graph:
        x = TaData(index=0, dtype=1, shape=[2, 3], placement="NPU", node_name="Data")
        y = TaData(index=1, dtype=0, shape=[2, 3], placement="NPU", node_name="Data_1")
        # torchair.ge.custom_op asks CANN's registry whether the type exists (libge_runner,
        # not here), then writes the operator with compat_ir._custom_op: called directly
        _program(torchair.ge, x, y, compat_ir._custom_op)
    theirs = _ops(graph._proto.op)
    with GeGraph("g") as g:
        x = g.data(0, torch.float16, [2, 3])
        y = g.data(1, torch.float32, [2, 3])
        outs = _program(ge, x, y, ge.custom_op)
        g.net_output(outs)
    ours = _ops(text_format.Parse(g.model_pbtxt("g"), ModelDef()).graph[0].op)
    assert [o.type for o in ours] == [o.type for o in theirs] == \
        ["Const", "Const", "Cast", "TensorMove", "MyOp"]
    for a, b in zip(ours, theirs):
        assert list(a.input) == list(b.input), a.type
        diff = {k: (a.attr.get(k), b.attr.get(k)) for k in set(a.attr) | set(b.attr)
                if a.attr.get(k) != b.attr.get(k)}
        assert not diff, (a.type, diff)
        assert [d.name for d in a.input_desc] == [d.name for d in b.input_desc], a.type
        assert a.input_desc == b.input_desc and a.output_desc == b.output_desc, a.type


def _nodes(text: str) -> list:
    """Each node of a TorchAir-format pbtxt: its name / op / input lines in order and its
    attribute blocks as a sorted list (a parsed GE map iterates in no fixed order)."""
    nodes = []
    for block in text.split("node {\n")[1:]:
        lines = block.splitlines()
        head = [line for line in lines if line.startswith("    ") and not line.startswith("     ")
                and not line.strip().startswith(("attr {", "}"))]
        attrs = sorted("\n".join(lines[i:i + 6]) for i, line in enumerate(lines)
                       if line == "    attr {")
        nodes.append((head, attrs))
    return nodes


def test_torchairs_pbtxt_format():
    """dynamo_export's dynamo.pbtxt: op_sdk's pbtxt.graphdef of a graph (every attribute
    type, tensor constants, control edges, descriptors) is, character for character, what
    TorchAir's convert_to_pbtxt writes for the same GE graph (read by the GE schema from
    op_sdk's ModelDef text)."""
    from torchair._ge_concrete_graph.utils import convert_to_pbtxt

    from op_sdk.converters import pbtxt

    with GeGraph("g") as g:
        x = g.data(0, torch.float16, [2, 3])
        y = g.data(1, torch.float32, [2, 3])
        outs = _program(ge, x, y, ge.custom_op)
        g.net_output(outs)
    theirs = convert_to_pbtxt(text_format.Parse(g.model_pbtxt("g"), ModelDef()).graph[0])
    ours = pbtxt.graphdef(g)
    assert _nodes(ours) == _nodes(theirs)
    assert 'input: "^' in ours and "list_list_int" in ours  # control edges, nested lists


def test_converter_written_against_op_sdk_ge_writes_through_torchair():
    from tests.test_torchair_api import scale2_op

    op = scale2_op("op_sdk_ta_real")

    @op_sdk.register_fx_node_ge_converter(op)
    def convert(x, meta_outputs=None):
        two = ge.Const(2.0, dtype=meta_outputs.dtype)
        return ge.custom_op("Scale2", inputs={"x": x, "k": two}, outputs=["y"],
                            attrs={"dst": ge.attr.DataType(meta_outputs.dtype)})

    try:
        register_with_torchair()
        gm = fx_of_call(op, (torch.randn(3, 4, dtype=torch.float16),), {})
        from tests.npu.real.test_converters import _torchair_ops

        theirs = [o for o in _torchair_ops(gm) if o.type in ("Const", "Scale2")]
        ours = _ops(text_format.Parse(convert_fx(gm).model_pbtxt("g"), ModelDef()).graph[0].op)
    finally:  # the test's operator leaves no converter behind
        from op_sdk.converters import torchair_bridge
        from op_sdk.converters.registry import _CONVERTERS

        _CONVERTERS.pop(op, None)
        torchair_bridge._REGISTERED.discard(op)
    assert [o.type for o in theirs] == [o.type for o in ours] == ["Const", "Scale2"]
    assert theirs[1].attr["dst"].dt == ours[1].attr["dst"].dt == 1  # DT_FLOAT16
    assert theirs[0].attr == ours[0].attr  # the value's bytes, its descriptor, _readable_value
    assert [d.name for d in theirs[1].input_desc] == [d.name for d in ours[1].input_desc] == \
        ["x", "k"]
    assert [d.name for d in theirs[1].output_desc] == [d.name for d in ours[1].output_desc] == ["y"]


@pytest.mark.parametrize("detail", [False, True])
def test_npu_print_converts_as_torchairs_converter(detail):
    """air.print: op_sdk's converter and TorchAir's (torchair/ops/_print_ops.py) write the
    same StringFormat / PrintV2 operators."""
    from tests.npu.real.test_converters import _summary_ours, _summary_torchair, _torchair_ops

    x, y = torch.randn(2, 3, dtype=torch.bfloat16), torch.arange(4)
    gm = fx_of_call(torch.ops.air.print.default,
                    ([x, y], "x {} y {}" + (" {} {}" if detail else ""), "{}", 2, detail), {})
    theirs = _torchair_ops(gm)
    ours = [o for o in convert_fx(gm).ops if o.type not in ("Data", "NetOutput")]
    assert [o.type for o in ours] == [o.type for o in theirs]
    # (the summaries leave out "_" attributes, TorchAir's side does: compared below)
    plain = [dataclasses.replace(o, attrs={k: v for k, v in o.attrs.items() if k[0] != "_"})
             for o in ours]
    assert [_summary_ours(o) for o in plain] == [_summary_torchair(o) for o in theirs]
    assert [o for o in theirs if o.type == "PrintV2"][0].attr["_kernel"].s == b"extend"
    assert [o for o in ours if o.type == "PrintV2"][0].attrs["_kernel"] == ("String", "extend")
