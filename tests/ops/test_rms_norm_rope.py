"""op_sdk::rms_norm_rope: the native CPU kernel is the chain npu_rotary_mul(npu_rms_norm(x, gamma,
eps)[0], cos, sin) bit for bit (and the reference the chain of their references) over dtypes and
gamma pairs, head dims (odd halves, the longest), 3-D / 4-D, cos / sin broadcast over each dim,
Qwen3's transposed view (read in place), strided / stride-0 / empty inputs, NaN and inf; its
rules; autograd against the chain's; dynamic shapes; opcheck; the GE converter, the ONNX
translation (run by onnxruntime) and the aclnn prototype CANN generates from the OpDef; the
registry-wide tables (the binding's source and its compile: tests/npu)."""

import pathlib

import pytest
import torch

from op_sdk.ops import rms_norm_rope as slice_module
from op_sdk.ops.rms_norm import rms_norm_reference
from op_sdk.ops.rotary_mul import rotary_mul_reference
from tests.ops._helpers import T, bad, bf16, fp16, fp32, npu, rand, zeros

ROOT = pathlib.Path(__file__).resolve().parents[2]
OP = torch.ops.op_sdk.rms_norm_rope
NAME = "op_sdk::rms_norm_rope"

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {NAME: "RmsNormRope"}

# (x dtype, gamma dtype): npu_rms_norm's pairs
PAIRS = [(fp32, fp32), (bf16, bf16), (fp16, fp16), (bf16, fp32), (fp16, fp32)]


def _inputs(xshape, cshape, dtype=fp32, gdtype=None, cdtype=None):
    x = rand(*xshape, dtype=dtype, scale=3.0)
    g = (torch.rand(xshape[-1]) + 0.5).to(gdtype or dtype)
    c, s = rand(*cshape, dtype=cdtype or dtype), rand(*cshape, dtype=cdtype or dtype)
    return x, g, c, s


def samples():
    return [
        (NAME, _inputs((2, 5, 3, 16), (2, 5, 1, 16), bf16), {}),
        (NAME, _inputs((7, 2, 8), (7, 1, 8)), {"epsilon": 1e-5}),
        (NAME, _inputs((2, 3, 4, 6), (1, 1, 4, 6), fp16, fp32), {}),
    ]


_X, _G, _C = T(2, 3, 8), T(8), T(2, 1, 8)

# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("rms_norm_rope/x-dtype", NAME, (T(2, 3, 8, dtype=torch.float64), T(8, dtype=torch.float64), _C, _C), {},
     "x", RuntimeError),
    ("rms_norm_rope/x-rank", NAME, (T(3, 8), _G, T(1, 8), T(1, 8)), {}, "x", RuntimeError),
    ("rms_norm_rope/odd-d", NAME, (T(2, 3, 7), T(7), T(2, 1, 7), T(2, 1, 7)), {}, "x", RuntimeError),
    ("rms_norm_rope/d-too-long", NAME, (T(1, 1, 1026), T(1026), T(1, 1, 1026), T(1, 1, 1026)), {}, "x",
     RuntimeError),
    ("rms_norm_rope/gamma-2d", NAME, (_X, T(3, 8), _C, _C), {}, "gamma", RuntimeError),
    ("rms_norm_rope/gamma-length", NAME, (_X, T(6), _C, _C), {}, "gamma", RuntimeError),
    ("rms_norm_rope/gamma-pair", NAME, (_X, T(8, dtype=bf16), _C, _C), {}, "gamma", RuntimeError),
    ("rms_norm_rope/cos-broadcast", NAME, (_X, _G, T(2, 2, 8), T(2, 2, 8)), {}, "cos", RuntimeError),
    ("rms_norm_rope/sin-shape", NAME, (_X, _G, _C, T(1, 1, 8)), {}, "sin", RuntimeError),
    ("rms_norm_rope/cos-dtype", NAME, (_X, _G, T(2, 1, 8, dtype=torch.int32), _C), {}, "cos", RuntimeError),
]

BAD_CALLS = [
    bad(NAME, "gamma", zeros(2, 3, 8), zeros(8, dtype=fp16), zeros(2, 1, 8), zeros(2, 1, 8)),
    bad(NAME, "x", zeros(2, 3, 9), zeros(9), zeros(2, 1, 9), zeros(2, 1, 9)),
    bad(NAME, "cos", zeros(2, 3, 8), zeros(8), zeros(2, 2, 8), zeros(2, 2, 8)),
]


# the relative size of one ulp of each dtype (2^(1 - p))
_ULP = {fp32: 2.0 ** -23, fp16: 2.0 ** -10, bf16: 2.0 ** -7}


