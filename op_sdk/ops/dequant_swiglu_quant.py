"""npu_dequant_swiglu_quant: an int32 GEMM accumulator dequantised (weight and per-token
activation scales, bias), its SwiGLU (plain, or GPT-OSS's clipped form), then static or
dynamic int8 quantisation, per MoE group (torch_npu.npu_dequant_swiglu_quant; CANN's
DequantSwigluQuant, aclnnDequantSwigluQuant / V2, hicann/ops-nn quant/dequant_swiglu_quant).

Contract (docs/operators.md, "The LLM operator families"), from torch_npu's document, ops-nn's
aclnn documents, op-plugin's binding (DequantSwigluQuantOpApi.cpp) and its test golden
(test_npu_dequant_swiglu_quant.py), the Atlas A2 / A3 behaviour:

* ``x`` int32 (a GEMM's accumulator), float16 or bfloat16, 2 to 8 dims, the last 2H even and
  > 0; rows are every dim but the last. G groups: ``group_index`` (int64 or int32, 1-D, G >=
  1 row counts, each >= 0, their sum at most the rows: data rules) or G = 1. Rows past the
  groups' sum: y 0 and scale 0 (the NPU leaves them unwritten).
* Dequantisation, int32 x only (a float16 / bfloat16 x is taken as it is, and then
  ``weight_scale``, ``activation_scale`` and ``bias`` must be None): an int32 ``bias`` is
  added to x in int32 (two's complement), then ``v = float32(x) * weight_scale *
  activation_scale`` (one float32 product each), then a float ``bias`` is added.
  ``weight_scale`` float32 (2H,) or (G, 2H), required with an int32 x; ``activation_scale``
  float32, one value per row (x's leading shape, with or without a trailing 1, or flat);
  ``bias`` int32, float32, float16 or bfloat16, (2H,) or (G, 2H).
* SwiGLU of v: ``swiglu_mode`` 0: ``silu(A) * B`` (torch's silu, A the half
  ``activate_left`` picks: the first when True, the second when False, as npu_swiglu_quant);
  1: A / B the even / odd elements, clipped (npu_clipped_swiglu's formula with ``glu_alpha``,
  ``clamp_limit``, ``glu_bias``; activate_left not read); 2: the halves as mode 0 picks
  them, clipped. ``clamp_limit`` > 0 and finite, ``glu_alpha`` / ``glu_bias`` finite
  (op-plugin's checks).
* ``quant_mode`` 1 (dynamic): ``t = act * quant_scale`` (when given: float32, float16 or
  bfloat16 of shape (H,) or (G, H)); ``scale = max|t| / 127`` per row (the dequantisation
  step, as npu_dynamic_quant returns it; one float32 division), ``y = round(t * (127 /
  max|t|))`` saturated to int8 (half to even; a NaN stores 0; an all-zero row scale 0, y 0).
  ``quant_offset`` is not read (torch_npu's document: no effect in dynamic mode).
* ``quant_mode`` 0 (static): ``y = round(act / quant_scale + quant_offset)`` saturated
  (op-plugin's golden: a division), each optional (1 and 0); ``quant_scale`` float32 of
  shape (G, H) per channel or (G,) per group; ``quant_offset`` float32, float16 or bfloat16 of
  the same forms; ``scale`` 0 (the NPU does not write it).
* ``dst_type`` None or 1 (int8), ``round_mode`` None or 0 (rint), ``activate_dim`` None, -1 or
  x.dim() - 1: the A2 / A3 path ignores these three (op-plugin); Ascend 950's other output
  dtypes, rounding modes and activation dims are refused by name rather than ignored.
* y int8 of x's shape with the last dim halved, scale float32 of x's shape without it,
  contiguous (torch_npu's Meta). Inference only.

Left out, said in docs/operators.md: torch_npu's document forbids ``bias`` with group_index
and ops-nn's documents allow it: op_sdk allows it (per group); upstream's golden treats
swiglu_mode 2 as mode 0 where the documents clip it: op_sdk clips.

Native CPU kernel: csrc/dequant_swiglu_quant.cpp (kernels/swiglu.h), every form without
group_index; MoE groups run the reference. CUDA: Triton (op_sdk/triton_kernels/swiglu.py),
every form, MoE groups too.
"""

from __future__ import annotations

import math

