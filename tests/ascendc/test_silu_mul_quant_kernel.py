"""SiluMulQuant Ascend C kernel (kernels/ascendc/silu_mul_quant) on the CPU model vs the
reference of the plugin example's my_ops::silu_mul_quant (examples/plugin_fused_op.py).

The kernel computes silu(gate) = gate / (1 + exp(-gate)) with the model's Exp; torch's silu
and exp are not correctly rounded, so h differs from the reference's in the last bits. The
outputs are compared bit for bit with the reference's formula evaluated with the model's silu
(_kernels.model_exp), and with bounds against the plain reference: y at most one step apart in
at most INT_FLIP_FRACTION of the elements, scale within SCALE_ULP ulps."""

import ctypes
import os
import sys

import pytest
import torch

from tests.ascendc import _kernels as K
from tests.ascendc._cases import CASES, case_id, check_key

pytestmark = pytest.mark.ascendc

# the driver builds these tests call (tests/ascendc/_kernels.py builds them together)
VARIANTS = [("silu_mul_quant", (("DTYPE_GATE", x),)) for x in ("half", "bfloat16_t")]


# ---- the kernel's call wrappers (tests/ascendc/driver_silu_mul_quant.cpp) ----

def silu_mul_quant(builder, gate, up, cores=40, ub=K.UB_910B):
    lib = builder.lib("silu_mul_quant", DTYPE_GATE=K.CTYPE[gate.dtype])
    gate, up = gate.contiguous(), up.contiguous()
    cols = gate.shape[-1]
    y = torch.empty(gate.shape, dtype=torch.int8)
    scale = torch.empty(gate.shape[:-1], dtype=torch.float32)
    key = K.call(lib.opsdk_run, K.ptr(gate), K.ptr(up), K.ptr(y), K.ptr(scale), K.nrows(gate, cols),
                 ctypes.c_uint32(cols), ctypes.c_uint32(cores), ctypes.c_uint32(ub))
    return (y, scale), key


def model_exp(builder, v: torch.Tensor) -> torch.Tensor:
    """The model's fp32 Exp (the host's std::exp), elementwise."""
    lib = builder.lib("silu_mul_quant", DTYPE_GATE="half")
    v = v.float().contiguous()
    out = torch.empty_like(v)
    lib.opsdk_expf(K.ptr(v), K.ptr(out), ctypes.c_uint64(v.numel()))
    return out


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
f16, bf16 = torch.float16, torch.bfloat16


@pytest.fixture(scope="module")
def plugin():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        import plugin_fused_op
    finally:
        sys.path.pop(0)
    return plugin_fused_op


def _formula(h):
    """The reference's quantisation of h (fp32)."""
    amax = h.abs().amax(-1, keepdim=True)
    inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    return torch.round(h * inv).clamp(-128, 127).to(torch.int8), (amax / 127.0).squeeze(-1)


def _check(kernels, plugin, gate, up, cores, ub=K.UB_910B):
    (y, scale), key = silu_mul_quant(kernels, gate, up, cores=cores, ub=ub)
    y_ref, s_ref = plugin.reference(gate, up)
    g = gate.float()
    h_ref = torch.nn.functional.silu(g) * up.float()
    fy, fs = _formula(h_ref)
    assert torch.equal(fy, y_ref) and torch.equal(fs, s_ref), "the formula must be the reference's"
    h_model = g / (model_exp(kernels, g * -1.0) + 1.0) * up.float()
    my, ms = _formula(h_model)
    assert torch.equal(y, my), "y differs from the reference's formula with the model's silu"
    assert torch.equal(scale.view(torch.int32), ms.view(torch.int32)), "scale (model's silu) not bit-exact"
    K.assert_int_close(y, y_ref, what="y")
    K.assert_ulp(scale, s_ref, K.SCALE_ULP, what="scale")
    return key


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("dt", [f16, bf16], ids=str)
def test_silu_mul_quant(kernels, plugin, case, dt):
    rows, cols, cores, ub, want_key = case
    torch.manual_seed(rows * 1000 + cols)
    gate, up = (torch.randn(rows, cols) * 3).to(dt), torch.randn(rows, cols).to(dt)
    check_key(_check(kernels, plugin, gate, up, cores, ub), case)


def test_silu_mul_quant_zero_rows_and_leading_dims(kernels, plugin):
    gate, up = torch.randn(2, 3, 40).to(bf16), torch.randn(2, 3, 40).to(bf16)
    up[1, 2] = 0                       # an all-zero row: scale 0, y 0
    _check(kernels, plugin, gate, up, 4)
    (y, scale), _ = silu_mul_quant(kernels, gate, up, cores=4)
    assert scale.shape == (2, 3) and scale[1, 2] == 0 and (y[1, 2] == 0).all()
