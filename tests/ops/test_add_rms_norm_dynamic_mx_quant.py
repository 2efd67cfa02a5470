"""npu_add_rms_norm_dynamic_mx_quant: the tables the registry-wide tests read and the slice's
own tests: the operator against the contract's steps written here (the fp32 sum, its norm
rounded to x1's dtype, within an ulp of the float64 norm) and the MX formula of
tests/ops/test_dynamic_mx_quant.py; x_out the sum rounded; rstd; bit for bit the composite
npu_add_rms_norm -> npu_dynamic_mx_quant the fusion reads; layouts, empty, NaN / inf; the
rules; the GE converter. op-plugin's test of it is ported in tests/conformance."""

import pytest
import torch

from op_sdk.ops.add_rms_norm_dynamic_mx_quant import add_rms_norm_dynamic_mx_quant_reference
from tests.ops._helpers import rms_norm_fp64
from tests.ops.test_dynamic_mx_quant import E1M2, E2M1, E4M3, E5M2
from tests.ops.test_rms_norm_dynamic_mx_quant import _compare

OP = torch.ops.npu.npu_add_rms_norm_dynamic_mx_quant
NAME = "npu_add_rms_norm_dynamic_mx_quant"

SCHEMAS = [
    "npu_add_rms_norm_dynamic_mx_quant(Tensor x1, Tensor x2, Tensor gamma, *, "
    "Tensor? beta=None, float epsilon=1e-06, int scale_alg=0, str round_mode=\"rint\", "
    "int dst_type=296) -> (Tensor, Tensor, Tensor, Tensor)",
]
GE_TYPES = {"npu::npu_add_rms_norm_dynamic_mx_quant": "AddRmsNormDynamicMxQuant"}
GE_REFUSED = {"npu::npu_add_rms_norm_dynamic_mx_quant": ("float4",)}


def _in(*shape, dtype=torch.bfloat16, seed=0, gdt=None):
    g = torch.Generator().manual_seed(seed)
    x1 = (torch.randn(shape, generator=g) * 2).to(dtype)
    x2 = torch.randn(shape, generator=g).to(dtype)
    gamma = (torch.rand(shape[-1], generator=g) + 0.5).to(gdt or dtype)
    beta = (torch.randn(shape[-1], generator=g) * 0.1).to(gdt or dtype)
    return x1, x2, gamma, beta


def samples():
    a, b, g, be = _in(4, 70)
    ah, bh, gh, beh = _in(3, 64, dtype=torch.float16, gdt=torch.float32)
    return [(NAME, (a, b, g), {"dst_type": E4M3}),
            (NAME, (ah, bh, gh), {"beta": beh, "dst_type": E2M1, "round_mode": "floor"}),
            (NAME, (a, b, g), {"beta": be, "dst_type": E5M2, "scale_alg": 1})]


def meta_grid():
    out = []
    for shape in ((8, 64), (3, 70), (2, 5, 34)):
        a, b, g, be = _in(*shape)
        out += [(NAME, (a, b, g), {"dst_type": E4M3}), (NAME, (a, b, g), {"dst_type": 24}),
                (NAME, (a, b, g), {"beta": be, "dst_type": E2M1}),
                (NAME, (a.half(), b.half(), g.float()), {"dst_type": E1M2})]
    return out


