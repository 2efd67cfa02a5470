"""The Ascend IR (GE) converters (op_sdk.converters): every operator converts, on every
sample call, to operators whose inputs, outputs and attributes are those of the pinned
prototype table; the table agrees with the Ascend C kernels' own prototypes; the GE IR text
is well formed and says what the graph holds; "pbtxt" graph dumps of compiles.

What needs the real GE schema and TorchAir (the text parsed by ge_ir.proto's ModelDef, the
converters against TorchAir's own and its generated IR) runs in the torch_npu environment:
tests/npu/real/test_converters.py and test_ge_schema_parses_dumps below."""

from __future__ import annotations

import glob
import os
import pathlib
import re
import subprocess
import sys

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import op_sdk
from op_sdk.converters import (UNCONVERTED, ConversionError, GeGraph, convert_fx, converter_for,
                               ge, ir)
from op_sdk.library import registered_ops
from tests import plugin_example
from tests.ops import gather, gather_dict

ROOT = pathlib.Path(__file__).resolve().parent.parent

# what the slices' test files declare (tests/ops/test_<slice>.py): the Ascend IR type(s) each
# operator becomes, the sample calls its converter refuses, the operators with no converter
IR_TYPE = gather_dict("GE_TYPES")
REFUSED = gather_dict("GE_REFUSED")
NO_CONVERTER = gather_dict("NO_GE_CONVERTER")
# GE types whose torch storage is another dtype (TorchAir writes the GE type)
STORED_AS = {"DT_QINT8": "DT_INT8", "DT_QUINT8": "DT_UINT8", "DT_QINT32": "DT_INT32",
             "DT_HIFLOAT8": "DT_UINT8", "DT_FLOAT8_E8M0": "DT_UINT8"}


def _op(name: str):
    ns, _, op = name.rpartition("::")
    return getattr(getattr(torch.ops, ns or "npu"), op).default


def _qualname(name: str) -> str:
    return name if "::" in name else f"npu::{name}"


def fx_of_call(op, args, kwargs) -> torch.fx.GraphModule:
    """An FX graph of one call, with fake values on every node (as Dynamo / AOT make)."""
    leaves, spec = torch.utils._pytree.tree_flatten((args, kwargs))
    index = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]

    def fn(*tensors):
        flat = list(leaves)
        for i, t in zip(index, tensors):
            flat[i] = t
        a, k = torch.utils._pytree.tree_unflatten(flat, spec)
        return op(*a, **k)

    with torch.no_grad():
        return make_fx(fn, tracing_mode="fake")(*[leaves[i].detach() for i in index])


def check_prototypes(graph: GeGraph) -> None:
    """Every operator of ``graph`` as its prototype says: fed inputs in prototype order,
    every required input fed, output names, attribute names / types, required attributes;
    every input reads an existing output."""
    outputs = {op.name: len(op.output_desc) for op in graph.ops}
    for op in graph.ops:
        for ref in op.inputs:
            name, _, index = ref.rpartition(":")
            assert name in outputs and int(index) < outputs[name], (op.name, ref)
        # control edges (no desc): one block, first (TorchAir's ge.<IrType>(dependencies=))
        # or last (custom_op's, the stream scopes')
        control = [i for i in op.inputs if i.endswith(":-1")]
        assert control in (op.inputs[:len(control)], op.inputs[len(op.inputs) - len(control):]), op.name
        data_inputs = len(op.inputs) - len(control)
        if op.type in ir.BUILTIN_TYPES or op.type == UNCONVERTED:
            continue
        proto = ir.prototype(op.type)
        # a dynamic input's tensors are named <input>0, <input>1, ... (TorchAir's names)
        dynamic = {i.name for i in proto.inputs if i.dynamic}
        names = []
        for d in op.input_desc:
            base = d.name.rstrip("0123456789")
            if base not in dynamic:
                names.append(d.name)
            elif not names or names[-1] != base:  # one name per dynamic input
                names.append(base)
        order = [i.name for i in proto.inputs]
        assert names == [n for n in order if n in names], (op.type, names)
        assert {i.name for i in proto.inputs if not i.optional} <= set(names), (op.type, names)
        assert [d.name for d in op.output_desc] == list(proto.outputs), op.type
        assert data_inputs == len(op.input_desc)
        for key, (typ, value) in op.attrs.items():
            if key.startswith("_"):  # scope attributes (stream labels), not the prototype's
                continue
            a = proto.attr(key)
            assert typ == a.type, (op.type, key)
            assert isinstance(value, ir.ATTR_TYPES[a.type]), (op.type, key, value)
        assert {a.name for a in proto.attrs if a.required} <= set(op.attrs), op.type


