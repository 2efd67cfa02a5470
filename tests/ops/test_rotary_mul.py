"""npu_rotary_mul and npu_rotary_mul_backward: the tables the registry-wide tests read
(samples: opcheck in five layouts; constraint cases: each rule on cpu and meta; GE types,
schemas, the Meta grid) and the slice's own tests: the
operator against an independent float64 formula of each rotary_mode (ops-transformer's golden)
over dtypes, layouts (BNSD / BSND / SBND / TND broadcasts), 3-D, non-contiguous, stride-0, empty
and NaN / inf inputs and dynamic shapes; autograd (the backward operator) and the rotate
matrix; its rules; its GE converters, ONNX translation (run by onnxruntime) and bindings."""

import pytest
import torch

from op_sdk.ops import rotary_mul as slice_module

OP = torch.ops.npu.npu_rotary_mul
BACKWARD = torch.ops.npu.npu_rotary_mul_backward
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
MODES = ["half", "interleave", "quarter", "interleave-half"]
# (x shape, cos / sin shape): BNSD 11SD / B1SD, BSND 1S1D / BS1D, SBND S11D, TND T1D / TND
LAYOUTS = [((2, 3, 5, 8), (1, 1, 5, 8)), ((2, 3, 5, 8), (2, 1, 5, 8)), ((2, 5, 3, 16), (1, 5, 1, 16)),
           ((2, 5, 3, 16), (2, 5, 1, 16)), ((5, 2, 3, 12), (5, 1, 1, 12)), ((7, 3, 4), (7, 1, 4)),
           ((7, 3, 4), (7, 3, 4)), ((1, 1, 1, 128), (1, 1, 1, 128)),
           # S = 1 (decode): the kernel's runs move to the heads, with and without a stride
           ((3, 4, 1, 8), (3, 4, 1, 8)), ((3, 4, 1, 8), (1, 4, 1, 8)), ((3, 4, 1, 8), (3, 1, 1, 8))]

SCHEMAS = [
    "npu_rotary_mul(Tensor input, Tensor r1, Tensor r2, str rotary_mode='half', Tensor? rotate=None) -> Tensor",  # noqa: E501
    "npu_rotary_mul_backward(Tensor grad, Tensor input, Tensor r1, Tensor r2, str rotary_mode='half') -> (Tensor, Tensor, Tensor)",  # noqa: E501
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_rotary_mul": ("RotaryMul", "RotaryPositionEmbedding"),
            "npu::npu_rotary_mul_backward": ("RotaryMulGrad", "RotaryPositionEmbeddingGrad")}


def _inputs(shape, rshape, dtype=torch.float32):
    return (torch.randn(shape).to(dtype), torch.randn(rshape).to(dtype),
            torch.randn(rshape).to(dtype))


def samples():
    """Calls every registry-wide test makes (the TorchAir comparison among them: half mode,
    as TorchAir's A2 / A3 converters write it; the other modes are tested below)."""
    x, c, s = _inputs((2, 3, 4, 64), (1, 1, 4, 64))
    xh, ch, sh = _inputs((3, 2, 16), (3, 1, 16), torch.float16)
    return [("npu_rotary_mul", (x, c, s), {}),
            ("npu_rotary_mul", (xh, ch, sh), {}),
            ("npu_rotary_mul", (x, c, s), {"rotary_mode": "half", "rotate": torch.randn(64, 64)}),
            ("npu_rotary_mul_backward", (torch.randn(2, 3, 4, 64), x, c, s), {})]


def meta_grid():
    """Calls on which the CPU kernel, the fake and torch_npu's Meta function must agree on
    output shapes and dtypes (tests/npu/real)."""
    out = []
    for dt in DTYPES:
        for shape, rshape in LAYOUTS[:6]:
            x, c, s = _inputs(shape, rshape, dt)
            out += [("npu_rotary_mul", (x, c, s), {}),
                    ("npu_rotary_mul_backward", (torch.randn(shape).to(dt), x, c, s), {})]
    return out


