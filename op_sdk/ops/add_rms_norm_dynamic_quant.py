"""npu_add_rms_norm_dynamic_quant: add + rms_norm (+ beta) + per-token dynamic quantisation,
up to two branches: int8; int4 packed 8 per int32 (``y_dtype=torch.quint4x2`` or
torch_npu.int4, code 285); on Ascend 950
float8_e5m2 / float8_e4m3fn / HiFloat8 (codes 23 / 291, 24 / 292, 290; HiFloat8's bits in
uint8).

Native CPU kernel: csrc/add_rms_norm_dynamic_quant.cpp (over kernels/norm_quant.h).
"""

from __future__ import annotations

import torch

from op_sdk.composite import Composite, same
from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import (
    HALF_DTYPES,
    INT8,
    QINT8,
    QUINT4X2,
    absmax,
    bench_norm_inputs,
    bench_positive,
    check,
    check_1d,
    dtype_arg,
)
from op_sdk.ops._formats import FLOAT8_OUT_CODES, storage_dtype
from op_sdk.ops._norm import _normalize, check_add_rms_norm
from op_sdk.ops.dynamic_quant import kernel_finv, quantized


def dynamic_quant_branches(op, smooth_scale1, smooth_scale2, output_mask):
    """Which of the two quantisation branches run (the output_mask rules)."""
    if output_mask is None:
        check(smooth_scale2 is None or smooth_scale1 is not None, op, "smooth_scale2",
              "requires smooth_scale1 when output_mask is not given")
        return True, smooth_scale1 is not None and smooth_scale2 is not None
    mask = tuple(bool(m) for m in output_mask)
    check(len(mask) == 2, op, "output_mask", f"must have 2 values, got {len(mask)}")
    check(mask[0] or mask[1], op, "output_mask", "must select at least one output, got "
          "[False, False]")
    check(smooth_scale1 is None or mask[0], op, "smooth_scale1",
          "requires output_mask[0] = True")
    check(smooth_scale2 is None or mask[1], op, "smooth_scale2",
          "requires output_mask[1] = True")
    return mask


def check_add_rms_norm_dynamic_quant(x1, x2, gamma, smooth_scale1, smooth_scale2, beta,
                                     output_mask, y_dtype):
    op = "npu_add_rms_norm_dynamic_quant"
    check_add_rms_norm(op, x1, x2, gamma, dtypes=HALF_DTYPES, min_dims=2)
    h = x1.shape[-1]
    check_1d(gamma, op, "gamma", h)
    for name, t in (("smooth_scale1", smooth_scale1), ("smooth_scale2", smooth_scale2),
                    ("beta", beta)):
        if t is not None:
            check_1d(t, op, name, h)
            check(t.dtype == x1.dtype, op, name,
                  f"must have the dtype of 'x1' ({x1.dtype}), got {t.dtype}")
    code = dtype_arg(op, "y_dtype", y_dtype, Y_CODES, INT8)
    if code == NPU_INT4:
        code = QUINT4X2  # torch_npu.int4: the same int32-packed output
    if code == QUINT4X2:
        check(h % 8 == 0, op, "x1", f"last dim must be a multiple of 8 for int4 (quint4x2) "
              f"output, got {h}")
    return dynamic_quant_branches(op, smooth_scale1, smooth_scale2, output_mask), code


NPU_INT4 = 285  # torch_npu.int4
Y_CODES = (INT8, QINT8, QUINT4X2, NPU_INT4) + FLOAT8_OUT_CODES


def y_storage(code: int) -> torch.dtype:
    """The dtype of y1 / y2: int8; int32 for int4 (8 per int32); the 8-bit float storage."""
    if code == QUINT4X2:
        return torch.int32
    return storage_dtype(code) if code in FLOAT8_OUT_CODES else torch.int8


def y_shape(x1: torch.Tensor, code: int) -> list:
    shape = list(x1.shape)
    if code == QUINT4X2:
        shape[-1] //= 8
    return shape


def _dynamic_branch(y, smooth, code):
    v = y * smooth.float() if smooth is not None else y
    q, scale = quantized(v, absmax(v, -1), code)
    return q, scale.squeeze(-1)


def add_rms_norm_dynamic_quant_reference(x1, x2, gamma, *, smooth_scale1=None,
                                         smooth_scale2=None, beta=None, epsilon=1e-6,
                                         output_mask=None, y_dtype=None):
    run, code = check_add_rms_norm_dynamic_quant(x1, x2, gamma, smooth_scale1, smooth_scale2,
                                                 beta, output_mask, y_dtype)
    # contiguous: the reductions sum in one order whatever x1's strides, and x is returned
    # contiguous, as the fake (torch_npu's Meta) allocates it
    x = (x1.float() + x2.float()).contiguous()
    y, _ = _normalize(x, gamma, epsilon)
    if beta is not None:
        y = y + beta.float()
    outs = []
    for on, smooth in zip(run, (smooth_scale1, smooth_scale2)):
        # a branch that does not run returns empty (0,) tensors (the contract's choice)
        outs.append(_dynamic_branch(y, smooth, code) if on else
                    (x1.new_empty((0,), dtype=y_storage(code)),
                     x1.new_empty((0,), dtype=torch.float32)))
    (y1, s1), (y2, s2) = outs
    return y1, y2, x.to(x1.dtype), s1, s2


def add_rms_norm_dynamic_quant_fake(x1, x2, gamma, *, smooth_scale1=None, smooth_scale2=None,
                                    beta=None, epsilon=1e-6, output_mask=None, y_dtype=None):
    run, code = check_add_rms_norm_dynamic_quant(x1, x2, gamma, smooth_scale1, smooth_scale2,
                                                 beta, output_mask, y_dtype)
    return _ardq_outputs(x1, run, code)


