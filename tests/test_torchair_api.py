"""TorchAir's public API under ``import op_sdk as torchair``: the converter API (``ge``:
custom_op in both forms, Const, Cast, Clone, DataType, Format, Tensor, TensorSpec, attr),
``get_compiler``, ``dynamo_export``, ``register_fx_node_ge_converter``, ``patch_for_hcom``,
in TorchAir's terms (its documented signatures and examples); and which names of TorchAir's
public-API list op_sdk has (docs/torchair.md lists the rest, with the reason)."""

from __future__ import annotations

import logging
import os
import warnings

import pytest
import torch
from torch._functorch.aot_autograd import aot_module_simplified
from torch.fx.experimental.proxy_tensor import make_fx

import op_sdk as torchair
from op_sdk import ge
from op_sdk.converters import ConversionError, GeGraph, convert_fx
from tests.test_converters import _unquote, check_text, parse_graphdef

# TorchAir's public-API names (tests/st/allowlist_for_publicAPI.json at fced8842), module by
# module, with torchair -> op_sdk; "npugraph_ex" is op_sdk.npugraph_ex
PUBLIC = {
    "op_sdk": ["CompilerConfig", "dynamo_export", "get_compiler", "get_npu_backend",
               "use_internal_format_weight", "register_fx_node_ge_converter", "patch_for_hcom",
               "register_replacement", "npu_format_cast_via_cpu"],
    "op_sdk.ge": ["custom_op", "Const", "Cast", "DataType", "Format", "Tensor", "TensorSpec",
                  "Clone"],
    "op_sdk.ge.attr": ["Bool", "DataType", "Float", "Int", "ListBool", "ListDataType",
                       "ListFloat", "ListInt", "ListListFloat", "ListListInt", "ListStr", "Str"],
    "op_sdk.inference": ["set_dim_gears", "cache_compile", "readable_cache"],
    "op_sdk.llm_datadist": ["create_npu_tensors"],
    "op_sdk.ops": ["npu_print", "record", "wait", "npu_create_tagged_event",
                   "npu_tagged_event_record", "npu_tagged_event_wait", "npu_record_tagged_stream",
                   "npu_fused_infer_attention_score", "npu_fused_infer_attention_score_v2"],
    "op_sdk.scope": ["npu_wait_tensor", "npu_stream_switch", "super_kernel", "limit_core_num",
                     "op_never_timeout", "data_dump"],
    "op_sdk.npugraph_ex": ["CompilerConfig", "compile_fx", "get_compiler", "get_npu_backend",
                           "register_replacement"],
    "op_sdk.tools.gegraph_check.align_trace": ["align_trace_json"],
    "op_sdk.tools.gegraph_check.deadlock_check": ["deadlock_check"],
    "op_sdk.tools.gegraph_check.filter_operators": ["filter_comm_ops"],
}
# the rest of TorchAir's list: not provided yet (docs/torchair.md, "Not provided")
NOT_PROVIDED: dict[str, list[str]] = {}


def _resolve(module: str, name: str):
    import importlib

    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None
    return getattr(mod, name, None)


@pytest.mark.parametrize("module,name", [(m, n) for m, names in PUBLIC.items() for n in names])
def test_public_name_is_there(module, name):
    assert _resolve(module, name) is not None, f"{module}.{name}"


def test_the_names_not_provided_are_the_documented_ones():
    text = open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "docs",
                             "torchair.md")).read()
    section = text.split("## Not provided")[1]
    for module, names in NOT_PROVIDED.items():
        for name in names:
            assert _resolve(module, name) is None, f"{module}.{name} exists: move it to PUBLIC"
            public = module.replace("op_sdk", "torchair", 1) + "." + name
            assert f"`{public}`" in section, public


# -- ge: the converter API -------------------------------------------------------------------


def _graph(build):
    with GeGraph("g") as g:
        x = g.data(0, torch.float16, [2, 3])
        y = g.data(1, torch.float32, [2, 3])
        outs = build(x, y)
        flat = [t for o in (outs if isinstance(outs, tuple) else (outs,))
                for t in (o if isinstance(o, list) else [o])]
        g.net_output(flat)
    return g, outs


