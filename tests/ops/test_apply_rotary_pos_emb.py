"""npu_apply_rotary_pos_emb: the tables the registry-wide tests read (samples, constraint
cases, GE types, schema, the Meta grid) and the slice's own tests: the operator against the
aclnnApplyRotaryPosEmbV2 document's formulas in float64 and against npu_rotary_mul on query
and key, bit for bit, over dtypes, the four layouts, GQA head counts, non-contiguous (each
result in its input's layout), empty and NaN / inf inputs and dynamic shapes; its inputs
never written; its rules; its GE converter and ONNX translation."""

import pytest
import torch

from op_sdk.ops import apply_rotary_pos_emb as slice_module

OP = torch.ops.npu.npu_apply_rotary_pos_emb
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
MODES = ["half", "quarter", "interleave"]
# layout -> (query shape, key shape, cos / sin shape)
SHAPES = {"BSND": ((2, 3, 4, 64), (2, 3, 1, 64), (2, 3, 1, 64)),
          "BSH": ((1, 5, 2, 128), (1, 5, 2, 128), (1, 5, 1, 128)),
          "SBND": ((3, 2, 4, 64), (3, 2, 2, 64), (3, 2, 1, 64)),
          "BNSD": ((2, 4, 3, 128), (2, 1, 3, 128), (2, 1, 3, 128)),
          "TND": ((7, 4, 64), (7, 2, 64), (7, 1, 64))}

SCHEMAS = ["npu_apply_rotary_pos_emb(Tensor query, Tensor key, Tensor cos, Tensor sin, str layout='BSND', str rotary_mode='half') -> (Tensor, Tensor)"]  # noqa: E501

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_apply_rotary_pos_emb": ("TensorMove", "ApplyRotaryPosEmb")}


def _inputs(layout, dtype=torch.float32):
    q, k, r = SHAPES[layout]
    return tuple(torch.randn(s).to(dtype) for s in (q, k, r, r))


def samples():
    return [("npu_apply_rotary_pos_emb", _inputs("BSND"), {}),
            ("npu_apply_rotary_pos_emb", _inputs("TND", torch.float16), {"layout": "TND"}),
            ("npu_apply_rotary_pos_emb", _inputs("BNSD", torch.bfloat16),
             {"layout": "BNSD", "rotary_mode": "interleave"})]


def meta_grid():
    """Calls on which the CPU kernel, the fake and torch_npu's Meta function must agree on
    output shapes and dtypes (tests/npu/real)."""
    return [("npu_apply_rotary_pos_emb", _inputs(layout, dt), {"layout": layout})
            for dt in DTYPES for layout in ("BSND", "SBND", "BNSD", "TND")]


_Q, _K, _C = torch.zeros(2, 3, 4, 64), torch.zeros(2, 3, 2, 64), torch.zeros(2, 3, 1, 64)
# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("apply_rope/layout", "npu_apply_rotary_pos_emb", (_Q, _K, _C, _C), {"layout": "BHSD"},
     "layout", RuntimeError),
    ("apply_rope/mode", "npu_apply_rotary_pos_emb", (_Q, _K, _C, _C),
     {"rotary_mode": "interleave-half"}, "rotary_mode", RuntimeError),
    ("apply_rope/dtype", "npu_apply_rotary_pos_emb", (_Q.int(), _K.int(), _C.int(), _C.int()), {},
     "query", RuntimeError),
    ("apply_rope/rank", "npu_apply_rotary_pos_emb", (_Q, _K, _C, _C), {"layout": "TND"}, "query",
     RuntimeError),
    ("apply_rope/d", "npu_apply_rotary_pos_emb", (torch.zeros(2, 3, 4, 32), torch.zeros(2, 3, 2, 32),
                                                  torch.zeros(2, 3, 1, 32), torch.zeros(2, 3, 1, 32)),
     {}, "query", RuntimeError),
    ("apply_rope/key-dtype", "npu_apply_rotary_pos_emb", (_Q, _K.half(), _C, _C), {}, "key",
     RuntimeError),
    ("apply_rope/key-shape", "npu_apply_rotary_pos_emb", (_Q, torch.zeros(2, 4, 2, 64), _C, _C), {},
     "key", RuntimeError),
    ("apply_rope/cos-heads", "npu_apply_rotary_pos_emb", (_Q, _K, torch.zeros(2, 3, 4, 64), _C), {},
     "cos", RuntimeError),
    ("apply_rope/cos-broadcast", "npu_apply_rotary_pos_emb", (_Q, _K, torch.zeros(1, 3, 1, 64), _C),
     {}, "cos", RuntimeError),
    ("apply_rope/sin-dtype", "npu_apply_rotary_pos_emb", (_Q, _K, _C, _C.half()), {}, "sin",
     RuntimeError),
]


