"""npu_dequant_swiglu_quant: the tables the registry-wide tests read (samples, constraint
cases, GE types, schema, the Meta grid) and the slice's own tests: the operator against an
independent float64 formula over x's dtypes, the three SwiGLU modes, both sides, both quant
modes, every scale / bias / offset form, MoE groups (rows past them 0), odd sizes, 3-D,
non-contiguous, stride-0, empty, all-zero and NaN / inf rows, int32 bias wrapping and dynamic
shapes; the native kernel against the reference; the composite the fusion reads, bit for
bit; the data rules; its GE converter and ONNX translation (run by onnxruntime). op-plugin's
own test of it is ported in tests/conformance/test_npu_dequant_swiglu_quant.py."""

import pytest
import torch

from op_sdk.ops import dequant_swiglu_quant as slice_module

OP = torch.ops.npu.npu_dequant_swiglu_quant
NAME = "npu_dequant_swiglu_quant"

SCHEMAS = [
    "npu_dequant_swiglu_quant(Tensor x, *, Tensor? weight_scale=None, "
    "Tensor? activation_scale=None, Tensor? bias=None, Tensor? quant_scale=None, "
    "Tensor? quant_offset=None, Tensor? group_index=None, bool activate_left=False, "
    "int quant_mode=0, int? dst_type=None, int? round_mode=None, int? activate_dim=None, "
    "int swiglu_mode=0, float clamp_limit=7., float glu_alpha=1.702, float glu_bias=1.) "
    "-> (Tensor, Tensor)",
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_dequant_swiglu_quant": "DequantSwigluQuant"}


def _int_x(*shape, seed=0, lo=-3000, hi=3000):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int32)


def _dequant(x, seed=1, groups=None):
    """weight / activation scales for an int32 x (G = groups rows of weight_scale)."""
    g = torch.Generator().manual_seed(seed)
    d = x.shape[-1]
    ws = torch.rand((groups, d) if groups else (d,), generator=g) * 2e-3 + 1e-4
    return {"weight_scale": ws,
            "activation_scale": torch.rand(*x.shape[:-1], 1, generator=g) + 0.25}


def samples():
    x = _int_x(7, 34)
    xb = (torch.randn(2, 3, 16) * 3).bfloat16()
    return [(NAME, (x,), {**_dequant(x), "activate_left": True, "quant_mode": 1,
                          "quant_scale": torch.rand(17) + 0.5}),
            (NAME, (x,), {**_dequant(x), "bias": torch.randint(-99, 99, (34,), dtype=torch.int32),
                          "quant_mode": 0, "quant_scale": torch.rand(1, 17) * 0.05 + 0.01,
                          "quant_offset": torch.randn(1, 17), "swiglu_mode": 2}),
            (NAME, (xb,), {"quant_mode": 1, "swiglu_mode": 1, "clamp_limit": 3.0}),
            (NAME, (x,), {**_dequant(x, groups=2), "quant_mode": 1,
                          "group_index": torch.tensor([3, 2])})]


def meta_grid():
    """Calls on which the CPU kernel, the fake and torch_npu's Meta function must agree on
    output shapes and dtypes (tests/npu/real)."""
    out = []
    for shape in ((3, 8), (2, 5, 34), (1, 2, 3, 4)):
        x = _int_x(*shape)
        out += [(NAME, (x,), {**_dequant(x), "quant_mode": 1}),
                (NAME, (x,), {**_dequant(x), "quant_mode": 0, "swiglu_mode": 1,
                              "quant_scale": torch.ones(1)}),
                (NAME, (x.half(),), {"quant_mode": 1, "activate_left": True, "dst_type": 1,
                                     "activate_dim": -1, "round_mode": 0}),
                (NAME, (x.bfloat16(),), {"quant_mode": 1, "swiglu_mode": 2})]
    return out