def fuzz_bound(name, args, kwargs):
    """The fuzz campaign's (tests/fuzz) extra error bound of the elements: the kernel's sum of
    squares runs in another order than the reference's, so t (the norm rounded to x's dtype)
    may differ by an ulp, and the rotation carries it: |t1| |cos1| + |t2| |sin1| ulps of t for
    the first half, |t2| |cos2| + |t1| |sin2| for the second (float64, from the inputs). None
    for calls outside the operator's rules."""
    if len(args) < 4:
        return None
    x, g, c, s = args[:4]
    if not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in (x, g, c, s)) \
            or x.dtype not in _ULP or x.dim() not in (3, 4) or x.shape[-1] % 2 or g.dim() != 1 \
            or g.shape[0] != x.shape[-1] or c.shape != s.shape or c.dim() != x.dim():
        return None
    try:
        cs = [t.to(x.dtype).double().expand(x.shape) for t in (c, s)]
    except RuntimeError:
        return None
    eps = kwargs.get("epsilon", args[4] if len(args) > 4 else 1e-6)
    xd = x.double()
    t = (xd / torch.sqrt(xd.square().mean(-1, keepdim=True) + eps) * g.double()).abs()
    h = x.shape[-1] // 2
    t1, t2 = t[..., :h], t[..., h:]
    cd, sd = cs[0].abs(), cs[1].abs()
    bound = torch.cat((t1 * cd[..., :h] + t2 * sd[..., :h], t2 * cd[..., h:] + t1 * sd[..., h:]), -1)
    return [(_ULP[x.dtype] * bound).nan_to_num(nan=float("inf"), posinf=float("inf"))]


def _chain(x, g, c, s, eps=1e-6):
    return npu.npu_rotary_mul(npu.npu_rms_norm(x, g, eps)[0], c, s)


SHAPES = [  # (x, cos / sin)
    ((2, 9, 4, 128), (2, 9, 1, 128)),   # Qwen3's BSND, cos per token
    ((2, 4, 9, 128), (2, 1, 9, 128)),   # BNSD
    ((1, 3, 2, 30), (1, 3, 1, 30)),     # halves of 15 elements
    ((17, 3, 64), (17, 1, 64)),         # TND
    ((5, 7, 2), (1, 1, 2)),             # one cos row for every row
    ((3, 1, 1, 1024), (3, 1, 1, 1024)),  # the longest head dim, decode's single token
    ((2, 3, 5, 16), (2, 3, 5, 16)),     # cos per row
]


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{str(p[0])[6:]}-{str(p[1])[6:]}")
@pytest.mark.parametrize("xs,cs", SHAPES, ids=str)
def test_native_kernel_is_the_chain_bit_for_bit(pair, xs, cs):
    torch.manual_seed(sum(xs))
    x, g, c, s = _inputs(xs, cs, *pair)
    got = OP(x, g, c, s, 1e-5)
    assert got.dtype == x.dtype and got.shape == x.shape and got.is_contiguous()
    assert torch.equal(got, _chain(x, g, c, s, 1e-5))
    # the reference is the chain of the two references, bit for bit
    ref = slice_module.rms_norm_rope_reference(x, g, c, s, 1e-5)
    assert torch.equal(ref, rotary_mul_reference(rms_norm_reference(x, g, 1e-5)[0], c, s))
    tol = {fp32: 1e-5, fp16: 4e-3, bf16: 3e-2}[x.dtype]
    torch.testing.assert_close(got.float(), ref.float(), rtol=tol, atol=tol * 4)


def test_layouts_read_in_place_and_other_cos_dtypes():
    """Qwen3's transposed view is read in place (its result the chain's, contiguous); strided
    heads, stride-0 rows, a float32 cos / sin with bfloat16 x (rounded to x's dtype first)."""
    torch.manual_seed(0)
    x, g, c, s = _inputs((2, 9, 4, 64), (2, 9, 1, 64), bf16)
    xt, ct, st = x.transpose(1, 2), c.transpose(1, 2), s.transpose(1, 2)
    assert not xt.is_contiguous()
    got = OP(xt, g, ct, st)
    assert got.is_contiguous() and torch.equal(got, _chain(xt, g, ct, st))
    wide = rand(2, 9, 4, 128, dtype=bf16)[..., ::2]  # a last dim with stride 2: copied first
    assert torch.equal(OP(wide, g, c, s), _chain(wide, g, c, s))
    rows = rand(1, 1, 3, 64, dtype=bf16).expand(2, 9, 3, 64)  # stride-0 batch and tokens
    assert torch.equal(OP(rows, g, c, s), _chain(rows, g, c, s))
    c32, s32 = c.float(), s.float()
    assert torch.equal(OP(x, g, c32, s32), _chain(x, g, c32, s32))
    assert torch.equal(OP(x, g, c32, s32), OP(x, g, c32.to(bf16), s32.to(bf16)))