_X, _G = torch.zeros(4, 64, dtype=torch.bfloat16), torch.ones(64, dtype=torch.bfloat16)
CASES = [
    ("add_rms_norm_dynamic_mx_quant/dtype", NAME, (_X.float(), _X.float(), _G.float()), {},
     "x1", RuntimeError),
    ("add_rms_norm_dynamic_mx_quant/x2-shape", NAME, (_X, _X[:2], _G), {}, "x2", RuntimeError),
    ("add_rms_norm_dynamic_mx_quant/x2-dtype", NAME, (_X, _X.half(), _G), {}, "x2",
     RuntimeError),
    ("add_rms_norm_dynamic_mx_quant/gamma", NAME, (_X, _X, _G[:8]), {}, "gamma", RuntimeError),
    ("add_rms_norm_dynamic_mx_quant/alg", NAME, (_X, _X, _G), {"dst_type": E4M3,
                                                                "scale_alg": 2}, "scale_alg",
     RuntimeError),
    ("add_rms_norm_dynamic_mx_quant/round", NAME, (_X, _X, _G), {"round_mode": "trunc"},
     "round_mode", RuntimeError),
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("gdt", [None, torch.float32])
@pytest.mark.parametrize("dst", [E4M3, E5M2, E2M1, E1M2])
@pytest.mark.parametrize("shape", [(3, 64), (5, 70), (2, 3, 130)])
def test_matches_formula(dtype, gdt, dst, shape):
    a, b, g, be = _in(*shape, dtype=dtype, gdt=gdt, seed=len(shape))
    x32 = a.float() + b.float()
    for beta in (None, be):
        y, x, s, rstd = OP(a, b, g, beta=beta, dst_type=dst)
        _compare(y, s, x32, dtype, g, beta, 1e-6, dst, rstd)
        assert torch.equal(x, x32.to(dtype))
        want = rms_norm_fp64(x32, g.double(), 1e-6)[1]
        torch.testing.assert_close(rstd.double(), want, rtol=1e-6, atol=0)


def test_norm_of_the_fp32_sum():
    """The norm reads the fp32 sum, not x_out rounded (ops-nn's kernel)."""
    a = torch.full((1, 64), 1.0, dtype=torch.bfloat16)
    b = torch.full((1, 64), 2.0 ** -9, dtype=torch.bfloat16)  # 1 + 2^-9 rounds to 1 in bf16
    g = torch.ones(64, dtype=torch.bfloat16)
    *_, rstd = OP(a, b, g, dst_type=E4M3, epsilon=0.0)
    torch.testing.assert_close(rstd[0, 0].item(), 1 / (1 + 2 ** -9), rtol=1e-6, atol=0)


def test_composite_bit_for_bit():
    """The fusion's chain, npu_add_rms_norm then npu_dynamic_mx_quant, bit for bit: the
    native kernels (one row helper computes both sums and rstd) and the references."""
    from op_sdk.ops.add_rms_norm import add_rms_norm_reference

    for dst, kw in ((E4M3, {}), (E5M2, {"scale_alg": 1}), (E2M1, {"round_mode": "round"})):
        a, b, g, _ = _in(7, 100, seed=dst)
        for norm, fused in ((torch.ops.npu.npu_add_rms_norm, OP),
                            (add_rms_norm_reference, add_rms_norm_dynamic_mx_quant_reference)):
            y, x, s, rstd = fused(a, b, g, epsilon=1e-5, dst_type=dst, **kw)
            n, r, xo = norm(a, b, g, 1e-5)
            y2, s2 = torch.ops.npu.npu_dynamic_mx_quant(n, dst_type=dst, **kw)
            assert torch.equal(y.view(torch.uint8), y2.view(torch.uint8))
            assert torch.equal(s, s2) and torch.equal(rstd, r) and torch.equal(x, xo)


def test_nan_inf_layouts_empty():
    a, b, g, _ = _in(4, 64)
    a[1, 3] = float("inf")
    y, x, s, rstd = OP(a, b, g, dst_type=E4M3)
    assert x[1, 3] == float("inf") and rstd[1, 0] == 0 and s[1, 0, 0] == 255
    want = OP(a, b, g, dst_type=E2M1)
    got = OP(a.t().contiguous().t(), b.unsqueeze(0).expand(2, 4, 64)[0], g, dst_type=E2M1)
    for w, o in zip(want, got):
        assert torch.equal(w, o)
    e = OP(a[:0], b[:0], g, dst_type=E4M3)
    assert [list(t.shape) for t in e] == [[0, 64], [0, 64], [0, 1, 2], [0, 1]]


def test_dynamic_shapes_and_ge_converter():
    from op_sdk.converters import convert_fx
    from tests.test_converters import fx_of_call

    def f(a, b, g):
        return OP(a, b, g, dst_type=E4M3)

    cf = torch.compile(f, backend="eager", dynamic=True, fullgraph=True)
    for rows in (3, 9):
        a, b, g, _ = _in(rows, 96)
        for u, v in zip(cf(a, b, g), f(a, b, g)):
            assert torch.equal(u.view(torch.uint8), v.view(torch.uint8))
    a, b, g, be = _in(4, 64)
    graph = convert_fx(fx_of_call(OP.default, (a, b, g), {"beta": be, "dst_type": E4M3}), NAME)
    (op,) = [o for o in graph.ops if o.type == "AddRmsNormDynamicMxQuant"]
    assert op.attr_values()["dst_type"] == 36 and op.attr_values()["output_rstd"] is True
