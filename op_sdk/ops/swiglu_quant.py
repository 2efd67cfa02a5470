"""npu_swiglu_quant: SwiGLU of the two halves of ``x``'s last dim, then int8 quantisation,
static or dynamic, per MoE group (torch_npu.npu_swiglu_quant; CANN's SwiGluQuant,
aclnnSwiGluQuantV2, hicann/ops-nn quant/swi_glu_quant).

Contract (docs/operators.md, "The LLM operator families"), from the aclnnSwiGluQuantV2
document and op-plugin's own test golden (test_npu_swiglu_quant.py):

* ``x`` float16, bfloat16 or float32 of at least 2 dims, the last dim 2N even and at most
  8192; rows are every dim but the last. float32 inside.
* ``act = silu(A) * B`` with ``activate_left=True`` (A, B the first and second halves),
  ``A * silu(B)`` with ``activate_left=False`` (the default: the *right* half is activated).
* groups: ``group_index`` int32 of G >= 1 values, cumulative end rows (``group_list_type``
  0, non-decreasing) or row counts (1), at most the row count in all; group g's rows use
  ``smooth_scales[g]`` (and ``offsets[g]``). Rows after the last group are quantised
  without smoothing or offset (the golden's rule). Without group_index, G = 1.
* ``smooth_scales`` float32 of shape (G, N) (per channel) or (G,) (per tensor);
  ``offsets`` float32 of smooth_scales' shape, read in static mode only.
* ``quant_mode`` 1 (dynamic): ``t = act * smooth``; ``scale = 127 / max|t|`` per row
  (one float32 division: the multiplier, not its reciprocal, as the golden returns it);
  ``y = round(t * scale)`` saturated to [-128, 127]. An all-zero row has scale inf and
  y 0 (a NaN product stores 0, the contract's rule); without smooth_scales, t = act.
* ``quant_mode`` 0 (static): ``y = round(act * smooth + offset)`` saturated, smooth_scales
  required; scale is not computed by the NPU kernel's documentation, and is 0 here.
* ``dst_type`` None or torch.int8 (int4 output: not provided by op_sdk).
* y is int8 of x's shape with the last dim halved, scale float32 of x's shape without its
  last dim; both contiguous (torch_npu's Meta).

Native CPU kernel: csrc/swiglu_quant.cpp (over kernels/swiglu.h), every form without
group_index; MoE groups run the reference. CUDA kernel: Triton
(op_sdk/triton_kernels/swiglu.py), every form, MoE groups too.
"""

from __future__ import annotations

import torch

from op_sdk.composite import Composite, Spelling
from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import by_value
from op_sdk.ops._common import (
    FLOAT_DTYPES, INT8_MAX, absmax, bench_randn, check, check_dtype, quantize_round,
    rows_by_group)
from op_sdk.triton_kernels import TritonKernel

MAX_LAST_DIM = 8192
QUANT_MODES = {0: "static", 1: "dynamic"}
GROUP_LIST_TYPES = {0: "cumsum", 1: "count"}
OP = "npu_swiglu_quant"


def check_swiglu_quant(x, smooth_scales, offsets, group_index, quant_mode, group_list_type,
                       dst_type):
    """The contract's shape / dtype / option rules (what the fake can see); returns N."""
    check_dtype(x, OP, "x", FLOAT_DTYPES)
    check(x.dim() >= 2, OP, "x", f"must have at least 2 dims, got {x.dim()}")
    d = x.shape[-1]
    check(d % 2 == 0 and 0 < d <= MAX_LAST_DIM, OP, "x",
          f"must have an even last dim of at most {MAX_LAST_DIM}, got {d}")
    check(quant_mode in QUANT_MODES, OP, "quant_mode",
          f"must be 0 (static) or 1 (dynamic), got {quant_mode}")
    check(group_list_type in GROUP_LIST_TYPES, OP, "group_list_type",
          f"must be 0 (cumsum) or 1 (count), got {group_list_type}")
    check(dst_type in (None, torch.int8), OP, "dst_type",
          f"must be None or torch.int8 (op_sdk provides no int4 output), got {dst_type}")
    n = d // 2
    groups = 1
    if group_index is not None:
        check(group_index.dtype == torch.int32 and group_index.dim() == 1
              and group_index.shape[0] >= 1, OP, "group_index",
              f"must be a 1-D int32 tensor of at least 1 value, got "
              f"{list(group_index.shape)} {group_index.dtype}")
        groups = group_index.shape[0]
    if smooth_scales is not None:
        check(smooth_scales.dtype == torch.float32
              and tuple(smooth_scales.shape) in ((groups, n), (groups,)), OP, "smooth_scales",
              f"must be float32 of shape ({groups}, {n}) or ({groups},) (G = {groups} "
              f"group{'s' if groups > 1 else ''}, N = {n}), got {list(smooth_scales.shape)} "
              f"{smooth_scales.dtype}")
    else:
        check(quant_mode == 1, OP, "smooth_scales",
              "is required in static mode (quant_mode 0): it is the quantisation scale")
    if offsets is not None and quant_mode == 0:
        check(offsets.dtype == torch.float32 and offsets.shape == smooth_scales.shape, OP,
              "offsets", f"must be float32 of smooth_scales' shape {list(smooth_scales.shape)}, "
              f"got {list(offsets.shape)} {offsets.dtype}")
    return n


