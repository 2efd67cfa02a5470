"""npu_rms_norm_quant: rms-norm over the last dim, times gamma plus beta, then static
per-tensor quantisation to int8 (or int4 packed 8 per int32).

ops-nn `norm/rms_norm_quant` (aclnnRmsNormQuant, Atlas A2 / A3): the documents disagree on
whether y is divided or multiplied by scale (ops-nn's aclnnRmsNormQuant.md divides,
op-plugin's torch_npu-npu_rms_norm_quant.md multiplies); its kernel settles it: it divides, as a
multiplication by the float32 reciprocal of scale (``1 / (float)scale``), adds the offset,
casts the float32 result to float16 (round half to even) and that to int8 (round half to even,
saturated). The contract follows the kernel. Native CPU kernel: csrc/rms_norm_quant.cpp (over
kernels/norm_quant.h).
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import (
    HALF_DTYPES,
    INT8,
    QUINT4X2,
    bench_randn,
    check,
    check_dtype,
    dtype_arg,
    pack_int4,
    quantize_round,
)
from op_sdk.ops._norm import _normalize

OP = "npu_rms_norm_quant"


def check_rms_norm_quant(x, gamma, beta, scale, offset, dst_dtype) -> int:
    """aclnnRmsNormQuant's rules (Atlas A2 / A3); returns the dst_dtype code (int8 or
    quint4x2)."""
    check_dtype(x, OP, "x", HALF_DTYPES)
    check(1 <= x.dim() <= 8, OP, "x", f"must have 1 to 8 dims, got {x.dim()}")
    d = x.shape[-1]
    check(gamma.dtype == x.dtype, OP, "gamma",
          f"must have the dtype of 'x' ({x.dtype}), got {gamma.dtype}")
    check(tuple(gamma.shape) in ((d,), (1, d)), OP, "gamma",
          f"must have shape [{d}] or [1, {d}] (x's last dim), got {list(gamma.shape)}")
    check(beta.shape == gamma.shape and beta.dtype == gamma.dtype, OP, "beta",
          f"must have gamma's shape and dtype ({list(gamma.shape)}, {gamma.dtype}), got "
          f"({list(beta.shape)}, {beta.dtype})")
    check(scale.dtype == x.dtype and tuple(scale.shape) == (1,), OP, "scale",
          f"must have the dtype of 'x' ({x.dtype}) and shape [1], got ({scale.dtype}, "
          f"{list(scale.shape)})")
    check(offset.dtype == torch.int8 and offset.shape == scale.shape, OP, "offset",
          f"must be int8 of scale's shape [1], got ({offset.dtype}, {list(offset.shape)})")
    code = dtype_arg(OP, "dst_dtype", dst_dtype, (INT8, QUINT4X2), INT8)
    if code == QUINT4X2:
        check(d % 8 == 0, OP, "x",
              f"last dim must be a multiple of 8 for int4 (quint4x2) output, got {d}")
    return code


def requantize_fp16(y, scale, offset, code):
    """The store of a normalised fp32 ``y``: v = y * (1 / scale) + offset in fp32, rounded to
    float16, then to int8 or int4 (round half to even, saturated, a NaN to 0). The native
    kernel (kernels/norm_quant.inl rms_norm_quant_rows) computes the same steps."""
    inv = 1.0 / scale.float().reshape(())
    v = (y * inv + offset.float().reshape(())).half().float()
    if code == QUINT4X2:
        return pack_int4(quantize_round(v, -8.0, 7.0, torch.int8))
    return quantize_round(v, -128.0, 127.0, torch.int8)


def rms_norm_quant_reference(x, gamma, beta, scale, offset, epsilon=1e-6, *, dst_dtype=None):
    code = check_rms_norm_quant(x, gamma, beta, scale, offset, dst_dtype)
    d = x.shape[-1]
    y, _ = _normalize(x.float().contiguous(), gamma.reshape(d), epsilon)
    return requantize_fp16(y + beta.reshape(d).float(), scale, offset, code)


def rms_norm_quant_fake(x, gamma, beta, scale, offset, epsilon=1e-6, *, dst_dtype=None):
    code = check_rms_norm_quant(x, gamma, beta, scale, offset, dst_dtype)
    if code == QUINT4X2:  # packed, contiguous (torch_npu's Meta)
        return x.new_empty((*x.shape[:-1], x.shape[-1] // 8), dtype=torch.int32)
    return x.new_empty(x.shape, dtype=torch.int8)


def rms_norm_quant_cuda(x, gamma, beta, scale, offset, epsilon=1e-6, *, dst_dtype=None):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/norm.py: the norm's static branch with
    the reciprocal of scale, the offset and the float16 step) for int8 and int4 outputs; empty
    rows and rows longer than its MAX_ROW run the reference."""
    from op_sdk.triton_kernels import norm

    code = check_rms_norm_quant(x, gamma, beta, scale, offset, dst_dtype)
    d = x.shape[-1]
    if not norm.fits(d):
        return rms_norm_quant_reference(x, gamma, beta, scale, offset, epsilon,
                                        dst_dtype=dst_dtype)
    # the per-tensor reciprocal and offset as per-column vectors of the one value
    inv = (1.0 / scale.float()).repeat(d)
    off = offset.float().repeat(d)
    out = rms_norm_quant_fake(x, gamma, beta, scale, offset, epsilon, dst_dtype=dst_dtype)
    (y,) = norm.run((out,), x, d, gamma=gamma.reshape(d), beta=beta.reshape(d), quant=1, s1=inv,
                    z1=off, q1=0, div_mode=False, f16=True, dst=norm.DST[code],
                    eps=epsilon)
    return y


