"""op_sdk.onnx.fuse_model / ``op-sdk fuse``: the groups found in an exported Llama and in
hand-built graphs, the rules that refuse a group, the benefit threshold, the outputs of the
fused model in onnxruntime, the CLI."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (a test dependency of "
                                          "op_sdk.onnx)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (a test "
                                                "dependency of op_sdk.onnx)")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from op_sdk.onnx import check, fuse_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = 2


def _run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _ops(model):
    return [(n.domain, n.op_type) for n in model.graph.node]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=LAYERS,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   vocab_size=128, intermediate_size=128,
                                   max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).float().eval()

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids):
            return self.m(input_ids=ids, use_cache=False).logits

    wrapper = Logits(model).eval()
    ids = torch.randint(0, 128, (2, 8))
    path = str(tmp_path_factory.mktemp("onnx") / "llama.onnx")
    torch.onnx.export(wrapper, (ids,), path, dynamo=True, input_names=["input_ids"],
                      output_names=["logits"],
                      dynamic_shapes={"ids": {0: "batch", 1: "sequence"}}, verbose=False)
    with torch.no_grad():
        eager = wrapper(ids).numpy()
    return path, ids.numpy(), eager


def test_llama_groups_outputs_and_replacements(llama):
    path, ids, eager = llama
    model, report = fuse_model(path, dim_hints={"batch": 2, "sequence": 8})
    norms = report.found("rms_norm") + report.found("add_rms_norm")
    assert len(norms) == 2 * LAYERS + 1, report.format()
    assert report.found("add_rms_norm"), report.format()
    assert len(report.found("swiglu")) == LAYERS, report.format()
    assert all(g.status == "fused" for g in report.groups), report.format()
    assert report.nodes_after < report.nodes_before
    check(model)
    ops = _ops(model)
    assert ("", "SimplifiedLayerNormalization") in ops  # the exporter writes opset < 23
    assert ("com.microsoft", "SkipSimplifiedLayerNormalization") in ops
    assert ("op_sdk.npu", "SiluMul") in ops
    assert {(f.domain, f.name) for f in model.functions} == {("op_sdk.npu", "SiluMul")}
    producer = {o: n for n in model.graph.node for o in n.output}
    assert not [n for n in model.graph.node if n.op_type == "ReduceMean"
                and producer.get(n.input[0]) is not None
                and producer[n.input[0]].op_type == "Pow"]
    before = _run(onnx.load(path), {"input_ids": ids})[0]
    after = _run(model, {"input_ids": ids})[0]
    np.testing.assert_allclose(after, before, atol=1e-4, rtol=0)
    np.testing.assert_allclose(after, eager, atol=1e-4, rtol=0)
    d = report.as_dict()
    assert d["nodes_before"] == report.nodes_before and d["groups"][0]["benefit_us"] > 0


# --- hand-built graphs ---------------------------------------------------------------------

D = 16


def _norm_model(opset=20, axes=(-1,), keepdims=1, exponent=2.0, eps=np.array(1e-6, np.float32),
                spelling="pow_reciprocal", residual=False, extra_user=False):
    """x [2, 3, D] -> RMSNorm as torch exports it, weight [D]; optionally x = a + b with the
    sum a second output; optionally 'mean' a second output too (another user)."""
    nodes, inits = [], [numpy_helper.from_array(np.linspace(0.5, 1.5, D, dtype=np.float32), "w"),
                        numpy_helper.from_array(np.asarray(eps, np.float32), "eps")]
    inputs = [h.make_tensor_value_info("x" if not residual else "a", T.FLOAT, [2, 3, D])]
    outputs = [h.make_tensor_value_info("y", T.FLOAT, [2, 3, D])]
    if residual:
        inputs.append(h.make_tensor_value_info("b", T.FLOAT, [2, 3, D]))
        nodes.append(h.make_node("Add", ["a", "b"], ["x"], name="residual"))
        outputs.append(h.make_tensor_value_info("x", T.FLOAT, [2, 3, D]))
    if spelling == "mul_div":
        nodes.append(h.make_node("Mul", ["x", "x"], ["sq"], name="square"))
    else:
        inits.append(numpy_helper.from_array(np.array(exponent, np.float32), "two"))
        nodes.append(h.make_node("Pow", ["x", "two"], ["sq"], name="pow"))
    if opset >= 18:
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        nodes.append(h.make_node("ReduceMean", ["sq", "axes"], ["mean"], name="mean",
                                 keepdims=keepdims))
    else:
        nodes.append(h.make_node("ReduceMean", ["sq"], ["mean"], name="mean", axes=list(axes),
                                 keepdims=keepdims))
    nodes += [h.make_node("Add", ["mean", "eps"], ["var"], name="add_eps"),
              h.make_node("Sqrt", ["var"], ["std"], name="sqrt")]
    if spelling == "div_x":
        nodes.append(h.make_node("Div", ["x", "std"], ["normed"], name="normalise"))
    else:
        if spelling == "mul_div":
            inits.append(numpy_helper.from_array(np.array(1.0, np.float32), "one"))
            nodes.append(h.make_node("Div", ["one", "std"], ["inv"], name="inv"))
        else:
            nodes.append(h.make_node("Reciprocal", ["std"], ["inv"], name="inv"))
        nodes.append(h.make_node("Mul", ["x", "inv"], ["normed"], name="normalise"))
    nodes.append(h.make_node("Mul", ["w", "normed"], ["y"], name="scale"))
    if extra_user:
        outputs.append(h.make_tensor_value_info("mean", T.FLOAT, None))
    graph = h.make_graph(nodes, "norm", inputs, outputs, inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _feeds(model, seed=0):
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
            .astype(np.float32) for i in model.graph.input}


def _same_outputs(model, fused, atol=1e-5):
    feeds = _feeds(model)
    for a, b in zip(_run(model, feeds), _run(fused, feeds)):
        np.testing.assert_allclose(b, a, atol=atol, rtol=0)


@pytest.mark.parametrize("opset,op", [(17, ("", "SimplifiedLayerNormalization")),
                                      (20, ("", "SimplifiedLayerNormalization")),
                                      (23, ("", "RMSNormalization"))])
@pytest.mark.parametrize("spelling", ["pow_reciprocal", "mul_div", "div_x"])
def test_rms_norm_replacement_by_opset(opset, op, spelling):
    model = _norm_model(opset=opset, spelling=spelling)
    fused, report = fuse_model(model)
    assert [g.status for g in report.groups] == ["fused"], report.format()
    assert _ops(fused) == [op]
    assert {t.name for t in fused.graph.initializer} == {"w"}  # eps, exponent, axes dropped
    check(fused)
    _same_outputs(model, fused)


def test_add_rms_norm_rewires_the_sum():
    model = _norm_model(residual=True)
    fused, report = fuse_model(model)
    (g,) = report.groups
    assert (g.kind, g.status) == ("add_rms_norm", "fused"), report.format()
    (node,) = fused.graph.node
    assert (node.domain, node.op_type) == ("com.microsoft", "SkipSimplifiedLayerNormalization")
    assert list(node.output) == ["y", "", "", "x"]
    check(fused)
    _same_outputs(model, fused)


@pytest.mark.parametrize("kwargs,rule", [
    ({"axes": (1,)}, "ReduceMean 'mean' axes [1] (rank 3): the rule needs the last axis"),
    ({"keepdims": 0}, "keepdims=0: the rule needs keepdims=1"),
    ({"exponent": 3.0}, "Pow 'pow' exponent 3: the rule needs the scalar constant 2"),
    ({"eps": np.full([D], 1e-6, np.float32)},
     "epsilon 'eps' shape [16]: the rule needs a scalar constant"),
    ({"extra_user": True}, "intermediate 'mean' (ReduceMean 'mean') is a graph output"),
    ({"axes": (1,), "opset": 17}, "axes [1] (rank 3): the rule needs the last axis"),
])
def test_rms_norm_refused_with_rule(kwargs, rule):
    model = _norm_model(**kwargs)
    fused, report = fuse_model(model)
    (g,) = report.groups
    assert g.status == "refused" and rule in g.reason, g.reason
    assert _ops(fused) == _ops(model)


def test_intermediate_with_another_user_refused():
    model = _norm_model()
    model.graph.node.append(h.make_node("Neg", ["inv"], ["neg"], name="other"))
    model.graph.output.append(h.make_tensor_value_info("neg", T.FLOAT, None))
    fused, report = fuse_model(model)
    (g,) = report.groups
    assert g.status == "refused", report.format()
    assert "intermediate 'inv' (Reciprocal 'inv') has another user (Neg 'other')" in g.reason
    assert len(fused.graph.node) == len(model.graph.node)


def test_huge_threshold_rejects_and_leaves_the_model():
    model = _norm_model(residual=True)
    fused, report = fuse_model(model, threshold_us=1e9, device="npu")
    (g,) = report.groups
    assert g.status == "rejected" and "<= threshold" in g.reason
    assert g.prediction["accepted"] is False
    assert fused.SerializeToString() == model.SerializeToString()
    assert "rejected" in report.format()


def test_already_fused_rms_normalization_counted():
    node = h.make_node("RMSNormalization", ["x", "w"], ["y"], axis=-1, epsilon=1e-6)
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, [2, D])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2, D])],
                         [numpy_helper.from_array(np.ones(D, np.float32), "w")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 23)])
    _, report = fuse_model(model)
    assert [(g.kind, g.status) for g in report.groups] == [("rms_norm", "already fused")]


def _silu_quant_model(quant=True, swiglu=True, opset=20, divisor=127.0):
    inits = [numpy_helper.from_array(np.array([-1], np.int64), "axes"),
             numpy_helper.from_array(np.array(divisor, np.float32), "c127"),
             numpy_helper.from_array(np.array(-128.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(127.0, np.float32), "hi")]
    inputs = [h.make_tensor_value_info("g", T.FLOAT, [4, 3, D])]
    nodes, outputs = [], []
    x = "g"
    if swiglu:
        inputs.append(h.make_tensor_value_info("up", T.FLOAT, [4, 3, D]))
        nodes += [h.make_node("Sigmoid", ["g"], ["sig"], name="sigmoid"),
                  h.make_node("Mul", ["g", "sig"], ["silu"], name="silu"),
                  h.make_node("Mul", ["silu", "up"], ["hidden"], name="gate_up")]
        x = "hidden"
    if quant:
        nodes += [h.make_node("Abs", [x], ["abs"], name="abs"),
                  h.make_node("ReduceMax", ["abs", "axes"], ["amax"], name="amax", keepdims=1),
                  h.make_node("Div", ["amax", "c127"], ["scale"], name="scale"),
                  h.make_node("Div", [x, "scale"], ["scaled"], name="scaled"),
                  h.make_node("Round", ["scaled"], ["rounded"], name="round"),
                  h.make_node("Clip", ["rounded", "lo", "hi"], ["clamped"], name="clamp"),
                  h.make_node("Cast", ["clamped"], ["q"], name="to_int8", to=T.INT8)]
        outputs = [h.make_tensor_value_info("q", T.INT8, [4, 3, D]),
                   h.make_tensor_value_info("scale", T.FLOAT, [4, 3, 1])]
    else:
        outputs = [h.make_tensor_value_info(x, T.FLOAT, [4, 3, D])]
    graph = h.make_graph(nodes, "silu_quant", inputs, outputs, inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _quant_outputs_match(model, fused):
    feeds = _feeds(model, seed=1)
    (qa, sa), (qb, sb) = _run(model, feeds), _run(fused, feeds)
    assert qb.dtype == np.int8 and sb.dtype == np.float32
    assert np.abs(qa.astype(np.int32) - qb.astype(np.int32)).max() <= 1
    np.testing.assert_allclose(sb, sa, rtol=1e-6, atol=0)


@pytest.mark.parametrize("swiglu,quant,kind,op", [
    (True, False, "swiglu", "SiluMul"),
    (False, True, "dynamic_quant", "DynamicQuant"),
    (True, True, "silu_mul_quant", "SiluMulQuant"),
])
@pytest.mark.parametrize("opset", [17, 20])
def test_custom_domain_groups_with_function_fallback(swiglu, quant, kind, op, opset):
    model = _silu_quant_model(quant=quant, swiglu=swiglu, opset=opset)
    if opset < 18 and quant:  # ReduceMax takes axes as an attribute below opset 18
        amax = next(n for n in model.graph.node if n.op_type == "ReduceMax")
        del amax.input[1:]
        amax.attribute.append(h.make_attribute("axes", [-1]))
    fused, report = fuse_model(model)
    assert [(g.kind, g.status) for g in report.groups] == [(kind, "fused")], report.format()
    # a quant's node gives a float32 scale of the rows' shape: unsqueezed back to the graph's
    assert _ops(fused) == [("op_sdk.npu", op)] + ([("", "Unsqueeze")] if quant else [])
    assert [(f.domain, f.name) for f in fused.functions] == [("op_sdk.npu", op)]
    check(fused)
    if quant:
        _quant_outputs_match(model, fused)
    else:
        _same_outputs(model, fused)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_fused_dynamic_quant_is_the_exported_one(tmp_path, dtype):
    """One definition of op_sdk.npu.DynamicQuant: the node, overload and function the fusion
    writes are those op_sdk.export_onnx writes for torch.ops.npu.npu_dynamic_quant."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    import op_sdk

    model = _silu_quant_model(swiglu=False)
    if dtype == "float16":
        for vi in list(model.graph.input) + [model.graph.output[1]]:
            vi.type.tensor_type.elem_type = T.FLOAT16
        for init in model.graph.initializer:
            if init.name in ("c127", "lo", "hi"):
                init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name))
    fused, report = fuse_model(model)
    assert [g.status for g in report.groups] == ["fused"], report.format()
    (node,) = [n for n in fused.graph.node if n.domain == "op_sdk.npu"]
    (fn,) = fused.functions

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.npu.npu_dynamic_quant(x)

    x = torch.randn(4, 3, D, dtype=getattr(torch, dtype))
    exported = op_sdk.export_onnx(M().eval(), (x,)).model_proto
    (enode,) = [n for n in exported.graph.node if n.domain == "op_sdk.npu"]
    (efn,) = [f for f in exported.functions if f.name == "DynamicQuant"]
    assert (node.op_type, node.overload, list(node.attribute)) == (enode.op_type, enode.overload,
                                                                   list(enode.attribute))
    assert [n.op_type for n in fn.node] == [n.op_type for n in efn.node]
    assert (list(fn.input), list(fn.output), fn.overload) == (list(efn.input), list(efn.output), efn.overload)
    check(fused)
    feeds = {k: v.astype(dtype) for k, v in _feeds(model, seed=2).items()}
    feeds["g"][1, 2] = 0  # an all-zero row: scale 0 and y 0, as the operator defines it
    q, scale = _run(fused, feeds)
    assert scale.dtype == np.dtype(dtype) and scale.shape == (4, 3, 1)
    assert scale[1, 2, 0] == 0 and (q[1, 2] == 0).all()
    want_y, want_scale = torch.ops.npu.npu_dynamic_quant(torch.from_numpy(feeds["g"]))
    np.testing.assert_array_equal(q, want_y.numpy())
    np.testing.assert_array_equal(scale[..., 0], want_scale.numpy().astype(dtype))


