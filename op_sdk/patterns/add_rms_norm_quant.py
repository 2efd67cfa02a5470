"""Fusion 5: npu_add_rms_norm -> npu_quantize(div_mode=True, axis=-1) becomes
npu_add_rms_norm_quant (y1 and x_out; the second quantisation branch unused).

Variants (derived from the operator's ``composite=``): with / without an explicit epsilon, x_out used / unused. Checks (TorchAir's):
zero_points not int8 / uint8; the output dtype int8 or qint8; x1, x2 both fp16 or both
bf16; x2 not 0-d; the last dim 32-byte aligned; gamma.shape == scales.shape; plus the
quantize axis being the last one (the pattern ignores the literal). TorchAir does not
apply it in max-autotune (Ascend's graph engine fuses it itself); here Inductor cannot
fuse across the two custom ops, so it stays on in max-autotune (see config).
"""  # noqa: E501

from __future__ import annotations

import torch

from op_sdk.patterns.checks import HALF, dtype_code, fmt, half_inputs, known_multiple, node_of, val
from op_sdk.patterns.derive import derived_variants
from op_sdk.patterns.fusion import Fusion
from op_sdk.patterns.diagnostics import Check

npu = torch.ops.npu

INT8, QINT8 = 1, 12
TAIL_ALIGNMENT_BYTES = 32


# The variants come from npu_add_rms_norm_quant's composite (op_sdk/ops/).
variants = derived_variants("npu_add_rms_norm_quant", grid=("x_out", "epsilon"),
                            rename={"scales1": "scales", "zero_points1": "zero_points"})


def example_inputs(dtype=torch.float16, variant=None, *, tokens=7, hidden=32, lead=(2,)):
    """fp16 x takes fp32 scales and int32 zero points; bf16 x takes both in bf16."""
    shape = (*lead, tokens, hidden)
    sdt, zdt = (torch.float32, torch.int32) if dtype == torch.float16 else (dtype, dtype)
    return {"x1": torch.randn(shape, dtype=dtype), "x2": torch.randn(shape, dtype=dtype),
            "gamma": torch.randn(hidden, dtype=dtype),
            "scales": (torch.rand(hidden) * 0.02 + 0.01).to(sdt),
            "zero_points": torch.randint(-4, 5, (hidden,)).to(zdt), "epsilon": 1e-5}


# ---- extra checks ------------------------------------------------------------------------

def _quantize(match):
    return node_of(match, npu.npu_quantize.default)


def _norm(match):
    return node_of(match, npu.npu_add_rms_norm.default)


def _quantize_args(match):
    q = _quantize(match)
    x = val(q.args[0])
    axis = q.args[4] if len(q.args) > 4 else q.kwargs.get("axis", 1)
    div_mode = q.args[5] if len(q.args) > 5 else q.kwargs.get("div_mode", True)
    if div_mode is not True:
        return "npu_quantize has div_mode=False; the fused operator divides by the scales"
    if not isinstance(axis, int) or axis % x.dim() != x.dim() - 1:
        return f"npu_quantize quantises along axis {axis}; the fused operator along the last"
    return None


def _output_dtype(match):
    q = _quantize(match)
    dtype = q.args[3] if len(q.args) > 3 else q.kwargs.get("dtype")
    if dtype_code(dtype) not in (INT8, QINT8):
        return f"npu_quantize outputs dtype {dtype}; the fused operator outputs int8 / qint8"
    return None


def _zero_points_dtype(match):
    zp = _quantize(match).args[2]
    if zp is not None and val(zp).dtype in (torch.int8, torch.uint8):
        return f"zero_points are {val(zp).dtype}; the fused operator takes int32 / bf16 ones"
    return None


def _x_dtypes(match):
    norm = _norm(match)
    return half_inputs(norm.args[0], norm.args[1])


def _x2_not_scalar(match):
    if val(_norm(match).args[1]).dim() == 0:
        return "x2 is 0-d"
    return None


def _tail_alignment(match):
    x1 = val(_norm(match).args[0])
    if x1.dim() == 0:
        return "x1 is 0-d"
    nbytes = x1.shape[-1] * x1.element_size()
    if not known_multiple(nbytes, TAIL_ALIGNMENT_BYTES):
        return (f"x1's last dim is {fmt(nbytes)} bytes, not a (statically known) multiple of "
                f"{TAIL_ALIGNMENT_BYTES}")
    return None


def _scales_shape(match):
    gamma, scales = val(_norm(match).args[2]), val(_quantize(match).args[1])
    if tuple(gamma.shape) != tuple(scales.shape):
        return f"scales have shape {fmt(scales.shape)}, gamma {fmt(gamma.shape)}; they must agree"
    return None


CHECKS = (
    Check("quantize_div_mode_last_axis", "args", _quantize_args),
    Check("output_int8", "dtype", _output_dtype),
    Check("zero_points_dtype", "dtype", _zero_points_dtype),
    Check("half_dtypes", "dtype", _x_dtypes),
    Check("x2_not_0d", "shape", _x2_not_scalar),
    Check("tail_alignment_32B", "alignment", _tail_alignment),
    Check("scales_shape_is_gamma_shape", "shape", _scales_shape),
)

FUSION = Fusion(
    name="add_rms_norm_quant",
    number=5,
    fused_op="npu_add_rms_norm_quant",
    unfused_ops=("npu.npu_add_rms_norm", "npu.npu_quantize"),
    variants=variants,
    example_inputs=example_inputs,
    checks=CHECKS,
    dtypes=HALF,
    torchair_max_autotune=False,
    opaque_to_inductor=True,
    doc=__doc__,
)
