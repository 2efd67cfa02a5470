"""SiluMulQuant Ascend C kernel (kernels/ascendc/silu_mul_quant) on op_sdk's CPU model of the
Ascend C API, against the reference of my_ops::silu_mul_quant: both tiling keys, tails,
multi-block splits, both dtypes it is built for; a tiling that cannot fit is reported, not run.

The kernel computes silu(gate) = gate / (1 + exp(-gate)) with the model's Exp; torch's silu
and exp are not correctly rounded, so h differs from the reference's in the last bits. The
outputs are compared bit for bit with the reference's formula evaluated with the model's silu
(``model_exp``), and with bounds against the plain reference: y at most one step apart in at
most INT_FLIP_FRACTION of the elements, scale within SCALE_ULP ulps."""

import ctypes

import pytest
import torch

from my_ops.ops import silu_mul_quant as slice_module

pytestmark = pytest.mark.ascendc

CTYPE = {torch.float16: "half", torch.bfloat16: "bfloat16_t"}
# the driver builds these tests call
VARIANTS = [("silu_mul_quant", (("DTYPE_GATE", t),)) for t in CTYPE.values()]

UB = 192 * 1024  # the unified buffer of an Atlas A2 vector core
WHOLE, SPLIT = 1, 2  # the tiling keys: whole rows per tile, a row in chunks
INT_FLIP_FRACTION = 0.01
SCALE_ULP = 8

# (rows, cols, cores, unified-buffer bytes, tiling key): row counts leave a remainder over the
# blocks; the small buffers force the split-row key with a tail chunk, 40 KiB several whole-row
# tiles per block with a tail tile. A 7168-element row fits whole or not by dtype: key None.
CASES = [
    (5, 1, 1, UB, WHOLE), (10, 7, 3, UB, WHOLE), (19, 33, 8, UB, WHOLE), (43, 96, 40, UB, WHOLE),
    (21, 1000, 8, UB, WHOLE), (23, 1000, 1, 40 * 1024, WHOLE), (7, 7168, 3, UB, None),
    (7, 1000, 3, 8 * 1024, SPLIT), (9, 7168, 8, 16 * 1024, SPLIT), (3, 300, 1, 4 * 1024, SPLIT),
]


def _ptr(t):
    return ctypes.c_void_p(t.data_ptr())


def run_kernel(kernels, gate, up, cores=40, ub=UB):
    """The kernel on the model: ((y, scale), tiling key); a broken model rule raises."""
    lib = kernels.lib("silu_mul_quant", DTYPE_GATE=CTYPE[gate.dtype])
    gate, up = gate.contiguous(), up.contiguous()
    cols = gate.shape[-1]
    y = torch.empty(gate.shape, dtype=torch.int8)
    scale = torch.empty(gate.shape[:-1], dtype=torch.float32)
    key, err = ctypes.c_uint32(0), ctypes.create_string_buffer(4096)
    rc = lib.opsdk_run(_ptr(gate), _ptr(up), _ptr(y), _ptr(scale), ctypes.c_uint64(gate.numel() // cols),
                       ctypes.c_uint32(cols), ctypes.c_uint32(cores), ctypes.c_uint32(ub), ctypes.byref(key),
                       err, ctypes.c_int(len(err)))
    if rc != 0:
        raise RuntimeError(err.value.decode(errors="replace"))
    return (y, scale), key.value


def model_exp(kernels, v: torch.Tensor) -> torch.Tensor:
    """The model's fp32 Exp (the host's std::exp), elementwise."""
    lib = kernels.lib("silu_mul_quant", DTYPE_GATE="half")
    v = v.float().contiguous()
    out = torch.empty_like(v)
    lib.opsdk_expf(_ptr(v), _ptr(out), ctypes.c_uint64(v.numel()))
    return out


def _formula(h):
    """The reference's quantisation of h (fp32)."""
    amax = h.abs().amax(-1, keepdim=True)
    inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    return torch.round(h * inv).clamp(-128, 127).to(torch.int8), (amax / 127.0).squeeze(-1)


def _ulps(a, b):
    """How many fp32 steps apart, elementwise."""
    def ordered(t):
        i = t.contiguous().view(torch.int32).to(torch.int64)
        return torch.where(i < 0, -(i & 0x7FFFFFFF), i)
    return (ordered(a) - ordered(b)).abs()


def _check(kernels, gate, up, cores, ub=UB):
    (y, scale), key = run_kernel(kernels, gate, up, cores=cores, ub=ub)
    y_ref, s_ref = slice_module.reference(gate, up)
    g = gate.float()
    fy, fs = _formula(torch.nn.functional.silu(g) * up.float())
    assert torch.equal(fy, y_ref) and torch.equal(fs, s_ref), "the formula must be the reference's"
    my, ms = _formula(g / (model_exp(kernels, g * -1.0) + 1.0) * up.float())
    assert torch.equal(y, my), "y differs from the reference's formula with the model's silu"
    assert torch.equal(scale.view(torch.int32), ms.view(torch.int32)), "scale (model's silu) not bit-exact"
    d = (y.int() - y_ref.int()).abs()
    assert int(d.max()) <= 1 and float((d > 0).float().mean()) <= INT_FLIP_FRACTION, "y vs the reference"
    assert int(_ulps(scale, s_ref).max()) <= SCALE_ULP, "scale vs the reference"
    return key


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"r{c[0]}-h{c[1]}-b{c[2]}-ub{c[3] // 1024}k")
@pytest.mark.parametrize("dt", list(CTYPE), ids=str)
def test_silu_mul_quant(kernels, case, dt):
    rows, cols, cores, ub, want_key = case
    torch.manual_seed(rows * 1000 + cols)
    gate, up = (torch.randn(rows, cols) * 3).to(dt), torch.randn(rows, cols).to(dt)
    key = _check(kernels, gate, up, cores, ub)
    assert key == want_key if want_key is not None else key in (WHOLE, SPLIT)


def test_silu_mul_quant_zero_rows_and_leading_dims(kernels):
    gate, up = torch.randn(2, 3, 40).to(torch.bfloat16), torch.randn(2, 3, 40).to(torch.bfloat16)
    up[1, 2] = 0  # an all-zero row: scale 0, y 0
    _check(kernels, gate, up, 4)
    (y, scale), _ = run_kernel(kernels, gate, up, cores=4)
    assert scale.shape == (2, 3) and scale[1, 2] == 0 and (y[1, 2] == 0).all()


def test_no_tiling_is_reported(kernels):
    gate = torch.randn(2, 64).to(torch.float16)
    with pytest.raises(RuntimeError, match="no tiling fits"):
        run_kernel(kernels, gate, gate, cores=1, ub=16)
