"""npu_swiglu and npu_swiglu_backward: the tables the registry-wide tests read (samples, constraint cases, GE types,
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
    "npu_swiglu_backward(Tensor grad_output, Tensor input, int dim=-1) -> Tensor",
]
BACKWARD = torch.ops.npu.npu_swiglu_backward

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_swiglu": "SwiGlu", "npu::npu_swiglu_backward": "SwiGluGrad"}


def samples():
    x = torch.randn(7, 34)
    return [("npu_swiglu", (x,), {}),
            ("npu_swiglu", (torch.randn(6, 5).to(torch.bfloat16),), {"dim": 0}),
            ("npu_swiglu", (torch.randn(4, 6, 3).half(),), {"dim": 1}),
            ("npu_swiglu_backward", (torch.randn(7, 17), x), {}),
            ("npu_swiglu_backward", (torch.randn(2, 6, 3).half(), torch.randn(4, 6, 3).half()), {"dim": 0})]


def fuzz_bound(name, args, kwargs):
    """The fuzz campaign's (tests/fuzz) extra error bound of npu_swiglu_backward's elements.
    The CPU kernel's exp and torch's differ by an ulp or two (see _KERNEL_TOL), and the first
    half's g (s + s (1 - s) a) b cancels near a = -1.28, so a difference of a few float32 ulps
    in s or in the intermediate terms is bounded by 16 * 2^-24 * |g b| s (1 + |a|) there, and
    by 16 * 2^-24 * |g s a| in the second half (float64, from the inputs). None for the
    forward (no cancellation: within the dtype's tolerance) and for calls it does not read."""
    if name != "npu_swiglu_backward" or len(args) < 2:
        return None
    g, x = args[0], args[1]
    dim = kwargs.get("dim", args[2] if len(args) > 2 else -1)
    if not (g.is_floating_point() and x.is_floating_point()) or x.dim() == 0 \
            or not -x.dim() <= dim < x.dim() or x.shape[dim] % 2:
        return None
    a, b = x.double().chunk(2, dim)
    if g.shape != a.shape:
        return None
    g = g.double()
    s = torch.sigmoid(a)
    ulps = 16 * 2.0 ** -24
    first = ulps * (g * b).abs() * s * (1 + a.abs())
    second = ulps * (g * s * a).abs()
    return [torch.cat((first, second), dim).nan_to_num(nan=float("inf"))]


def meta_grid():
    """Calls on which the CPU kernel, the fake and torch_npu's Meta function must agree on
    output shapes and dtypes (tests/npu/real)."""
    out = []
    for dt in DTYPES:
        for shape, dim in SHAPES[:5]:
            x = torch.randn(shape).to(dt)
            half = list(shape)
            half[dim] //= 2
            out += [("npu_swiglu", (x,), {"dim": dim}),
                    ("npu_swiglu_backward", (torch.randn(half).to(dt), x), {"dim": dim})]
    return out


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("swiglu/dtype", "npu_swiglu", (torch.zeros(2, 8, dtype=torch.int32),), {}, "input", RuntimeError),
    ("swiglu/0-dim", "npu_swiglu", (torch.tensor(1.0),), {}, "input", RuntimeError),
    ("swiglu/odd", "npu_swiglu", (torch.zeros(2, 7),), {}, "input", RuntimeError),
    ("swiglu/dim-range", "npu_swiglu", (torch.zeros(2, 8),), {"dim": 2}, "dim", RuntimeError),
    ("swiglu/dim-negative", "npu_swiglu", (torch.zeros(2, 8),), {"dim": -3}, "dim", RuntimeError),
    ("swiglu_backward/odd", "npu_swiglu_backward", (torch.zeros(2, 3), torch.zeros(2, 7)), {}, "input",
     RuntimeError),
    ("swiglu_backward/shape", "npu_swiglu_backward", (torch.zeros(2, 8), torch.zeros(2, 8)), {}, "grad_output",
     RuntimeError),
    ("swiglu_backward/dtype", "npu_swiglu_backward", (torch.zeros(2, 4).half(), torch.zeros(2, 8)), {},
     "grad_output", RuntimeError),
    ("swiglu_backward/dim", "npu_swiglu_backward", (torch.zeros(2, 4), torch.zeros(2, 8)), {"dim": 5}, "dim",
     RuntimeError),
]


# The native CPU kernel's exp (kernels/swiglu.inl) and torch's (Sleef, or the C library
# in its tails) are each within an ulp or two of exp, not the same bits: float32 results
# agree within a few ulp, float16 / bfloat16 ones within one rounding step (a value on a
# rounding boundary). atol covers a = -88.7..-104, where one exp overflows and the other
# does not (silu about 1e-37 against -0).
_KERNEL_TOL = {torch.float32: (8 * 2.0 ** -24, 1e-30), torch.float16: (2.0 ** -10, 2.0 ** -24),
               torch.bfloat16: (2.0 ** -7, 2.0 ** -133)}


