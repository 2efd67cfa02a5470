"""npu_rms_norm_quant: the native CPU kernel against the reference and the kernel's formula
(the reciprocal of scale, the float16 step) over dtypes, sizes, int8 and int4, strided,
expanded, empty and non-finite inputs; the registry-wide tables."""

import pytest
import torch

from op_sdk.ops._common import unpack_int4
from op_sdk.ops.rms_norm_quant import rms_norm_quant_reference
from tests.ops._helpers import T, assert_int_close, bad, bf16, fp16, fp32, npu, rand, strided, zeros

SCHEMAS = [
    "npu_rms_norm_quant(Tensor x, Tensor gamma, Tensor beta, Tensor scale, Tensor offset, "
    "float epsilon=1e-06, *, int? dst_dtype=None) -> Tensor",
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_rms_norm_quant": "RmsNormQuant"}
# what the converter refuses, by a word of its error (int4 results: TorchAir's to write)
GE_REFUSED = {"npu::npu_rms_norm_quant": ("torch.quint4x2",)}

i8 = torch.int8


def _args(shape, dtype, gamma_2d=False, scale=0.02, offset=3):
    d = shape[-1]
    gshape = (1, d) if gamma_2d else (d,)
    return (rand(*shape, dtype=dtype), rand(*gshape, dtype=dtype), rand(*gshape, dtype=dtype, scale=0.1),
            torch.tensor([scale], dtype=dtype), torch.tensor([offset], dtype=i8))


def samples():
    return [
        ("npu_rms_norm_quant", _args((5, 32), bf16), {}),
        ("npu_rms_norm_quant", _args((2, 3, 32), fp16, gamma_2d=True), {"epsilon": 1e-5}),
        ("npu_rms_norm_quant", _args((4, 16), fp16), {"dst_dtype": torch.quint4x2}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real): 1-D to 3-D x, both dtypes, gamma of one
    or two dims, int8 and int4 (quint4x2) outputs."""
    cases = []
    for shape in [(16,), (5, 16), (2, 3, 32)]:
        for dt in (fp16, bf16):
            cases.append(("npu_rms_norm_quant", _args(shape, dt), {}))
            cases.append(("npu_rms_norm_quant", _args(shape, dt, gamma_2d=True), {"epsilon": 1e-5}))
            cases.append(("npu_rms_norm_quant", _args(shape, dt), {"dst_dtype": 16}))
    return cases


def _t(shape, dt):
    return T(*shape, dtype=dt)


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("rnq/x-dtype", "npu_rms_norm_quant", (_t((4, 8), fp32), _t((8,), fp32), _t((8,), fp32), _t((1,), fp32),
                                           _t((1,), i8)), {}, "x", RuntimeError),
    ("rnq/gamma-shape", "npu_rms_norm_quant", (_t((4, 8), bf16), _t((2, 8), bf16), _t((2, 8), bf16),
                                               _t((1,), bf16), _t((1,), i8)), {}, "gamma", RuntimeError),
    ("rnq/beta-shape", "npu_rms_norm_quant", (_t((4, 8), bf16), _t((8,), bf16), _t((1, 8), bf16),
                                              _t((1,), bf16), _t((1,), i8)), {}, "beta", RuntimeError),
    ("rnq/scale-dtype", "npu_rms_norm_quant", (_t((4, 8), bf16), _t((8,), bf16), _t((8,), bf16),
                                               _t((1,), fp32), _t((1,), i8)), {}, "scale", RuntimeError),
    ("rnq/scale-shape", "npu_rms_norm_quant", (_t((4, 8), bf16), _t((8,), bf16), _t((8,), bf16),
                                               _t((8,), bf16), _t((8,), i8)), {}, "scale", RuntimeError),
    ("rnq/offset-dtype", "npu_rms_norm_quant", (_t((4, 8), bf16), _t((8,), bf16), _t((8,), bf16),
                                                _t((1,), bf16), _t((1,), torch.int32)), {}, "offset", RuntimeError),
    ("rnq/dst-dtype", "npu_rms_norm_quant", (_t((4, 8), bf16), _t((8,), bf16), _t((8,), bf16),
                                             _t((1,), bf16), _t((1,), i8)), {"dst_dtype": 3}, "dst_dtype",
     RuntimeError),
    ("rnq/int4-last-dim", "npu_rms_norm_quant", (_t((4, 12), bf16), _t((12,), bf16), _t((12,), bf16),
                                                 _t((1,), bf16), _t((1,), i8)), {"dst_dtype": 16}, "x", RuntimeError),
]

BAD_CALLS = [
    bad("npu_rms_norm_quant", "gamma", zeros(4, 8), zeros(7), zeros(7), zeros(1), zeros(1, dtype=i8)),
    bad("npu_rms_norm_quant", "offset", zeros(4, 8), zeros(8), zeros(8), zeros(1), zeros(1)),
]


def _formula(x, gamma, beta, scale, offset, eps=1e-6, int4=False):
    """ops-nn's kernel in float64 where it computes in float32 (the int8 may then differ by
    one step on a rounding boundary): y = x * rstd * gamma + beta; v = y * (1 / scale) +
    offset; to float16; round half to even, saturated."""
    xd = x.double()
    rstd = 1 / torch.sqrt(xd.square().mean(-1, keepdim=True) + eps)
    y = xd * rstd * gamma.reshape(-1).double() + beta.reshape(-1).double()
    v = (y * (1 / scale.double()) + offset.double()).half().double()
    lo, hi = (-8, 7) if int4 else (-128, 127)
    return torch.round(v).clamp(lo, hi).to(i8)


@pytest.mark.parametrize("dtype", [fp16, bf16])
@pytest.mark.parametrize("shape", [(1, 96), (257, 96), (2, 3, 40), (3, 7168), (24,)])
@pytest.mark.parametrize("int4", [False, True])
def test_matches_reference_and_formula(dtype, shape, int4):
    torch.manual_seed(0)
    args = _args(shape, dtype, gamma_2d=shape[0] == 2)
    kw = {"dst_dtype": torch.quint4x2} if int4 else {}
    got = npu.npu_rms_norm_quant(*args, 1e-5, **kw)
    want = rms_norm_quant_reference(*args, 1e-5, **kw)
    assert_int_close(got, want, int4=int4)
    unpacked = unpack_int4(got) if int4 else got
    assert_int_close(unpacked, _formula(*args, eps=1e-5, int4=int4))


def test_float16_step_and_reciprocal():
    """Hand-built rows whose normalised values are exact (x = +-1, eps 0: rstd 1), then the
    division by scale as a multiplication by its reciprocal, the offset and the saturation;
    and random rows where the float16 step before the integer rounding (a double rounding)
    changes the result: the kernel follows it."""
    x = torch.tensor([[1.0, -1.0, 1.0, -1.0]], dtype=bf16)
    g = torch.ones(4, dtype=bf16)
    beta = torch.tensor([99.5, 101.5, -200.0, 40.0], dtype=bf16)  # y = 100.5, 100.5, -199, 39
    s, o = torch.tensor([0.5], dtype=bf16), torch.tensor([-1], dtype=i8)
    got = npu.npu_rms_norm_quant(x, g, beta, s, o, 0.0)
    assert torch.equal(got, rms_norm_quant_reference(x, g, beta, s, o, 0.0))
    assert got.tolist() == [[127, 127, -128, 77]]  # 2y - 1: 200, 200, -399, 77
    torch.manual_seed(0)
    x, g, b, s, o = _args((64, 256), fp16, scale=0.013, offset=0)
    got = npu.npu_rms_norm_quant(x, g, b, s, o)
    xd = x.double()
    y = xd / torch.sqrt(xd.square().mean(-1, keepdim=True) + 1e-6) * g.double() + b.double()
    v = y * (1 / s.double())
    once = torch.round(v).clamp(-128, 127).to(i8)  # no float16 step
    assert int((got != once).sum()) > 10  # the float16 step shows
    assert_int_close(got, _formula(x, g, b, s, o))


def test_layouts_empty_and_nonfinite():
    torch.manual_seed(0)
    x, g, b, s, o = _args((33, 40), bf16)
    xs = strided(x)
    assert not xs.is_contiguous()
    assert torch.equal(npu.npu_rms_norm_quant(xs, g, b, s, o), rms_norm_quant_reference(xs, g, b, s, o))
    e = x[:1].expand(5, 40)
    assert torch.equal(npu.npu_rms_norm_quant(e, g, b, s, o), rms_norm_quant_reference(e, g, b, s, o))
    y = npu.npu_rms_norm_quant(torch.empty(0, 5, 40, dtype=bf16), g, b, s, o)
    assert y.shape == (0, 5, 40) and y.dtype == i8
    y = npu.npu_rms_norm_quant(torch.empty(0, 40, dtype=bf16), g, b, s, o, dst_dtype=16)
    assert y.shape == (0, 5) and y.dtype == torch.int32
    xn = torch.tensor([[1.0, float("nan"), 2.0, 3.0], [1.0, float("inf"), 2.0, 3.0],
                       [1e4, -1e4, 1e4, -1e4]], dtype=fp16)
    g4, b4 = torch.ones(4, dtype=fp16), torch.zeros(4, dtype=fp16)
    s4 = torch.tensor([1e-4], dtype=fp16)  # 1e4 * 1e4: beyond float16, inf, saturated
    got = npu.npu_rms_norm_quant(xn, g4, b4, s4, torch.tensor([0], dtype=i8))
    want = rms_norm_quant_reference(xn, g4, b4, s4, torch.tensor([0], dtype=i8))
    assert torch.equal(got, want)
    assert got[0].tolist() == [0, 0, 0, 0]  # a NaN row stores 0
    assert got[2].tolist() == [127, -128, 127, -128]


def test_compiles_with_dynamic_rows():
    f = torch.compile(lambda *a: npu.npu_rms_norm_quant(*a).float() + 1, dynamic=True, fullgraph=True)
    for rows in (3, 9):
        args = _args((rows, 32), bf16)
        assert torch.equal(f(*args), npu.npu_rms_norm_quant(*args).float() + 1)


@pytest.mark.parametrize("dt", [fp16, bf16])
def test_onnx_export_runs_in_onnxruntime(tmp_path, dt):
    """The custom node RmsNormQuant and the composite-only export, run by onnxruntime, against
    eager within one step (the composite reduces in another order); int4 is refused."""
    from tests.test_onnx_export import Op, _check

    torch.manual_seed(0)
    x, g, b, s, o = _args((2, 5, 32), fp32, gamma_2d=True)
    _check(tmp_path, Op(lambda *a: npu.npu_rms_norm_quant(*a), (dt, dt, dt, dt, None)),
           (x, g, b, s, o), ["RmsNormQuant"], int_step=1)
    import op_sdk
    from op_sdk.onnx.translation import UnsupportedOnnxExport

    class M(torch.nn.Module):
        def forward(self, *a):
            return npu.npu_rms_norm_quant(*a, dst_dtype=16)
    with pytest.raises(UnsupportedOnnxExport, match="npu_rms_norm_quant.*dst_dtype"):
        op_sdk.export_onnx(M(), _args((4, 16), fp16), tmp_path / "m.onnx")
