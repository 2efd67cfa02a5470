"""npu_swiglu: the tables the registry-wide tests read (samples, constraint cases, GE types,
schemas, the Meta grid) and the slice's own tests: the operator against its reference and
against an independent float64 formula over dtypes, dims, odd half sizes, 3-D, non-contiguous,
stride-0, empty and NaN / inf inputs and dynamic shapes; its schema / fake (opcheck); its
rules; its GE converter, ONNX translation (the custom node, and its composite run by
onnxruntime) and OpPlugin binding source."""

import pytest
import torch

from op_sdk.ops import swiglu as slice_module

OP = torch.ops.npu.npu_swiglu
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (shape, dim): the split dim's half sizes odd, one, and long; last, first and middle dims
SHAPES = [((1, 2), -1), ((7, 34), -1), ((2, 5, 130), -1), ((64, 1000), 1), ((6, 5, 3), 0),
          ((3, 8, 5), 1), ((2, 4, 6), -2)]

SCHEMAS = [
    "npu_swiglu(Tensor input, int dim=-1) -> Tensor",
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_swiglu": "SwiGlu"}


def samples():
    x = torch.randn(7, 34)
    return [("npu_swiglu", (x,), {}),
            ("npu_swiglu", (torch.randn(6, 5).to(torch.bfloat16),), {"dim": 0}),
            ("npu_swiglu", (torch.randn(4, 6, 3).half(),), {"dim": 1})]


def meta_grid():
    """Calls on which the CPU kernel, the fake and torch_npu's Meta function must agree on
    output shapes and dtypes (tests/npu/real)."""
    return [("npu_swiglu", (torch.randn(shape).to(dt),), {"dim": dim})
            for dt in DTYPES for shape, dim in SHAPES[:5]]


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("swiglu/dtype", "npu_swiglu", (torch.zeros(2, 8, dtype=torch.int32),), {}, "input", RuntimeError),
    ("swiglu/0-dim", "npu_swiglu", (torch.tensor(1.0),), {}, "input", RuntimeError),
    ("swiglu/odd", "npu_swiglu", (torch.zeros(2, 7),), {}, "input", RuntimeError),
    ("swiglu/dim-range", "npu_swiglu", (torch.zeros(2, 8),), {"dim": 2}, "dim", RuntimeError),
    ("swiglu/dim-negative", "npu_swiglu", (torch.zeros(2, 8),), {"dim": -3}, "dim", RuntimeError),
]


def _assert_same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def _formula(x, dim):
    """ops-nn's golden, in float64: silu(first half) * second half, rounded to x's dtype."""
    a, b = x.double().chunk(2, dim)
    return (a / (1 + torch.exp(-a)) * b).to(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", SHAPES, ids=str)
def test_matches_reference_and_formula(dtype, shape, dim):
    x = (torch.randn(shape) * 4).to(dtype)
    out = OP(x, dim)
    _assert_same(out, slice_module.swiglu_reference(x, dim))
    want = list(shape)
    want[dim] //= 2
    assert list(out.shape) == want
    # the float32 computation rounds once: within one step of the float64 formula
    tol = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
    torch.testing.assert_close(out.double(), _formula(x, dim).double(), rtol=tol, atol=tol)


def test_default_dim_is_the_last():
    x = torch.randn(3, 4, 10)
    _assert_same(OP(x), OP(x, -1))
    _assert_same(OP(x), OP(x, 2))


def test_non_contiguous_stride_zero_empty_and_nan():
    for x, dim in ((torch.randn(40, 30).t(), -1), (torch.randn(1, 18).expand(5, 18), -1),
                   (torch.randn(0, 8), -1), (torch.randn(4, 0), 1), (torch.randn(6, 0), 0),
                   (torch.tensor([[float("nan"), float("inf"), -float("inf"), 1.0, 2.0, -3.0,
                                   float("inf"), float("nan")]]), -1)):
        _assert_same(OP(x, dim), slice_module.swiglu_reference(x.contiguous(), dim))


def test_inf_and_nan_follow_the_formula():
    x = torch.tensor([[float("inf"), -float("inf"), float("nan"), 0.0, 1.0, 2.0, 1.0, 5.0]])
    out = OP(x)
    # silu(inf) * 1 = inf; silu(-inf) * 2 = -0 * 2 (exp overflow: -inf / inf = nan in the
    # naive formula; torch's silu gives -0.0); nan stays nan
    assert out[0, 0] == float("inf") and out[0, 2].isnan()
    _assert_same(out, slice_module.swiglu_reference(x))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_rules_name_operator_and_argument(case):
    _, _, args, kwargs, arg, exc = case
    for device in ("cpu", "meta"):
        with pytest.raises(exc, match=rf"npu_swiglu: argument '{arg}' must"):
            OP(*[a.to(device) for a in args], **kwargs)


def test_opcheck():
    for _, args, kwargs in samples():
        torch.library.opcheck(OP.default, args, kwargs,
                              test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


def test_compiles_with_dynamic_shapes():
    @torch.compile(backend="aot_eager", dynamic=True, fullgraph=True)
    def f(t):
        return OP(t) * 2

    for rows in (3, 9):
        x = torch.randn(rows, 18)
        torch.testing.assert_close(f(x), slice_module.swiglu_reference(x) * 2)


def test_ge_converter_builds_the_declared_prototype():
    from torch.fx.experimental.proxy_tensor import make_fx

    from op_sdk.converters import convert_fx, ir

    gm = make_fx(lambda t: OP(t, 0), tracing_mode="fake")(torch.randn(4, 16, dtype=torch.float16))
    graph = convert_fx(gm)
    (op,) = [o for o in graph.ops if o.type == "SwiGlu"]
    proto = ir.prototype("SwiGlu")
    assert [d.name for d in op.input_desc] == [i.name for i in proto.inputs] == ["x"]
    assert [d.name for d in op.output_desc] == ["y"]
    assert op.attr_values()["dim"] == 0
    assert graph.model_pbtxt("swiglu").count('type: "SwiGlu"') == 1


@pytest.mark.parametrize("dim", [-1, 0])
def test_onnx_export_writes_the_custom_node_and_its_composite(dim):
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    import op_sdk

    class M(torch.nn.Module):
        def forward(self, x):
            return OP(x, dim)

    x = torch.randn(6, 10)
    program = op_sdk.export_onnx(M().eval(), (x,))
    assert [n.op_type for n in program.model.graph].count("SwiGlu") == 1
    composite = op_sdk.export_onnx(M().eval(), (x,), composite_only=True)
    assert "SwiGlu" not in [n.op_type for n in composite.model.graph]
    # onnxruntime runs the model with the node: its function body inlined
    sess = ort.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
    torch.testing.assert_close(torch.from_numpy(got), OP(x, dim), rtol=1e-6, atol=1e-6)