_X, _C = torch.zeros(2, 3, 4, 8), torch.zeros(1, 1, 4, 8)
# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("rotary/dtype", "npu_rotary_mul", (_X.int(), _C, _C), {}, "input", RuntimeError),
    ("rotary/rank", "npu_rotary_mul", (torch.zeros(4, 8), torch.zeros(4, 8), torch.zeros(4, 8)), {},
     "input", RuntimeError),
    ("rotary/mode", "npu_rotary_mul", (_X, _C, _C), {"rotary_mode": "full"}, "rotary_mode", RuntimeError),
    ("rotary/odd-d", "npu_rotary_mul", (torch.zeros(2, 3, 4, 7),) + (torch.zeros(1, 1, 4, 7),) * 2, {},
     "input", RuntimeError),
    ("rotary/quarter-d", "npu_rotary_mul", (torch.zeros(2, 3, 4, 6),) + (torch.zeros(1, 1, 4, 6),) * 2,
     {"rotary_mode": "quarter"}, "input", RuntimeError),
    ("rotary/r1-shape", "npu_rotary_mul", (_X, torch.zeros(1, 2, 4, 8), _C), {}, "r1", RuntimeError),
    ("rotary/r1-rank", "npu_rotary_mul", (_X, torch.zeros(4, 8), _C), {}, "r1", RuntimeError),
    ("rotary/r1-dtype", "npu_rotary_mul", (_X, _C.int(), _C), {}, "r1", RuntimeError),
    ("rotary/r2-shape", "npu_rotary_mul", (_X, _C, torch.zeros(2, 1, 4, 8)), {}, "r2", RuntimeError),
    ("rotary/rotate-shape", "npu_rotary_mul", (_X, _C, _C), {"rotate": torch.zeros(8, 7)}, "rotate",
     RuntimeError),
    ("rotary/rotate-mode", "npu_rotary_mul", (_X, _C, _C), {"rotary_mode": "quarter",
                                                          "rotate": torch.zeros(8, 8)}, "rotate",
     RuntimeError),
    ("rotary_backward/grad", "npu_rotary_mul_backward", (torch.zeros(2, 3, 4, 4), _X, _C, _C), {},
     "grad", RuntimeError),
    ("rotary_backward/mode", "npu_rotary_mul_backward", (_X, _X, _C, _C), {"rotary_mode": "x"},
     "rotary_mode", RuntimeError),
]


def _rot64(x, mode):
    """ops-transformer's golden.py per mode, float64: (A(x), B(x))."""
    if mode == "half":
        x1, x2 = x.chunk(2, -1)
        return x, torch.cat((-x2, x1), -1)
    if mode == "interleave":
        return x, torch.stack((-x[..., 1::2], x[..., 0::2]), -1).reshape(x.shape)
    if mode == "quarter":
        q = x.chunk(4, -1)
        return x, torch.cat((-q[1], q[0], -q[3], q[2]), -1)
    return (torch.cat((x[..., 0::2], x[..., 1::2]), -1),
            torch.cat((-x[..., 1::2], x[..., 0::2]), -1))


def _formula(x, c, s, mode):
    a, b = _rot64(x.double(), mode)
    return (a * c.to(x.dtype).double() + b * s.to(x.dtype).double()).to(x.dtype)


TOL = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}


def _assert_same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,rshape", LAYOUTS, ids=str)
def test_matches_reference_and_formula(dtype, mode, shape, rshape):
    if mode == "quarter" and shape[-1] % 4:
        pytest.skip("quarter needs a multiple of 4")
    x, c, s = _inputs(shape, rshape, dtype)
    out = OP(x, c, s, mode)
    _assert_same(out, slice_module.rotary_mul_reference(x, c, s, mode))
    tol = TOL[dtype]
    torch.testing.assert_close(out.double(), _formula(x, c, s, mode).double(), rtol=tol, atol=tol)