def _rotate64(x, mode):
    """The document's rotate(x) per rotary_mode, float64."""
    if mode == "half":
        x1, x2 = x.chunk(2, -1)
        return torch.cat((-x2, x1), -1)
    if mode == "quarter":
        q = x.chunk(4, -1)
        return torch.cat((-q[1], q[0], -q[3], q[2]), -1)
    return torch.stack((-x[..., 1::2], x[..., 0::2]), -1).reshape(x.shape)


def _formula(x, c, s, mode):
    x64 = x.double()
    return (x64 * c.double() + _rotate64(x64, mode) * s.double()).to(x.dtype)


def _assert_same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


TOL = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout", list(SHAPES))
def test_matches_the_formulas_and_rotary_mul(dtype, mode, layout):
    torch.manual_seed(0)
    q, k, c, s = _inputs(layout, dtype)
    before = (q.clone(), k.clone())
    qo, ko = OP(q, k, c, s, layout, mode)
    assert torch.equal(q, before[0]) and torch.equal(k, before[1])  # inputs unwritten
    for got, x in ((qo, q), (ko, k)):
        _assert_same(got, torch.ops.npu.npu_rotary_mul(x, c, s, mode))
        torch.testing.assert_close(got.double(), _formula(x, c, s, mode).double(),
                                   rtol=TOL[dtype], atol=TOL[dtype])
    for got, want in zip((qo, ko), slice_module.apply_rotary_pos_emb_reference(q, k, c, s, layout, mode)):
        _assert_same(got, want)


def test_layouts_empty_and_nonfinite():
    q, k, c, s = _inputs("BSND")
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)  # dense, permuted
    qo, ko = OP(qt, k, c, s)
    assert qo.stride() == qt.stride() and ko.is_contiguous()  # empty_like, as torch_npu's Meta
    _assert_same(qo, OP(q, k, c, s)[0])
    ke = torch.randn(2, 3, 1, 64).expand(2, 3, 2, 64)  # stride 0: written contiguous
    _assert_same(OP(q, ke, c, s)[1], OP(q, ke.contiguous(), c, s)[1])
    e = OP(torch.randn(0, 4, 64), torch.randn(0, 2, 64), torch.randn(0, 1, 64), torch.randn(0, 1, 64),
           "TND")
    assert [t.shape for t in e] == [(0, 4, 64), (0, 2, 64)]
    qn = q.clone()
    qn[0, 0, 0, 0], qn[1, 2, 3, 63] = float("nan"), float("inf")
    for got, want in zip(OP(qn, k, c, s), slice_module.apply_rotary_pos_emb_reference(qn, k, c, s)):
        _assert_same(got, want)


def test_compiles_with_dynamic_shapes():
    @torch.compile(backend="aot_eager", dynamic=True, fullgraph=True)
    def f(q, k, c, s):
        qo, ko = OP(q, k, c, s, "TND")
        return qo * 2, ko

    for t in (3, 9):
        q, k, c, s = (torch.randn(t, n, 64) for n in (4, 2, 1, 1))
        want = slice_module.apply_rotary_pos_emb_reference(q, k, c, s, "TND")
        got = f(q, k, c, s)
        torch.testing.assert_close(got[0], want[0] * 2)
        torch.testing.assert_close(got[1], want[1])


def test_ge_converter():
    from torch.fx.experimental.proxy_tensor import make_fx

    from op_sdk.converters import convert_fx

    q, k, c, s = _inputs("BNSD", torch.float16)
    ops = [o for o in convert_fx(make_fx(lambda *a: OP(*a, "BNSD", "quarter"),
                                         tracing_mode="fake")(q, k, c, s)).ops
           if o.type not in ("Data", "NetOutput")]
    assert [o.type for o in ops] == ["TensorMove", "TensorMove", "ApplyRotaryPosEmb"]
    attrs = ops[-1].attr_values()
    assert attrs["layout"] == 3 and attrs["rotary_mode"] == "quarter"
    assert [d.name for d in ops[-1].output_desc] == ["query", "key"]


@pytest.mark.parametrize("layout,mode", [("BSND", "half"), ("TND", "interleave"), ("SBND", "quarter")])
def test_onnx_export_runs_in_onnxruntime(layout, mode):
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    import op_sdk

    class M(torch.nn.Module):
        def forward(self, q, k, c, s):
            return OP(q, k, c, s, layout, mode)

    args = _inputs(layout)
    program = op_sdk.export_onnx(M().eval(), args)
    assert [n.op_type for n in program.model.graph].count("ApplyRotaryPosEmb") == 1
    sess = ort.InferenceSession(program.model_proto.SerializeToString(),
                                providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    got = sess.run(None, dict(zip(names, (a.numpy() for a in args))))
    for a, b in zip(got, M()(*args)):
        torch.testing.assert_close(torch.from_numpy(a), b, rtol=1e-5, atol=1e-5)
