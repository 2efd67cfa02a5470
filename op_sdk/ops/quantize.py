"""npu_quantize: static quantisation with per-channel (or per-tensor) scales and zero points.

Native CPU kernel: csrc/quantize.cpp (over kernels/quant.h).
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import (
    FLOAT_DTYPES,
    INT32,
    INT8,
    QINT32,
    QINT8,
    QUINT4X2,
    QUINT8,
    UINT8,
    bench_randn,
    check,
    check_dtype,
    dtype_arg,
    pack_int4,
    quantize_round,
)


_QUANTIZE_OUT = {
    INT8: torch.int8, QINT8: torch.int8, UINT8: torch.uint8, QUINT8: torch.uint8,
    INT32: torch.int32, QINT32: torch.int32, QUINT4X2: torch.int32,
}
_RANGES = {torch.int8: (-128.0, 127.0), torch.uint8: (0.0, 255.0),
           torch.int32: (-2.0**31, 2.0**31 - 1)}


def check_quantize(input, scales, zero_points, dtype, axis, div_mode):
    """Returns (dtype code, the honoured axis as a non-negative dim)."""
    op = "npu_quantize"
    check_dtype(input, op, "input", FLOAT_DTYPES)
    check(input.dim() >= 1, op, "input", "must have at least 1 dim")
    code = dtype_arg(op, "dtype", dtype, tuple(_QUANTIZE_OUT), None)
    if div_mode:
        check(-input.dim() <= axis < input.dim(), op, "axis",
              f"must be in [{-input.dim()}, {input.dim() - 1}], got {axis}")
        ax = axis % input.dim()
        check(code != QUINT4X2, op, "dtype", "quint4x2 (int4 packed in int32) requires "
              "div_mode=False")
    else:
        # div_mode=False (AscendQuantV3) quantises along one of the last two axes: axis -2
        # is honoured, any axis >= -1 (the default 1 too) means the last axis
        check(axis >= -2, op, "axis", f"must be -2 or >= -1 (the last axis) when "
              f"div_mode=False, got {axis}")
        check(axis != -2 or input.dim() >= 2, op, "axis",
              f"-2 needs an input of at least 2 dims, got {input.dim()}")
        ax = input.dim() - 2 if axis == -2 else input.dim() - 1
        check(scales.dtype == input.dtype, op, "scales",
              f"must have the dtype of 'input' ({input.dtype}) when div_mode=False, got "
              f"{scales.dtype}")
        if zero_points is not None:
            check(zero_points.dtype == input.dtype, op, "zero_points",
                  f"must have the dtype of 'input' ({input.dtype}) when div_mode=False, got "
                  f"{zero_points.dtype}")
    if code == QUINT4X2:
        check(input.shape[-1] % 8 == 0, op, "input",
              f"last dim must be a multiple of 8 for quint4x2 output, got {input.shape[-1]}")
    check_dtype(scales, op, "scales", FLOAT_DTYPES)
    _check_quant_param(op, "scales", scales, input, ax, div_mode)
    if zero_points is not None:
        check(zero_points.dtype != torch.bool and not zero_points.is_complex(), op,
              "zero_points", f"must be numeric, got {zero_points.dtype}")
        _check_quant_param(op, "zero_points", zero_points, input, ax, div_mode)
        if not div_mode:
            check(zero_points.shape == scales.shape, op, "zero_points",
                  f"must have the shape of 'scales' {list(scales.shape)} when div_mode=False, "
                  f"got {list(zero_points.shape)}")
    return code, ax


def _check_quant_param(op, name, t, input, ax, div_mode):
    """1-D of size 1 or input.size(ax); with div_mode=False also input's rank with every dim
    1 but ``ax`` (per-head scales of (B, S, H, D) along axis -2: (1, 1, H, 1))."""
    n = input.shape[ax]
    if t.dim() == 1:
        check(t.shape[0] in (1, n), op, name,
              f"must be 1-D of size 1 or input.size({ax}) = {n}, got {list(t.shape)}")
        return
    want = [1] * input.dim()
    want[ax] = n
    check(not div_mode and t.dim() == input.dim()
          and all(d == 1 for i, d in enumerate(t.shape) if i != ax) and t.shape[ax] in (1, n),
          op, name, f"must be 1-D of size 1 or {n}" + ("" if div_mode else
                    f", or of shape {want} (div_mode=False)") + f", got {list(t.shape)}")


def quantize_reference(input, scales, zero_points, dtype, axis=1, div_mode=True):
    code, ax = check_quantize(input, scales, zero_points, dtype, axis, div_mode)
    bshape = [1] * input.dim()
    bshape[ax] = -1
    x = input.float()
    s = scales.float().reshape(bshape)
    v = x / s if div_mode else x * s
    if zero_points is not None:
        v = v + zero_points.float().reshape(bshape)  # the same values, per-axis broadcast
    if code == QUINT4X2:
        return pack_int4(quantize_round(v, -8.0, 7.0, torch.int8))
    out = _QUANTIZE_OUT[code]
    lo, hi = _RANGES[out]
    return quantize_round(v, lo, hi, out)


def quantize_fake(input, scales, zero_points, dtype, axis=1, div_mode=True):
    code, _ = check_quantize(input, scales, zero_points, dtype, axis, div_mode)
    return _quantize_output(input, code)


def _quantize_output(input, code):
    """y as the fake allocates it."""
    if code != QUINT4X2:  # in the input's layout, as torch_npu's Meta (empty_like)
        return torch.empty_like(input, dtype=_QUANTIZE_OUT[code])
    shape = list(input.shape)
    shape[-1] //= 8
    return input.new_empty(shape, dtype=_QUANTIZE_OUT[code])


def _bench_inputs(t, h, dt):
    return (bench_randn(t, h, dtype=dt), torch.rand(h) * 0.05 + 0.01,
            torch.randint(-4, 4, (h,), dtype=torch.int32), torch.qint8, -1, True), {}



def quantize_cuda(input, scales, zero_points, dtype, axis=1, div_mode=True):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/quantize.py) for int8 / uint8
    outputs; int32 and quint4x2 outputs run the reference."""
    from op_sdk.triton_kernels import quantize

    code, ax = check_quantize(input, scales, zero_points, dtype, axis, div_mode)
    out = _QUANTIZE_OUT[code]
    if code == QUINT4X2 or out == torch.int32:
        return quantize_reference(input, scales, zero_points, dtype, axis, div_mode)
    return quantize.run(input, scales, zero_points, ax, div_mode, _quantize_output(input, code),
                        *_RANGES[out])