def _op(g, type_):
    return next(op for op in g.ops if op.type == type_)


def test_custom_op_torchair_form_writes_inputs_attrs_outputs_as_given():
    attrs = {"i": ge.attr.Int(2), "f": ge.attr.Float(0.5), "b": ge.attr.Bool(True),
             "s": ge.attr.Str("hi"), "dt": ge.attr.DataType(ge.DataType.DT_BF16),
             "li": ge.attr.ListInt([1, 2]), "lf": ge.attr.ListFloat([1.5]),
             "lb": ge.attr.ListBool([True, False]), "ls": ge.attr.ListStr(["a", "b"]),
             "ldt": ge.attr.ListDataType([ge.DataType.DT_FLOAT, ge.DataType.DT_INT8]),
             "lli": ge.attr.ListListInt([[1, 2], [3]]), "llf": ge.attr.ListListFloat([[0.25]])}
    g, (a, b) = _graph(lambda x, y: ge.custom_op(
        "MyOp", inputs={"x": x, "xs": [x, y], "opt": None}, outputs=["y", ("z", 2)],
        attrs=attrs))
    op = _op(g, "MyOp")
    assert op.inputs == ["Data:0", "Data:0", "Data_1:0", ""]
    assert [d.name for d in op.input_desc] == ["x", "xs0", "xs1", "opt"]
    assert op.input_desc[3].attrs == {"_is_unfed_optional": ("Int", 1)}
    assert [d.name for d in op.output_desc] == ["y", "z0", "z1"]
    assert isinstance(a, ge.Tensor) and a.index == 0
    assert isinstance(b, list) and [t.index for t in b] == [1, 2]
    model = check_text(g)
    text_op = next(o for o in model["graph"][0]["op"] if _unquote(o["type"][0]) == "MyOp")
    values = {_unquote(x["key"][0]): x["value"][0] for x in text_op["attr"]}
    assert values["i"] == {"i": ["2"]} and values["f"] == {"f": ["0.5"]}
    assert values["b"] == {"b": ["true"]} and values["s"] == {"s": ['"hi"']}
    assert values["dt"] == {"dt": ["27"]}
    assert values["li"]["list"][0] == {"i": ["1", "2"], "val_type": ["VT_LIST_INT"]}
    assert values["lb"]["list"][0] == {"b": ["true", "false"], "val_type": ["VT_LIST_BOOL"]}
    assert values["ls"]["list"][0] == {"s": ['"a"', '"b"']}  # no val_type, as TorchAir
    assert values["ldt"]["list"][0] == {"dt": ["0", "2"], "val_type": ["VT_LIST_DATA_TYPE"]}
    assert values["lli"] == {"list_list_int": [{"list_list_i": [{"list_i": ["1", "2"]},
                                                                {"list_i": ["3"]}]}]}
    assert values["llf"] == {"list_list_float": [{"list_list_f": [{"list_f": ["0.25"]}]}]}


def test_custom_op_returns_as_torchair_does():
    _, one = _graph(lambda x, y: ge.custom_op("A", inputs={"x": x}, outputs=["y"]))
    assert isinstance(one, ge.Tensor)
    _, dyn = _graph(lambda x, y: ge.custom_op("B", inputs={"x": x}, outputs=[("y", 3)]))
    assert isinstance(dyn, list) and len(dyn) == 3
    with GeGraph("g") as g:
        x = g.data(0, torch.float32, [2])
        assert ge.custom_op("C", inputs={"x": x}, outputs=None) is None
        assert ge.custom_op("D", inputs={"x": x}, outputs=[]) is None


@pytest.mark.parametrize("kwargs,words", [
    ({"inputs": [1]}, "Invalid input type:list vs expect one of [None, dict]"),
    ({"inputs": {"x": 3}}, "Invalid input 'x' type:int"),
    ({"inputs": {"x": [3]}}, "Invalid input 'x'[0] type:int vs expect 'ge.Tensor'"),
    ({"attrs": {"n": 3}}, "Invalid attr 'n' type:int vs expect one of [ge.attr.Bool"),
    ({"attrs": {"n": ge.attr.Int}}, "Invalid attr 'n' type:_Attr without a value"),
    ({"outputs": "y"}, "Invalid output type:str vs expect one of [list, tuple]"),
    ({"outputs": [("y", "2")]}, "vs expect one of [str, tuple[str, int]]"),
])
def test_custom_op_errors_as_torchair(kwargs, words):
    with GeGraph("g"), pytest.raises(AssertionError) as e:
        ge.custom_op("MyOp", **kwargs)
    assert words in str(e.value) and "custom op 'MyOp'" in str(e.value)