def test_r1_r2_of_another_dtype_are_rounded_to_inputs_first():
    x, c, s = _inputs((2, 2, 3, 8), (1, 1, 3, 8), torch.bfloat16)
    c32, s32 = c.float() + 1e-3, s.float() - 1e-3
    _assert_same(OP(x, c32, s32), OP(x, c32.bfloat16(), s32.bfloat16()))


def test_rotate_matrix():
    """With rotate, B(x) = x @ rotate; the matrix of "half" gives the "half" result."""
    x, c, s = _inputs((2, 3, 4, 8), (1, 1, 4, 8))
    rot = torch.randn(8, 8)
    torch.testing.assert_close(OP(x, c, s, "half", rot), x * c + (x @ rot) * s)
    h = torch.zeros(8, 8)
    h[:4, 4:] = torch.eye(4)
    h[4:, :4] = -torch.eye(4)
    torch.testing.assert_close(OP(x, c, s, "half", h), OP(x, c, s, "half"))


def test_non_contiguous_stride_zero_empty_and_nonfinite():
    x, c, s = _inputs((2, 5, 3, 8), (1, 5, 1, 8))
    xt = x.transpose(1, 2).contiguous().transpose(1, 2)  # dense, permuted
    out = OP(xt, c, s)
    assert out.is_contiguous()  # as torch_npu's Meta allocates it
    _assert_same(out, OP(x, c, s))
    xe = torch.randn(1, 1, 3, 8).expand(2, 5, 3, 8)
    _assert_same(OP(xe, c, s), OP(xe.contiguous(), c, s))
    assert OP(torch.randn(0, 3, 8), torch.randn(0, 1, 8), torch.randn(0, 1, 8)).shape == (0, 3, 8)
    # a dim -2 of size 1 whose strides differ between cos and sin (rows padded to 11: a
    # slice of a wider buffer; the fuzz campaign's find)
    xp = torch.randn(16, 128, 1, 11)[..., :8]
    cp, sp = torch.randn(1, 1, 1, 11)[..., :8], torch.randn(1, 1, 1, 8)
    _assert_same(OP(xp, cp, sp), slice_module.rotary_mul_reference(xp, cp, sp))
    xn = x.clone()
    xn[0, 0, 0, 0], xn[1, 1, 1, 5] = float("nan"), float("inf")
    for mode in MODES:
        _assert_same(OP(xn, c, s, mode), slice_module.rotary_mul_reference(xn, c, s, mode))


def test_compiles_with_dynamic_shapes():
    @torch.compile(backend="aot_eager", dynamic=True, fullgraph=True)
    def f(x, c, s):
        return OP(x, c, s, "interleave") * 2

    for t in (3, 9):
        x, c, s = _inputs((t, 2, 8), (t, 1, 8))
        torch.testing.assert_close(f(x, c, s), slice_module.rotary_mul_reference(x, c, s, "interleave") * 2)


def _grads64(g, x, c, s, mode):
    xd, cd, sd = (t.double().requires_grad_() for t in (x, c, s))
    a, b = _rot64(xd, mode)
    return torch.autograd.grad(a * cd + b * sd, (xd, cd, sd), g.double())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,rshape", LAYOUTS[:6], ids=str)
def test_backward_matches_reference_and_the_formulas_gradient(dtype, mode, shape, rshape):
    x, c, s = _inputs(shape, rshape, dtype)
    g = torch.randn(shape).to(dtype)
    out = BACKWARD(g, x, c, s, mode)
    for got, want in zip(out, slice_module.rotary_mul_backward_reference(g, x, c, s, mode)):
        _assert_same(got, want)
    assert out[1].shape == c.shape and out[2].shape == s.shape
    tol = TOL[dtype] * (8 if dtype != torch.float32 else 10)  # the broadcast sums
    for got, want in zip(out, _grads64(g, x, c, s, mode)):
        torch.testing.assert_close(got.double(), want.to(dtype).double(), rtol=tol, atol=tol)