def _group_rows(group_index, group_list_type, rows):
    """Each row's group (-1 after the last group), from group_index's values (data rules)."""
    g = group_index.to(torch.int64)
    counts = g if group_list_type == 1 else torch.diff(g, prepend=g.new_zeros(1))
    check(bool((g >= 0).all()) and bool((counts >= 0).all()), OP, "group_index",
          "must have non-negative values" + (", non-decreasing in cumsum mode (group_list_type 0)"
                                             if group_list_type == 0 else ""))
    return rows_by_group(OP, counts, rows)


def _per_row(values, of_row):
    """smooth_scales / offsets read per row: (rows, N) or (rows, 1). Rows after the last
    group (of_row -1) read group 0's here; the caller keeps their unsmoothed value."""
    v = values.float().reshape(values.shape[0], -1)
    return v[of_row.clamp(min=0)]


def swiglu_quant_reference(x, *, smooth_scales=None, offsets=None, group_index=None,
                           activate_left=False, quant_mode=0, group_list_type=0,
                           dst_type=None):
    n = check_swiglu_quant(x, smooth_scales, offsets, group_index, quant_mode,
                           group_list_type, dst_type)
    rows = x.shape[:-1].numel()
    xf = x.float().reshape(rows, 2 * n)
    a, b = xf[:, :n], xf[:, n:]
    silu = torch.nn.functional.silu
    t = silu(a) * b if activate_left else a * silu(b)
    if smooth_scales is not None:
        of_row = (_group_rows(group_index, group_list_type, rows) if group_index is not None
                  else torch.zeros(rows, dtype=torch.int64, device=x.device))
        grouped = (of_row >= 0).unsqueeze(-1)
        t = torch.where(grouped, t * _per_row(smooth_scales, of_row), t)
        if quant_mode == 0 and offsets is not None:
            t = torch.where(grouped, t + _per_row(offsets, of_row), t)
    if quant_mode == 1:
        amax = absmax(t, -1)  # NaN propagates
        scale = torch.full_like(amax, INT8_MAX) / amax  # 127 / 0 = inf
        t = t * scale
    else:
        scale = t.new_zeros(rows, 1)
    y = quantize_round(t, -INT8_MAX - 1, INT8_MAX, torch.int8)
    return (y.reshape(*x.shape[:-1], n).contiguous(),
            scale.reshape(x.shape[:-1]).contiguous())


def swiglu_quant_fake(x, *, smooth_scales=None, offsets=None, group_index=None,
                      activate_left=False, quant_mode=0, group_list_type=0, dst_type=None):
    n = check_swiglu_quant(x, smooth_scales, offsets, group_index, quant_mode,
                           group_list_type, dst_type)
    return (x.new_empty((*x.shape[:-1], n), dtype=torch.int8),
            x.new_empty(x.shape[:-1], dtype=torch.float32))