def test_custom_op_by_prototype_takes_attributes_positionally():
    with GeGraph("g") as g:
        x = g.data(0, torch.float32, [4])
        y = ge.custom_op("Swish", x, 2.0)  # TorchAir's form: inputs, then attributes
        z = ge.custom_op("Swish", x, scale=ge.attr.Float(3.0))  # op_sdk's keywords take ge.attr too
    assert g.op(y.op.name).attrs == {"scale": ("Float", 2.0)}
    assert g.op(z.op.name).attrs == {"scale": ("Float", 3.0)}
    with GeGraph("g") as g:
        x = g.data(0, torch.float32, [4])
        with pytest.raises(IndexError, match="1 inputs and 1 attributes, got 3 arguments"):
            ge.custom_op("Swish", x, 2.0, 3.0)
        with pytest.raises(ConversionError, match="no Ascend IR prototype of that type"):
            ge.custom_op("NoSuchType", x)
        with pytest.raises(ConversionError, match="not both"):
            ge.custom_op("Swish", x, inputs={"x": x}, outputs=["y"])


def test_attr_values_compare_print_and_refuse_wrong_types():
    assert ge.attr.Int(3) == ge.attr.Int(3) != ge.attr.Float(3.0)
    assert repr(ge.attr.ListStr(["a"])) == "ge.attr.ListStr(['a'])"
    assert ge.attr.Int(3)(None) == ge.attr.Int(3) and ge.attr.Int(3)(4).value == 4
    assert ge.attr.Float(1).value == 1.0 and isinstance(ge.attr.Float(1).value, float)
    with pytest.raises(AssertionError, match="Type mismatch"):
        ge.attr.Int(ge.attr.Float(1.0))
    with pytest.raises(AssertionError, match="Value cannot be None"):
        ge.attr.Int(None)
    for builder, bad, words in ((ge.attr.Int, True, "takes an int"), (ge.attr.Str, 1, "takes a str"),
                                (ge.attr.ListInt, [1.5], "list of ints"),
                                (ge.attr.ListListInt, [1], "list of lists of ints"),
                                (ge.attr.Bool, 1, "takes a bool")):
        with pytest.raises(TypeError, match=words):
            builder(bad)


def test_const_dtype_from_code_torch_dtype_or_value():
    cases = [
        (lambda: ge.Const(1.5), "DT_FLOAT", [], torch.tensor(1.5, dtype=torch.float32)),
        (lambda: ge.Const([1, 2]), "DT_INT64", [2], torch.tensor([1, 2])),
        (lambda: ge.Const(True), "DT_BOOL", [], torch.tensor(True)),
        (lambda: ge.Const([[1, 2], [3, 4]], dtype=ge.DataType.DT_FLOAT16), "DT_FLOAT16", [2, 2],
         torch.tensor([[1, 2], [3, 4]], dtype=torch.float16)),
        (lambda: ge.Const([0.1, -2.0], dtype=torch.bfloat16), "DT_BF16", [2],
         torch.tensor([0.1, -2.0], dtype=torch.bfloat16)),
        (lambda: ge.Const(torch.arange(6, dtype=torch.int16).reshape(2, 3).t()), "DT_INT16", [3, 2],
         torch.arange(6, dtype=torch.int16).reshape(2, 3).t()),
        (lambda: ge.Const([], dtype=ge.DataType.DT_INT8), "DT_INT8", [0],
         torch.tensor([], dtype=torch.int8)),
    ]
    for make, dtype, shape, expected in cases:
        with GeGraph("g") as g:
            t = make()
        (desc, data) = g.op(t.op.name).attrs["value"][1]
        assert (desc.dtype, list(desc.shape)) == (dtype, shape), dtype
        got = torch.frombuffer(bytearray(data), dtype=expected.dtype) if data else \
            torch.empty(0, dtype=expected.dtype)
        assert torch.equal(got.reshape(expected.shape), expected.contiguous()), dtype
        check_text(g)