@pytest.mark.parametrize("mode", MODES)
def test_autograd_calls_the_backward_operator(mode):
    x, c, s = (t.requires_grad_() for t in _inputs((2, 3, 4, 8), (1, 1, 4, 8)))
    g = torch.randn(2, 3, 4, 8)
    got = torch.autograd.grad(OP(x, c, s, mode), (x, c, s), g)
    for a, b in zip(got, _grads64(g, x.detach(), c.detach(), s.detach(), mode)):
        torch.testing.assert_close(a.double(), b, rtol=1e-5, atol=1e-5)
    with torch.profiler.profile() as prof:
        torch.autograd.grad(OP(x, c, s, mode), (x, c, s), g)
    assert any(e.name == "npu::npu_rotary_mul_backward" for e in prof.events())


def test_autograd_with_rotate():
    x, c, s = (t.requires_grad_() for t in _inputs((2, 3, 4, 8), (1, 1, 4, 8)))
    rot = torch.randn(8, 8)
    g = torch.randn(2, 3, 4, 8)
    got = torch.autograd.grad(OP(x, c, s, "half", rot), (x, c, s), g)
    want = torch.autograd.grad(x * c + (x @ rot) * s, (x, c, s), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def _ge(fn, *args):
    from torch.fx.experimental.proxy_tensor import make_fx

    from op_sdk.converters import convert_fx

    return [o for o in convert_fx(make_fx(fn, tracing_mode="fake")(*args)).ops
            if o.type not in ("Data", "NetOutput")]


def test_ge_converters():
    x, c, s = _inputs((2, 3, 4, 64), (1, 1, 4, 64), torch.float16)
    (op,) = _ge(lambda a, b, d: OP(a, b, d), x, c, s)
    assert op.type == "RotaryMul" and [d.name for d in op.input_desc] == ["x", "r1", "r2"]
    ops = _ge(lambda a, b, d: OP(a, b, d, "interleave"), x, c, s)
    assert [o.type for o in ops] == ["RotaryPositionEmbedding"] and ops[0].attr_values()["mode"] == 1
    ops = _ge(lambda a, b, d: OP(a, b.float(), d.float(), "quarter"), x, c, s)
    assert [o.type for o in ops].count("Cast") == 4 and ops[-1].attr_values()["mode"] == 2
    (op,) = _ge(lambda g, a, b, d: BACKWARD(g, a, b, d), x, x, c, s)
    assert op.type == "RotaryMulGrad" and [d.name for d in op.output_desc] == ["dx", "dr1", "dr2"]
    (op,) = _ge(lambda g, a, b, d: BACKWARD(g, a, b, d, "interleave-half"), x, x, c, s)
    assert op.type == "RotaryPositionEmbeddingGrad" and op.attr_values()["mode"] == 3
    assert [d.name for d in op.input_desc] == ["dy", "cos", "sin", "x"]


@pytest.mark.parametrize("mode", MODES)
def test_onnx_export_runs_in_onnxruntime(mode):
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    import op_sdk

    class M(torch.nn.Module):
        def forward(self, x, c, s):
            return OP(x, c, s, mode)

    class B(torch.nn.Module):
        def forward(self, g, x, c, s):
            return BACKWARD(g, x, c, s, mode)

    x, c, s = _inputs((2, 3, 4, 8), (1, 3, 1, 8))
    g = torch.randn(2, 3, 4, 8)
    for model, args, ir_type in ((M(), (x, c, s), "RotaryPositionEmbedding"),
                                 (B(), (g, x, c, s), "RotaryPositionEmbeddingGrad")):
        program = op_sdk.export_onnx(model.eval(), args)
        assert [n.op_type for n in program.model.graph].count(ir_type) == 1
        sess = ort.InferenceSession(program.model_proto.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        got = sess.run(None, dict(zip(names, (a.numpy() for a in args))))
        want = model(*args)
        for a, b in zip(got, want if isinstance(want, tuple) else (want,)):
            torch.testing.assert_close(torch.from_numpy(a), b, rtol=1e-5, atol=1e-5)