import torch

from op_sdk.composite import Composite
from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import by_value
from op_sdk.ops._common import (
    FLOAT_DTYPES, INT8_MAX, absmax, check, div_scalar, quantize_round, rows_by_group)
from op_sdk.ops.add_rms_norm_cast import _npu_dtype_cast, _to
from op_sdk.ops.clipped_swiglu import clipped_glu
from op_sdk.triton_kernels import TritonKernel

OP = "npu_dequant_swiglu_quant"
X_DTYPES = (torch.int32, torch.float16, torch.bfloat16)
BIAS_DTYPES = (torch.int32, *FLOAT_DTYPES)
QUANT_MODES = {0: "static", 1: "dynamic"}
SWIGLU_MODES = (0, 1, 2)
MAX_DIMS = 8
INT8_CODE = 1  # torch_npu's dtype code of int8 (its Meta's default dst_type)


def _shape_text(t) -> str:
    return f"{list(t.shape)} {t.dtype}"


def check_dequant_swiglu_quant(x, weight_scale, activation_scale, bias, quant_scale,
                               quant_offset, group_index, quant_mode, dst_type, round_mode,
                               activate_dim, swiglu_mode, clamp_limit, glu_alpha, glu_bias):
    """The contract's shape / dtype / option rules (what the fake can see); returns (H, G)."""
    check(x.dtype in X_DTYPES, OP, "x",
          f"must have dtype int32, float16 or bfloat16, got {x.dtype}")
    check(2 <= x.dim() <= MAX_DIMS, OP, "x", f"must have 2 to {MAX_DIMS} dims, got {x.dim()}")
    d = x.shape[-1]
    check(d % 2 == 0 and d > 0, OP, "x", f"must have an even last dim > 0, got {d}")
    h = d // 2
    check(quant_mode in QUANT_MODES, OP, "quant_mode",
          f"must be 0 (static) or 1 (dynamic), got {quant_mode}")
    check(swiglu_mode in SWIGLU_MODES, OP, "swiglu_mode",
          f"must be 0 (SwiGLU), 1 (clipped, even / odd) or 2 (clipped, halves), got {swiglu_mode}")
    check(math.isfinite(clamp_limit) and clamp_limit > 0, OP, "clamp_limit",
          f"must be positive and finite, got {clamp_limit}")
    check(math.isfinite(glu_alpha), OP, "glu_alpha", f"must be finite, got {glu_alpha}")
    check(math.isfinite(glu_bias), OP, "glu_bias", f"must be finite, got {glu_bias}")
    check(dst_type in (None, INT8_CODE), OP, "dst_type",
          f"must be None or 1 (int8: the Atlas A2 / A3 output; Ascend 950's float8 / float4 "
          f"outputs are not provided by op_sdk), got {dst_type}")
    check(round_mode in (None, 0), OP, "round_mode",
          f"must be None or 0 (rint, the int8 output's rounding), got {round_mode}")
    check(activate_dim in (None, -1, x.dim() - 1), OP, "activate_dim",
          f"must be None, -1 or {x.dim() - 1} (the last dim; Ascend 950's other activation "
          f"dims are not provided by op_sdk), got {activate_dim}")
    groups = 1
    if group_index is not None:
        check(group_index.dtype in (torch.int64, torch.int32) and group_index.dim() == 1
              and group_index.shape[0] >= 1, OP, "group_index",
              f"must be a 1-D int64 or int32 tensor of at least 1 row count, got "
              f"{_shape_text(group_index)}")
        groups = group_index.shape[0]
    g_text = f"G = {groups} group{'s' if groups > 1 else ''}"
    per_group = ((groups,), (groups, h))
    if x.dtype == torch.int32:
        check(weight_scale is not None, OP, "weight_scale",
              "is required when x is int32 (the weight's dequantisation scale)")
    else:
        for name, t in (("weight_scale", weight_scale), ("activation_scale", activation_scale),
                        ("bias", bias)):
            check(t is None, OP, name,
                  f"must be None when x is {x.dtype} (only an int32 x is dequantised)")
    if weight_scale is not None:
        ok = (weight_scale.dtype == torch.float32
              and tuple(weight_scale.shape) in ((groups, d),) + (((d,),) if groups == 1 else ()))
        check(ok, OP, "weight_scale",
              f"must be float32 of shape ({groups}, {d})" + (f" or ({d},)" if groups == 1 else "")
              + f" ({g_text}, 2H = {d}), got {_shape_text(weight_scale)}")
    if activation_scale is not None:
        lead = tuple(x.shape[:-1])
        rows = math.prod(lead)
        ok = (activation_scale.dtype == torch.float32
              and tuple(activation_scale.shape) in (lead, lead + (1,), (rows,), (rows, 1)))
        check(ok, OP, "activation_scale",
              f"must be float32 with one value per row of x: shape {list(lead)}, "
              f"{list(lead + (1,))}, [{rows}] or [{rows}, 1], got {_shape_text(activation_scale)}")
    if bias is not None:
        ok = (bias.dtype in BIAS_DTYPES
              and tuple(bias.shape) in ((groups, d),) + (((d,),) if groups == 1 else ()))
        check(ok, OP, "bias",
              f"must be int32, float32, float16 or bfloat16 of shape ({groups}, {d})"
              + (f" or ({d},)" if groups == 1 else "") + f", got {_shape_text(bias)}")
    if quant_scale is not None:
        if quant_mode == 1:
            ok = (quant_scale.dtype in FLOAT_DTYPES
                  and tuple(quant_scale.shape) in ((groups, h),) + (((h,),) if groups == 1 else ()))
            want = (f"float32, float16 or bfloat16 of shape ({groups}, {h})"
                    + (f" or ({h},)" if groups == 1 else "") + " in dynamic mode")
        else:
            ok = quant_scale.dtype == torch.float32 and tuple(quant_scale.shape) in per_group
            want = f"float32 of shape ({groups}, {h}) or ({groups},) in static mode"
        check(ok, OP, "quant_scale", f"must be {want} ({g_text}, H = {h}), got "
              + _shape_text(quant_scale))
    if quant_offset is not None and quant_mode == 0:
        forms = (tuple(quant_scale.shape),) if quant_scale is not None else per_group
        ok = quant_offset.dtype in FLOAT_DTYPES and tuple(quant_offset.shape) in forms
        check(ok, OP, "quant_offset",
              "must be float32, float16 or bfloat16 of " + (
                  f"quant_scale's shape {list(quant_scale.shape)}" if quant_scale is not None
                  else f"shape ({groups}, {h}) or ({groups},)") + f", got {_shape_text(quant_offset)}")
    return h, groups


