"""op_sdk's GE converters against TorchAir's, inside the real torch_npu environment:

* the pinned prototype table (op_sdk.converters.ir) equals the IR definitions TorchAir of
  torch-npu 2.13.0 generates from CANN's prototypes (input kinds and names in order, output
  names, attribute kinds, names, types and defaults);
* for the operators TorchAir converts, op_sdk's converter writes the same operators as
  TorchAir's own for the same call (type, input descriptor names, output names, attributes
  with prototype defaults filled in, graph inputs each reads);
* register_with_torchair() gives TorchAir a converter exactly for the operators it has none
  of (npu_add_rms_norm_quant, the plugin's silu_mul_quant), leaves TorchAir's own in place,
  and the registered converter writes through TorchAir's builder what op_sdk's writes.

TorchAir's converters run in its GeGraph with the CANN-compatibility probe (a call into
CANN's prototype registry) answered "compatible"; nothing reaches ACL or GE."""

from __future__ import annotations

import inspect
import sys

import pytest
import torch

pytest.importorskip("google.protobuf", reason="protobuf is installed by "
                    "tests/npu/ge_schema.py beside the torch_npu environment")

import torchair  # noqa: E402
from torchair._ge_concrete_graph import compat_ir  # noqa: E402
from torchair._ge_concrete_graph import auto_generated_ge_raw_ops as raw  # noqa: E402
from torchair._ge_concrete_graph.fx2ge_converter import _get_converter  # noqa: E402
from torchair._ge_concrete_graph.ge_converter.custom import quantmatmul  # noqa: E402
from torchair._ge_concrete_graph.ge_ir_pb2 import DataType as ProtoDataType  # noqa: E402
from torchair.ge._ge_graph import GeGraph as TaGraph  # noqa: E402
from torchair.ge._ge_graph import Data as TaData  # noqa: E402

import op_sdk  # noqa: E402,F401
from op_sdk.converters import ConversionError, convert_fx, converter_for, ir  # noqa: E402
from op_sdk.converters import register_with_torchair  # noqa: E402
from op_sdk.converters import torchair_bridge  # noqa: E402
from tests import plugin_example  # noqa: E402
from tests.ops import gather  # noqa: E402
from tests.test_converters import IR_TYPE, _op, _qualname, fx_of_call  # noqa: E402

compat_ir.is_cann_compat = lambda *args, **kwargs: ""  # CANN's prototype registry is not here
# the SoC whose converter path op_sdk's mirrors (Atlas A2 / A3, not arch35); TorchAir asks
# the device, which is not here
quantmatmul.is_arch35 = lambda: False
compat_ir.ge_op.__globals__["is_cann_compat"] = compat_ir.is_cann_compat  # noqa: E501


@pytest.fixture(autouse=True)
def _an_atlas_a2(monkeypatch):
    """TorchAir's converters that branch on the chip (``is_arch35``: Ascend 950 or not) ask
    torch_npu for the device's name, which the stubbed environment cannot give: they are
    run as on an Atlas A2, the platform op_sdk's converters write for."""
    import torch_npu

    monkeypatch.setattr(torch_npu.npu, "get_device_name", lambda *a, **k: "Ascend910B1")


# the operators TorchAir of torch-npu 2.13.0 converts itself (op_sdk's deliverables table
# reports the same set)
from op_sdk.app.deliverables import torchair_converts  # noqa: E402