def test_const_readable_value_and_errors():
    with GeGraph("g") as g:
        a = ge.Const([1, 2])
        b = ge.Const(3, readable=False)
    assert g.op(a.op.name).attrs["_readable_value"] == ("String", "[1, 2]")
    assert "_readable_value" not in g.op(b.op.name).attrs
    with GeGraph("g") as g:
        with pytest.raises(ValueError, match="should not be a Tensor object"):
            ge.Const(a)
        with pytest.raises(ValueError, match=r"code 13 \(DT_STRING\) has no torch dtype"):
            ge.Const(1, dtype=ge.DataType.DT_STRING)
        with pytest.raises(ValueError, match="not a number"):
            ge.Const("text")


def test_cast_and_clone_with_dependencies():
    with GeGraph("g") as g:
        x = g.data(0, torch.float16, [2])
        c = ge.Const(0)
        y = ge.Cast(x, dst_type=ge.DataType.DT_FLOAT, dependencies=[c], node_name="to_f32")
        z = ge.Clone(y, dependencies=[x])
        g.net_output([z])
    cast, move = g.op("to_f32"), g.op(z.op.name)
    assert cast.type == "Cast" and cast.inputs == ["Const:-1", "Data:0"]
    assert cast.attrs == {"dst_type": ("Int", 0)}
    assert move.type == "TensorMove" and move.inputs == ["Data:-1", "to_f32:0"]
    check_text(g)
    with GeGraph("g"):
        with pytest.raises(AssertionError, match="need to be Tensor"):
            ge.Clone(1)
        with pytest.raises(TypeError):
            ge.Cast(x, ge.DataType.DT_FLOAT)  # dst_type is keyword-only, as TorchAir's


def test_datatype_format_tensorspec_as_torchair():
    assert (ge.DataType.DT_FLOAT, ge.DataType.DT_FLOAT16, ge.DataType.DT_INT64,
            ge.DataType.DT_BF16, ge.DataType.DT_UNDEFINED, ge.DataType.DT_FLOAT8_E4M3FN,
            ge.DataType.DT_FLOAT4_E1M2, ge.DataType.DT_MAX) == (0, 1, 9, 27, 28, 36, 41, 42)
    assert ge.Format.FORMAT_ND.value == 2 and ge.Format.FORMAT_FRACTAL_NZ.value == 29
    assert ge.Format.FORMAT_UNDEFINED.value == -1 and ge.Format(29) is ge.Format.FORMAT_FRACTAL_NZ
    spec = ge.TensorSpec(torch.empty(2, 5, dtype=torch.bfloat16))
    assert (spec.dtype, spec.size, spec.rank) == (ge.DataType.DT_BF16, [2, 5], 2)
    assert repr(spec) == "TensorSpec(dtype=DT_BF16, size=[2, 5])"
    gm = make_fx(lambda x: x * 2, tracing_mode="symbolic")(torch.randn(3, 4))
    dyn = next(iter(gm.graph.find_nodes(op="placeholder"))).meta["val"]
    assert isinstance(dyn.shape[0], torch.SymInt)
    spec = ge.TensorSpec(dyn)
    assert spec.rank == 2 and spec.dtype == ge.DataType.DT_FLOAT
    with pytest.raises(AssertionError, match="dynamic spec"):
        spec.size  # noqa: B018
    assert ge.TensorSpec(None).dtype is None


_LIBS = []  # the test operators' libraries, kept alive


def scale2_op(namespace: str):
    """A test operator ``namespace::scale2(Tensor x) -> Tensor`` (x * 2) with a Meta kernel."""
    lib = torch.library.Library(namespace, "FRAGMENT")
    lib.define("scale2(Tensor x) -> Tensor")
    lib.impl("scale2", lambda x: x * 2, "CompositeExplicitAutograd")
    lib.impl("scale2", lambda x: torch.empty_like(x), "Meta")
    _LIBS.append(lib)
    return getattr(torch.ops, namespace).scale2.default


