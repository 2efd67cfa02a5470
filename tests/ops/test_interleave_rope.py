"""npu_interleave_rope: the tables the registry-wide tests read (samples, constraint cases,
GE types, schema, the Meta grid) and the slice's own tests: the operator against the
aclnnInterleaveRope document's formula in float64 (de-interleave, then q * cos +
RotateHalf(q) * sin) and against npu_rotary_mul's "interleave-half" mode, bit for bit, over
dtypes, the cos / sin broadcasts, non-contiguous (the output in x's layout), stride-0, empty
and NaN / inf inputs and dynamic shapes; its rules; its GE converter and ONNX translation."""

import pytest
import torch

from op_sdk.ops import interleave_rope as slice_module

OP = torch.ops.npu.npu_interleave_rope
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (x shape, cos / sin shape): (B, N, S, 64) with cos / sin (B or 1, 1, S or 1, 64)
LAYOUTS = [((2, 3, 5, 64), (2, 1, 5, 64)), ((2, 3, 5, 64), (1, 1, 5, 64)),
           ((4, 16, 1, 64), (4, 1, 1, 64)), ((3, 2, 7, 64), (3, 1, 1, 64)),
           ((1, 1, 1, 64), (1, 1, 1, 64))]

SCHEMAS = ["npu_interleave_rope(Tensor x, Tensor cos, Tensor sin) -> Tensor"]

# the Ascend IR operator each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_interleave_rope": "InterleaveRope"}


def _inputs(shape, rshape, dtype=torch.float32):
    return (torch.randn(shape).to(dtype), torch.randn(rshape).to(dtype),
            torch.randn(rshape).to(dtype))


def samples():
    x, c, s = _inputs((2, 3, 4, 64), (2, 1, 4, 64))
    xh, ch, sh = _inputs((3, 2, 1, 64), (3, 1, 1, 64), torch.float16)
    return [("npu_interleave_rope", (x, c, s), {}), ("npu_interleave_rope", (xh, ch, sh), {})]


def meta_grid():
    """Calls on which the CPU kernel, the fake and torch_npu's Meta function must agree on
    output shapes and dtypes (tests/npu/real)."""
    return [("npu_interleave_rope", _inputs(shape, rshape, dt), {})
            for dt in DTYPES for shape, rshape in LAYOUTS[:4]]


_X, _C = torch.zeros(2, 3, 4, 64), torch.zeros(2, 1, 4, 64)
# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("interleave_rope/dtype", "npu_interleave_rope", (_X.int(), _C.int(), _C.int()), {}, "x",
     RuntimeError),
    ("interleave_rope/rank", "npu_interleave_rope", (torch.zeros(3, 4, 64), torch.zeros(3, 1, 64),
                                                     torch.zeros(3, 1, 64)), {}, "x", RuntimeError),
    ("interleave_rope/d", "npu_interleave_rope", (torch.zeros(2, 3, 4, 32), torch.zeros(2, 1, 4, 32),
                                                  torch.zeros(2, 1, 4, 32)), {}, "x", RuntimeError),
    ("interleave_rope/cos-n", "npu_interleave_rope", (_X, torch.zeros(2, 3, 4, 64), _C), {}, "cos",
     RuntimeError),
    ("interleave_rope/cos-s", "npu_interleave_rope", (_X, torch.zeros(2, 1, 3, 64), _C), {}, "cos",
     RuntimeError),
    ("interleave_rope/cos-dtype", "npu_interleave_rope", (_X, _C.half(), _C), {}, "cos", RuntimeError),
    ("interleave_rope/sin-shape", "npu_interleave_rope", (_X, _C, torch.zeros(1, 1, 4, 64)), {}, "sin",
     RuntimeError),
]