def _torchair_prototype(op_type: str):
    """What TorchAir's generated wrapper of ``op_type`` declares (its signature: inputs
    before ``*``, Optional ones optional, list ones dynamic; keyword attributes with their
    defaults) and emits (input descriptor and output names, all inputs fed)."""
    fn = getattr(raw, op_type)
    inputs, attrs, by_keyword = [], [], set()
    for p in inspect.signature(fn).parameters.values():
        if p.name in ("dependencies", "node_name"):
            continue
        note = str(p.annotation)
        if p.kind == p.POSITIONAL_OR_KEYWORD:
            kind = "dynamic" if "List" in note else "optional" if "Optional" in note else "input"
            inputs.append((kind, p.name))
        elif p.kind == p.KEYWORD_ONLY and "Tensor" in note:
            # an optional input the generator put after the attributes' `*`
            # (RotaryPositionEmbedding's rotate, appended to the REG_OP later)
            inputs.append(("optional", p.name))
            by_keyword.add(p.name)
        elif p.kind == p.KEYWORD_ONLY:
            attrs.append((p.name, p.default))
    with TaGraph() as graph:
        indices = iter(range(1 << 16))  # one graph input each (a dynamic input takes two)

        def data(_):
            return TaData(index=next(indices), dtype=0, shape=[2], placement="NPU")

        fed = [(name, [data(i), data(i)] if k == "dynamic" else data(i))
               for i, (k, name) in enumerate(inputs)]
        proto = ir.prototype(op_type)
        required = {a.name: {"Int": 1, "Type": 1, "String": "torch.qint8", "Float": 1.0,
                             "Bool": False}.get(a.type, []) for a in proto.attrs if a.required}
        fn(*[v for n, v in fed if n not in by_keyword],
           **{n: v for n, v in fed if n in by_keyword}, **required)
    (op,) = [o for o in graph._proto.op if o.type == op_type]
    return inputs, attrs, [d.name for d in op.input_desc], [d.name for d in op.output_desc]


# attribute defaults TorchAir's generator writes differently from CANN's prototype: the
# `DT_INT8` of `.ATTR(dst_type, Int, DT_INT8)` (ge::DataType 2) comes out as 1
GENERATOR_DEFAULTS = {("AddRmsNormDynamicQuant", "dst_type")}
# attributes whose wrapper parameter TorchAir's generator names otherwise than the attribute
# it writes: DynamicMxQuant's wrapper takes block_size and writes `op.attr["blocksize"]`
# (CANN's prototype's name, the one the converter comparison below sees)
GENERATOR_NAMES = {("DynamicMxQuant", "block_size"): "blocksize"}
_PY = {"Int": int, "Type": int, "Float": float, "Bool": bool, "String": str,
       "ListInt": list, "ListFloat": list, "ListBool": list, "ListString": list}
COMPARED = sorted(t for t in ir.prototypes() if hasattr(raw, t))


def test_table_covers_what_torchair_generates():
    # AddRmsNormQuant has no generated wrapper in this TorchAir (its fusion "does not take
    # effect in max-autotune"); Cast is written by hand there (a deformed prototype);
    # SwiGluQuant, GemmaRmsNorm, InplaceAddRmsNorm and RmsNormQuant have none (TorchAir
    # converts no npu_swiglu_quant, npu_gemma_rms_norm, in-place npu_add_rms_norm_v2,
    # npu_rms_norm_quant)
    pinned = {t for t, p in ir.prototypes().items() if not p.source.startswith("declared by")}
    assert pinned - set(COMPARED) == {"AddRmsNormQuant", "Cast", "SwiGluQuant", "GemmaRmsNorm",
                                      "InplaceAddRmsNorm", "RmsNormQuant"}


@pytest.mark.parametrize("op_type", COMPARED)
def test_prototype_matches_torchair_generated_ir(op_type):
    proto = ir.prototype(op_type)
    inputs, attrs, input_descs, outputs = _torchair_prototype(op_type)
    assert inputs == [("dynamic" if i.dynamic else "optional" if i.optional else "input", i.name)
                      for i in proto.inputs]
    assert input_descs == [n for i in proto.inputs
                           for n in ([f"{i.name}0", f"{i.name}1"] if i.dynamic else [i.name])]
    assert outputs == list(proto.outputs)
    assert [GENERATOR_NAMES.get((op_type, n), n) for n, _ in attrs] == \
        [a.name for a in proto.attrs]
    for (name, default), a in zip(attrs, proto.attrs):
        if (op_type, name) in GENERATOR_DEFAULTS:
            assert default == 1 and a.default == ir.GE_DTYPE["DT_INT8"], (op_type, name)
        elif a.required:
            assert default is inspect.Parameter.empty, (op_type, name)
        elif a.type == "Float":
            assert default == pytest.approx(a.default, rel=1e-6), (op_type, name)
        else:
            assert default == a.default and type(default) is _PY[a.type], (op_type, name, default)


# -- converters against TorchAir's ------------------------------------------------------------