# the aclnn API the binding calls: its GetWorkspaceSize prototype, as CANN declares it
# zeroPoints may be null: "支持传入空指针" (the API document's zeroPoints row)
prototypes.declare("aclnnQuantize",
                   "const aclTensor* x, const aclTensor* scales, const aclTensor* zeroPoints, "
                   "aclDataType dtype, int32_t axis, aclTensor* out",
                   prototypes.OPS_NN + "quant/quantize/op_api/aclnn_quantize.h; nullable: "
                   "quant/quantize/docs/aclnnQuantize.md", nullable=("zeroPoints",), cann="8.5.0")
# offset may be null ("可选参数") and y is the output ("输出"): the API document's rows
prototypes.declare("aclnnAscendQuantV3",
                   "const aclTensor* x, const aclTensor* scale, const aclTensor* offset, bool sqrtMode, "
                   "const char* roundMode, int32_t dstType, int32_t axis, const aclTensor* y",
                   prototypes.OPS_NN + "quant/ascend_quant_v2/op_host/op_api/aclnn_ascend_quant_v3.h; nullable, "
                   "outputs: quant/ascend_quant_v2/docs/aclnnAscendQuantV3.md",
                   nullable=("offset",), outputs=("y",), cann="8.5.0")


npu_quantize = define_op(
    "npu_quantize(Tensor input, Tensor scales, Tensor? zero_points, int dtype, int axis=1, "
    "bool div_mode=True) -> Tensor",
    # as torch_npu's kernel: div_mode=True is aclnnQuantize, round(x / scales + zero_points)
    # into the dtype the Meta function allocates y with; div_mode=False is
    # aclnnAscendQuantV3, round(x * scale + offset), whose int32 output is int4 packed
    # eight to an int32 (quint4x2 here) and which has no uint8 one, so int8 / qint8 /
    # quint4x2 only
    aclnn=AclnnBinding(
        "aclnnQuantize", outputs=("y",), rename={"x": "input"}, dtype_of={"dtype": "y"},
        meta_only=("dtype",), when={"div_mode": True},
        otherwise=AclnnBinding(
            "aclnnAscendQuantV3", outputs=("y",),
            rename={"x": "input", "scale": "scales", "offset": "zero_points"},
            constants={"sqrtMode": "false", "roundMode": '"round"'}, dtype_of={"dstType": "y"},
            convert={"axis": "ascend_quant_axis"}, requires={"dtype": (INT8, QINT8, QUINT4X2)})),
    kernels={"cuda": TritonKernel(quantize_cuda)},
    reference=quantize_reference, fake=quantize_fake, native=("cpu",),
    doc="Static quantisation rint(x / scales + zp) (div_mode) or rint(x * scales + zp).",
    benchmarks=(Benchmark(_bench_inputs),),
)
