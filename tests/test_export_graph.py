"""dynamo_export's GE graph in TorchAir's terms (the models and expectations of TorchAir's
tests/st/torchair_export_st.py; tests/npu/real/test_export_vs_torchair.py compares the same
exports with torch_npu's TorchAir): symbolic sizes read from tensors or packed into inputs,
the inputs a model writes as RefData, dtype promotion as TorchAir's converters write it,
weights in files past protobuf's limit, collectives and the ATC configuration of a
two-process export, and a TorchAir script's spawned workers under op_sdk.as_torchair."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import op_sdk
from op_sdk.compiler import export
from tests.export_models import cases, node_names, op_counts
from tests.test_converters import parse_graphdef

pytestmark = pytest.mark.filterwarnings("ignore:op_sdk.dynamo_export")


def _export(path, name=None, case=None, **kw):
    model, args, dynamic = case or cases()[name]
    torch._dynamo.reset()
    op_sdk.dynamo_export(*args, model=model, export_path=str(path), dynamic=dynamic, **kw)
    text = (path / "dynamo.pbtxt").read_text()
    return text, parse_graphdef(text), args


def _attr(node, key, field):
    return node["attr"][key][field][0]


def test_a_size_of_an_input_is_read_from_the_tensor_and_is_no_output(tmp_path):
    text, nodes, _ = _export(tmp_path, "size_out")
    assert op_counts(text) == {"Add": 1, "Const": 1, "Data": 2, "Gather": 1, "NetOutput": 1,
                               "Shape": 1}
    assert node_names(text, "Data") == ["x", "y"]  # the model's argument names
    assert nodes["Shape"]["input"] == ["x:0"] and _attr(nodes["Shape"], "dtype", "i") == "9"
    assert nodes["Gather"]["input"] == ["Shape:0", "Const:0"]  # dim 1 of x
    assert _attr(nodes["Const"], "_readable_value", "s") == '"1"'
    assert nodes["NetOutput"]["input"] == ["Add:0"]  # the size returned is not a graph output


def test_lists_of_sizes_are_packed_and_host_sizes_become_one_input(tmp_path):
    """TorchAir's test_export_with_sym_pack: x (6) is no tensor's size: an input; [x] and
    [x, x] are each one int64 input of the packed sizes (shared by the two views by [x]);
    [4, y, y] packs a constant and y read from p; stack is a Pack too."""
    text, nodes, _ = _export(tmp_path, "size_pack")
    assert node_names(text, "Data") == ["p", "z", "m", "n", "Data", "Data_1"]
    assert [int(_attr(nodes[n], "index", "i")) for n in node_names(text, "Data")] == list(range(6))
    assert [nodes[n]["attr"]["[o]y"]["shape"][0]["dim"] for n in ("Data", "Data_1")] == [["1"], ["2"]]
    assert {nodes[n]["attr"]["[o]y"]["dtype"][0] for n in ("Data", "Data_1")} == {"DT_INT64"}
    reshapes = {n: v["input"] for n, v in nodes.items() if v["op"] == "Reshape"}
    assert reshapes["Reshape"] == ["p:0", "Data:0"] and reshapes["Reshape_1"] == ["z:0", "Data:0"]
    assert reshapes["Reshape_3"] == ["m:0", "Data_1:0"]
    packs = {n: v["input"] for n, v in nodes.items() if v["op"] == "Pack"}
    assert sorted(map(len, packs.values())) == [3, 4]
    (sizes,) = [i for i in packs.values() if len(i) == 3]
    assert sizes[1:] == ["Gather:0", "Gather:0"] and nodes["Shape"]["input"] == ["p:0"]
    assert op_counts(text)["ReduceSum"] == 2 and op_counts(text)["Cast"] == 2


def test_sizes_computed_in_the_graph_are_int64_scalars(tmp_path):
    """Arithmetic on sizes is written on int64 scalars (no Cast: a size is int64), a list
    holding a computed size is a Pack; full / zeros of it are Fills; a sum over an empty
    tensor is zeros of its (static) shape; a full of no size is its constant."""
    text, nodes, _ = _export(tmp_path / "sizes", "sizes_computed")
    assert op_counts(text) == {"Add": 1, "Const": 4, "Data": 1, "Fill": 2, "Gather": 2, "Mul": 1,
                               "NetOutput": 1, "Pack": 3, "Reshape": 1, "Shape": 2}
    assert nodes["Mul"]["input"] == ["Gather:0", "Gather_1:0"]
    assert nodes["Reshape"]["input"] == ["x:0", "Pack:0"] and nodes["Pack"]["input"] == ["Mul:0"]
    zeros = nodes[nodes["Fill_1"]["input"][1].split(":")[0]]
    assert zeros["attr"]["[o]"]["dtype"] == ["DT_INT32"]
    text, nodes, _ = _export(tmp_path / "empty", "empty_sum")
    assert node_names(text, "Data") == ["x"]  # e's only use is its static size
    dims = nodes[nodes["Fill"]["input"][0].split(":")[0]]
    assert _attr(dims, "_readable_value", "s") == '"[5]"'
    assert op_counts(text)["ReduceSum"] == 1 and op_counts(text)["Const"] == 4
    assert nodes["NetOutput"]["input"][2] == "Const_3:0"  # torch.full([], 3)


def test_an_unread_input_is_left_out_and_the_rest_renumbered(tmp_path):
    class SecondOnly(torch.nn.Module):
        def forward(self, x, y):
            return y * 3

    text, nodes, _ = _export(tmp_path, case=(SecondOnly(), (torch.randn(2), torch.randn(2)), False))
    assert node_names(text, "Data") == ["y"] and _attr(nodes["y"], "index", "i") == "0"


def _first_input(self, other, *, alpha=1, meta_outputs=None):
    return self


@pytest.mark.parametrize("loaded_first", [True, False], ids=["after op_sdk's", "before op_sdk's"])
def test_a_scripts_converter_for_an_aten_operator_replaces_op_sdks(tmp_path, loaded_first):
    """As in TorchAir, a converter a script registers for an aten operator is the one used
    from then on, whether op_sdk's own converters were loaded before it (a compile ran) or are
    loaded after it (op_sdk loads them at the first conversion; TorchAir at import). This is
    what TorchAir's test_torch_uint_16_32_64 counts: after its test_lite_export has made
    aten.add's converter return its first input, add(x, y) of two uint16 inputs exports as one
    Data read by the NetOutput (the unread y left out)."""
    import importlib

    from op_sdk.converters import aten as own_aten
    from op_sdk.converters.registry import _CONVERTERS, load_slices

    op = torch.ops.aten.add.Tensor
    load_slices()
    saved = _CONVERTERS[op]
    try:
        if not loaded_first:
            _CONVERTERS.pop(op)
        op_sdk.register_fx_node_ge_converter(op)(_first_input)
        if not loaded_first:
            importlib.reload(own_aten)  # op_sdk's converters registered after the script's
        assert _CONVERTERS[op] is _first_input
        text, nodes, _ = _export(tmp_path, "uint16")
    finally:
        _CONVERTERS[op] = saved
    assert op_counts(text) == {"Data": 1, "NetOutput": 1}
    assert nodes["NetOutput"]["input"] == ["x:0"]
    assert text.count("dtype: DT_UINT16") == 3  # Data's input and output, NetOutput's input
    text, _, _ = _export(tmp_path / "again", "uint16")  # op_sdk's own converter again
    assert op_counts(text) == {"Add": 1, "Data": 2, "NetOutput": 1}


def test_inputs_the_model_writes_are_refdata_named_as_torchair(tmp_path):
    text, nodes, (x, y) = _export(tmp_path / "one", "writes_one")
    ref = f"RefData_2_4_4_1_0_{id(y)}"  # shape, stride, offset, the tensor passed
    assert node_names(text, "RefData") == [ref] and node_names(text, "Data") == ["x"]
    assert _attr(nodes[ref], "_origin_data_name", "s") == '"y"'  # the Data it replaces
    assert nodes["Add"]["input"][0] == f"{ref}:0" and nodes["NetOutput"]["input"] == ["Add:0"]
    assert "OpSdkUnconverted" not in text  # the write-back is the graph's result itself
    text, _, (x, _) = _export(tmp_path / "both", "writes_both")  # one tensor passed twice
    assert node_names(text, "RefData") == [f"RefData_2_4_4_1_0_{id(x)}"]
    assert node_names(text, "Data") == []


def test_mixed_dtypes_are_cast_as_torchairs_converters_write_them(tmp_path):
    """TorchAir's test_export_bf16, with its counts."""
    text, nodes, _ = _export(tmp_path, "bf16")
    assert op_counts(text) == {"Add": 2, "Cast": 3, "Const": 3, "Data": 2, "Fill": 1, "Muls": 1,
                               "NetOutput": 1}
    assert text.count("dtype: DT_BF16") == 13 and text.count("  dim: 10") == 4
    fill = nodes["Fill"]
    dims, value = (nodes[i.split(":")[0]] for i in fill["input"])
    assert _attr(dims, "_readable_value", "s") == '"[2, 4]"'
    assert value["attr"]["[o]"]["dtype"] == ["DT_FLOAT16"] and _attr(value, "_readable_value", "s") == '"1"'
    casts = {n: _attr(v, "dst_type", "i") for n, v in nodes.items() if v["op"] == "Cast"}
    assert sorted(casts.values()) == ["0", "0", "27"]  # both operands to float32, Muls' to bf16
    assert _attr(nodes["Muls"], "value", "f") == "2.0" and nodes["Muls"]["input"] == ["p1:0"]


