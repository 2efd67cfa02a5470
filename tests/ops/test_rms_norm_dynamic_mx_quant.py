"""npu_rms_norm_dynamic_mx_quant: the tables the registry-wide tests read and the slice's own
tests: the operator against an independent float64 norm (rounded to x's dtype as the kernels
store it) followed by the MX formula of tests/ops/test_dynamic_mx_quant.py, over x's dtypes,
gamma / beta in x's dtype or float32, every destination, round mode and scale_alg, odd sizes,
3-D, non-contiguous, empty, all-zero and NaN / inf rows and dynamic shapes; rstd; bit for
bit the composite npu_rms_norm -> npu_dynamic_mx_quant the fusion reads; the rules; the GE
converter. op-plugin's test of it is ported in tests/conformance."""

import pytest
import torch

from op_sdk.ops.rms_norm_dynamic_mx_quant import rms_norm_dynamic_mx_quant_reference
from tests.ops._helpers import rms_norm_fp64
from tests.ops.test_dynamic_mx_quant import E1M2, E2M1, E4M3, E5M2, _golden, _values

OP = torch.ops.npu.npu_rms_norm_dynamic_mx_quant
NAME = "npu_rms_norm_dynamic_mx_quant"

SCHEMAS = [
    "npu_rms_norm_dynamic_mx_quant(Tensor x, Tensor gamma, *, Tensor? beta=None, "
    "float epsilon=1e-06, int scale_alg=0, str round_mode=\"rint\", int dst_type=296) "
    "-> (Tensor, Tensor, Tensor)",
]
GE_TYPES = {"npu::npu_rms_norm_dynamic_mx_quant": "RmsNormDynamicMxQuant"}
GE_REFUSED = {"npu::npu_rms_norm_dynamic_mx_quant": ("float4",)}


def _in(*shape, dtype=torch.bfloat16, seed=0, gdt=None):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 2).to(dtype)
    gamma = (torch.rand(shape[-1], generator=g) + 0.5).to(gdt or dtype)
    beta = (torch.randn(shape[-1], generator=g) * 0.1).to(gdt or dtype)
    return x, gamma, beta


def samples():
    x, g, b = _in(4, 70)
    xh, gh, bh = _in(3, 64, dtype=torch.float16, gdt=torch.float32)
    return [(NAME, (x, g), {"dst_type": E4M3}),
            (NAME, (xh, gh), {"beta": bh, "dst_type": E2M1, "round_mode": "round"}),
            (NAME, (x, g), {"beta": b, "dst_type": E5M2, "scale_alg": 1, "epsilon": 1e-5})]


def meta_grid():
    out = []
    for shape in ((8, 64), (3, 70), (2, 5, 34)):
        x, g, b = _in(*shape)
        out += [(NAME, (x, g), {"dst_type": E4M3}), (NAME, (x, g), {"dst_type": 23}),
                (NAME, (x, g), {"beta": b, "dst_type": E2M1}),
                (NAME, (x.half(), g.float()), {"dst_type": E1M2})]
    return out


_X, _G = torch.zeros(4, 64, dtype=torch.bfloat16), torch.ones(64, dtype=torch.bfloat16)
CASES = [
    ("rms_norm_dynamic_mx_quant/dtype", NAME, (_X.float(), _G.float()), {}, "x", RuntimeError),
    ("rms_norm_dynamic_mx_quant/gamma-shape", NAME, (_X, _G[:32]), {}, "gamma", RuntimeError),
    ("rms_norm_dynamic_mx_quant/gamma-dtype", NAME, (_X, _G.half()), {}, "gamma", RuntimeError),
    ("rms_norm_dynamic_mx_quant/beta-dtype", NAME, (_X, _G), {"beta": _G.float()}, "beta",
     RuntimeError),
    ("rms_norm_dynamic_mx_quant/alg", NAME, (_X, _G), {"scale_alg": 2}, "scale_alg",
     RuntimeError),
    ("rms_norm_dynamic_mx_quant/alg-fp4", NAME, (_X, _G), {"scale_alg": 1}, "scale_alg",
     RuntimeError),
    ("rms_norm_dynamic_mx_quant/round", NAME, (_X, _G), {"dst_type": E4M3, "round_mode": "round"},
     "round_mode", RuntimeError),
    ("rms_norm_dynamic_mx_quant/dst", NAME, (_X, _G), {"dst_type": 290}, "dst_type",
     RuntimeError),
    ("rms_norm_dynamic_mx_quant/odd", NAME, (torch.zeros(2, 33, dtype=torch.bfloat16),
                                             torch.ones(33, dtype=torch.bfloat16)), {}, "x",
     RuntimeError),
]


def _compare(y, s, x32, dtype, gamma, beta, eps, dst, rstd, **kw):
    """The contract's steps written here: the fp32 norm (x * rstd * gamma + beta, with the
    operator's rstd: the tests check it against float64 on its own, and the order of its sum
    is the kernel's) rounded to x's dtype, within an ulp of x's dtype of the float64 norm,
    then the MX formula of the dynamic_mx_quant tests: values and codes bit for bit."""
    mine = _normalised(x32, gamma, beta, eps, dtype, rstd)
    y64, _ = rms_norm_fp64(x32, gamma.double(), eps)
    if beta is not None:
        y64 = y64 + beta.double()
    ulp = 2.0 ** (-7 if dtype == torch.bfloat16 else -10)
    assert ((mine.double() - y64).abs() <= y64.abs() * ulp + 1e-6).all()
    vals, codes = _golden(mine, dst_type=dst, **kw)
    assert torch.equal(_values(y, dst), vals)
    assert torch.equal(s.long().reshape(*s.shape[:-2], -1)[..., :codes.shape[-1]], codes)


