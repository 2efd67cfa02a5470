"""npu_swiglu_quant: the tables the registry-wide tests read (samples, constraint cases, GE
types, schema, the Meta grid) and the slice's own tests: the operator against an independent
float64 formula of both quant modes, both activation sides, MoE groups in cumsum and count
modes, per-channel / per-tensor smoothing, odd sizes, 3-D, non-contiguous, stride-0, empty,
all-zero and NaN / inf rows and dynamic shapes; its data rules; its GE converter and ONNX
translation (run by onnxruntime). op-plugin's own test of it is ported in
tests/conformance/test_npu_swiglu_quant.py."""

import pytest
import torch

from op_sdk.ops import swiglu_quant as slice_module

OP = torch.ops.npu.npu_swiglu_quant
DTYPES = [torch.float32, torch.float16, torch.bfloat16]

SCHEMAS = [
    "npu_swiglu_quant(Tensor x, *, Tensor? smooth_scales=None, Tensor? offsets=None, "
    "Tensor? group_index=None, bool activate_left=False, int quant_mode=0, "
    "int group_list_type=0, ScalarType? dst_type=None) -> (Tensor, Tensor)",
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_swiglu_quant": "SwiGluQuant"}


def samples():
    x = torch.randn(7, 34)
    s1 = torch.rand(1, 17) + 0.5
    return [("npu_swiglu_quant", (x,), {"quant_mode": 1, "activate_left": True}),
            ("npu_swiglu_quant", (x.to(torch.bfloat16),), {"smooth_scales": s1, "quant_mode": 1}),
            ("npu_swiglu_quant", (torch.randn(2, 3, 8).half(),),
             {"smooth_scales": torch.rand(1) + 0.5, "offsets": torch.randn(1), "quant_mode": 0}),
            ("npu_swiglu_quant", (x,), {"smooth_scales": torch.rand(2, 17) + 0.5,
                                        "group_index": torch.tensor([3, 7], dtype=torch.int32),
                                        "quant_mode": 1, "dst_type": torch.int8})]


def meta_grid():
    """Calls on which the CPU kernel, the fake and torch_npu's Meta function must agree on
    output shapes and dtypes (tests/npu/real). dst_type is given: torch_npu's Meta allocates
    y with dtype=dst_type, so with None its y is float32 (the kernel writes int8, as the
    document says None means)."""
    out = []
    for dt in DTYPES:
        for shape in ((3, 8), (2, 5, 34), (1, 2, 3, 4)):
            x = torch.randn(shape).to(dt)
            out += [("npu_swiglu_quant", (x,), {"quant_mode": 1, "dst_type": torch.int8}),
                    ("npu_swiglu_quant", (x,), {"smooth_scales": torch.ones(1),
                                                "quant_mode": 0, "dst_type": torch.int8})]
    return out


_X = torch.zeros(4, 16)
_G = torch.tensor([2, 4], dtype=torch.int32)
# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("swiglu_quant/dtype", "npu_swiglu_quant", (_X.int(),), {"quant_mode": 1}, "x", RuntimeError),
    ("swiglu_quant/1-d", "npu_swiglu_quant", (torch.zeros(16),), {"quant_mode": 1}, "x", RuntimeError),
    ("swiglu_quant/odd", "npu_swiglu_quant", (torch.zeros(4, 15),), {"quant_mode": 1}, "x",
     RuntimeError),
    ("swiglu_quant/long", "npu_swiglu_quant", (torch.zeros(2, 8194),), {"quant_mode": 1}, "x",
     RuntimeError),
    ("swiglu_quant/mode", "npu_swiglu_quant", (_X,), {"quant_mode": 2}, "quant_mode", RuntimeError),
    ("swiglu_quant/list-type", "npu_swiglu_quant", (_X,), {"quant_mode": 1, "group_list_type": 2},
     "group_list_type", RuntimeError),
    ("swiglu_quant/int4", "npu_swiglu_quant", (_X,), {"quant_mode": 1, "dst_type": torch.quint4x2},
     "dst_type", RuntimeError),
    ("swiglu_quant/static-no-scale", "npu_swiglu_quant", (_X,), {}, "smooth_scales", RuntimeError),
    ("swiglu_quant/scale-shape", "npu_swiglu_quant", (_X,), {"smooth_scales": torch.ones(8),
                                                          "quant_mode": 1},
     "smooth_scales", RuntimeError),
    ("swiglu_quant/scale-dtype", "npu_swiglu_quant", (_X,),
     {"smooth_scales": torch.ones(1, 8, dtype=torch.float16), "quant_mode": 1}, "smooth_scales",
     RuntimeError),
    ("swiglu_quant/scale-groups", "npu_swiglu_quant", (_X,),
     {"smooth_scales": torch.ones(3, 8), "group_index": _G, "quant_mode": 1}, "smooth_scales",
     RuntimeError),
    ("swiglu_quant/offsets", "npu_swiglu_quant", (_X,),
     {"smooth_scales": torch.ones(1, 8), "offsets": torch.ones(1), "quant_mode": 0}, "offsets",
     RuntimeError),
    ("swiglu_quant/group-dtype", "npu_swiglu_quant", (_X,),
     {"smooth_scales": torch.ones(2, 8), "group_index": _G.long(), "quant_mode": 1},
     "group_index", RuntimeError),
]


