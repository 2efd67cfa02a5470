"""npu_dynamic_quant: symmetric dynamic quantisation per token (or tensor / channel) to int8
or int4, or (Ascend 950, aclnnDynamicQuantV3 / V4) to float8_e5m2, float8_e4m3fn or
HiFloat8, with optional smoothing and MoE groups.

Native CPU kernel: csrc/dynamic_quant.cpp (over kernels/quant.h).
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import (
    FLOAT_DTYPES,
    INT4_MAX,
    INT8,
    INT8_MAX,
    QUINT4X2,
    absmax,
    bench_positive,
    bench_randn,
    check,
    check_1d,
    check_dtype,
    div_scalar,
    dtype_arg,
    pack_int4,
    quantize_round,
    rows_by_group,
)
from op_sdk.ops._formats import (
    FLOAT8_MAX,
    FLOAT8_OUT_CODES,
    HIF8_MAX,
    HIFLOAT8,
    dynamic_quant_float8,
    float8_inv,
    storage_dtype,
)


QUANT_MODES = ("pertoken", "pertensor", "perchannel")
MAX_GROUPS = 1024
DST_CODES = (INT8, QUINT4X2) + FLOAT8_OUT_CODES
# |dst_type_max| below this means "not given" (32768), as the 950 tiling reads it
DST_TYPE_MAX_UNSET = 1e-6


def float8_dmax(code: int, dst_type_max: float) -> float:
    """DTYPE_MAX of an 8-bit float output: the format's largest value; for HiFloat8
    dst_type_max when given (aclnnDynamicQuantV4)."""
    if code == HIFLOAT8 and abs(dst_type_max) >= DST_TYPE_MAX_UNSET:
        return float(dst_type_max)
    return FLOAT8_MAX[code]


def kernel_finv(code: int, dst_type_max: float = 0.0) -> float:
    """The kernels' ``finv`` of a dynamic quantisation to ``code``: an 8-bit float output's
    fl(1 / DTYPE_MAX) (``float8_inv``), 0 for the integer outputs (unused)."""
    return float8_inv(float8_dmax(code, dst_type_max)) if code in FLOAT8_OUT_CODES else 0.0


def check_dynamic_quant(input, smooth_scales, group_index, dst_type, quant_mode, dst_type_max):
    """Shape / dtype rules (everything the fake function can see). Returns dst code."""
    op = "npu_dynamic_quant"
    check_dtype(input, op, "input", FLOAT_DTYPES)
    check(input.dim() > 1, op, "input", f"must have more than 1 dim, got {input.dim()}")
    code = dtype_arg(op, "dst_type", dst_type, DST_CODES, INT8)
    check(quant_mode in QUANT_MODES, op, "quant_mode",
          f"must be one of {', '.join(QUANT_MODES)}, got {quant_mode!r}")
    if code == HIFLOAT8:
        check(0.0 <= dst_type_max <= HIF8_MAX, op, "dst_type_max",
              f"must be in [0, 32768] for hifloat8 output (0: 32768), got {dst_type_max}")
    else:
        check(dst_type_max == 0.0, op, "dst_type_max",
              f"must be 0.0 for int8 / int4 / float8 outputs (it sets hifloat8's range only), "
              f"got {dst_type_max}")
    h = input.shape[-1]
    if code == QUINT4X2:
        check(h % 8 == 0, op, "input",
              f"last dim must be a multiple of 8 for int4 (quint4x2) output, got {h}")
    if smooth_scales is not None:
        check_dtype(smooth_scales, op, "smooth_scales", FLOAT_DTYPES)
    if group_index is not None:
        check(quant_mode == "pertoken", op, "group_index",
              f"requires quant_mode 'pertoken', got {quant_mode!r}")
        check(group_index.dtype == torch.int32, op, "group_index",
              f"must have dtype int32, got {group_index.dtype}")
        check(group_index.dim() == 1 and 1 <= group_index.shape[0] <= MAX_GROUPS, op,
              "group_index", f"must be 1-D with 1 to {MAX_GROUPS} groups, got shape "
              f"{list(group_index.shape)}")
        check(smooth_scales is not None, op, "smooth_scales", "is required with group_index")
        check(smooth_scales.dim() == 2 and smooth_scales.shape[0] == group_index.shape[0]
              and smooth_scales.shape[1] == h, op, "smooth_scales",
              f"must have shape (E, H) = ({group_index.shape[0]}, {h}) with group_index, "
              f"got {list(smooth_scales.shape)}")
    elif smooth_scales is not None and quant_mode == "perchannel":
        # per channel (aclnnDynamicQuantV3): one smoothing factor per row of dim -2
        check(smooth_scales.dim() == 1 and smooth_scales.shape[0] == input.shape[-2], op,
              "smooth_scales", f"must be 1-D of length input.size(-2) = {input.shape[-2]} "
              f"with quant_mode 'perchannel', got shape {list(smooth_scales.shape)}")
    elif smooth_scales is not None:
        check_1d(smooth_scales, op, "smooth_scales", h)
    return code


def check_group_index_values(op: str, group_index: torch.Tensor, rows: int) -> None:
    """Data rules of MoE group_index: cumulative end rows, non-decreasing, last == rows."""
    g = group_index.to(torch.int64)
    check(bool((g >= 0).all()), op, "group_index", "must have no negative values")
    check(bool((g[1:] >= g[:-1]).all()), op, "group_index", "must be non-decreasing")
    check(int(g[-1]) == rows, op, "group_index",
          f"last value must equal the number of rows {rows}, got {int(g[-1])}")


def group_rows(op: str, group_index: torch.Tensor, rows: int) -> torch.Tensor:
    """Each row's MoE group from group_index's cumulative end rows (after its data rules),
    for the reference and the CUDA kernel alike."""
    check_group_index_values(op, group_index, rows)
    g = group_index.to(torch.int64)
    return rows_by_group(op, torch.diff(g, prepend=g.new_zeros(1)), rows)


def _dynamic_quant_shapes(input, quant_mode, code):
    y_shape = list(input.shape)
    if code == QUINT4X2:
        y_shape[-1] //= 8
    if quant_mode == "pertoken":
        s_shape = list(input.shape[:-1])
    elif quant_mode == "pertensor":
        s_shape = [1]
    else:
        s_shape = list(input.shape[:-2]) + [input.shape[-1]]
    return y_shape, s_shape


def _y_out(input, y_shape, dtype, code):
    """y as torch_npu's Meta allocates it: in the input's layout (int4: packed, contiguous)."""
    return input.new_empty(y_shape, dtype=dtype) if code == QUINT4X2 else \
        torch.empty_like(input, dtype=dtype)


def dynamic_quant_reference(input, *, smooth_scales=None, group_index=None, dst_type=None,
                            quant_mode="pertoken", dst_type_max=0.0):
    code = check_dynamic_quant(input, smooth_scales, group_index, dst_type, quant_mode,
                               dst_type_max)
    h = input.shape[-1]
    s = input.float()
    if group_index is not None:
        rows = s.reshape(input.shape[:-1].numel(), h)
        group_of_row = group_rows("npu_dynamic_quant", group_index, rows.shape[0])
        s = (rows * smooth_scales.float()[group_of_row]).reshape(input.shape)
    elif smooth_scales is not None and quant_mode == "perchannel":
        s = s * smooth_scales.float().unsqueeze(-1)
    elif smooth_scales is not None:
        s = s * smooth_scales.float()
    amax = absmax(s, -1 if quant_mode == "pertoken" else
                  None if quant_mode == "pertensor" else -2)
    y_shape, s_shape = _dynamic_quant_shapes(input, quant_mode, code)
    y, scale = quantized(s, amax, code, dst_type_max)
    return _y_out(input, y_shape, y.dtype, code).copy_(y), scale.reshape(s_shape)


def quantized(v, amax, code, dst_type_max=0.0):
    """The dynamic quantisation of float32 ``v`` by its ``amax`` (broadcasting against it) to
    the output of ``code``: (y, scale). int8 / int4: ``y = round(v * fl(dmax / amax))``
    saturated (int4 packed 8 a int32), ``scale = amax / dmax``, an all-zero row scale 0 and
    y 0 (the contract's choice), never NaN; 8-bit floats: ``dynamic_quant_float8``. The one
    rule of npu_dynamic_quant's and npu_add_rms_norm_dynamic_quant's references."""
    if code in FLOAT8_OUT_CODES:
        return dynamic_quant_float8(v, amax, code, float8_dmax(code, dst_type_max))
    dmax = INT4_MAX if code == QUINT4X2 else INT8_MAX
    # one fp32 division dmax / amax (a Python scalar / tensor is reciprocal(amax) * dmax,
    # which can differ in the last bit)
    inv = torch.where(amax > 0, torch.full_like(amax, dmax) / amax, torch.zeros_like(amax))
    q = quantize_round(v * inv, -dmax - 1, dmax, torch.int8)
    return (pack_int4(q) if code == QUINT4X2 else q), div_scalar(amax, dmax)


def dynamic_quant_fake(input, *, smooth_scales=None, group_index=None, dst_type=None,
                       quant_mode="pertoken", dst_type_max=0.0):
    code = check_dynamic_quant(input, smooth_scales, group_index, dst_type, quant_mode,
                               dst_type_max)
    return _dynamic_quant_outputs(input, quant_mode, code)


def _dynamic_quant_outputs(input, quant_mode, code):
    """y, scale as the fake allocates them."""
    y_shape, s_shape = _dynamic_quant_shapes(input, quant_mode, code)
    ydt = (torch.int32 if code == QUINT4X2 else
           storage_dtype(code) if code in FLOAT8_OUT_CODES else torch.int8)
    return _y_out(input, y_shape, ydt, code), input.new_empty(s_shape, dtype=torch.float32)



def dynamic_quant_cuda(input, *, smooth_scales=None, group_index=None, dst_type=None,
                       quant_mode="pertoken", dst_type_max=0.0):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/norm.py) per token, with or without
    smooth_scales (one set, or a MoE group's), to int8, int4, float8 or HiFloat8
    (``dst_type_max`` its DTYPE_MAX); per tensor / per channel in two passes (the amax, then
    the quantisation: ``norm.run_by_amax``). Empty inputs and rows longer than its MAX_ROW
    run the reference."""
    from op_sdk.triton_kernels import norm

    kw = {"smooth_scales": smooth_scales, "group_index": group_index, "dst_type": dst_type,
          "quant_mode": quant_mode, "dst_type_max": dst_type_max}
    code = check_dynamic_quant(input, smooth_scales, group_index, dst_type, quant_mode,
                               dst_type_max)
    n = input.shape[-1]
    if code not in norm.DST or not norm.fits(n) or (quant_mode != "pertoken"
                                                     and input.numel() == 0):
        return dynamic_quant_reference(input, **kw)
    if quant_mode != "pertoken":
        return norm.run_by_amax(_dynamic_quant_outputs(input, quant_mode, code), input,
                                smooth_scales, quant_mode == "perchannel", norm.DST[code],
                                kernel_finv(code, dst_type_max))
    groups = None
    if group_index is not None:
        groups = group_rows("npu_dynamic_quant", group_index, input.shape[:-1].numel())
    return norm.run(_dynamic_quant_outputs(input, quant_mode, code), input, n, quant=2,
                    s1=smooth_scales, q1=0, c1=1, dst=norm.DST[code], groups=groups,
                    finv=kernel_finv(code, dst_type_max))


# the aclnn API the binding calls: its GetWorkspaceSize prototype, as CANN declares it
prototypes.declare("aclnnDynamicQuant",
                   "const aclTensor* x, const aclTensor* smoothScalesOptional, const aclTensor* yOut, "
                   "const aclTensor* scaleOut",
                   prototypes.CANN_HEADERS + "aclnn_dynamic_quant.h")


npu_dynamic_quant = define_op(
    "npu_dynamic_quant(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None, "
    "int? dst_type=None, str quant_mode=\"pertoken\", float dst_type_max=0.0) -> (Tensor, Tensor)",
    # aclnnDynamicQuant: symmetric per-token int8 (dst_type None or torch.int8, code 1)
    aclnn=AclnnBinding("aclnnDynamicQuant", outputs=("y", "scale"), rename={"x": "input"},
                       requires={"group_index": None, "dst_type": (None, 1),
                                 "quant_mode": "pertoken", "dst_type_max": 0.0}),
    kernels={"cuda": TritonKernel(dynamic_quant_cuda)},
    reference=dynamic_quant_reference, fake=dynamic_quant_fake, native=("cpu",),
    # float8 / HiFloat8 outputs: csrc/dynamic_quant.cpp routes them here
    reference_op=True,
    doc="Symmetric dynamic quantisation per token (or tensor / channel) to int8, int4, "
        "float8 or hifloat8.",
    benchmarks=(Benchmark(lambda t, h, dt: ((bench_randn(t, h, dtype=dt),),
                                          {"smooth_scales": bench_positive(h, dtype=dt)})),),
)