def test_meta_outputs_are_tensorspecs_with_ge_codes():
    seen = []
    op = scale2_op("op_sdk_ta_api")

    @torchair.register_fx_node_ge_converter(op)
    def convert(x, meta_outputs=None):
        seen.append(meta_outputs)
        return ge.custom_op("Scale2", inputs={"x": x}, outputs=["y"],
                            attrs={"factor": ge.attr.Float(2.0),
                                   "dst": ge.attr.DataType(meta_outputs.dtype)})

    try:
        gm = make_fx(lambda x: op(x), tracing_mode="fake")(torch.randn(3, 4, dtype=torch.float16))
        g = convert_fx(gm)
    finally:
        from op_sdk.converters.registry import _CONVERTERS

        _CONVERTERS.pop(op, None)
    (spec,) = seen
    assert isinstance(spec, ge.TensorSpec) and spec.dtype == ge.DataType.DT_FLOAT16
    scale = _op(g, "Scale2")
    assert scale.attrs["dst"] == ("DataType", ge.DataType.DT_FLOAT16)
    # as TorchAir: the operator's output carries its dtype, no shape; the graph output both
    assert scale.output_desc[0].dtype == "DT_FLOAT16" and scale.output_desc[0].shape is None
    out = _op(g, "NetOutput").input_desc[0]
    assert (out.dtype, out.shape) == ("DT_FLOAT16", (3, 4))
    check_text(g)


# -- get_compiler ------------------------------------------------------------------------------


class _MM(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class _Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(64))

    def forward(self, x, r):
        h = x + r
        v = h.float().pow(2).mean(-1, keepdim=True)
        return (h.float() * torch.rsqrt(v + 1e-6)).to(x.dtype) * self.w, h


@pytest.mark.parametrize("mode", ["max-autotune", "reduce-overhead"])
def test_get_compiler_in_a_backend_of_ones_own(mode):
    """TorchAir's get_compiler example: a backend that prints the graph, then compiles it
    with the NPU compiler through aot_module_simplified."""
    config = torchair.CompilerConfig()
    config.mode = mode
    compiler = torchair.get_compiler(config)
    seen = []

    def custom_backend(gm, example_inputs):
        seen.append(gm)
        return aot_module_simplified(gm, example_inputs, fw_compiler=compiler)

    torch._dynamo.reset()
    x = torch.ones([2, 2], dtype=torch.int32)
    assert torch.equal(torch.compile(_MM(), backend=custom_backend, dynamic=False)(x, x), x + x)
    m = _Norm()
    a, b = torch.randn(8, 64), torch.randn(8, 64)
    with torch.no_grad():
        out, h = torch.compile(m, backend=custom_backend)(a, b)
        ref, _ = m(a, b)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(h, a + b)
    assert len(seen) == 2 and len(compiler.reports) == 2
    report = compiler.reports[-1]
    assert report.mode == mode and report.graphs
    # the pass pipeline ran on the graph: the RMSNorm found, fused or priced
    outcome = report.graphs[-1].outcome()
    assert "rms_norm" in outcome, outcome
    if mode == "reduce-overhead":
        assert report.graphs[-1].match_count("native_rms_norm") == 1


def test_get_compiler_default_config():
    compiler = torchair.get_compiler()
    assert compiler.config.mode.value == "max-autotune"
    assert "NpuFxCompiler" in repr(compiler)


# -- dynamo_export -----------------------------------------------------------------------------