def _ardq_outputs(x1, run, code):
    """y1, y2, x, scale1, scale2 as the fake allocates them for the branches in ``run``."""
    ys, ss = [], []
    ydt = y_storage(code)
    for on in run:
        if not on:
            ys.append(x1.new_empty((0,), dtype=ydt))
        elif code == QUINT4X2:
            ys.append(x1.new_empty(y_shape(x1, code), dtype=ydt))
        else:  # contiguous whatever x1's layout, as torch_npu's Meta allocates them
            ys.append(x1.new_empty(x1.shape, dtype=ydt))
        ss.append(x1.new_empty(x1.shape[:-1], dtype=torch.float32) if on
                  else x1.new_empty((0,), dtype=torch.float32))
    return ys[0], ys[1], x1.new_empty(x1.shape), ss[0], ss[1]


def _unfused(x1, x2, gamma, *, smooth_scale1=None, **kw):
    y, _, x = torch.ops.npu.npu_add_rms_norm(x1, x2, gamma)
    q, scale = torch.ops.npu.npu_dynamic_quant(y, smooth_scales=smooth_scale1)
    return q, x, scale


def _unfused_spelling(x1, x2, gamma, smooth_scale1=None, epsilon=1e-6, *, y_view=same,
                      scale_view=same):
    """What the fused operator replaces (its first branch): npu_add_rms_norm, then
    npu_dynamic_quant of y. The steps: a view of y before the quantisation and one of
    the scale after it (fusion 2's flatten(0, 1) / view(-1, 1)); rstd stays unused."""
    y, _, x_out = torch.ops.npu.npu_add_rms_norm.default(x1, x2, gamma, epsilon)
    y1, scale1 = torch.ops.npu.npu_dynamic_quant.default(y_view(y), smooth_scales=smooth_scale1)
    return {"y1": y1, "scale1": scale_view(scale1), "x_out": x_out}



def add_rms_norm_dynamic_quant_cuda(x1, x2, gamma, *, smooth_scale1=None, smooth_scale2=None,
                                    beta=None, epsilon=1e-6, output_mask=None, y_dtype=None):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/norm.py) for int8, int4, float8 and
    HiFloat8 outputs; empty rows and rows longer than its MAX_ROW run the reference."""
    from op_sdk.triton_kernels import norm

    kw = {"smooth_scale1": smooth_scale1, "smooth_scale2": smooth_scale2, "beta": beta,
          "epsilon": epsilon, "output_mask": output_mask, "y_dtype": y_dtype}
    run, code = check_add_rms_norm_dynamic_quant(x1, x2, gamma, smooth_scale1, smooth_scale2,
                                                 beta, output_mask, y_dtype)
    if code not in norm.DST or not norm.fits(gamma.numel()):
        return add_rms_norm_dynamic_quant_reference(x1, x2, gamma, **kw)
    outs = _ardq_outputs(x1, run, code)
    return norm.run(outs, x1, gamma.numel(), x2=x2, gamma=gamma, beta=beta, xo=2, quant=2,
                    s1=smooth_scale1, q1=0 if run[0] else None, c1=3 if run[0] else None,
                    s2=smooth_scale2, q2=1 if run[1] else None, c2=4 if run[1] else None,
                    dst=norm.DST[code], eps=epsilon, finv=kernel_finv(code))


# the aclnn API the binding calls: its GetWorkspaceSize prototype, as CANN declares it
prototypes.declare("aclnnAddRmsNormDynamicQuant",
                   "const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma, "
                   "const aclTensor* smoothScale1Optional, const aclTensor* smoothScale2Optional, "
                   "double epsilon, const aclTensor* y1Out, const aclTensor* y2Out, "
                   "const aclTensor* xOut, const aclTensor* scale1Out, const aclTensor* scale2Out",
                   prototypes.CANN_HEADERS + "aclnn_add_rms_norm_dynamic_quant.h")


npu_add_rms_norm_dynamic_quant = define_op(
    "npu_add_rms_norm_dynamic_quant(Tensor x1, Tensor x2, Tensor gamma, *, "
    "Tensor? smooth_scale1=None, Tensor? smooth_scale2=None, Tensor? beta=None, "
    "float epsilon=1e-06, bool[2]? output_mask=None, int? y_dtype=None) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    # CANN 8.1.RC1's aclnnAddRmsNormDynamicQuant has no beta, output mask or output dtype
    aclnn=AclnnBinding("aclnnAddRmsNormDynamicQuant",
                       outputs=("y1", "y2", "x", "scale1", "scale2"),
                       requires={"beta": None, "output_mask": None, "y_dtype": None}),
    kernels={"cuda": TritonKernel(add_rms_norm_dynamic_quant_cuda)},
    reference=add_rms_norm_dynamic_quant_reference, fake=add_rms_norm_dynamic_quant_fake,
    native=("cpu",),
    # int4 / float8 / HiFloat8 outputs: csrc/add_rms_norm_dynamic_quant.cpp routes them here
    reference_op=True,
    doc="add + rms_norm (+ beta) + per-token dynamic quantisation (int8, int4, float8, "
        "hifloat8), up to two branches.",
    benchmarks=(Benchmark(lambda t, h, dt: (bench_norm_inputs(t, h, dt),
                                          {"smooth_scale1": bench_positive(h, dtype=dt)}),
                          _unfused, "npu_add_rms_norm + npu_dynamic_quant"),),
    composite=Composite(_unfused_spelling, outputs=("y1", "y2", "x_out", "scale1", "scale2"),
                        optional_outputs=("x_out",), defaults=("epsilon",),
                        fixed={"output_mask": [True, False]}),
)