def _bench_inputs(t, h, dt):
    return ((bench_randn(t, h, dtype=dt), bench_randn(h, dtype=dt), bench_randn(h, dtype=dt) * 0.1,
             torch.tensor([0.05], dtype=dt), torch.tensor([2], dtype=torch.int8)), {})


def _unfused(x, gamma, beta, scale, offset, epsilon=1e-6, *, dst_dtype=None):
    """The unfused chain: npu_rms_norm, the bias add, npu_quantize's per-tensor division."""
    y, _ = torch.ops.npu.npu_rms_norm(x, gamma, epsilon)
    return torch.ops.npu.npu_quantize(y + beta, scale, offset, torch.qint8, -1, True)


# the aclnn API the binding calls: its GetWorkspaceSize prototype, as CANN declares it
prototypes.declare("aclnnRmsNormQuant",
                   "const aclTensor* x, const aclTensor* gamma, const aclTensor* beta, "
                   "const aclTensor* scale, const aclTensor* offset, double epsilon, "
                   "aclTensor* y",
                   prototypes.OPS_NN + "norm/rms_norm_quant/op_host/op_api/aclnn_rms_norm_quant.h "
                   "(y: its output, aclnnRmsNormQuant.md)", cann="8.5.0", outputs=("y",))


npu_rms_norm_quant = define_op(
    "npu_rms_norm_quant(Tensor x, Tensor gamma, Tensor beta, Tensor scale, Tensor offset, "
    "float epsilon=1e-06, *, int? dst_dtype=None) -> Tensor",
    aclnn=AclnnBinding("aclnnRmsNormQuant", outputs=("y",), meta_only=("dst_dtype",)),
    kernels={"cuda": TritonKernel(rms_norm_quant_cuda)},
    reference=rms_norm_quant_reference, fake=rms_norm_quant_fake, native=("cpu",),
    doc="rms_norm (last dim) * gamma + beta, then y / scale + offset (per tensor) through "
        "float16 to int8 or packed int4.",
    benchmarks=(Benchmark(_bench_inputs, _unfused, "npu_rms_norm + add + npu_quantize"),),
)