# -- a small reader of protobuf text, to check the writer independently ----------------------

_TOKEN = re.compile(r'\s*(?:#[^\n]*\n\s*)*("(?:[^"\\]|\\.)*"|[{}:]|[^\s{}:"]+)')


def parse_pbtxt(text: str) -> dict:
    tokens = _TOKEN.findall(text)
    pos = 0

    def message(end):
        nonlocal pos
        fields: dict = {}
        while pos < len(tokens) and tokens[pos] != end:
            name = tokens[pos]
            pos += 1
            if tokens[pos] == ":":
                pos += 1
                value = tokens[pos]
                pos += 1
                fields.setdefault(name, []).append(value)
            else:
                assert tokens[pos] == "{", (name, tokens[pos])
                pos += 1
                fields.setdefault(name, []).append(message("}"))
                pos += 1
        return fields

    out = message(None)
    assert pos == len(tokens)
    return out


def _unquote(s: str) -> str:
    assert s.startswith('"') and s.endswith('"'), s
    return s[1:-1]


def parse_graphdef(text: str, raw: bool = False) -> dict:
    """A ``.pbtxt`` in TorchAir's format (TensorFlow's GraphDef text: dynamo_export's
    dynamo.pbtxt, the "pbtxt" graph dumps): {node name: {"op", "input": [...], "attr": {key:
    the attribute's GE text, parsed (``raw``: as text)}}}, in the file's order."""
    import ast

    nodes = {}
    for block in text.split("node {\n")[1:]:
        lines = block.splitlines()
        node = {"input": [], "attr": {}}
        for i, line in enumerate(lines):
            if line.startswith("    name: "):
                name = ast.literal_eval(line.split(": ", 1)[1])
            elif line.startswith("    op: "):
                node["op"] = ast.literal_eval(line.split(": ", 1)[1])
            elif line.startswith("    input: "):
                node["input"].append(ast.literal_eval(line.split(": ", 1)[1]))
            elif line == "    attr {":
                key = ast.literal_eval(lines[i + 1].strip().split(": ", 1)[1])
                value = ast.literal_eval("b" + lines[i + 3].strip().split(": ", 1)[1]).decode()
                node["attr"][key] = value if raw else parse_pbtxt(value)
        nodes[name] = node
    return nodes


def check_text(graph: GeGraph) -> dict:
    """The graph's GE IR text read back: the same ops, inputs, descriptors and attributes."""
    model = parse_pbtxt(graph.model_pbtxt("m"))
    assert _unquote(model["name"][0]) == "m"
    (g,) = model["graph"]
    ops = g.get("op", [])
    assert len(ops) == len(graph.ops)
    for text_op, op in zip(ops, graph.ops):
        assert _unquote(text_op["name"][0]) == op.name
        assert _unquote(text_op["type"][0]) == op.type
        assert [_unquote(i) for i in text_op.get("input", [])] == op.inputs
        assert [_unquote(a["key"][0]) for a in text_op.get("attr", [])] == list(op.attrs)
        for field, descs in (("input_desc", op.input_desc), ("output_desc", op.output_desc)):
            got = text_op.get(field, [])
            assert [_unquote(d["name"][0]) if "name" in d else "" for d in got] == \
                [d.name for d in descs]
            assert [d["dtype"][0] for d in got] == [d.dtype for d in descs]
            assert [[int(x) for x in d["shape"][0].get("dim", [])] if "shape" in d else None
                    for d in got] == [list(d.shape) if d.shape is not None else None
                                      for d in descs]
    return model


# -- every operator, every sample ----------------------------------------------------------------