def swiglu_quant_cuda(x, *, smooth_scales=None, offsets=None, group_index=None,
                      activate_left=False, quant_mode=0, group_list_type=0, dst_type=None):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/swiglu.py), MoE groups too: each row's
    group from the reference's rule (``_group_rows``, which checks group_index's values: a
    read back)."""
    from op_sdk.triton_kernels import swiglu

    y, scale = swiglu_quant_fake(x, smooth_scales=smooth_scales, offsets=offsets,
                                 group_index=group_index, activate_left=activate_left,
                                 quant_mode=quant_mode, group_list_type=group_list_type,
                                 dst_type=dst_type)
    groups = None
    if group_index is not None:
        groups = _group_rows(group_index, group_list_type, x.shape[:-1].numel())
        if smooth_scales is None:  # (groups only choose smooth_scales / offsets)
            groups = None
    return swiglu.run_quant(x, y, scale, y.shape[-1], smooth_scales,
                            offsets if quant_mode == 0 else None, activate_left, quant_mode == 1,
                            groups)


# ---- the unfused spelling: SwiGLU, then per-token dynamic int8 --------------------------------

def _swiglu_dynamic_quant(x):
    """npu_swiglu (silu of the first half) then npu_dynamic_quant, whose scale is the
    dequantisation step amax / 127: npu_swiglu_quant(activate_left=True, quant_mode=1)
    returns the multiplier 127 / amax, mapped back by _dequant_scale."""
    y, scale = torch.ops.npu.npu_dynamic_quant(torch.ops.npu.npu_swiglu(x, -1))
    return {"y": y, "scale": scale}


def _dequant_scale(multiplier):
    """npu_dynamic_quant's scale from npu_swiglu_quant's: 1 / (127 / amax), within an ulp of
    amax / 127; an all-zero row (multiplier inf) gives 0, npu_dynamic_quant's."""
    return torch.reciprocal(multiplier)


def _unfused_spelling(x, *, quant=_swiglu_dynamic_quant):
    return quant(x)


def _bench_unfused(x, **_):
    return torch.ops.npu.npu_dynamic_quant(torch.ops.npu.npu_swiglu(x, -1))


# the aclnn API torch_npu's own kernel calls (op-plugin: aclnnSwiGluQuantV2), its prototype as
# ops-nn documents it (quant/swi_glu_quant/docs/aclnnSwiGluQuantV2.md)
prototypes.declare("aclnnSwiGluQuantV2",
                   "const aclTensor* x, const aclTensor* smoothScalesOptional, "
                   "const aclTensor* offsetsOptional, const aclTensor* groupIndexOptional, "
                   "bool activateLeft, char* quantModeOptional, int64_t groupListType, "
                   "int64_t dstType, const aclTensor* yOut, const aclTensor* scaleOut",
                   prototypes.OPS_NN + "quant/swi_glu_quant/docs/aclnnSwiGluQuantV2.md",
                   cann="8.5.0")


def _bindings():
    """quant_mode goes to aclnn as its string ("static" / "dynamic"); dst_type None or int8
    (the fake refuses any other) is aclnn's dstType 2 (int8)."""
    return by_value("aclnnSwiGluQuantV2", "quant_mode",
                    {1: {"quantModeOptional": '"dynamic"'}, 0: {"quantModeOptional": '"static"'}},
                    outputs=("y", "scale"),
                    rename={"smoothScalesOptional": "smooth_scales", "offsetsOptional": "offsets",
                            "groupIndexOptional": "group_index", "activateLeft": "activate_left",
                            "groupListType": "group_list_type"},
                    constants={"dstType": "2"}, meta_only=("dst_type",))


npu_swiglu_quant = define_op(
    "npu_swiglu_quant(Tensor x, *, Tensor? smooth_scales=None, Tensor? offsets=None, "
    "Tensor? group_index=None, bool activate_left=False, int quant_mode=0, "
    "int group_list_type=0, ScalarType? dst_type=None) -> (Tensor, Tensor)",
    reference=swiglu_quant_reference, fake=swiglu_quant_fake, native=("cpu",),
    kernels={"cuda": TritonKernel(swiglu_quant_cuda)},
    # the CPU launcher routes calls with group_index (and invalid ones) to the reference
    reference_op=True,
    aclnn=_bindings(),
    doc="SwiGLU of x's halves (left or right activated), then static or dynamic int8 "
        "quantisation per MoE group.",
    # rows of h = 2N (at most 8192, the operator's limit): N = h / 2 outputs per row
    benchmarks=(Benchmark(lambda t, h, dt: ((bench_randn(t, h, dtype=dt),),
                                          {"activate_left": True, "quant_mode": 1}),
                          _bench_unfused, "npu_swiglu + npu_dynamic_quant"),),
    composite=Composite(_unfused_spelling, outputs=("y", "scale"),
                        fixed={"activate_left": True, "quant_mode": 1},
                        spellings={"quant": {"": Spelling(_swiglu_dynamic_quant,
                                                          outputs={"scale": _dequant_scale})}}),
)