def _attr_value(attr_def):
    field = attr_def.WhichOneof("value")
    if field == "list":
        lv = attr_def.list
        for f in ("i", "f", "b", "s"):
            if len(getattr(lv, f)):
                return [x.decode() if isinstance(x, bytes) else x for x in getattr(lv, f)]
        return []
    v = getattr(attr_def, field)
    return v.decode() if isinstance(v, bytes) else v


def _effective(op_type, attrs: dict) -> dict:
    proto = ir.prototypes().get(op_type)
    if proto is None:
        return attrs
    out = {a.name: a.default for a in proto.attrs if not a.required}
    out.update(attrs)
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in out.items()}


def _torchair_ops(gm: torch.fx.GraphModule, returned: set | None = None) -> list:
    """TorchAir's converter of the graph's one operator, run in TorchAir's GeGraph;
    ``returned`` (if given) receives the names of the operators whose outputs the converter
    returns (which NetOutput reads, in a whole graph)."""
    node = next(n for n in gm.graph.nodes if n.op == "call_function"
                and isinstance(n.target, torch._ops.OpOverload) and n.target.namespace != "aten")
    with TaGraph() as graph:
        env = {}
        index = 0
        for n in gm.graph.nodes:
            if n.op != "placeholder":
                continue
            v = n.meta["val"]
            t = TaData(index=index, dtype=torchair.ge._ge_graph.torch_type_to_ge_type(v.dtype),
                       shape=list(v.shape), placement="NPU", node_name=n.name)
            t.set_meta(v)
            env[n] = t
            index += 1

        def value(a):
            if isinstance(a, torch.fx.Node):
                return env[a]
            if isinstance(a, (list, tuple)):
                return type(a)(value(x) for x in a)
            return a

        # the FX value itself: TorchAir's registered converter wraps it in TensorSpecs
        # (fx2ge_converter.get_meta_outputs), as its graph builder calls it
        result = _get_converter(node.target)(*value(list(node.args)),
                                             meta_outputs=node.meta.get("val"),
                                             **value(dict(node.kwargs)))
    if returned is not None:
        returned.update(t.tensor.split(":")[0] for t in torch.utils._pytree.tree_leaves(result)
                        if isinstance(getattr(t, "tensor", None), str))
    return [op for op in graph._proto.op if op.type != "Data"]


# attributes op_sdk's converters write otherwise than TorchAir's, on purpose: (GE type,
# attribute) -> (op_sdk's value, TorchAir's). The fused MX norms ask for rstd, which op_sdk's
# operators return (TorchAir's converters write output_rstd false and still return the
# output).
DELIBERATE = {("RmsNormDynamicMxQuant", "output_rstd"): (True, False),
              ("AddRmsNormDynamicMxQuant", "output_rstd"): (True, False)}


def _deliberate(summary, side):
    attrs = dict(summary[3])
    for (op_type, name), values in DELIBERATE.items():
        if summary[0] == op_type:
            assert attrs.pop(name) == values[side], (op_type, name, side)
    return (*summary[:3], attrs, summary[4])


def _summary_torchair(op):
    """An unfed optional input, which TorchAir's older generated wrappers write as an empty
    input with its name, and its newer ones leave out (as op_sdk does), is left out."""
    attrs = {k: _attr_value(v) for k, v in op.attr.items() if not k.startswith("_")}
    fed = [(i, d.name) for i, d in zip(op.input, op.input_desc) if i]
    return _deliberate((op.type, [n for _, n in fed], [d.name for d in op.output_desc],
                        _effective(op.type, attrs), [i.split(":")[0] for i, _ in fed]), 1)


def _summary_ours(op):
    return _deliberate((op.type, [d.name for d in op.input_desc], [d.name for d in op.output_desc],
                        _effective(op.type, op.attr_values()), [i.split(":")[0] for i in op.inputs]), 0)


COVERED = [pytest.param(name, args, kwargs, id=f"{name}-{i}")
           for i, (name, args, kwargs) in enumerate(gather("samples"))
           if _qualname(name) in torchair_converts()]


def test_torchair_converts_exactly_the_declared_set():
    import torchair._ge_concrete_graph.ge_converter.custom  # noqa: F401

    from op_sdk.library import registered_ops

    covered = {d.qualname for d in registered_ops() if torchair_bridge.covered_by_torchair(d.op)
               and converter_for(d.op) is not None}
    assert covered == set(torchair_converts())