def test_empty_nan_and_inf():
    g = torch.rand(8) + 0.5
    for xs in ((0, 3, 8), (2, 0, 3, 8)):
        x = torch.empty(xs)
        c = torch.ones(*xs[:-2], 1, 8)
        y = OP(x, g, c, c)
        assert y.shape == x.shape
    for dt in (fp32, bf16, fp16):  # the rounding in registers keeps NaN / inf as a store does
        x = torch.tensor([[[1.0, float("nan"), 2.0, 3.0], [1.0, float("inf"), 2.0, 3.0],
                           [1.0, 2.0, 3.0, 4.0]]]).repeat(1, 1, 8).to(dt)
        c, s = torch.randn(1, 3, 32).to(dt), torch.randn(1, 3, 32).to(dt)
        c[0, 2, 0] = float("inf")
        g = torch.linspace(0.5, 2, 32).to(dt)
        got = OP(x, g, c, s)
        torch.testing.assert_close(got, _chain(x, g, c, s), equal_nan=True, rtol=0, atol=0)
        ref = slice_module.rms_norm_rope_reference(x, g, c, s)
        assert torch.equal(got.isnan(), ref.isnan()) and torch.equal(got.isinf(), ref.isinf())
        assert torch.isnan(got[0, 0]).all() and torch.isnan(got[0, 1]).any()


def test_rules_name_the_operator_and_argument():
    x, g, c = torch.zeros(2, 3, 7), torch.zeros(7), torch.zeros(2, 1, 7)
    for device in ("cpu", "meta"):
        with pytest.raises(RuntimeError, match=r"rms_norm_rope: argument 'x' must have a last dim that is a "
                                               r"positive multiple of 2"):
            OP(x.to(device), g.to(device), c.to(device), c.to(device))
    with pytest.raises(RuntimeError, match=r"rms_norm_rope: argument 'gamma' must be 1-D"):
        OP(torch.zeros(2, 3, 8), torch.zeros(3, 8), torch.zeros(2, 1, 8), torch.zeros(2, 1, 8))


def test_autograd_is_the_chains():
    torch.manual_seed(0)
    x, g, c, s = (t.requires_grad_() for t in _inputs((2, 5, 3, 16), (2, 5, 1, 16)))
    w = torch.randn(2, 5, 3, 16)
    (OP(x, g, c, s, 1e-5) * w).sum().backward()
    grads = [t.grad.clone() for t in (x, g, c, s)]
    for t in (x, g, c, s):
        t.grad = None
    (_chain(x, g, c, s, 1e-5) * w).sum().backward()
    for got, want in zip(grads, (t.grad for t in (x, g, c, s))):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_opcheck():
    x, g, c, s = _inputs((2, 5, 3, 16), (2, 5, 1, 16))
    torch.library.opcheck(OP.default, (x, g, c, s), test_utils=("test_schema", "test_faketensor",
                                                                 "test_aot_dispatch_static"))


def test_compiles_with_dynamic_shapes():
    f = torch.compile(lambda *a: OP(*a) * 2, dynamic=True, fullgraph=True)
    for tokens in (3, 9):
        x, g, c, s = _inputs((2, tokens, 4, 16), (2, tokens, 1, 16), bf16)
        assert torch.equal(f(x, g, c, s), OP(x, g, c, s) * 2)


def test_ge_converter_builds_the_declared_prototype():
    from torch.fx.experimental.proxy_tensor import make_fx

    from op_sdk.converters import convert_fx, ir

    x, g, c, s = _inputs((2, 5, 3, 16), (2, 5, 1, 16), fp16, fp32, fp32)
    graph = convert_fx(make_fx(lambda *a: OP(*a, 1e-5), tracing_mode="fake")(x, g, c, s))
    ops = [o for o in graph.ops if o.type not in ("Data", "NetOutput")]
    # cos / sin cast to x's dtype (the OpDef's), gamma kept float32 (a pair the kernel has)
    assert [o.type for o in ops] == ["Cast", "Cast", "RmsNormRope"]
    (op,) = [o for o in ops if o.type == "RmsNormRope"]
    assert [d.name for d in op.input_desc] == [i.name for i in ir.prototype("RmsNormRope").inputs]
    assert [d.name for d in op.output_desc] == ["y"]
    assert graph.model_pbtxt("rms_norm_rope").count('type: "RmsNormRope"') == 1


@pytest.mark.parametrize("dt,tol", [(None, 1e-5), (bf16, 2e-2)])
def test_onnx_export_runs_in_onnxruntime(tmp_path, dt, tol):
    """The custom node RmsNormRope (its local function) and the composite-only export, run by
    onnxruntime, against eager (tests/test_onnx_export.py's harness)."""
    pytest.importorskip("onnxscript")
    from tests.test_onnx_export import Op, _check

    x, g, c, s = _inputs((2, 5, 3, 16), (2, 5, 1, 16))
    _check(tmp_path, Op(lambda *a: OP(*a, 1e-5), (dt,) * 4), (x, g, c, s), ["RmsNormRope"], tol=tol)


def test_aclnn_prototype_is_the_one_cann_generates_from_the_opdef():
    """The declaration in the ops file is what CANN generates from the kernel's OpDef:
    change one, and this says the other must follow."""
    from op_sdk.npu import prototypes

    opdef = ROOT / "kernels" / "ascendc" / "rms_norm_rope" / "op_host" / "rms_norm_rope_def.cpp"
    params = prototypes.prototype_from_opdef(str(opdef), "RmsNormRope")
    assert params == prototypes.PROTOTYPES["aclnnRmsNormRope"].params
