"""npu_quant_matmul: int8 x int8, int4 x int4 (per channel or per group of k), int8 x
int4 (per-group) and float8 / HiFloat8 matmul with per-channel / per-token dequantisation,
and per-block (G-B / B-B) scales for int8 / float8 / HiFloat8.

Native CPU kernel: csrc/quant_matmul.cpp (over kernels/quant_matmul.h): an exact int8
product (an AVX-512 VNNI kernel reading (n, k) weights in place for few-row inputs, ATen's
int8 GEMM otherwise) with the dequantisation fused into one pass over the output. The
per-group forms (A8W4, per-group A4W4) take the same exact product one group of 256 rows
of k at a time and accumulate the scaled groups in fp32, in order. The float8 / HiFloat8,
per-block and MX forms (off the CPU hot path) have one implementation, the reference: the
launcher routes them to it (``reference_op=True``: ``op_sdk_reference::npu_quant_matmul``).

The slice, by form: the shared rules and the int8 form's checks in _quant_matmul_common.py,
the int4 forms in _quant_matmul_int4.py, float8 / HiFloat8 in _quant_matmul_float8.py,
per-block scales in _quant_matmul_per_block.py, MX in _quant_matmul_mx.py; this module
picks the form of a call (reference and fake) and defines the operator.
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import INT8, INT32, quantize_s9, requantize_int8, unpack_quant_offset, unpack_quant_scale
from op_sdk.ops._quant_matmul_common import _OUT_DTYPES, _PACKED_SCALE, check_quant_matmul
from op_sdk.ops._quant_matmul_float8 import _FLOAT8_OUT, _float8_reference, _is_float8_form, check_float8
from op_sdk.ops._quant_matmul_int4 import (
    _a4w4_per_group_reference,
    _a4w4_shapes,
    _a4w4_unpack,
    _a8w4_reference,
    _check_a4w4,
    _is_a4w4,
    _is_a4w4_per_group,
    _is_a8w4,
    a4w4_int8_like,
    check_a4w4_per_group,
    check_a8w4,
)
from op_sdk.ops._quant_matmul_mx import _is_mx, _mx_reference, check_mx, e8m0_to_float
from op_sdk.ops._quant_matmul_per_block import _is_per_block, _per_block_reference, check_per_block

__all__ = ["npu_quant_matmul", "quant_matmul_reference", "quant_matmul_fake", "check_quant_matmul",
           "e8m0_to_float", "bench_inputs", "bench_composite"]


def quant_matmul_reference(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None,
                           output_dtype=None, x1_dtype=None, x2_dtype=None,
                           pertoken_scale_dtype=None, scale_dtype=None, group_sizes=None,
                           y_scale=None):
    if _is_mx(scale_dtype, pertoken_scale_dtype):
        code, *_ = check_mx(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype,
                            x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes, y_scale)
        return _mx_reference(x1, x2, scale, pertoken_scale, bias, x1_dtype, x2_dtype, code)
    if _is_per_block(x1, x2, scale, pertoken_scale):
        code, gs, *_ = check_per_block(x1, x2, scale, offset, pertoken_scale, bias,
                                       output_dtype, x1_dtype, x2_dtype, pertoken_scale_dtype,
                                       scale_dtype, group_sizes, y_scale)
        return _per_block_reference(x1, x2, scale, pertoken_scale, bias, x1_dtype, x2_dtype,
                                    code, gs)
    if _is_float8_form(x1, x2, x1_dtype, x2_dtype):
        code, *_ = check_float8(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                                x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype,
                                group_sizes, y_scale)
        return _float8_reference(x1, x2, scale, pertoken_scale, bias, x1_dtype, x2_dtype, code)
    if _is_a4w4_per_group(x1, x2, scale):
        return _a4w4_per_group_reference(x1, x2, scale, offset, pertoken_scale, bias,
                                         output_dtype, x1_dtype, x2_dtype,
                                         pertoken_scale_dtype, scale_dtype, group_sizes,
                                         y_scale)
    if _is_a8w4(x1, x2) and x1_dtype is None and x2_dtype is None:
        return _a8w4_reference(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                               group_sizes)
    if _is_a4w4(x1, x2):
        _check_a4w4(x1, x2, pertoken_scale, output_dtype, bias)
        x1, x2 = _a4w4_unpack(x1, x2)
    code = check_quant_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                              x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype,
                              group_sizes, y_scale)
    # fp64 products of int8 values are exact for any realistic k (< 2**38)
    acc = torch.matmul(x1.double(), x2.double()).to(torch.int32)
    if bias is not None and bias.dtype == torch.int32:
        acc = acc + bias
    if code == INT32:
        return acc
    s, off = dequant_params(scale, offset)
    out = acc.float() * s
    if pertoken_scale is not None:
        out = out * pertoken_scale[:, None]
        if bias is not None and bias.dtype != torch.int32:
            out = out + bias.float()
    if code == INT8:
        return requantize_int8(out, off)
    return out.to(_OUT_DTYPES[code])


def dequant_params(scale, offset):
    """The int8 form's fp32 scale, and the s9 offset an int8 output adds (None: none): a
    packed (int64 / uint64) scale holds both; a float scale's offset is the `offset`
    tensor, rounded to s9 (_quant_matmul_common.py's comment gives the sources)."""
    if scale.dtype in _PACKED_SCALE:
        return unpack_quant_scale(scale), unpack_quant_offset(scale)
    return scale.float(), None if offset is None else quantize_s9(offset)


def quant_matmul_fake(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None,
                      output_dtype=None, x1_dtype=None, x2_dtype=None,
                      pertoken_scale_dtype=None, scale_dtype=None, group_sizes=None,
                      y_scale=None):
    if _is_mx(scale_dtype, pertoken_scale_dtype):
        code, batch, m, n = check_mx(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                                     x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype,
                                     group_sizes, y_scale)
        batch = torch.broadcast_shapes(batch, scale.shape[:-3], pertoken_scale.shape[:-3])
        return x1.new_empty((*batch, m, n), dtype=_FLOAT8_OUT[code])
    if _is_per_block(x1, x2, scale, pertoken_scale):
        code, _, batch, m, n = check_per_block(x1, x2, scale, offset, pertoken_scale, bias,
                                               output_dtype, x1_dtype, x2_dtype,
                                               pertoken_scale_dtype, scale_dtype, group_sizes,
                                               y_scale)
        batch = torch.broadcast_shapes(batch, scale.shape[:-2], pertoken_scale.shape[:-2])
        return x1.new_empty((*batch, m, n), dtype=_FLOAT8_OUT[code])
    if _is_float8_form(x1, x2, x1_dtype, x2_dtype):
        code, batch, m, n = check_float8(x1, x2, scale, offset, pertoken_scale, bias,
                                         output_dtype, x1_dtype, x2_dtype, pertoken_scale_dtype,
                                         scale_dtype, group_sizes, y_scale)
        return x1.new_empty((*batch, m, n), dtype=_FLOAT8_OUT[code])
    if _is_a4w4_per_group(x1, x2, scale):
        code, _, n, _ = check_a4w4_per_group(
            x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype, x2_dtype,
            pertoken_scale_dtype, scale_dtype, group_sizes, y_scale)
        return x1.new_empty((x1.shape[0], n), dtype=_OUT_DTYPES[code])
    if _is_a8w4(x1, x2) and x1_dtype is None and x2_dtype is None:
        code, _, n, _ = check_a8w4(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                                   group_sizes)
        return x1.new_empty((x1.shape[0], n), dtype=_OUT_DTYPES[code])
    if _is_a4w4(x1, x2):  # (the int8 rules on operands of the unpacked shapes)
        x1, x2, _ = a4w4_int8_like(x1, x2, pertoken_scale, output_dtype, bias)
    code = check_quant_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                              x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype,
                              group_sizes, y_scale)
    return _int8_output(x1, x2, code)