def test_every_operator_has_a_converter_or_a_reason():
    for opdef in registered_ops():
        if not opdef.module.startswith("op_sdk.ops."):
            continue  # a plugin or test operator defined in this process
        if opdef.qualname in NO_CONVERTER:
            assert converter_for(opdef.op) is None
            continue
        assert converter_for(opdef.op) is not None, opdef.qualname
        assert opdef.qualname in IR_TYPE, opdef.qualname


SAMPLES = [pytest.param(name, args, kwargs, id=f"{name}-{i}")
           for i, (name, args, kwargs) in enumerate(gather("samples"))
           if _qualname(name) not in NO_CONVERTER]


@pytest.mark.parametrize("name,args,kwargs", SAMPLES)
def test_sample_converts_to_its_prototypes(name, args, kwargs):
    qualname = _qualname(name)
    gm = fx_of_call(_op(name), args, kwargs)
    try:
        graph = convert_fx(gm, qualname)
    except ConversionError as e:
        refused = REFUSED.get(qualname, ())
        assert any(r in str(e) for r in refused), e
        assert qualname.split("::")[1] in str(e)  # names the operator
        return
    types = [op.type for op in graph.ops]
    want = IR_TYPE[qualname]
    assert any(t in (want if isinstance(want, tuple) else (want,)) for t in types), types
    assert UNCONVERTED not in types
    check_prototypes(graph)
    check_text(graph)
    # every graph output is fed by a converted tensor with the FX value's dtype and shape
    (net,) = [op for op in graph.ops if op.type == "NetOutput"]
    val = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    vals = [v.meta["val"] for v in (val if isinstance(val, (list, tuple)) else [val])]
    assert len(net.input_desc) == len(vals)
    for d, v in zip(net.input_desc, vals):
        if d.shape != (0,):  # an output switched off is an empty constant, as in TorchAir
            assert STORED_AS.get(d.dtype, d.dtype) == ir.proto_dtype(v.dtype), (d, v.dtype)
            assert list(d.shape) == list(v.shape)


def test_add_rms_norm_quant_inputs_by_name():
    """The operator's argument order is not the prototype's: inputs go by name."""
    x = torch.randn(4, 32, dtype=torch.bfloat16)
    g = torch.rand(32, dtype=torch.bfloat16)
    s1, s2 = torch.rand(32, dtype=torch.bfloat16) + 0.5, torch.rand(32, dtype=torch.bfloat16) + 0.5
    z1 = torch.randn(32, dtype=torch.bfloat16)
    beta = torch.randn(32, dtype=torch.bfloat16)
    gm = fx_of_call(torch.ops.npu.npu_add_rms_norm_quant.default, (x, x, g, s1, z1),
                    {"beta": beta, "scales2": s2, "epsilon": 1e-5, "div_mode": False})
    graph = convert_fx(gm)
    (op,) = [o for o in graph.ops if o.type == "AddRmsNormQuant"]
    assert [d.name for d in op.input_desc] == ["x1", "x2", "gamma", "scales1", "scales2",
                                               "zero_points1", "beta"]
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    assert op.inputs == [f"{p}:0" for p in (placeholders[0], placeholders[1], placeholders[2],
                                             placeholders[3], placeholders[6], placeholders[4],
                                             placeholders[5])]
    assert op.attr_values() == {"epsilon": 1e-5, "div_mode": False, "dst_type": 2} or \
        op.attr_values() == {"epsilon": 1e-5, "div_mode": False}
    assert "axis" not in op.attrs  # the prototype default -1: left out, as TorchAir does
    assert [d.dtype for d in op.output_desc] == ["DT_INT8", "DT_INT8", "DT_BF16"]


def test_attribute_defaults_left_out_and_values_typed():
    x = torch.randn(3, 16, dtype=torch.float16)
    g = torch.rand(16, dtype=torch.float16)
    default = convert_fx(fx_of_call(torch.ops.npu.npu_rms_norm.default, (x, g), {}))
    set_ = convert_fx(fx_of_call(torch.ops.npu.npu_rms_norm.default, (x, g), {"epsilon": 0.25}))
    (a,) = [o for o in default.ops if o.type == "RmsNorm"]
    (b,) = [o for o in set_.ops if o.type == "RmsNorm"]
    assert a.attrs == {} and b.attrs == {"epsilon": ("Float", 0.25)}
    text = set_.model_pbtxt("m")
    assert 'key: "epsilon"' in text and "f: 0.25" in text