def row_groups(group_index, rows: int) -> torch.Tensor:
    """Each row's group, -1 past the groups' sum, from group_index's counts (data rules:
    each >= 0, the sum at most the rows)."""
    counts = group_index.to(torch.int64)
    check(bool((counts >= 0).all()), OP, "group_index",
          f"values must be row counts >= 0, got {counts.tolist()[:8]}")
    return rows_by_group(OP, counts, rows)


def _per_row(t, of_row, width, per_group_scalar=False):
    """A parameter read per row as float32, (rows, width) or (rows, 1): its (G, width) or
    (width,) form (G = 1), or with ``per_group_scalar`` its (G,) form; rows past the groups
    read group 0 (their results are zeroed)."""
    v = t.float().reshape(-1, 1 if per_group_scalar and t.dim() == 1 else width)
    return v[of_row.clamp(min=0)]


def dequant_swiglu_quant_reference(x, *, weight_scale=None, activation_scale=None, bias=None,
                                   quant_scale=None, quant_offset=None, group_index=None,
                                   activate_left=False, quant_mode=0, dst_type=None,
                                   round_mode=None, activate_dim=None, swiglu_mode=0,
                                   clamp_limit=7.0, glu_alpha=1.702, glu_bias=1.0):
    """The ground truth: the contract's steps in float32 (module docstring)."""
    h, _ = check_dequant_swiglu_quant(x, weight_scale, activation_scale, bias, quant_scale,
                                      quant_offset, group_index, quant_mode, dst_type,
                                      round_mode, activate_dim, swiglu_mode, clamp_limit,
                                      glu_alpha, glu_bias)
    rows = x.shape[:-1].numel()
    of_row = (row_groups(group_index, rows) if group_index is not None
              else torch.zeros(rows, dtype=torch.int64, device=x.device))
    v = x.reshape(rows, 2 * h)
    if bias is not None and bias.dtype == torch.int32:
        v = v + bias.reshape(-1, 2 * h)[of_row.clamp(min=0)]  # int32, wrapping
    v = v.float()
    if weight_scale is not None:
        v = v * _per_row(weight_scale, of_row, 2 * h)
    if activation_scale is not None:
        v = v * activation_scale.reshape(rows, 1)
    if bias is not None and bias.dtype != torch.int32:
        v = v + _per_row(bias, of_row, 2 * h)
    if swiglu_mode == 1:
        a, b = v[:, 0::2], v[:, 1::2]
    else:
        a, b = (v[:, :h], v[:, h:]) if activate_left else (v[:, h:], v[:, :h])
    if swiglu_mode == 0:
        t = torch.nn.functional.silu(a) * b
    else:
        t = clipped_glu(a, b, glu_alpha, clamp_limit, glu_bias)
    if quant_mode == 1:
        if quant_scale is not None:
            t = t * _per_row(quant_scale, of_row, h)
        amax = absmax(t, -1)  # NaN propagates
        scale = div_scalar(amax, INT8_MAX)  # one IEEE division on every device
        t = t * (torch.full_like(amax, INT8_MAX) / amax)
    else:
        if quant_scale is not None:
            t = t / _per_row(quant_scale, of_row, h, True)
        if quant_offset is not None:
            t = t + _per_row(quant_offset, of_row, h, True)
        scale = t.new_zeros(rows, 1)
    y = quantize_round(t, -INT8_MAX - 1, INT8_MAX, torch.int8)
    scale = scale.reshape(rows)
    if group_index is not None:
        live = of_row >= 0
        y = torch.where(live.unsqueeze(-1), y, 0)
        scale = torch.where(live, scale, 0.0)
    return (y.reshape(*x.shape[:-1], h).contiguous(),
            scale.reshape(x.shape[:-1]).contiguous())