def test_weights_past_protobufs_limit_are_written_to_files(tmp_path, monkeypatch):
    """TorchAir's test_export_weight_externalized: a FileConstant per weight, its bytes in
    ``{path}/{name}``; below the limit the weight is a Const holding its bytes."""
    case = cases()["weight"]
    text, _, _ = _export(tmp_path / "const", case=case)
    assert op_counts(text)["Const"] == 1 and "FileConstant" not in text
    assert sorted(os.listdir(tmp_path / "const")) == ["dynamo.pbtxt"]
    monkeypatch.setattr(export, "MAX_GRAPH_BYTES", 10)
    text, nodes, _ = _export(tmp_path / "file", case=case)
    assert op_counts(text) == {"Add": 1, "Cast": 1, "Data": 2, "FileConstant": 1, "Muls": 1,
                               "NetOutput": 1}
    weight = nodes["p1"]
    path = str(tmp_path / "file" / "p1")
    assert _attr(weight, "file_path", "s") == f'"{path}"'
    assert weight["attr"]["shape"]["list"][0]["i"] == ["10", "10", "10"]
    assert _attr(weight, "dtype", "dt") == "1"  # DT_FLOAT16
    model = case[0]
    assert np.array_equal(np.fromfile(path, dtype=np.float16).reshape(10, 10, 10),
                          model.p1.detach().numpy())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_two_process_export_writes_collectives_rank_folders_and_atc_config(tmp_path):
    """TorchAir's test_export_with_allreduce / _with_atc_config_generated, their counts."""
    import torch.multiprocessing as mp

    from tests import export_worker

    mp.spawn(export_worker.run, args=(2, _free_port(), "op_sdk", str(tmp_path)), nprocs=2)
    read = lambda *p: tmp_path.joinpath(*p).read_text()  # noqa: E731
    for rank in (0, 1):
        one = read("one_group", f"rank_{rank}", "dynamo.pbtxt")
        assert op_counts(one) == {"Add": 3, "Cast": 1, "Const": 2, "Data": 2, "HcomAllReduce": 1,
                                  "Identity": 1, "NetOutput": 1}
        (hcom,) = [n for n in parse_graphdef(one).values() if n["op"] == "HcomAllReduce"]
        assert _attr(hcom, "group", "s") == '"tag=ptd:0;rank_list=0,1"'
        assert _attr(hcom, "reduction", "s") == '"sum"' and _attr(hcom, "fusion", "i") == "0"
    assert read("groups", "rank_0", "dynamo.pbtxt").count('op: "HcomAllReduce"') == 4
    assert read("groups_dynamic_atc", "rank_0", "dynamo.pbtxt").count(" dim: -1") == 4
    scatter = read("scatter", "rank_0", "dynamo.pbtxt")
    assert scatter.count("HcomReduceScatter") == 3 and op_counts(scatter)["RefData"] == 1
    assert not (tmp_path / "groups" / "model_relation_config.json").exists()  # (not asked)
    relation = read("one_group_atc", "model_relation_config.json")
    assert relation.count('"submodel_name": "export0.air"') == 2
    assert relation.count('"group_rank_list": "[0, 1]"') == 1
    assert relation.count("model_instance_id") == 4 and "0:0:0" in relation and "0:0:1" in relation
    numa = json.loads(read("one_group_atc", "numa_config.json"))
    assert [i["item_id"] for i in numa["cluster"][0]["cluster_nodes"][0]["item_list"]] == [0, 1]
    groups = json.loads(read("groups_dynamic_atc", "model_relation_config.json"))["comm_group"]
    assert [g["group_name"] for g in groups] == [f"tag={t};rank_list=0,1" for t in
                                                 ("test1", "test2", "test3")]


def test_a_torchair_scripts_spawned_workers_and_subprocesses_resolve_torchair(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import subprocess, sys
        import torch

        def work(rank):
            import torchair
            from torchair.configs.compiler_config import CompilerConfig
            import npugraph_ex
            print("worker", rank, torchair.__name__, npugraph_ex.__name__, CompilerConfig.__module__)

        if __name__ == "__main__":
            import torchair
            print("main", torchair.__name__)
            torch.multiprocessing.spawn(work, nprocs=2)
            print(subprocess.run([sys.executable, "-c", "import torchair; print('sub', torchair.__name__)"],
                                 capture_output=True, text=True, check=True).stdout.strip())
    """))
    out = subprocess.run([sys.executable, "-m", "op_sdk.as_torchair", str(script)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = sorted(out.stdout.split("\n"))
    assert [line for line in lines if line] == [
        "main op_sdk", "sub op_sdk", *(f"worker {r} op_sdk op_sdk.npugraph_ex op_sdk.compiler.config"
                                       for r in (0, 1))]
    # without the command, a plain process has no torchair
    plain = subprocess.run([sys.executable, "-c", "import torchair"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert plain.returncode != 0 and "No module named 'torchair'" in plain.stderr