def test_dynamic_quant_picks_the_ir_by_mode():
    x = torch.randn(5, 64, dtype=torch.bfloat16)
    per_token = convert_fx(fx_of_call(torch.ops.npu.npu_dynamic_quant.default, (x,), {}))
    assert "DynamicQuant" in [o.type for o in per_token.ops]
    per_tensor = convert_fx(fx_of_call(torch.ops.npu.npu_dynamic_quant.default, (x,),
                                       {"quant_mode": "pertensor"}))
    (op,) = [o for o in per_tensor.ops if o.type == "DynamicQuantV2"]
    assert op.attr_values()["quant_mode"] == "pertensor"
    assert op.attr_values()["is_symmetrical"] is True


def test_output_mask_switches_outputs_to_empty_constants():
    x = torch.randn(4, 32, dtype=torch.float16)
    g = torch.rand(32, dtype=torch.float16)
    gm = fx_of_call(torch.ops.npu.npu_add_rms_norm_dynamic_quant.default, (x, x, g),
                    {"output_mask": [True, False]})
    graph = convert_fx(gm)
    (op,) = [o for o in graph.ops if o.type == "AddRmsNormDynamicQuant"]
    assert op.attrs["output_mask"] == ("ListBool", [True, False])
    (net,) = [o for o in graph.ops if o.type == "NetOutput"]
    fed = [graph.op(i.rpartition(":")[0]).type for i in net.inputs]
    assert fed == ["AddRmsNormDynamicQuant", "Const", "AddRmsNormDynamicQuant",
                   "AddRmsNormDynamicQuant", "Const"]


# -- the builder's checks --------------------------------------------------------------------------


def test_builder_rejects_what_the_prototype_lacks():
    with GeGraph() as g:
        x = g.data(0, torch.float16, [2, 8])
        gamma = g.data(1, torch.float16, [8])
        with pytest.raises(ConversionError, match=r"AddRmsNorm: required input 'gamma'"):
            ge.AddRmsNorm(x, x)
        with pytest.raises(ConversionError, match=r"RmsNorm has no input or attribute 'eps'"):
            ge.RmsNorm(x, gamma, eps=1e-5)
        with pytest.raises(ConversionError, match=r"attribute 'epsilon' \(Float\) must be a float"):
            ge.RmsNorm(x, gamma, epsilon="small")
        with pytest.raises(ConversionError, match=r"attribute 'output_mask' \(ListBool\)"):
            ge.AddRmsNormDynamicQuant(x, x, gamma, output_mask=[1, 0])
        with pytest.raises(ConversionError, match=r"Quantize: required attribute 'dtype'"):
            ge.Quantize(x, gamma)
        with pytest.raises(ConversionError, match=r"input 'gamma' must be a GE tensor"):
            ge.RmsNorm(x, 1.0)
        with pytest.raises(ConversionError, match=r"RmsNorm takes 2 inputs"):
            ge.RmsNorm(x, gamma, gamma)
        with pytest.raises(AttributeError, match=r"ge.AddRmsNormV9: no Ascend IR prototype"):
            ge.AddRmsNormV9(x)
    with pytest.raises(ConversionError, match="no graph is being built"):
        ge.RmsNorm(x, gamma)


def test_unconverted_node_strict_error_and_dump_placeholder():
    def f(x, g):
        y, _ = torch.ops.npu.npu_rms_norm(x, g)
        return torch.sin(y)

    gm = make_fx(f, tracing_mode="fake")(torch.randn(2, 8), torch.rand(8))
    with pytest.raises(ConversionError, match=r"no converter for aten\.sin\.default \(FX node "
                                              r"'sin'\)"):
        convert_fx(gm)
    graph = convert_fx(gm, strict=False)
    (op,) = [o for o in graph.ops if o.type == UNCONVERTED]
    assert op.attrs["_fx_target"] == ("String", "aten.sin.default")
    assert [d.name for d in op.input_desc] == ["x0"] and op.output_desc[0].dtype == "DT_FLOAT"
    assert graph.unconverted == {"aten.sin.default": 1}
    text = graph.model_pbtxt("m")
    assert text.startswith("# 1 node(s) with no GE converter")
    check_text(graph)