_X = torch.zeros(4, 16, dtype=torch.int32)
_WS = {"weight_scale": torch.ones(16)}
# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("dequant_swiglu_quant/dtype", NAME, (torch.zeros(4, 16),), {}, "x", RuntimeError),
    ("dequant_swiglu_quant/1-d", NAME, (torch.zeros(16, dtype=torch.int32),), _WS, "x",
     RuntimeError),
    ("dequant_swiglu_quant/odd", NAME, (torch.zeros(4, 15, dtype=torch.int32),),
     {"weight_scale": torch.ones(15)}, "x", RuntimeError),
    ("dequant_swiglu_quant/no-weight-scale", NAME, (_X,), {}, "weight_scale", RuntimeError),
    ("dequant_swiglu_quant/weight-scale-shape", NAME, (_X,), {"weight_scale": torch.ones(8)},
     "weight_scale", RuntimeError),
    ("dequant_swiglu_quant/weight-scale-float-x", NAME, (_X.half(),), _WS, "weight_scale",
     RuntimeError),
    ("dequant_swiglu_quant/activation-scale", NAME, (_X,),
     {**_WS, "activation_scale": torch.ones(3, 1)}, "activation_scale", RuntimeError),
    ("dequant_swiglu_quant/bias-dtype", NAME, (_X,), {**_WS, "bias": torch.ones(16).long()},
     "bias", RuntimeError),
    ("dequant_swiglu_quant/quant-scale-dynamic", NAME, (_X,),
     {**_WS, "quant_scale": torch.ones(1), "quant_mode": 1}, "quant_scale", RuntimeError),
    ("dequant_swiglu_quant/quant-scale-static-dtype", NAME, (_X,),
     {**_WS, "quant_scale": torch.ones(1).half()}, "quant_scale", RuntimeError),
    ("dequant_swiglu_quant/quant-offset", NAME, (_X,),
     {**_WS, "quant_scale": torch.ones(1, 8), "quant_offset": torch.ones(1)}, "quant_offset",
     RuntimeError),
    ("dequant_swiglu_quant/quant-mode", NAME, (_X,), {**_WS, "quant_mode": 2}, "quant_mode",
     RuntimeError),
    ("dequant_swiglu_quant/swiglu-mode", NAME, (_X,), {**_WS, "swiglu_mode": 3}, "swiglu_mode",
     RuntimeError),
    ("dequant_swiglu_quant/clamp-limit", NAME, (_X,), {**_WS, "clamp_limit": 0.0},
     "clamp_limit", RuntimeError),
    ("dequant_swiglu_quant/glu-alpha", NAME, (_X,), {**_WS, "glu_alpha": float("inf")},
     "glu_alpha", RuntimeError),
    ("dequant_swiglu_quant/dst-type", NAME, (_X,), {**_WS, "dst_type": 291}, "dst_type",
     RuntimeError),
    ("dequant_swiglu_quant/round-mode", NAME, (_X,), {**_WS, "round_mode": 2}, "round_mode",
     RuntimeError),
    ("dequant_swiglu_quant/activate-dim", NAME, (_X,), {**_WS, "activate_dim": 0},
     "activate_dim", RuntimeError),
    ("dequant_swiglu_quant/group-dtype", NAME, (_X,),
     {"weight_scale": torch.ones(2, 16), "group_index": torch.tensor([1.0, 2.0])},
     "group_index", RuntimeError),
    ("dequant_swiglu_quant/weight-scale-groups", NAME, (_X,),
     {"weight_scale": torch.ones(3, 16), "group_index": torch.tensor([1, 2])}, "weight_scale",
     RuntimeError),
]


def _formula(x, weight_scale=None, activation_scale=None, bias=None, quant_scale=None,
             quant_offset=None, group_index=None, activate_left=False, quant_mode=0,
             swiglu_mode=0, clamp_limit=7.0, glu_alpha=1.702, glu_bias=1.0, **_):
    """op-plugin's golden (golden_dequant_swiglu_quant_torch) in float64, per group, rows past
    the groups 0; swiglu_mode 2 clipped on the halves (the documents; upstream's golden
    treats it as mode 0): (y before rounding, scale)."""
    d = x.shape[-1]
    h = d // 2
    rows = x.shape[:-1].numel()
    v = x.reshape(rows, d)
    counts = [rows] if group_index is None else group_index.tolist()
    y = torch.zeros(rows, h, dtype=torch.float64)
    scale = torch.zeros(rows, dtype=torch.float64)
    act = None if activation_scale is None else activation_scale.double().reshape(rows, 1)

    def row(p, g, width, scalar=False):
        t = p.double()
        if t.dim() == 1 and scalar:
            return t[g]
        return t.reshape(-1, width)[g]

    begin = 0
    for g, c in enumerate(counts):
        r = slice(begin, begin + c)
        t = v[r]
        if x.dtype == torch.int32:
            if bias is not None and bias.dtype == torch.int32:
                t = t + row(bias, g, d)
            t = t.double() * row(weight_scale, g, d)
            if act is not None:
                t = t * act[r]
            if bias is not None and bias.dtype != torch.int32:
                t = t + row(bias, g, d)
        else:
            t = t.double()
        if swiglu_mode == 1:
            a, b = t[:, 0::2], t[:, 1::2]
        else:
            a, b = (t[:, :h], t[:, h:]) if activate_left else (t[:, h:], t[:, :h])
        if swiglu_mode == 0:
            out = torch.nn.functional.silu(a) * b
        else:
            a = a.clamp(max=clamp_limit)
            out = a * torch.sigmoid(glu_alpha * a) * (b.clamp(-clamp_limit, clamp_limit) + glu_bias)
        if quant_mode == 1:
            if quant_scale is not None:
                out = out * row(quant_scale, g, h)
            amax = out.abs().amax(-1)
            scale[r] = amax / 127
            out = out * (127 / amax)[:, None]
        else:
            if quant_scale is not None:
                out = out / row(quant_scale, g, h, scalar=True)
            if quant_offset is not None:
                out = out + row(quant_offset, g, h, scalar=True)
        y[r] = out
        begin += c
    return y.reshape(*x.shape[:-1], h), scale.reshape(x.shape[:-1])


