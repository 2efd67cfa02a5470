"""my_ops::silu_mul_quant: the operator against its reference over dtypes, odd sizes, 3-D,
non-contiguous, stride-0, empty and NaN / inf inputs and dynamic shapes; its schema and fake
(opcheck); its rules; its fusion; its GE converter, ONNX translation and OpPlugin binding."""

import pathlib

import pytest
import torch

import op_sdk
from my_ops.ops import silu_mul_quant as slice_module

ROOT = pathlib.Path(__file__).resolve().parents[2]
OP = torch.ops.my_ops.silu_mul_quant
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(1, 1), (7, 33), (2, 5, 129), (64, 1000)]


def _inputs(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 3).to(dtype), torch.randn(shape, generator=g).to(dtype)


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("silu_mul_quant/shape", "my_ops::silu_mul_quant", (torch.zeros(2, 8), torch.zeros(2, 7)), {}, "up",
     RuntimeError),
    ("silu_mul_quant/dtype", "my_ops::silu_mul_quant", (torch.zeros(2, 8), torch.zeros(2, 8).half()), {}, "up",
     RuntimeError),
    ("silu_mul_quant/integer", "my_ops::silu_mul_quant",
     (torch.zeros(2, 8, dtype=torch.int32), torch.zeros(2, 8, dtype=torch.int32)), {}, "up", RuntimeError),
]


def _assert_same(got, want):
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_reference(dtype, shape):
    gate, up = _inputs(shape, dtype)
    y, scale = OP(gate, up)
    assert y.dtype == torch.int8 and scale.dtype == torch.float32 and scale.shape == shape[:-1]
    _assert_same((y, scale), slice_module.reference(gate, up))


def test_non_contiguous_stride_zero_empty_and_inf():
    gate, up = _inputs((40, 30))
    row = torch.randn(1, 17)
    cases = [(gate.t(), up.t()), (row.expand(5, 17), torch.randn(5, 17)), (torch.randn(0, 9), torch.randn(0, 9)),
             (torch.tensor([[float("inf"), -float("inf"), 1.0, 0.0]]), torch.ones(1, 4))]
    for g, u in cases:
        _assert_same(OP(g, u), slice_module.reference(g.contiguous(), u.contiguous()))


def test_zero_row_quantises_to_zero():
    gate, up = _inputs((3, 16))
    up[1] = 0
    y, scale = OP(gate, up)
    assert scale[1] == 0 and (y[1] == 0).all() and (scale[[0, 2]] > 0).all()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_rules_name_operator_and_argument(case):
    _, _, args, kwargs, arg, exc = case
    for device in ("cpu", "meta"):
        with pytest.raises(exc, match=rf"silu_mul_quant: argument '{arg}' must"):
            OP(*[a.to(device) for a in args], **kwargs)


def test_opcheck():
    torch.library.opcheck(OP.default, _inputs((7, 33)),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


def test_cpu_kernel_is_the_plugins_own():
    assert op_sdk.get_op("silu_mul_quant", "my_ops").kernel_devices()["cpu"] == "python"


def test_compiles_with_dynamic_shapes():
    @torch.compile(backend="aot_eager", dynamic=True, fullgraph=True)
    def f(g, u):
        y, s = OP(g, u)
        return y.float() * s[..., None]  # dequantised

    for rows in (3, 9):
        gate, up = _inputs((rows, 17))
        y, s = slice_module.reference(gate, up)
        assert torch.equal(f(gate, up), y.float() * s[..., None])


def _swiglu_quant(gate, up):
    return torch.ops.npu.npu_dynamic_quant(torch.nn.functional.silu(gate) * up)


def test_fusion_replaces_the_unfused_spelling():
    """A model written without the operator gets it from op_sdk's backend: the fusion
    derived from the declaration's composite (max-autotune: Inductor's decomposed silu)."""
    torch._dynamo.reset()
    config = op_sdk.CompilerConfig()
    config.mode = "max-autotune"
    backend = op_sdk.get_npu_backend(compiler_config=config)
    gate, up = _inputs((9, 64), torch.bfloat16)
    # Inductor's graph caches off: a cached graph skips the passes, and the report with them
    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        y, s = torch.compile(_swiglu_quant, backend=backend, fullgraph=True)(gate, up)
    assert op_sdk.explain(backend).patterns == {"silu_mul_quant": 1}
    # the fused operator computed it (fp32 inside: the unfused bf16 spelling rounds h first)
    _assert_same((y, s), slice_module.reference(gate, up))
    y_unfused, s_unfused = _swiglu_quant(gate, up)
    assert (y.int() - y_unfused.int()).abs().max() <= 1
    torch.testing.assert_close(s, s_unfused, rtol=2e-2, atol=0)


def test_ge_converter_builds_the_declared_prototype():
    from torch.fx.experimental.proxy_tensor import make_fx

    from op_sdk.converters import convert_fx, ir

    gm = make_fx(lambda g, u: OP(g, u), tracing_mode="fake")(*_inputs((4, 16), torch.float16))
    graph = convert_fx(gm)
    (op,) = [o for o in graph.ops if o.type == "SiluMulQuant"]
    proto = ir.prototype("SiluMulQuant")
    assert [d.name for d in op.input_desc] == [i.name for i in proto.inputs] == ["gate", "up"]
    assert [d.name for d in op.output_desc] == ["y", "scale"]
    assert graph.model_pbtxt("silu_mul_quant").count('type: "SiluMulQuant"') == 1


def test_onnx_export_writes_the_fused_node_and_its_composite():
    pytest.importorskip("onnxscript")

    class M(torch.nn.Module):
        def forward(self, g, u):
            return OP(g, u)

    args = _inputs((3, 16))
    program = op_sdk.export_onnx(M().eval(), args)
    assert [n.op_type for n in program.model.graph].count("SiluMulQuant") == 1
    composite = op_sdk.export_onnx(M().eval(), args, composite_only=True)
    assert "SiluMulQuant" not in [n.op_type for n in composite.model.graph]


def test_aclnn_prototype_is_the_one_cann_generates_from_the_opdef():
    """The declaration in the ops file is what CANN generates from the kernel's OpDef:
    change one, and this says the other must follow."""
    from op_sdk.npu import prototypes

    opdef = ROOT / "kernels" / "ascendc" / "silu_mul_quant" / "op_host" / "silu_mul_quant_def.cpp"
    params = prototypes.prototype_from_opdef(str(opdef), "SiluMulQuant")
    assert params == prototypes.PROTOTYPES["aclnnSiluMulQuant"].params


def test_binding_source_is_the_generated_one():
    from op_sdk.library import get_op
    from op_sdk.npu.binding import check_source, generate_source

    opdef = get_op("silu_mul_quant", "my_ops")
    source = (ROOT / "csrc" / "npu" / "silu_mul_quant.cpp").read_text()
    assert source == generate_source(opdef), "regenerate it: op_sdk.npu.binding.generate_source"
    check_source(opdef, source)


def test_binding_compiles_against_torch_npu():
    from op_sdk.app import ascendc_run

    include = ascendc_run.torch_npu_include()
    if include is None:
        pytest.skip("torch_npu is not installed: its headers build the OpPlugin binding")
    ascendc_run.compile_binding(ROOT / "csrc" / "npu" / "silu_mul_quant.cpp", include)


def test_the_example_runs():
    slice_module.main()