# -- the IR prototypes against the Ascend C kernels' prototypes ---------------------------------------

_REG = re.compile(r"REG_OP\((\w+)\)(.*?)\.OP_END_FACTORY_REG", re.S)
_ITEM = re.compile(r"\.(INPUT|OPTIONAL_INPUT|DYNAMIC_INPUT|OUTPUT|ATTR|REQUIRED_ATTR)\(([^)]*\)?)\)")


def _default(text: str, typ: str):
    text = text.strip()
    if typ == "Float":
        return float(text.rstrip("f"))
    if typ == "Bool":
        return {"true": True, "false": False}[text]
    if typ == "String":
        return text.strip('"')
    if typ.startswith("List"):
        assert text == "{}", text
        return []
    return ir.GE_DTYPE[text] if text.startswith("DT_") else int(text)


def _plugin():
    return plugin_example.load()


def test_ascendc_prototypes_match_the_declared_ones():
    _plugin()  # registers SiluMulQuant's prototype
    from op_sdk.app.deliverables import ascendc_root

    root = ascendc_root()  # the installed package's copy, or the source tree's
    assert root is not None
    headers = sorted(glob.glob(os.path.join(root, "*", "op_graph", "*_proto.h")))
    assert len(headers) >= 9
    # and the worked example's (a user project's kernels/ascendc)
    headers += glob.glob(str(plugin_example.PROJECT / "kernels" / "ascendc" / "*" / "op_graph" / "*_proto.h"))
    assert any(h.endswith("silu_mul_quant_proto.h") for h in headers)
    for header in headers:
        (m,) = _REG.findall(pathlib.Path(header).read_text())
        name, body = m
        proto = ir.prototype(name)
        inputs, outputs, attrs = [], [], []
        for kind, arg in _ITEM.findall(body):
            parts = [p.strip() for p in re.split(r",(?![^{(]*[)}])", arg)]
            if kind.endswith("INPUT"):
                inputs.append(ir.IrInput(parts[0], optional=kind == "OPTIONAL_INPUT",
                                         dynamic=kind == "DYNAMIC_INPUT"))
            elif kind == "OUTPUT":
                outputs.append(parts[0])
            elif kind == "REQUIRED_ATTR":
                attrs.append(ir.IrAttr(parts[0], parts[1]))
            else:
                attrs.append(ir.IrAttr(parts[0], parts[1], _default(parts[2], parts[1])))
        assert tuple(inputs) == proto.inputs, header
        assert tuple(outputs) == proto.outputs, header
        assert tuple(attrs) == proto.attrs, header


def test_plugin_operator_converts():
    _plugin()
    gate = torch.randn(3, 16, dtype=torch.bfloat16)
    gm = fx_of_call(torch.ops.my_ops.silu_mul_quant.default, (gate, gate), {})
    graph = convert_fx(gm)
    (op,) = [o for o in graph.ops if o.type == "SiluMulQuant"]
    assert [d.name for d in op.input_desc] == ["gate", "up"]
    assert [(d.name, d.dtype) for d in op.output_desc] == [("y", "DT_INT8"), ("scale", "DT_FLOAT")]
    check_prototypes(graph)


def test_register_prototype_refuses_a_silent_change():
    p = ir.prototype("RmsNorm")
    with pytest.raises(ValueError, match="already registered with a different prototype"):
        ir.register_prototype(ir.IrPrototype("RmsNorm", p.inputs, ("y",)))
    assert ir.register_prototype(p) is p


# -- "pbtxt" graph dumps of compiles -------------------------------------------------------------------


def _block(x1, x2, gamma):
    y, _, x = torch.ops.npu.npu_add_rms_norm(x1, x2, gamma)
    q, s = torch.ops.npu.npu_dynamic_quant(y)
    return q, s, x * 2