def _normalised(x32, gamma, beta, eps, dtype, rstd=None):
    x = x32.float()
    if rstd is None:
        rstd = 1.0 / torch.sqrt(x.square().mean(-1, keepdim=True) + eps)
    y = x * rstd * gamma.float()
    if beta is not None:
        y = y + beta.float()
    return y.to(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("gdt", [None, torch.float32])
@pytest.mark.parametrize("dst", [E4M3, E5M2, E2M1, E1M2])
@pytest.mark.parametrize("shape", [(3, 64), (5, 70), (2, 3, 130)])
def test_matches_formula(dtype, gdt, dst, shape):
    x, g, b = _in(*shape, dtype=dtype, gdt=gdt, seed=len(shape))
    modes = ("rint", "round", "floor") if dst in (E2M1, E1M2) else ("rint",)
    for beta in (None, b):
        for mode in modes:
            y, s, rstd = OP(x, g, beta=beta, dst_type=dst, round_mode=mode)
            _compare(y, s, x.float(), dtype, g, beta, 1e-6, dst, rstd, round_mode=mode)
            want = rms_norm_fp64(x.float(), g.double(), 1e-6)[1]
            torch.testing.assert_close(rstd.double(), want, rtol=1e-6, atol=0)
            assert rstd.shape == (*shape[:-1], 1)


@pytest.mark.parametrize("dst", [E4M3, E5M2])
def test_cublas(dst):
    x, g, b = _in(6, 96, seed=3)
    y, s, rstd = OP(x, g, beta=b, dst_type=dst, scale_alg=1, epsilon=1e-5)
    _compare(y, s, x.float(), x.dtype, g, b, 1e-5, dst, rstd, scale_alg=1)


def test_composite_bit_for_bit():
    """The fusion's chain, npu_rms_norm's y (rounded) then npu_dynamic_mx_quant, bit for bit:
    the native kernels (one row helper computes both norms' rstd) and the references."""
    from op_sdk.ops.rms_norm import rms_norm_reference

    for dst, kw in ((E4M3, {}), (E5M2, {"scale_alg": 1}), (E2M1, {"round_mode": "floor"})):
        x, g, _ = _in(7, 100, seed=dst)
        for norm, fused in ((torch.ops.npu.npu_rms_norm, OP),
                            (rms_norm_reference, rms_norm_dynamic_mx_quant_reference)):
            y, s, rstd = fused(x, g, epsilon=1e-5, dst_type=dst, **kw)
            n, r = norm(x, g, 1e-5)
            y2, s2 = torch.ops.npu.npu_dynamic_mx_quant(n, dst_type=dst, **kw)
            assert torch.equal(y.view(torch.uint8), y2.view(torch.uint8))
            assert torch.equal(s, s2) and torch.equal(rstd, r)


def test_nan_inf_zero_rows():
    x, g, _ = _in(4, 64)
    x[0] = 0
    x[1, 3] = float("inf")
    x[2, 40] = float("nan")
    y, s, rstd = OP(x, g, dst_type=E4M3)
    assert (s[0] == 0).all() and (y[0].float() == 0).all()
    # 1 / sqrt(fp32(1e-6)): the norms' two roundings (CANN's Newton step gives 1000.0)
    torch.testing.assert_close(rstd[0, 0].item(), 1000.0, rtol=2e-7, atol=0)
    # an inf: rstd 0, the inf's block NaN * 0 -> code 255 and values 0, the other block 0
    assert rstd[1, 0] == 0 and s[1, 0, 0] == 255 and (y[1].float() == 0).all()
    assert torch.isnan(rstd[2, 0]) and (s[2] == 255).all() and (y[2].float() == 0).all()
    assert (y[3].float() != 0).any()


def test_layouts_and_empty():
    x, g, _ = _in(8, 64, seed=2)
    want = OP(x, g, dst_type=E4M3)
    for v in (x.t().contiguous().t(), x.unsqueeze(0).expand(3, 8, 64)[1]):
        got = OP(v, g, dst_type=E4M3)
        assert torch.equal(got[0].view(torch.uint8), want[0].view(torch.uint8))
        assert torch.equal(got[1], want[1]) and torch.equal(got[2], want[2])
    e = OP(x[:0], g, dst_type=E2M1)
    assert e[0].shape == (0, 32) and e[1].shape == (0, 1, 2) and e[2].shape == (0, 1)


def test_dynamic_shapes():
    def f(x, g):
        return OP(x, g, dst_type=E4M3)

    cf = torch.compile(f, backend="eager", dynamic=True, fullgraph=True)
    for rows in (3, 9):
        x, g, _ = _in(rows, 96)
        for a, b in zip(cf(x, g), f(x, g)):
            assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def test_ge_converter():
    from op_sdk.converters import convert_fx
    from tests.test_converters import fx_of_call

    x, g, b = _in(4, 64)
    graph = convert_fx(fx_of_call(OP.default, (x, g), {"beta": b, "dst_type": E5M2}), NAME)
    (op,) = [o for o in graph.ops if o.type == "RmsNormDynamicMxQuant"]
    assert op.attr_values()["dst_type"] == 35 and op.attr_values()["output_rstd"] is True