def _formula(x, smooth=None, offsets=None, group_index=None, activate_left=False, quant_mode=0,
             group_list_type=0):
    """op-plugin's golden (test_npu_swiglu_quant.py), in float64 over rows: (y before the
    int8 cast, scale); rows after the last group unsmoothed."""
    rows = x.shape[:-1].numel()
    a, b = x.double().reshape(rows, -1).chunk(2, -1)
    silu = torch.nn.functional.silu
    y = silu(a) * b if activate_left else a * silu(b)
    if smooth is not None:
        if group_index is None:
            spans = [(0, rows)]
        else:
            g, spans, begin = group_index.tolist(), [], 0
            for v in g:
                end = v if group_list_type == 0 else begin + v
                spans.append((begin, end))
                begin = end
        for i, (lo, hi) in enumerate(spans):
            y[lo:hi] = y[lo:hi] * smooth[i].double() + (
                offsets[i].double() if quant_mode == 0 and offsets is not None else 0)
    scale = None
    if quant_mode == 1:
        scale = 127.0 / y.abs().amax(-1)
        y = y * scale[:, None]
    return y.reshape(*x.shape[:-1], -1), scale


def _assert_kernel_close(y, scale, ref_y, ref_scale):
    """The CPU kernel against the reference: its exp and torch's differ by an ulp or two
    (tests/ops/test_swiglu.py), so a scale within a few float32 ulps and an int8 value on a
    rounding boundary one step away (in at most 1% of the elements)."""
    diff = (y.int() - ref_y.int()).abs()
    assert diff.numel() == 0 or (int(diff.max()) <= 1
                                 and int((diff > 0).sum()) <= max(1, diff.numel() // 100))
    torch.testing.assert_close(scale, ref_scale, rtol=1e-6, atol=0, equal_nan=True)


def _check(x, **kw):
    """The operator against _formula: int8 within one step where the float64 value sits
    within 1e-3 of a rounding boundary (float32 inside), the scale within float32's
    tolerance; y in x's shape with the last dim halved, contiguous."""
    y, scale = OP(x, **kw)
    ref_y, ref_scale = slice_module.swiglu_quant_reference(x, **kw)
    _assert_kernel_close(y, scale, ref_y, ref_scale)
    assert y.dtype == torch.int8 and y.shape == (*x.shape[:-1], x.shape[-1] // 2)
    assert y.is_contiguous() and scale.shape == x.shape[:-1] and scale.dtype == torch.float32
    smooth = kw.get("smooth_scales")
    want, want_scale = _formula(x.float(), smooth, kw.get("offsets"), kw.get("group_index"),
                                kw.get("activate_left", False), kw.get("quant_mode", 0),
                                kw.get("group_list_type", 0))
    exact = want.round().clamp(-128, 127)
    diff = (y.double() - exact).abs()
    near = ((want - want.floor() - 0.5).abs() < 1e-3 * (1 + want.abs()))
    assert bool(((diff == 0) | ((diff <= 1) & near)).all()), (y, exact)
    if want_scale is not None:
        torch.testing.assert_close(scale.double(), want_scale.reshape(scale.shape), rtol=2e-6,
                                   atol=0)
    else:
        assert not scale.any()
    return y, scale


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("activate_left", [False, True])
@pytest.mark.parametrize("quant_mode", [0, 1])
@pytest.mark.parametrize("shape", [(1, 2), (7, 34), (2, 5, 130), (3, 2, 2, 6)], ids=str)
def test_matches_the_golden(dtype, activate_left, quant_mode, shape):
    torch.manual_seed(0)
    x = (torch.randn(shape) * 3).to(dtype)
    n = shape[-1] // 2
    kw = {"activate_left": activate_left, "quant_mode": quant_mode}
    if quant_mode == 0:
        kw.update(smooth_scales=torch.rand(1, n) * 20 + 1, offsets=torch.randn(1, n))
    _check(x, **kw)
    _check(x, **{**kw, "smooth_scales": torch.rand(1) * 20 + 1,
                 **({"offsets": torch.randn(1)} if quant_mode == 0 else {})})


@pytest.mark.parametrize("group_list_type", [0, 1])
@pytest.mark.parametrize("quant_mode", [0, 1])
@pytest.mark.parametrize("per_tensor", [False, True])
def test_moe_groups(group_list_type, quant_mode, per_tensor):
    torch.manual_seed(1)
    x = torch.randn(2, 9, 24)
    ends = [3, 3, 10, 16]  # an empty group; rows 16 and 17 after the last group
    index = ends if group_list_type == 0 else [ends[0]] + [b - a for a, b in zip(ends, ends[1:])]
    shape = (4,) if per_tensor else (4, 12)
    kw = {"smooth_scales": torch.rand(shape) * 10 + 0.5, "quant_mode": quant_mode,
          "group_index": torch.tensor(index, dtype=torch.int32), "group_list_type": group_list_type}
    if quant_mode == 0:
        kw["offsets"] = torch.randn(shape)
    _check(x, **kw)


def test_layouts_empty_zero_and_nonfinite():
    x = torch.randn(6, 20)
    for other in (x.t().contiguous().t(), torch.randn(1, 20).expand(6, 20)):
        assert all(torch.equal(a, b) for a, b in zip(OP(other, quant_mode=1),
                                                      OP(other.contiguous(), quant_mode=1)))
    y, scale = OP(torch.zeros(0, 3, 8), quant_mode=1)
    assert y.shape == (0, 3, 4) and scale.shape == (0, 3)
    # an all-zero row: scale 127 / 0 = inf, y 0; a NaN makes its row's scale NaN and y 0
    xz = torch.randn(3, 8)
    xz[0] = 0
    xz[2, 1] = float("nan")
    y, scale = OP(xz, quant_mode=1, activate_left=True)
    assert scale[0] == float("inf") and not y[0].any()
    assert scale[2].isnan() and not y[2].any()
    assert torch.isfinite(scale[1])
    # inf: silu(inf) * 2 = inf saturates to 127; silu(1) * -1 = -0.73 rounds to -1
    xi = torch.tensor([[float("inf"), 1.0, 2.0, -1.0]])
    y, _ = OP(xi, smooth_scales=torch.ones(1), quant_mode=0, activate_left=True)
    assert y.tolist() == [[127, -1]]


def test_group_index_data_rules():
    x = torch.randn(4, 8)
    s = torch.ones(2, 4)
    for index, words in (([3, 1], "non-decreasing"), ([1, 5], "at most the 4 rows"),
                         ([-1, 2], "non-negative")):
        with pytest.raises(RuntimeError, match=words):
            OP(x, smooth_scales=s, group_index=torch.tensor(index, dtype=torch.int32),
               quant_mode=1)
    with pytest.raises(RuntimeError, match="at most the 4 rows"):
        OP(x, smooth_scales=s, group_index=torch.tensor([3, 2], dtype=torch.int32), quant_mode=1,
           group_list_type=1)


def test_compiles_with_dynamic_shapes():
    f = torch.compile(lambda x: OP(x, quant_mode=1, activate_left=True), dynamic=True,
                      fullgraph=True)
    for rows in (3, 5):
        x = torch.randn(rows, 2, 16)
        for a, b in zip(f(x), OP(x, quant_mode=1, activate_left=True)):
            assert torch.equal(a, b)


def test_matches_swiglu_then_dynamic_quant():
    """The composite the fusion reads: npu_swiglu then npu_dynamic_quant quantise the
    bf16-rounded SwiGLU; the fused operator the float32 one, so int8 agrees within a step
    and 1 / scale is npu_dynamic_quant's scale within float32 rounding."""
    torch.manual_seed(2)
    x = torch.randn(5, 64, dtype=torch.bfloat16)
    y, scale = OP(x, activate_left=True, quant_mode=1)
    q, dq = torch.ops.npu.npu_dynamic_quant(torch.ops.npu.npu_swiglu(x))
    assert (y.int() - q.int()).abs().max() <= 1
    torch.testing.assert_close(1 / scale, dq, rtol=1e-2, atol=0)
    xf = x.float()
    y, scale = OP(xf, activate_left=True, quant_mode=1)
    q, dq = torch.ops.npu.npu_dynamic_quant(torch.ops.npu.npu_swiglu(xf))
    assert torch.equal(y, q)
    torch.testing.assert_close(1 / scale, dq, rtol=2e-7, atol=0)


def test_ge_converter():
    from torch.fx.experimental.proxy_tensor import make_fx

    from op_sdk.converters import convert_fx, ir

    def f(x, s, o):
        return OP(x, smooth_scales=s, offsets=o, activate_left=True, quant_mode=0)

    gm = make_fx(f, tracing_mode="fake")(torch.randn(4, 16), torch.ones(1, 8), torch.zeros(1, 8))
    graph = convert_fx(gm)
    (op,) = [o for o in graph.ops if o.type == "SwiGluQuant"]
    proto = ir.prototype("SwiGluQuant")
    assert [d.name for d in op.input_desc] == [i.name for i in proto.inputs][:3]
    assert [d.name for d in op.output_desc] == ["y", "scale"]
    attrs = op.attr_values()
    assert attrs["quant_mode"] == "static" and attrs["activate_left"] is True
    assert graph.model_pbtxt("swiglu_quant").count('type: "SwiGluQuant"') == 1


@pytest.mark.parametrize("quant_mode", [0, 1])
def test_onnx_export_runs_in_onnxruntime(quant_mode):
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    import op_sdk

    s, o = torch.rand(1, 12) * 10 + 1, torch.randn(1, 12)

    class M(torch.nn.Module):
        def forward(self, x):
            return OP(x, smooth_scales=s, offsets=o, activate_left=quant_mode == 1,
                      quant_mode=quant_mode)

    x = torch.randn(5, 24)
    program = op_sdk.export_onnx(M().eval(), (x,))
    assert [n.op_type for n in program.model.graph].count("SwiGluQuant") == 1
    sess = ort.InferenceSession(program.model_proto.SerializeToString(),
                                providers=["CPUExecutionProvider"])
    y, scale = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
    want_y, want_scale = M()(x)
    assert (torch.from_numpy(y).int() - want_y.int()).abs().max() <= 1
    torch.testing.assert_close(torch.from_numpy(scale), want_scale, rtol=1e-6, atol=0)