@pytest.mark.parametrize("mode", ["max-autotune", "reduce-overhead"])
def test_pbtxt_dump_of_a_compile(tmp_path, mode):
    torch._dynamo.reset()
    cfg = op_sdk.CompilerConfig()
    cfg.mode = mode
    cfg.debug.graph_dump.type = "pbtxt"
    cfg.debug.graph_dump.path = str(tmp_path)
    backend = op_sdk.get_npu_backend(compiler_config=cfg)
    x1 = torch.randn(8, 64, dtype=torch.bfloat16)
    x2, gamma = torch.randn_like(x1), torch.rand(64, dtype=torch.bfloat16)
    torch.compile(_block, backend=backend)(x1, x2, gamma)
    files = sorted(tmp_path.iterdir())
    assert len(files) == 1 and files[0].suffix == ".pbtxt", files  # one, after the last pass
    assert "_ge_rank_0_pid_" in files[0].name
    types = [n["op"] for n in parse_graphdef(files[0].read_text()).values()]
    assert "AddRmsNormDynamicQuant" in types  # the fusion fired before the dump
    assert "AddRmsNorm" not in types and "DynamicQuant" not in types
    assert types.count("Data") == 3 and types[-1] == "NetOutput"
    assert backend.last_report.graphs[0].stages[-1].dumps == [str(files[0])]
    torch._dynamo.reset()


def test_pbtxt_dump_keeps_symbolic_sizes_and_every_dtype_torchair_maps(tmp_path):
    """A dynamic compile's dump writes its symbolic sizes as -1 without specialising them
    (a second size reuses the graph: one compile, one dump); the dtypes TorchAir maps to GE
    (complex32, float8_e8m0fnu among them) are written."""
    from torch._dynamo.utils import counters
    from torch._inductor import config as iconfig

    cfg = op_sdk.CompilerConfig()
    cfg.debug.graph_dump.type = "pbtxt"
    cfg.debug.graph_dump.path = str(tmp_path)
    backend = op_sdk.get_npu_backend(compiler_config=cfg)
    torch._dynamo.reset()
    counters.clear()
    with iconfig.patch(fx_graph_cache=False):
        f = torch.compile(lambda x, y: x * 2 + y, backend=backend, dynamic=True)
        for n in (3, 4, 6):
            f(torch.randn(n, 5), torch.randn(n, 5))
        assert counters["stats"]["unique_graphs"] == 1
        (dump,) = tmp_path.iterdir()
        nodes = parse_graphdef(dump.read_text())
        tensor_data = [n for n in nodes.values() if n["op"] == "Data"
                       and n["attr"]["[o]y"]["shape"][0] != {}]
        assert len(tensor_data) == 2
        assert all(n["attr"]["[o]y"]["shape"][0]["dim"] == ["-1", "-1"] for n in tensor_data)
        dump.unlink()
        g = torch.compile(lambda x: (x.to(torch.complex32), x.to(torch.float8_e8m0fnu)),
                          backend=backend, dynamic=False)
        g(torch.rand(3) + 0.5)
    (dump,) = tmp_path.iterdir()
    dtypes = {n["attr"]["[o]y"]["dtype"][0] for n in parse_graphdef(dump.read_text()).values()
              if "[o]y" in n["attr"]}
    assert {"DT_COMPLEX32", "DT_FLOAT8_E8M0"} <= dtypes
    torch._dynamo.reset()


def _demo_dump(path: pathlib.Path) -> list[str]:
    """A max-autotune compile of the embedded demo model (frozen parameters, as the demo
    runs it; two layers to keep it short) dumped as "pbtxt"."""
    from op_sdk.app.models import DecoderConfig, DeepSeekW8A8

    torch._dynamo.reset()
    model = DeepSeekW8A8(DecoderConfig(layers=2)).eval()
    cfg = op_sdk.CompilerConfig()
    cfg.experimental_config.frozen_parameter = True
    cfg.debug.graph_dump.type = "pbtxt"
    cfg.debug.graph_dump.path = str(path)
    compiled = torch.compile(model, backend=op_sdk.get_npu_backend(compiler_config=cfg))
    with torch.no_grad():
        compiled(model.example_tokens(1, 4))
    torch._dynamo.reset()
    return sorted(str(p) for p in path.iterdir())