def dequant_swiglu_quant_fake(x, *, weight_scale=None, activation_scale=None, bias=None,
                              quant_scale=None, quant_offset=None, group_index=None,
                              activate_left=False, quant_mode=0, dst_type=None, round_mode=None,
                              activate_dim=None, swiglu_mode=0, clamp_limit=7.0, glu_alpha=1.702,
                              glu_bias=1.0):
    h, _ = check_dequant_swiglu_quant(x, weight_scale, activation_scale, bias, quant_scale,
                                      quant_offset, group_index, quant_mode, dst_type,
                                      round_mode, activate_dim, swiglu_mode, clamp_limit,
                                      glu_alpha, glu_bias)
    return (x.new_empty((*x.shape[:-1], h), dtype=torch.int8),
            x.new_empty(x.shape[:-1], dtype=torch.float32))


def dequant_swiglu_quant_cuda(x, **kw):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/swiglu.py), MoE groups too: each row's
    group from the reference's rule (``row_groups``, which checks group_index's values: a
    read back)."""
    from op_sdk.triton_kernels import swiglu

    y, scale = dequant_swiglu_quant_fake(x, **kw)
    gi = kw.get("group_index")
    groups = row_groups(gi, x.shape[:-1].numel()) if gi is not None else None
    return swiglu.run_dequant_quant(x, y, scale, groups=groups, **kw)


# ---- the unfused spelling: the int32 accumulator dequantised, SwiGLU, dynamic int8 ----------

def _unfused_spelling(x, weight_scale, activation_scale, quant_scale=None, *, cast=_to):
    """After an int32 npu_quant_matmul (W8A8 with the scales left to the epilogue, as a MoE's
    grouped GEMM hands them to npu_dequant_swiglu_quant): float32 x times the weight's
    (2H,) scale and the rows' (rows, 1) scale, npu_swiglu (silu of the first half), then
    npu_dynamic_quant per token, smoothed by quant_scale (H,) when given. npu_dynamic_quant
    returns amax / 127 and rounds t * (127 / amax): the fused operator's own steps, so the
    chain and the operator agree bit for bit."""
    t = cast(x, torch.float32) * weight_scale * activation_scale
    y, scale = torch.ops.npu.npu_dynamic_quant(torch.ops.npu.npu_swiglu(t, -1),
                                               smooth_scales=quant_scale)
    return {"y": y, "scale": scale}


def _bench_make(t, h, dt):
    """A MoE expert's int32 gate_up accumulator (t rows of 2h) and its scales; dt unused
    (x is int32)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-30000, 30000, (t, 2 * h), generator=g, dtype=torch.int32)
    return ((x,), {"weight_scale": torch.rand(2 * h, generator=g) * 1e-4,
                   "activation_scale": torch.rand(t, 1, generator=g) * 1e-2 + 1e-3,
                   "activate_left": True, "quant_mode": 1})