def test_dynamic_quant_refused_divisor():
    model = _silu_quant_model(swiglu=False, divisor=100.0)
    fused, report = fuse_model(model)
    (g,) = report.groups
    assert g.status == "refused" and "divisor 100: the rule needs the scalar constant 127" in \
        g.reason
    assert _ops(fused) == _ops(model)


def test_import_op_sdk_does_not_import_onnx():
    code = ("import sys, op_sdk, op_sdk.onnx; "
            "print(sorted(m for m in ('onnx', 'onnxruntime', 'onnxscript') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT}, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_cli_end_to_end(tmp_path):
    src, out, rep = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(_norm_model(residual=True), src)
    proc = subprocess.run([sys.executable, "-m", "op_sdk", "fuse", str(src), "-o", str(out),
                           "--report", str(rep), "--device", "npu", "--dim", "batch=2"],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr
    assert "add_rms_norm" in proc.stdout and "fused -> com.microsoft." in proc.stdout
    data = json.loads(rep.read_text())
    assert data["nodes_before"] == 8 and data["nodes_after"] == 1 and data["device"] == "npu"
    assert data["groups"][0]["status"] == "fused" and data["groups"][0]["benefit_us"] > 0
    check(onnx.load(out))
    bad = subprocess.run([sys.executable, "-m", "op_sdk", "fuse", str(src), "-o", str(out),
                          "--dim", "batch"], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert bad.returncode == 2 and "--dim takes NAME=VALUE" in bad.stderr


# --- small PyTorch modules, exported ---------------------------------------------------------

def _export(module, args, path, **kwargs):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")
    torch.onnx.export(module.eval(), args, str(path), dynamo=True, verbose=False, **kwargs)
    return onnx.load(str(path))


@pytest.mark.parametrize("opset", [None, 23])
def test_exported_nn_rms_norm(tmp_path, opset):
    torch = pytest.importorskip("torch")
    norm = torch.nn.RMSNorm(D, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, D))
    x = torch.randn(2, 3, D)
    model = _export(norm, (x,), tmp_path / "norm.onnx",
                    **({} if opset is None else {"opset_version": opset}))
    fused, report = fuse_model(model)
    (g,) = report.groups
    if model.opset_import[0].version >= 23:  # the exporter wrote RMSNormalization itself
        assert (g.kind, g.status) == ("rms_norm", "already fused")
        assert _ops(fused) == [("", "RMSNormalization")]
    else:
        assert (g.kind, g.status) == ("rms_norm", "fused"), report.format()
        assert _ops(fused) == [("", "SimplifiedLayerNormalization")]
    (y,) = _run(fused, {model.graph.input[0].name: x.numpy()})
    np.testing.assert_allclose(y, norm(x).detach().numpy(), atol=1e-5, rtol=0)


class _HfNorm:
    """Hugging Face's LlamaRMSNorm.forward, as a module factory (torch imported lazily)."""

    @staticmethod
    def make(dtype):
        import torch

        class Norm(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, D).to(dtype))

            def forward(self, x):
                x32 = x.float()
                var = x32.pow(2).mean(-1, keepdim=True)
                return self.weight * (x32 * torch.rsqrt(var + 1e-6)).to(x.dtype)

        return Norm()


def test_exported_hf_fp16_norm_takes_its_casts(tmp_path):
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 3, D).half()
    model = _export(_HfNorm.make(torch.float16), (x,), tmp_path / "hf16.onnx")
    fused, report = fuse_model(model)
    (g,) = report.groups
    assert g.status == "fused" and g.ops.count("Cast") == 2, report.format()
    (node,) = fused.graph.node
    assert node.op_type == "SimplifiedLayerNormalization" and node.input[0] == "x"
    check(fused)
    feeds = {"x": x.numpy()}
    np.testing.assert_allclose(_run(fused, feeds)[0].astype(np.float32),
                               _run(model, feeds)[0].astype(np.float32), atol=2e-3, rtol=0)


def test_exported_bf16_norm_refused_for_onnxruntime_cpu(tmp_path):
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 3, D).bfloat16()
    model = _export(_HfNorm.make(torch.bfloat16), (x,), tmp_path / "hf_bf16.onnx")
    fused, report = fuse_model(model)
    (g,) = report.groups
    assert g.status == "refused", report.format()
    assert "element type bfloat16 has no onnxruntime CPU kernel" in g.reason
    assert _ops(fused) == _ops(model)