@pytest.fixture(scope="module")
def demo_dump(tmp_path_factory):
    return _demo_dump(tmp_path_factory.mktemp("demo_pbtxt"))


def test_demo_model_pbtxt(demo_dump):
    (file,) = demo_dump
    text = pathlib.Path(file).read_text()
    types = [n["op"] for n in parse_graphdef(text).values()]
    for fused in ("AddRmsNormDynamicQuant", "QuantBatchMatmulV3", "TransposeBatchMatMul"):
        assert fused in types, (fused, sorted(set(types)))
    assert types[-1] == "NetOutput"
    # every node is either converted or a documented placeholder, listed at the top
    listed = re.findall(r"(\S+\.\S+\.\S+) x(\d+)", text.split("\n", 1)[0])
    assert sum(int(n) for _, n in listed) == types.count(UNCONVERTED)


@pytest.mark.torch_npu_real
def test_ge_schema_parses_dumps(demo_dump, tmp_path):
    """The demo's dump (TorchAir's GraphDef form: each attribute's text parsed as GE's
    AttrDef, each descriptor's as its TensorDescriptor) and a dump of every sample call
    (GE's ModelDef text), parsed by the GE schema of the torch-npu wheel (ge_ir.proto,
    TorchAir's generated module)."""
    import json
    from tests.npu.ge_schema import prepare_protobuf
    from tests.npu.torch_npu_env import prepare

    env, why = prepare()
    if env is None:
        pytest.skip(why)
    protobuf, why = prepare_protobuf()
    if protobuf is None:
        pytest.skip(why)
    demo = tmp_path / "demo.json"
    demo.write_text(json.dumps(parse_graphdef(pathlib.Path(demo_dump[0]).read_text(), raw=True)))
    files = [str(demo)]
    for i, (name, args, kwargs) in enumerate(gather("samples")):
        if _qualname(name) in NO_CONVERTER:
            continue
        try:
            graph = convert_fx(fx_of_call(_op(name), args, kwargs), f"sample_{i}")
        except ConversionError:
            continue
        file = tmp_path / f"sample_{i}.pbtxt"
        file.write_text(graph.model_pbtxt(f"sample_{i}"))
        files.append(str(file))
    script = (
        "import json, sys, torch, torch_npu\n"
        "assert torch.npu.is_available() is False\n"
        "from google.protobuf import text_format\n"
        "from torchair._ge_concrete_graph.ge_ir_pb2 import AttrDef, ModelDef, TensorDescriptor\n"
        "out = {}\n"
        "for f in sys.argv[1:]:\n"
        "    if f.endswith('.json'):\n"
        "        out[f] = []\n"
        "        for node in json.load(open(f)).values():\n"
        "            for key, text in node['attr'].items():\n"
        "                text_format.Parse(text, TensorDescriptor() if key[:3] in ('[i]', '[o]')\n"
        "                                  else AttrDef())\n"
        "            out[f].append((node['op'], [k[3:] for k in node['attr'] if k[:3] == '[i]'],\n"
        "                           sum(k[:3] == '[o]' for k in node['attr'])))\n"
        "        continue\n"
        "    m = text_format.Parse(open(f).read(), ModelDef())\n"
        "    out[f] = [(op.type, [d.name for d in op.input_desc], len(op.output_desc))\n"
        "              for op in m.graph[0].op]\n"
        "print(json.dumps(out))\n")
    res = subprocess.run([sys.executable, "-c", script, *files], capture_output=True, text=True,
                         env=env.environ([protobuf]), timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]

    parsed = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(parsed) == len(files) > 20
    demo_types = {t for t, _, _ in parsed[str(demo)]}
    assert {"AddRmsNormDynamicQuant", "QuantBatchMatmulV3", "TransposeBatchMatMul"} <= demo_types
    for f, ops in parsed.items():
        if f in demo_dump:
            continue
        assert ops[-1][0] == "NetOutput" and any(t not in ("Data", "Const", "NetOutput")
                                                 for t, _, _ in ops), f


def test_import_op_sdk_does_not_import_converters():
    code = "import sys, op_sdk; print('op_sdk.converters' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.stdout.strip() == "False", res.stderr