def _assert_kernel_close(y, scale, ref_y, ref_scale):
    """The native kernel against the reference: its exp and torch's differ by an ulp or two
    (tests/ops/test_swiglu.py), so an int8 value on a rounding boundary may be one step away
    (in at most 1% of the elements) and the scale within a few float32 ulps."""
    diff = (y.int() - ref_y.int()).abs()
    assert diff.numel() == 0 or (int(diff.max()) <= 1
                                 and int((diff > 0).sum()) <= max(1, diff.numel() // 100))
    torch.testing.assert_close(scale, ref_scale, rtol=1e-6, atol=0, equal_nan=True)


def _check(x, **kw):
    """The operator against the reference (the kernel's tolerance) and both against
    _formula: int8 within one step where the float64 value sits within 1e-3 of a rounding
    boundary, the scale within float32's tolerance; shapes, dtypes and layouts of torch_npu's
    Meta."""
    y, scale = OP(x, **kw)
    ref_y, ref_scale = slice_module.dequant_swiglu_quant_reference(x, **kw)
    _assert_kernel_close(y, scale, ref_y, ref_scale)
    h = x.shape[-1] // 2
    assert y.dtype == torch.int8 and y.shape == (*x.shape[:-1], h) and y.is_contiguous()
    assert scale.dtype == torch.float32 and scale.shape == x.shape[:-1]
    want, want_scale = _formula(x, **kw)
    exact = want.round().clamp(-128, 127)
    near = (want - want.floor() - 0.5).abs() < 1e-3 * (1 + want.abs())
    for out in (y, ref_y):
        diff = (out.double() - exact).abs()
        assert bool(((diff == 0) | ((diff <= 1) & near)).all()), (out, exact)
    torch.testing.assert_close(ref_scale.double(), want_scale, rtol=2e-6, atol=0)
    return y, scale


@pytest.mark.parametrize("swiglu_mode", [0, 1, 2])
@pytest.mark.parametrize("activate_left", [False, True])
@pytest.mark.parametrize("quant_mode", [0, 1])
@pytest.mark.parametrize("shape", [(1, 2), (7, 34), (2, 5, 130), (3, 2, 2, 6)], ids=str)
def test_int32_matches_the_golden(swiglu_mode, activate_left, quant_mode, shape):
    x = _int_x(*shape)
    h = shape[-1] // 2
    kw = {**_dequant(x), "activate_left": activate_left, "quant_mode": quant_mode,
          "swiglu_mode": swiglu_mode}
    if quant_mode == 1:
        _check(x, **kw)
        _check(x, **kw, quant_scale=torch.rand(1, h) + 0.5)
    else:
        _check(x, **kw, quant_scale=torch.rand(1, h) * 0.05 + 0.01, quant_offset=torch.randn(1, h))
        _check(x, **kw, quant_scale=torch.rand(1) * 0.05 + 0.01, quant_offset=torch.randn(1))
        _check(x, **kw)  # neither: round(act)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("swiglu_mode", [0, 1, 2])
@pytest.mark.parametrize("quant_mode", [0, 1])
def test_float_x_matches_the_golden(dtype, swiglu_mode, quant_mode):
    x = (torch.randn(3, 5, 66, generator=torch.Generator().manual_seed(3)) * 3).to(dtype)
    kw = {"quant_mode": quant_mode, "swiglu_mode": swiglu_mode, "activate_left": True}
    if quant_mode == 1:
        kw["quant_scale"] = (torch.rand(33) + 0.5).to(dtype)  # float16 / bfloat16 smooth
    else:
        kw.update(quant_scale=torch.rand(1, 33) * 0.05 + 0.01, quant_offset=torch.randn(1, 33).to(dtype))
    _check(x, **kw)


@pytest.mark.parametrize("bias_dtype", [torch.int32, torch.float32, torch.float16, torch.bfloat16],
                         ids=str)
@pytest.mark.parametrize("quant_mode", [0, 1])
def test_bias_forms(bias_dtype, quant_mode):
    x = _int_x(6, 40)
    bias = (torch.randint(-500, 500, (40,)) if bias_dtype == torch.int32
            else torch.randn(1, 40) * 2).to(bias_dtype)
    _check(x, **_dequant(x), bias=bias, quant_mode=quant_mode)


def test_int32_bias_wraps():
    """An int32 bias is added in int32 (two's complement) before the float cast: 2^31 - 1 +
    1 is -2^31, whose silu is -0, so the row's amax is |silu(5) * -7| (added in float, the
    first lane would be 2^31 * 3 and the scale ~5e7)."""
    x = torch.tensor([[2**31 - 1, 5, 3, -7]], dtype=torch.int32)
    bias = torch.tensor([1, 0, 0, 0], dtype=torch.int32)
    amax = float(torch.nn.functional.silu(torch.tensor(5.0)) * 7)
    for f in (OP, slice_module.dequant_swiglu_quant_reference):
        y, scale = f(x, weight_scale=torch.ones(4), bias=bias, quant_mode=1, activate_left=True)
        assert y.tolist() == [[0, -127]]
        assert scale.item() == pytest.approx(amax / 127, rel=1e-6)


@pytest.mark.parametrize("quant_mode", [0, 1])
@pytest.mark.parametrize("per_group_scalar", [False, True])
def test_moe_groups(quant_mode, per_group_scalar):
    x = _int_x(2, 9, 24, seed=4)
    counts = [3, 0, 7, 6]  # an empty group; rows 16 and 17 past the groups
    g = torch.Generator().manual_seed(5)
    kw = {**_dequant(x, groups=4), "quant_mode": quant_mode,
          "group_index": torch.tensor(counts), "bias": torch.randint(-9, 9, (4, 24), generator=g,
                                                                    dtype=torch.int32)}
    shape = (4,) if per_group_scalar and quant_mode == 0 else (4, 12)
    kw["quant_scale"] = torch.rand(shape, generator=g) * (0.05 if quant_mode == 0 else 1) + 0.01
    if quant_mode == 0:
        kw["quant_offset"] = torch.randn(shape, generator=g)
    y, scale = _check(x, **kw)
    assert not y.reshape(18, 12)[16:].any() and not scale.reshape(18)[16:].any()
    # int32 group_index reads the same
    y32, s32 = OP(x, **{**kw, "group_index": torch.tensor(counts, dtype=torch.int32)})
    assert torch.equal(y32, y) and torch.equal(s32, scale)


def test_layouts_empty_zero_and_nonfinite():
    x = _int_x(6, 20)
    kw = {**_dequant(x), "quant_mode": 1}
    for other in (x.t().contiguous().t(), _int_x(1, 20).expand(6, 20)):
        got = OP(other, **kw)
        want = OP(other.contiguous(), **kw)
        assert all(torch.equal(a, b) for a, b in zip(got, want))
    ws = torch.rand(40)[::2]  # a strided weight scale
    assert all(torch.equal(a, b) for a, b in zip(OP(x, **{**kw, "weight_scale": ws}),
                                                  OP(x, **{**kw, "weight_scale": ws.contiguous()})))
    empty = torch.zeros(0, 3, 8, dtype=torch.int32)
    y, scale = OP(empty, weight_scale=torch.ones(8), quant_mode=1)
    assert y.shape == (0, 3, 4) and scale.shape == (0, 3)
    # an all-zero row: scale 0, y 0; a NaN makes its row's scale NaN and y 0; inf saturates
    xf = torch.randn(3, 8)
    xf[0] = 0
    xf[2, 1] = float("nan")
    for f in (OP, slice_module.dequant_swiglu_quant_reference):
        y, scale = f(xf.half(), quant_mode=1, activate_left=True)
        assert scale[0] == 0 and not y[0].any()
        assert scale[2].isnan() and not y[2].any()
        assert torch.isfinite(scale[1]) and scale[1] > 0
        xi = torch.tensor([[float("inf"), 1.0, 2.0, -1.0]]).half()
        y, scale = f(xi, quant_mode=0, activate_left=True)
        assert y.tolist() == [[127, -1]] and scale.tolist() == [0.0]


def test_group_index_data_rules():
    x = _int_x(4, 8)
    ws = torch.ones(2, 8)
    for index, words in (([3, 2], "at most the 4 rows"), ([-1, 2], ">= 0")):
        with pytest.raises(RuntimeError, match=words):
            OP(x, weight_scale=ws, group_index=torch.tensor(index), quant_mode=1)


def test_compiles_with_dynamic_shapes():
    def f(x, ws, a):
        return OP(x, weight_scale=ws, activation_scale=a, quant_mode=1, activate_left=True)

    cf = torch.compile(f, dynamic=True, fullgraph=True)
    for rows in (3, 5):
        x = _int_x(rows, 2, 16)
        args = (x, torch.rand(16), torch.rand(rows, 2, 1))
        for a, b in zip(cf(*args), f(*args)):
            assert torch.equal(a, b)


def test_matches_the_composite_bit_for_bit():
    """The unfused chain the fusion reads (dequantise, npu_swiglu, npu_dynamic_quant with the
    smooth scales) is the operator's reference bit for bit; the native kernel within its
    tolerance."""
    x = _int_x(5, 64, seed=6)
    kw = _dequant(x)
    for qs in (None, torch.rand(32) + 0.5):
        chain = slice_module._unfused_spelling(x, kw["weight_scale"], kw["activation_scale"], qs)
        args = dict(**kw, quant_scale=qs, activate_left=True, quant_mode=1)
        ref = slice_module.dequant_swiglu_quant_reference(x, **args)
        assert torch.equal(chain["y"], ref[0]) and torch.equal(chain["scale"], ref[1])
        _assert_kernel_close(*OP(x, **args), *ref)


def test_ge_converter():
    from torch.fx.experimental.proxy_tensor import make_fx

    from op_sdk.converters import convert_fx, ir

    def f(x, ws, a, qs):
        return OP(x, weight_scale=ws, activation_scale=a, quant_scale=qs, activate_left=True,
                  quant_mode=1, swiglu_mode=2, clamp_limit=5.0)

    gm = make_fx(f, tracing_mode="fake")(_int_x(4, 16), torch.ones(16), torch.ones(4, 1),
                                         torch.ones(8))
    graph = convert_fx(gm)
    (op,) = [o for o in graph.ops if o.type == "DequantSwigluQuant"]
    proto = [i.name for i in ir.prototype("DequantSwigluQuant").inputs]
    names = [d.name for d in op.input_desc]  # the inputs given, in the prototype's order
    assert names == ["x", "weight_scale", "activation_scale", "quant_scale"]
    assert names == [n for n in proto if n in names]
    assert [d.name for d in op.output_desc] == ["y", "scale"]
    attrs = op.attr_values()
    assert attrs["quant_mode"] == "dynamic" and attrs["activate_left"] is True
    assert attrs["swiglu_mode"] == 2 and attrs["clamp_limit"] == pytest.approx(5.0)
    # attributes at their prototype defaults (round_mode "rint", activate_dim -1) may be left out
    assert attrs.get("round_mode", "rint") == "rint" and attrs.get("activate_dim", -1) == -1
    assert graph.model_pbtxt("dequant_swiglu_quant").count('type: "DequantSwigluQuant"') == 1


@pytest.mark.parametrize("swiglu_mode", [0, 1, 2])
@pytest.mark.parametrize("quant_mode", [0, 1])
def test_onnx_export_runs_in_onnxruntime(swiglu_mode, quant_mode):
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    import op_sdk

    x = _int_x(5, 24)
    kw = {**_dequant(x), "activate_left": swiglu_mode == 2, "quant_mode": quant_mode,
          "swiglu_mode": swiglu_mode}
    kw["bias"] = (torch.randint(-9, 9, (24,), dtype=torch.int32) if swiglu_mode != 1
                  else torch.randn(24))
    if quant_mode == 1:
        kw["quant_scale"] = torch.rand(12) + 0.5
    else:
        kw.update(quant_scale=torch.rand(1, 12) * 0.05 + 0.01, quant_offset=torch.randn(1, 12))

    class M(torch.nn.Module):
        def forward(self, x):
            return OP(x, **kw)

    program = op_sdk.export_onnx(M().eval(), (x,))
    assert [n.op_type for n in program.model.graph].count("DequantSwigluQuant") == 1
    sess = ort.InferenceSession(program.model_proto.SerializeToString(),
                                providers=["CPUExecutionProvider"])
    y, scale = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
    want_y, want_scale = M()(x)
    assert (torch.from_numpy(y).int() - want_y.int()).abs().max() <= 1
    torch.testing.assert_close(torch.from_numpy(scale), want_scale, rtol=1e-6, atol=0)