@pytest.mark.parametrize("name,args,kwargs", COVERED)
def test_converter_matches_torchair(name, args, kwargs):
    gm = fx_of_call(_op(name), args, kwargs)
    try:
        ours = [op for op in convert_fx(gm).ops if op.type not in ("Data", "NetOutput")]
    except ConversionError as e:  # a form op_sdk leaves to TorchAir's converter
        pytest.skip(f"op_sdk's converter refuses it: {e}")
    try:
        returned: set = set()
        theirs = _torchair_ops(gm, returned)
    except Exception as e:  # noqa: BLE001 - TorchAir's own converter fails on this call here
        pytest.skip(f"TorchAir's converter raises on this call in this environment: {e!r}")
    # empty constants (outputs switched off) carry no attributes worth comparing
    assert [_summary_ours(o) for o in ours if o.type != "Const"] == \
        [_summary_torchair(o) for o in theirs if o.type != "Const"]
    # a Const no operator reads (TorchAir's FusedInferAttentionScore converter builds its int4
    # keys' shape multiplier on every call): op_sdk's graphs drop unread constants
    read = {i.split(":")[0] for o in theirs for i in o.input if i}
    assert [o.type for o in ours].count("Const") == [
        o.type for o in theirs if o.name in read | returned].count("Const")
    want = IR_TYPE[_qualname(name)]
    assert any(o.type in (want if isinstance(want, tuple) else (want,)) for o in ours)


def test_every_torchair_operator_is_compared():
    """At least one sample call of each operator TorchAir converts is compared above (some
    calls with optional tensor inputs given by keyword raise inside TorchAir's generated IR
    wrappers in this environment)."""
    compared = set()
    for name, args, kwargs in gather("samples"):
        if _qualname(name) not in torchair_converts() or _qualname(name) in compared:
            continue
        gm = fx_of_call(_op(name), args, kwargs)
        try:
            ours = [op for op in convert_fx(gm).ops if op.type not in ("Data", "NetOutput")]
            theirs = _torchair_ops(gm)
        except Exception:  # noqa: BLE001
            continue
        if [_summary_ours(o) for o in ours if o.type != "Const"] == \
                [_summary_torchair(o) for o in theirs if o.type != "Const"]:
            compared.add(_qualname(name))
    assert compared == set(torchair_converts())


def test_converter_comparison_sees_a_difference():
    """The comparison above fails on a converter that writes another attribute value."""
    x = torch.randn(3, 16, dtype=torch.float16)
    g = torch.rand(16, dtype=torch.float16)
    gm = fx_of_call(torch.ops.npu.npu_rms_norm.default, (x, g), {"epsilon": 0.25})
    theirs = [_summary_torchair(o) for o in _torchair_ops(gm)]
    gm2 = fx_of_call(torch.ops.npu.npu_rms_norm.default, (x, g), {"epsilon": 0.5})
    ours = [_summary_ours(o) for o in convert_fx(gm2).ops if o.type not in ("Data", "NetOutput")]
    assert ours != theirs


def _plugin():
    return plugin_example.load()