# The gradient's first half, g (s + s (1 - s) a) b, cancels where s (1 - s) a is near -s
# (a near -1.28), which magnifies those ulps: compared at the float64 formula's tolerance.
_BACKWARD_TOL = {torch.float32: (1e-5, 1e-6), torch.float16: (2e-3, 1e-5),
                 torch.bfloat16: (1.6e-2, 1e-4)}


def _assert_same(got, want, backward=False):
    """The operator (the CPU kernel) against its reference: see _KERNEL_TOL."""
    assert got.shape == want.shape and got.dtype == want.dtype
    rtol, atol = (_BACKWARD_TOL if backward else _KERNEL_TOL)[got.dtype]
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True)


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
    op = case[1]
    for device in ("cpu", "meta"):
        with pytest.raises(exc, match=rf"{op}: argument '{arg}' must"):
            getattr(torch.ops.npu, op)(*[a.to(device) for a in args], **kwargs)


def test_opcheck():
    for name, args, kwargs in samples():
        op = getattr(torch.ops.npu, name).default
        torch.library.opcheck(op, args, kwargs,
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


def _grad_formula(g, x, dim):
    """aclnnSwiGluGrad's formula, in float64, rounded to x's dtype."""
    a, b = x.double().chunk(2, dim)
    g = g.double()
    s = torch.sigmoid(a)
    return torch.cat((g * (s + s * (1 - s) * a) * b, g * s * a), dim).to(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", SHAPES, ids=str)
def test_backward_matches_reference_and_formula(dtype, shape, dim):
    x = (torch.randn(shape) * 4).to(dtype)
    half = list(shape)
    half[dim] //= 2
    g = torch.randn(half).to(dtype)
    out = BACKWARD(g, x, dim)
    _assert_same(out, slice_module.swiglu_backward_reference(g, x, dim), backward=True)
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    torch.testing.assert_close(out.double(), _grad_formula(g, x, dim).double(), rtol=tol, atol=tol)


def test_backward_non_contiguous_and_empty():
    x = torch.randn(12, 5).t()
    g = torch.randn(5, 6)
    out = BACKWARD(g, x)
    _assert_same(out, slice_module.swiglu_backward_reference(g.contiguous(), x.contiguous()),
                 backward=True)
    assert out.stride() == x.stride()  # input's layout, as torch_npu's Meta (empty_like)
    assert BACKWARD(torch.randn(0, 4), torch.randn(0, 8)).shape == (0, 8)


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_autograd_calls_the_backward_operator(dim):
    """Autograd of npu_swiglu is npu_swiglu_backward (as torch_npu's is): the gradient of the
    composite silu(a) * b in float32, and the backward operator is what runs."""
    x = torch.randn(4, 6, 8, requires_grad=True)
    g = torch.randn(OP(x, dim).shape)
    (got,) = torch.autograd.grad(OP(x, dim), x, g)
    a, b = x.chunk(2, dim)
    (want,) = torch.autograd.grad(torch.nn.functional.silu(a) * b, x, g)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    _assert_same(got, BACKWARD(g, x.detach(), dim))
    with torch.profiler.profile() as prof:
        torch.autograd.grad(OP(x, dim), x, g)
    assert any(e.name == "npu::npu_swiglu_backward" for e in prof.events())


def test_autograd_compiles():
    @torch.compile(backend="aot_eager", fullgraph=True)
    def f(t):
        return OP(t).square().sum()

    x = torch.randn(5, 12, requires_grad=True)
    (got,) = torch.autograd.grad(f(x), x)
    x2 = x.detach().requires_grad_(True)
    (want,) = torch.autograd.grad(OP(x2).square().sum(), x2)
    torch.testing.assert_close(got, want)


def test_backward_ge_converter():
    from torch.fx.experimental.proxy_tensor import make_fx

    from op_sdk.converters import convert_fx

    x = torch.randn(4, 16, dtype=torch.float16)
    gm = make_fx(lambda g, t: BACKWARD(g, t, 0), tracing_mode="fake")(torch.randn(2, 16).half(), x)
    (op,) = [o for o in convert_fx(gm).ops if o.type == "SwiGluGrad"]
    assert [d.name for d in op.input_desc] == ["y_grad", "x"]
    assert [d.name for d in op.output_desc] == ["y"]
    assert op.attr_values()["dim"] == 0


@pytest.mark.parametrize("dim", [-1, 0])
def test_backward_onnx_export_runs_in_onnxruntime(dim):
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    import op_sdk

    class M(torch.nn.Module):
        def forward(self, g, x):
            return BACKWARD(g, x, dim)

    x = torch.randn(6, 10)
    g = torch.randn(OP(x, dim).shape)
    program = op_sdk.export_onnx(M().eval(), (g, x))
    assert [n.op_type for n in program.model.graph].count("SwiGluGrad") == 1
    sess = ort.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    (got,) = sess.run(None, dict(zip(names, (g.numpy(), x.numpy()))))
    torch.testing.assert_close(torch.from_numpy(got), BACKWARD(g, x, dim), rtol=1e-5, atol=1e-5)