def _int8_output(x1, x2, code):
    """The int8 form's output, as the fake allocates it."""
    batch = torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    return x1.new_empty((*batch, x1.shape[-2], x2.shape[-1]), dtype=_OUT_DTYPES[code])


# batched weights one launch takes (a grid axis of CUDA's at most 65535 programs)
MAX_BATCHES = 65535


def quant_matmul_cuda(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None,
                      output_dtype=None, x1_dtype=None, x2_dtype=None,
                      pertoken_scale_dtype=None, scale_dtype=None, group_sizes=None,
                      y_scale=None):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/quant_matmul.py) of the int8 form,
    with a 2-D x2 (the weight) or a batched one, and of the A4W4 form (int4 x1 and weight,
    int32-packed, unpacked in registers), and of the grouped forms (a scale row per 256 rows
    of k: A8W4, per-group A4W4; ``qmm.run_grouped``), and of the per-block forms (2-D int8
    G-B, float8 G-B and B-B: a scale per group of rows and 128 of k and per 128 x 128 block
    of the weight: ``qmm.run_block_scaled``): the products and the epilogue in one kernel.
    The other forms (float8 / HiFloat8 per channel, HiFloat8 or mixed float8 per block,
    per-block with batch dims, MX; more than MAX_BATCHES weights) run the reference."""
    kw = dict(offset=offset, pertoken_scale=pertoken_scale, bias=bias,
              output_dtype=output_dtype, x1_dtype=x1_dtype, x2_dtype=x2_dtype,
              pertoken_scale_dtype=pertoken_scale_dtype, scale_dtype=scale_dtype,
              group_sizes=group_sizes, y_scale=y_scale)
    from op_sdk.triton_kernels import quant_matmul as qmm

    c = lambda t: None if t is None else t.contiguous()  # noqa: E731  (dense operands)
    if _is_a8w4(x1, x2) and x1_dtype is None and x2_dtype is None:
        check_a8w4(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, group_sizes)
        return qmm.run_grouped(x1, x2, c(unpack_quant_scale(scale)), c(pertoken_scale),
                               quant_matmul_fake(x1, x2, scale, **kw), offset=c(offset))
    if _is_a4w4_per_group(x1, x2, scale):
        check_a4w4_per_group(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                             x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes,
                             y_scale)
        _, _, transposed = _a4w4_shapes(x1, x2)
        return qmm.run_grouped(x1, x2, c(scale), c(pertoken_scale),
                               quant_matmul_fake(x1, x2, scale, **kw), zero=c(offset),
                               pack_w=2 if transposed else 1)
    if (_is_per_block(x1, x2, scale, pertoken_scale) and x1.dtype == x2.dtype
            and x1.dtype in (torch.int8, torch.float8_e4m3fn, torch.float8_e5m2)
            and x1_dtype is None and x2_dtype is None
            and x1.dim() == x2.dim() == scale.dim() == pertoken_scale.dim() == 2):
        _, (gm, _, _), *_ = check_per_block(x1, x2, scale, offset, pertoken_scale, bias,
                                            output_dtype, x1_dtype, x2_dtype,
                                            pertoken_scale_dtype, scale_dtype, group_sizes,
                                            y_scale)
        return qmm.run_block_scaled(x1, x2, c(pertoken_scale), c(scale), c(bias),
                                    quant_matmul_fake(x1, x2, scale, **kw), row_group=gm)
    a4w4 = _is_a4w4(x1, x2) and not _is_a4w4_per_group(x1, x2, scale)
    if ((not a4w4 and (x1.dtype != torch.int8 or x2.dtype != torch.int8))
            or (x2.dim() > 2 and torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]).numel()
                > MAX_BATCHES)
            or _is_mx(scale_dtype, pertoken_scale_dtype)
            or _is_per_block(x1, x2, scale, pertoken_scale)
            or _is_float8_form(x1, x2, x1_dtype, x2_dtype)):
        return quant_matmul_reference(x1, x2, scale, **kw)
    pack_w = 0
    r1, r2 = x1, x2  # (the operands the int8 rules read)
    if a4w4:
        r1, r2, transposed = a4w4_int8_like(x1, x2, pertoken_scale, output_dtype, bias)
        pack_w = 2 if transposed else 1
    code = check_quant_matmul(r1, r2, scale, offset, pertoken_scale, bias, output_dtype,
                              x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype,
                              group_sizes, y_scale)
    s, off = dequant_params(scale, offset)
    kind = {INT32: qmm.INT32_OUT, INT8: qmm.INT8_OUT}.get(code, qmm.FLOAT_OUT)
    return qmm.run(x1, x2, c(s), c(pertoken_scale), c(bias),
                   c(off) if code == INT8 else None, _int8_output(r1, r2, code), kind,
                   pack_w=pack_w)


# Decode / small-batch shapes of DeepSeek-style projections. The composite is what a model
# writes without the operator: ATen's int8 GEMM and a dequantising epilogue.

def bench_inputs(n):
    """(T, K, dtype) -> an int8 (T, K) x (K, N) call, the weight stored (N, K) and passed
    transposed, with per-channel and per-token scales and a dtype output."""
    def make(t, k, dt):
        x1 = torch.randint(-127, 128, (t, k), dtype=torch.int8)
        w = torch.randint(-127, 128, (n, k), dtype=torch.int8)
        return (x1, w.t(), torch.rand(n) * 1e-3), {"pertoken_scale": torch.rand(t) + 0.5,
                                                   "output_dtype": dt}
    return make


def bench_composite(x1, x2, scale, *, pertoken_scale, output_dtype):
    acc = torch._int_mm(x1, x2)
    return (acc.float() * scale * pertoken_scale[:, None]).to(output_dtype)


# the aclnn API the binding calls: its GetWorkspaceSize prototype, as CANN declares it
# offset and bias may be null: the API document's formulas include the cases without
# bias and without offset (aclnnQuantMatmulV4, CANN 8.1.RC1 API reference).
prototypes.declare("aclnnQuantMatmulV4",
                   "const aclTensor* x1, const aclTensor* x2, const aclTensor* scale, "
                   "const aclTensor* offset, const aclTensor* pertokenScaleOptional, "
                   "const aclTensor* bias, bool transposeX1, bool transposeX2, const aclTensor* out",
                   prototypes.CANN_HEADERS + "aclnn_quant_matmul_v4.h; nullable: the aclnnQuantMatmulV4 API document",
                   nullable=("offset", "bias"))


npu_quant_matmul = define_op(
    "npu_quant_matmul(Tensor x1, Tensor x2, Tensor scale, *, Tensor? offset=None, "
    "Tensor? pertoken_scale=None, Tensor? bias=None, int? output_dtype=None, "
    "int? x1_dtype=None, int? x2_dtype=None, int? pertoken_scale_dtype=None, "
    "int? scale_dtype=None, int[]? group_sizes=None, Tensor? y_scale=None) -> Tensor",
    # CANN's own matmul kernel (no op_sdk Cube kernel); output_dtype reaches it through the
    # output tensor, which the Meta function allocates in that dtype
    aclnn=AclnnBinding("aclnnQuantMatmulV4", outputs=("out",), rename={"pertokenScaleOptional": "pertoken_scale"},
                       constants={"transposeX1": "false", "transposeX2": "false"},
                       requires={"x1_dtype": None, "x2_dtype": None, "pertoken_scale_dtype": None,
                                 "scale_dtype": None, "group_sizes": None, "y_scale": None},
                       meta_only=("output_dtype",), convert={"scale": "quant_matmul_scale"}),
    reference=quant_matmul_reference, fake=quant_matmul_fake, native=("cpu",),
    kernels={"cuda": TritonKernel(quant_matmul_cuda)},
    # the float8 / HiFloat8, per-block and MX forms: csrc/quant_matmul.cpp routes them here
    reference_op=True,
    doc="int8 x int8, int4 x int4 (per channel or per group of k), int8 x int4 (per-group) "
        "and float8 / hifloat8 matmul with per-channel / per-token dequantisation.",
    benchmarks=(
        Benchmark(bench_inputs(5632), bench_composite, "torch._int_mm + dequant (eager)",
                  composite=bench_composite, n=5632,
                  shapes=tuple((t, 1024) for t in (1, 4, 8, 16, 32, 128))),
        Benchmark(bench_inputs(2048), bench_composite, "torch._int_mm + dequant (eager)",
                  composite=bench_composite, n=2048, shapes=((1, 7168), (16, 7168))),
    ),
)