def test_import_after_torchair_registers_and_later_operators_follow(tmp_path):
    """`import torchair` before `import op_sdk` registers op_sdk's converters at import; an
    operator defined afterwards with ge=GeIr(...) is registered with TorchAir too."""
    import subprocess

    code = (
        "import torch, torch_npu, torchair\n"
        "import op_sdk\n"
        "from torchair._ge_concrete_graph.fx2ge_converter import _get_converter\n"
        "assert _get_converter(torch.ops.npu.npu_add_rms_norm_quant.default) is not None\n"
        "from op_sdk.converters import GeIr\n"
        "op_sdk.define_op('later_op(Tensor x) -> Tensor', namespace='later_ns',\n"
        "                 reference=lambda x: x.clone(), ge=GeIr('LaterOp'))\n"
        "assert _get_converter(torch.ops.later_ns.later_op.default).op_sdk_converter\n"
        "print('ok')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


def test_register_with_torchair_fills_only_the_gaps():
    _plugin()
    before = {op: getattr(op, "_ge_converter", None) for op in
              (torch.ops.npu.npu_add_rms_norm.default, torch.ops.npu.npu_quant_matmul.default)}
    register_with_torchair()  # (op_sdk may have registered at import, TorchAir being there)
    done = set(torchair_bridge._REGISTERED)
    # an npu operator torch_npu lacks (an in-tree npu_* slice) has no TorchAir converter either
    owned = {o.op for o in op_sdk.registered_ops()
             if o.namespace == "npu" and o.owned and converter_for(o.op)}
    assert done == {torch.ops.npu.npu_add_rms_norm_quant.default,
                    torch.ops.npu.npu_swiglu_quant.default,
                    torch.ops.npu.npu_gemma_rms_norm.default,
                    torch.ops.npu.npu_add_rms_norm_v2.default,
                    # (TorchAir converts its functional twin and re-inplaces to it)
                    torch.ops.npu.npu_kv_rmsnorm_rope_cache_v2.default,
                    torch.ops.npu.npu_rms_norm_quant.default,
                    # op_sdk's own operator with an NPU kernel (its Ascend C kernel and
                    # binding); op_sdk::quant_matmul_packed, CPU-only, is left out
                    torch.ops.op_sdk.rms_norm_rope.default,
                    # TorchAir's forms of the attention operator, which op_sdk defines: TorchAir's
                    # own converter of them lives in the module that would define them too
                    torch.ops.air.npu_fused_infer_attention_score.default,
                    torch.ops.air.npu_fused_infer_attention_score_v2.default,
                    torch.ops.my_ops.silu_mul_quant.default} | owned
    for op, conv in before.items():  # TorchAir's own stay
        assert getattr(op, "_ge_converter", None) is conv
    assert register_with_torchair() == []  # once
    for op in done:
        assert _get_converter(op).op_sdk_converter is converter_for(op)


@pytest.mark.parametrize("name,args,kwargs", [
    pytest.param(n, a, k, id=f"{n}-{i}") for i, (n, a, k) in enumerate(gather("samples"))
    if n == "npu_add_rms_norm_quant"])
def test_registered_converter_writes_through_torchair(name, args, kwargs):
    register_with_torchair()
    gm = fx_of_call(_op(name), args, kwargs)
    try:
        ours = [op for op in convert_fx(gm).ops if op.type not in ("Data", "NetOutput")]
    except ConversionError as e:
        pytest.skip(f"op_sdk's converter refuses it: {e}")
    theirs = _torchair_ops(gm)
    assert [_summary_ours(o) for o in ours] == [_summary_torchair(o) for o in theirs]
    (op,) = [o for o in theirs if o.type == "AddRmsNormQuant"]
    assert [ProtoDataType.Name(d.dtype) for d in op.output_desc][:2] == \
        [o.output_desc[0].dtype for o in ours if o.type == "AddRmsNormQuant"] * 2


def test_plugin_converter_through_torchair():
    _plugin()
    register_with_torchair()
    gate = torch.randn(3, 16, dtype=torch.bfloat16)
    gm = fx_of_call(torch.ops.my_ops.silu_mul_quant.default, (gate, gate), {})
    (op,) = _torchair_ops(gm)
    assert op.type == "SiluMulQuant"
    assert [d.name for d in op.input_desc] == ["gate", "up"]
    assert [d.name for d in op.output_desc] == ["y", "scale"]


def test_op_sdk_operator_with_an_npu_kernel_converts_through_torchair():
    """op_sdk::rms_norm_rope (op_sdk's own operator with an Ascend C kernel) reaches TorchAir's
    graph as op_sdk's converter writes it: cos / sin cast to x's dtype, then RmsNormRope."""
    register_with_torchair()
    x = torch.randn(2, 5, 3, 16, dtype=torch.bfloat16)
    g, c = torch.rand(16, dtype=torch.bfloat16), torch.randn(2, 5, 1, 16)
    gm = fx_of_call(torch.ops.op_sdk.rms_norm_rope.default, (x, g, c, c), {"epsilon": 1e-5})
    ops = _torchair_ops(gm)
    assert [o.type for o in ops] == ["Cast", "Cast", "RmsNormRope"]
    assert [d.name for d in ops[-1].input_desc] == ["x", "gamma", "cos", "sin"]
    ours = [o for o in convert_fx(gm).ops if o.type not in ("Data", "NetOutput")]
    assert [_summary_ours(o) for o in ours] == [_summary_torchair(o) for o in ops]