def _formula(x, c, s):
    """aclnnInterleaveRope's formulas in float64: q = reshape(x, [B, N, S, 32, 2])
    .transpose(-1, -2).reshape(B, N, S, 64); q * cos + RotateHalf(q) * sin."""
    b, n, sq, d = x.shape
    q = x.double().reshape(b, n, sq, d // 2, 2).transpose(-1, -2).reshape(b, n, sq, d)
    q1, q2 = q.chunk(2, -1)
    return (q * c.double() + torch.cat((-q2, q1), -1) * s.double()).to(x.dtype)


def _assert_same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,rshape", LAYOUTS, ids=str)
def test_matches_the_formula_and_rotary_mul(dtype, shape, rshape):
    torch.manual_seed(0)
    x, c, s = _inputs(shape, rshape, dtype)
    y = OP(x, c, s)
    _assert_same(y, slice_module.interleave_rope_reference(x, c, s))
    _assert_same(y, torch.ops.npu.npu_rotary_mul(x, c, s, "interleave-half"))
    # float32 inside, each product rounded: within a rounding of the float64 formula
    tol = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
    torch.testing.assert_close(y.double(), _formula(x, c, s).double(), rtol=tol, atol=tol)


def test_layouts_stride_zero_empty_and_nonfinite():
    x, c, s = _inputs((2, 5, 3, 64), (2, 1, 3, 64))
    xt = x.transpose(1, 2).contiguous().transpose(1, 2)  # dense, permuted (BSND memory)
    out = OP(xt, c, s)
    assert out.stride() == xt.stride()  # x's layout, as torch_npu's Meta (empty_like)
    _assert_same(out, OP(x, c, s))
    xe = torch.randn(2, 1, 3, 64).expand(2, 5, 3, 64)  # stride 0: written contiguous
    oe = OP(xe, c, s)
    assert oe.is_contiguous()
    _assert_same(oe, OP(xe.contiguous(), c, s))
    cs = torch.randn(2, 1, 3, 128)[..., ::2]  # strided cos
    _assert_same(OP(x, cs, s), OP(x, cs.contiguous(), s))
    assert OP(torch.randn(0, 2, 3, 64), torch.randn(0, 1, 3, 64), torch.randn(0, 1, 3, 64)).shape \
        == (0, 2, 3, 64)
    xn = x.clone()
    xn[0, 0, 0, 0], xn[1, 1, 1, 5], xn[1, 4, 2, 63] = float("nan"), float("inf"), -float("inf")
    _assert_same(OP(xn, c, s), slice_module.interleave_rope_reference(xn, c, s))


def test_compiles_with_dynamic_shapes():
    @torch.compile(backend="aot_eager", dynamic=True, fullgraph=True)
    def f(x, c, s):
        return OP(x, c, s) * 2

    for b in (3, 9):
        x, c, s = _inputs((b, 2, 1, 64), (b, 1, 1, 64))
        torch.testing.assert_close(f(x, c, s), slice_module.interleave_rope_reference(x, c, s) * 2)


def test_ge_converter():
    from torch.fx.experimental.proxy_tensor import make_fx

    from op_sdk.converters import convert_fx

    x, c, s = _inputs((2, 3, 4, 64), (2, 1, 4, 64), torch.float16)
    ops = [o for o in convert_fx(make_fx(lambda a, b, d: OP(a, b, d), tracing_mode="fake")(x, c, s)).ops
           if o.type not in ("Data", "NetOutput")]
    assert [o.type for o in ops] == ["InterleaveRope"]
    assert [d.name for d in ops[0].input_desc] == ["x", "cos", "sin"]


def test_onnx_export_runs_in_onnxruntime():
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    import op_sdk

    class M(torch.nn.Module):
        def forward(self, x, c, s):
            return OP(x, c, s)

    x, c, s = _inputs((2, 3, 4, 64), (2, 1, 4, 64))
    program = op_sdk.export_onnx(M().eval(), (x, c, s))
    assert [n.op_type for n in program.model.graph].count("InterleaveRope") == 1
    sess = ort.InferenceSession(program.model_proto.SerializeToString(),
                                providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    (got,) = sess.run(None, dict(zip(names, (a.numpy() for a in (x, c, s)))))
    torch.testing.assert_close(torch.from_numpy(got), OP(x, c, s), rtol=1e-5, atol=1e-5)