def _bench_unfused(x, *, weight_scale, activation_scale, **_):
    return _unfused_spelling(x, weight_scale, activation_scale)


# the aclnn APIs torch_npu's kernel calls (op-plugin DequantSwigluQuantOpApi.cpp: V2 on Atlas
# A2 / A3 wherever CANN has it, with dstType int8, roundMode "rint", activateDim -1), their
# prototypes as ops-nn documents them
prototypes.declare("aclnnDequantSwigluQuantV2",
                   "const aclTensor* x, const aclTensor* weightScaleOptional, "
                   "const aclTensor* activationScaleOptional, const aclTensor* biasOptional, "
                   "const aclTensor* quantScaleOptional, const aclTensor* quantOffsetOptional, "
                   "const aclTensor* groupIndexOptional, bool activateLeft, "
                   "char* quantModeOptional, int64_t dstType, char* roundModeOptional, "
                   "int64_t activateDim, int64_t swigluMode, double clampLimit, "
                   "double gluAlpha, double gluBias, const aclTensor* yOut, "
                   "const aclTensor* scaleOut",
                   prototypes.OPS_NN
                   + "quant/dequant_swiglu_quant/docs/aclnnDequantSwigluQuantV2.md",
                   cann="8.5.0")


def _bindings():
    """quant_mode goes to aclnn as its string; dst_type / round_mode / activate_dim (None or
    their A2 / A3 values, the fake refuses others) as op-plugin passes them there."""
    return by_value("aclnnDequantSwigluQuantV2", "quant_mode",
                    {m: {"quantModeOptional": f'"{QUANT_MODES[m]}"'} for m in (1, 0)},
                    outputs=("y", "scale"),
                    rename={"weightScaleOptional": "weight_scale",
                            "activationScaleOptional": "activation_scale", "biasOptional": "bias",
                            "quantScaleOptional": "quant_scale",
                            "quantOffsetOptional": "quant_offset",
                            "groupIndexOptional": "group_index", "activateLeft": "activate_left",
                            "swigluMode": "swiglu_mode", "clampLimit": "clamp_limit",
                            "gluAlpha": "glu_alpha", "gluBias": "glu_bias"},
                    constants={"dstType": "2", "roundModeOptional": '"rint"', "activateDim": "-1"},
                    meta_only=("dst_type", "round_mode", "activate_dim"))


npu_dequant_swiglu_quant = define_op(
    "npu_dequant_swiglu_quant(Tensor x, *, Tensor? weight_scale=None, "
    "Tensor? activation_scale=None, Tensor? bias=None, Tensor? quant_scale=None, "
    "Tensor? quant_offset=None, Tensor? group_index=None, bool activate_left=False, "
    "int quant_mode=0, int? dst_type=None, int? round_mode=None, int? activate_dim=None, "
    "int swiglu_mode=0, float clamp_limit=7., float glu_alpha=1.702, float glu_bias=1.) "
    "-> (Tensor, Tensor)",
    reference=dequant_swiglu_quant_reference, fake=dequant_swiglu_quant_fake, native=("cpu",),
    kernels={"cuda": TritonKernel(dequant_swiglu_quant_cuda)},
    # the CPU launcher routes calls with group_index (and invalid ones) to the reference
    reference_op=True,
    aclnn=_bindings(),
    doc="An int32 GEMM accumulator dequantised (weight / per-token scales, bias), SwiGLU "
        "(plain or clipped), then static or dynamic int8 quantisation, per MoE group.",
    benchmarks=(Benchmark(_bench_make, _bench_unfused,
                          "dequant + npu_swiglu + npu_dynamic_quant"),),
    composite=Composite(_unfused_spelling, outputs=("y", "scale"),
                        fixed={"activate_left": True, "quant_mode": 1},
                        spellings={"cast": {"to": _to, "npu_dtype_cast": _npu_dtype_cast}}),
)