class _Export(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.p1 = torch.nn.Parameter(torch.randn(2, 4))
        self.p2 = torch.nn.Parameter(torch.randn(2, 4))
        self.register_buffer("b", torch.arange(4, dtype=torch.float32))

    def forward(self, x, y):
        return x + y + self.p1 + self.p2 + self.b


def test_dynamo_export_writes_the_ge_graph_with_the_weights(tmp_path):
    model = _Export()
    x, y = torch.randn(2, 4), torch.randn(2, 4)
    path = tmp_path / "test_export_file_False"
    with pytest.warns(UserWarning, match=r"export\.air is not written"):
        assert torchair.dynamo_export(x, y, model=model, export_path=str(path),
                                      export_name="sub/export", dynamic=False) is None
    assert sorted(os.listdir(path)) == ["dynamo.pbtxt"]
    text = (path / "dynamo.pbtxt").read_text()
    assert text.startswith('node {\n    name: "')  # TorchAir's format
    nodes = parse_graphdef(text)
    types = [n["op"] for n in nodes.values()]
    assert types.count("Data") == 2 and types[-1] == "NetOutput"
    assert text.count('op: "Data"') == 2
    for name, t in (("p1", model.p1), ("p2", model.p2), ("b", model.b)):
        assert nodes[name]["op"] == "Const", name
        tensor = nodes[name]["attr"]["value"]["t"][0]
        assert [int(d) for d in tensor["desc"][0]["shape"][0]["dim"]] == list(t.shape)
        raw = _unquote(tensor["data"][0]).encode("latin-1").decode("unicode_escape").encode("latin-1")
        assert torch.equal(torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(t.shape),
                           t.detach()), name
        assert nodes[name]["attr"]["[o]"]["dtype"] == ["DT_FLOAT"], name  # unnamed descriptor
    data_indices = sorted(int(n["attr"]["index"]["i"][0]) for n in nodes.values()
                          if n["op"] == "Data")
    assert data_indices == [0, 1]


class _Inner(torch.nn.Module):
    def forward(self, x, y):
        return torch.chunk(x + y, 2, dim=0)


class _Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.submodel = _Inner()

    def forward(self, x, y):
        return self.submodel(x * 2, y)


@pytest.mark.parametrize("record", [True, False])
def test_dynamo_export_records_the_module_stack(tmp_path, record):
    """TorchAir's export.experimental.enable_record_nn_module_stack: each operator converted
    from a node of a submodule carries the node's nn_module_stack (its string) as the
    attribute nn_module_stack; off by default."""
    config = torchair.CompilerConfig()
    assert config.export.experimental.enable_record_nn_module_stack.value is False
    config.export.experimental.enable_record_nn_module_stack = record
    with pytest.raises(ValueError):
        config.export.experimental.enable_record_nn_module_stack = "yes"
    with pytest.warns(UserWarning, match=r"\.air is not written"):
        torchair.dynamo_export(torch.randn(2, 4), torch.randn(2, 4), model=_Outer(),
                               export_path=str(tmp_path), dynamic=False, config=config)
    nodes = parse_graphdef((tmp_path / "dynamo.pbtxt").read_text())
    recorded = {name: _unquote(n["attr"]["nn_module_stack"]["s"][0])
                for name, n in nodes.items() if "nn_module_stack" in n["attr"]}
    if not record:
        assert recorded == {}
        return
    adds = [name for name, n in nodes.items() if n["op"] == "Add"]
    assert adds and all("submodel" in recorded[n] and "_Inner" in recorded[n] for n in adds)
    muls = [name for name, n in nodes.items() if n["op"] == "Mul"]
    assert muls and not any(n in recorded for n in muls)  # the root module's operator: none


class _Add(torch.nn.Module):
    def forward(self, x, y):
        return torch.add(x, y)


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_dynamo_export_runs_no_operator(tmp_path, dtype):
    """TorchAir's export stops at the graph's first call: unsigned 16 / 32 / 64-bit inputs
    export although torch's CPU add has no kernel for them (eager raises)."""
    x = torch.randint(0, 255, (2, 2), dtype=dtype)
    with pytest.raises(NotImplementedError):
        torch.add(x, x)
    with pytest.warns(UserWarning, match=r"\.air is not written"):
        torchair.dynamo_export(x, x.clone(), model=_Add(), export_path=str(tmp_path),
                               dynamic=False)
    text = (tmp_path / "dynamo.pbtxt").read_text()
    types = [n["op"] for n in parse_graphdef(text).values()]
    assert types.count("Data") == 2 and "Add" in types
    assert text.count("dtype: DT_" + str(dtype).split(".")[-1].upper()) >= 3


def test_dynamo_export_refuses_a_symbolic_link(tmp_path, caplog):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with caplog.at_level(logging.ERROR, logger="op_sdk"):
        assert torchair.dynamo_export(torch.randn(2, 4), torch.randn(2, 4), model=_Export(),
                                      export_path=str(link)) is None
    assert "should not be an symbolic link" in caplog.text
    assert os.listdir(real) == []
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        torchair.dynamo_export(torch.randn(2), model=lambda x: x)


def test_patch_for_hcom_says_it_is_not_needed(caplog):
    with caplog.at_level(logging.WARNING, logger="op_sdk"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert torchair.patch_for_hcom() is None
    assert "no need to call patch_for_hcom" in caplog.text


# -- inference.set_dim_gears -------------------------------------------------------------------


def _gear_inputs(n):
    from op_sdk.inference import set_dim_gears

    x = torch.randn(n, 4)
    set_dim_gears(x, {0: [2, 4, 8]})
    return x


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_set_dim_gears_one_graph_serves_the_gears_and_refuses_the_rest(mode):
    config = torchair.CompilerConfig()
    config.mode = mode
    backend = torchair.get_npu_backend(compiler_config=config)

    def f(x, y):
        return (x * 2 + 1).sum(0) + y

    torch._dynamo.reset()
    compiled = torch.compile(f, backend=backend)
    y = torch.randn(4)
    for n in (2, 4, 8, 4, 2):
        x = _gear_inputs(n)
        torch.testing.assert_close(compiled(x, y), f(x, y))
    assert len(backend.reports) == 1  # one dynamic graph for the three gears
    for n in (3, 16, 1):  # between two gears, above and below them
        with pytest.raises(Exception, match=rf"The index {n} of the current tensor shape is "
                                            rf"not within the range \[2, 4, 8\]"):
            compiled(_gear_inputs(n), y)
    x = _gear_inputs(8)
    torch.testing.assert_close(compiled(x, y), f(x, y))
    assert len(backend.reports) == 1  # a refused size leaves no compiled graph
    torch._dynamo.reset()


@pytest.mark.parametrize("gears,words", [
    ({"0": [2, 4]}, "Dim index in dim_gears must be an integer"),
    ({2: [2, 4]}, r"must be in range \[0, 1\], but got 2"),
    ({0: 4}, "must be a list or tuple"),
    ({0: [2, 4.0]}, "Element at index 1 of value for dim index 0 in dim_gears must be an integer"),
    ({0: [0, 4]}, "Gear value at index 0 for dim index 0 must not be 0"),
    ({0: [4]}, r"Length of gears for dim index 0 in dim_gears must be in range \[2, 100\]"),
])
def test_set_dim_gears_checks_as_torchair(gears, words):
    from op_sdk.inference import set_dim_gears

    with pytest.raises(AssertionError, match=words):
        set_dim_gears(torch.randn(4, 4), gears)
    t = torch.randn(4, 4)
    set_dim_gears(t, {0: [2, 4]})
    set_dim_gears(t, {0: [2, 4]})  # the same again is fine
    with pytest.raises(AssertionError, match="already has set dim gears"):
        set_dim_gears(t, {0: [4, 8]})


def test_gear_merge_policy_and_limit():
    from op_sdk.compiler.gears import _merged

    assert sorted(_merged([(2, 4), (8, 16)], "zip")) == [(2, 8), (4, 16)]
    assert len(_merged([(2, 4), (8, 16)], "product")) == 4
    with pytest.raises(AssertionError, match="input gears len must same"):
        _merged([(2, 4), (8, 16, 32)], "zip")
    with pytest.raises(AssertionError, match="cannot exceed 100, and the current number of "
                                             "gears is: 121"):
        _merged([tuple(range(1, 12)), tuple(range(1, 12))], "product")
    config = torchair.CompilerConfig()
    config.mode = "reduce-overhead"
    config.inference_config.dynamic_gears_merge_policy = "zip"
    backend = torchair.get_npu_backend(compiler_config=config)
    from op_sdk.inference import set_dim_gears

    a, b = torch.randn(2, 3), torch.randn(4, 3)
    set_dim_gears(a, {0: [2, 4]})
    set_dim_gears(b, {0: [4, 8, 16]})
    torch._dynamo.reset()
    with pytest.raises(Exception, match="input gears len must same"):
        torch.compile(lambda a, b: a.sum() + b.sum(), backend=backend)(a, b)
    torch._dynamo.reset()


# -- npugraph_ex's names -----------------------------------------------------------------------


def test_npugraph_ex_package_names():
    import op_sdk.npugraph_ex as npugraph_ex

    config = npugraph_ex.CompilerConfig()
    config.remove_noop_ops = False
    backend = npugraph_ex.get_npu_backend(compiler_config=config)
    assert backend.config.mode.value == "npugraph_ex"
    assert backend.config.experimental_config.remove_noop_ops.value is False
    with pytest.raises(TypeError, match="npugraph_ex CompilerConfig"):
        npugraph_ex.get_npu_backend(compiler_config=torchair.CompilerConfig())
    compiler = npugraph_ex.get_compiler(config)
    assert compiler.config.mode.value == "npugraph_ex"

    def custom_backend(gm, example_inputs):
        return aot_module_simplified(gm, example_inputs, fw_compiler=compiler)

    torch._dynamo.reset()
    m = _Norm()
    a, b = torch.randn(4, 64), torch.randn(4, 64)
    with torch.no_grad():
        out, _ = torch.compile(m, backend=custom_backend)(a, b)
        torch.testing.assert_close(out, m(a, b)[0], atol=1e-5, rtol=1e-5)
    assert compiler.reports[-1].graphs[-1].match_count("native_rms_norm") == 1
    torch._dynamo.reset()
    assert npugraph_ex.scope.limit_core_num and npugraph_ex.ops.record
    assert npugraph_ex.logger.name == "op_sdk"


def test_create_npu_tensors_checks_then_says_there_is_no_npu_memory():
    create = torchair.llm_datadist.create_npu_tensors
    with pytest.raises(TypeError, match="shape only support"):
        create(4, torch.float16, [0])
    with pytest.raises(TypeError, match="addresses inner type only support"):
        create([4], torch.float16, [1.5])
    with pytest.raises(ValueError, match="unsupported dtype: torch.float8_e4m3fn"):
        create([4], torch.float8_e4m3fn, [0])
    with pytest.raises(RuntimeError, match="this machine has no NPU"):
        create([2, 4], torch.float16, [4096, 8192])


# -- npu_print's GE converter ------------------------------------------------------------------


@pytest.mark.parametrize("detail", [False, True])
def test_npu_print_converts_as_torchair(detail):
    def f(x, y):
        torchair.ops.npu_print("x is", x, "y", y, summarize_size=2, tensor_detail=detail)
        return x + 1

    gm = make_fx(f, tracing_mode="fake")(torch.randn(2, 3, dtype=torch.bfloat16), torch.arange(4))
    g = convert_fx(gm)
    check_text(g)
    types = [op.type for op in g.ops]
    expected = ["Cast", "Shape", "Shape", "StringFormat", "PrintV2"] if detail else \
        ["Cast", "StringFormat", "PrintV2"]
    assert [t for t in types if t in ("Cast", "Shape", "StringFormat", "PrintV2")][:len(expected)] \
        == expected
    fmt, printer = _op(g, "StringFormat"), _op(g, "PrintV2")
    cast = _op(g, "Cast")
    assert cast.attrs == {"dst_type": ("Int", ge.DataType.DT_FLOAT)}  # bfloat16 printed as float
    feeds = [cast.name, _op(g, "Shape").name] if detail else [cast.name]
    assert [i.rsplit(":", 1)[0] for i in fmt.inputs][:len(feeds)] == feeds
    assert len(fmt.inputs) == (4 if detail else 2)
    assert [d.name for d in fmt.input_desc] == [f"x{i}" for i in range(len(fmt.inputs))]
    assert fmt.attrs["summarize"] == ("Int", 2) and fmt.attrs["placeholder"][1] in \
        fmt.attrs["template"][1]
    assert printer.inputs == [f"{fmt.name}:0"] and printer.output_desc == []
    assert printer.attrs == {"_kernel": ("String", "extend")}
