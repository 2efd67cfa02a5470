"""npu_dynamic_mx_quant: MX quantisation (Ascend 950) of a float16 / bfloat16 / float32
tensor along one axis, one E8M0 scale per block of 32 - 1024 values, the values to
float8_e4m3fn / float8_e5m2 or packed float4_e2m1 / float4_e1m2 (op_sdk/ops/_mx.py).

Native CPU kernel: csrc/dynamic_mx_quant.cpp (kernels/mx_quant.h), for blocks of 32 along
the last dim (float8 with scale_alg 0 / 1, float4 with scale_alg 0); it routes every other
call here. CUDA: the Triton kernel of op_sdk/triton_kernels/mx.py, for the same forms.
"""

from __future__ import annotations


from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import FLOAT_DTYPES, bench_randn, check, check_dtype
from op_sdk.ops._mx import (
    MX_BLOCK,
    check_mx_args,
    check_mx_quant_only,
    kernel_form,
    mx_outputs_like,
    mx_quantize,
)

OP = "npu_dynamic_mx_quant"
MAX_BLOCK = 1024


def check_dynamic_mx_quant(input, axis, round_mode, dst_type, block_size, scale_alg,
                           dst_type_max, max_low_bound):
    """Every rule of the call (none reads data); returns (dst code, scale_alg, axis >= 0)."""
    check_dtype(input, OP, "input", FLOAT_DTYPES)
    check(1 <= input.dim() <= 7, OP, "input", f"must have 1 to 7 dims, got {input.dim()}")
    check(-input.dim() <= axis < input.dim(), OP, "axis",
          f"must be in [{-input.dim()}, {input.dim() - 1}], got {axis}")
    check(0 < block_size <= MAX_BLOCK and block_size % 32 == 0, OP, "block_size",
          f"must be a multiple of 32 in [32, {MAX_BLOCK}], got {block_size}")
    code, alg = check_mx_args(OP, input, "input", dst_type, round_mode, scale_alg, fused=False)
    check_mx_quant_only(OP, code, alg, block_size, input, dst_type_max, max_low_bound)
    return code, alg, axis % input.dim()


def dynamic_mx_quant_reference(input, *, axis=-1, round_mode="rint", dst_type=296,
                               block_size=32, scale_alg=0, dst_type_max=0.0,
                               max_low_bound=0.0):
    code, alg, ax = check_dynamic_mx_quant(input, axis, round_mode, dst_type, block_size,
                                           scale_alg, dst_type_max, max_low_bound)
    return mx_quantize(input, code, axis=ax, block=block_size, alg=alg, round_mode=round_mode,
                       dst_type_max=dst_type_max, max_low_bound=max_low_bound)


def dynamic_mx_quant_fake(input, *, axis=-1, round_mode="rint", dst_type=296, block_size=32,
                          scale_alg=0, dst_type_max=0.0, max_low_bound=0.0):
    code, _, ax = check_dynamic_mx_quant(input, axis, round_mode, dst_type, block_size,
                                         scale_alg, dst_type_max, max_low_bound)
    return mx_outputs_like(input, code, ax, block_size)


def dynamic_mx_quant_cuda(input, *, axis=-1, round_mode="rint", dst_type=296, block_size=32,
                          scale_alg=0, dst_type_max=0.0, max_low_bound=0.0):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/mx.py) for blocks of 32 along the last
    dim (float8 with scale_alg 0 / 1, float4 with scale_alg 0); other axes and block sizes,
    scale_alg 2, a dst_type_max or max_low_bound, empty rows and rows longer than its
    MAX_ROW run the reference."""
    from op_sdk.triton_kernels import mx

    kw = {"axis": axis, "round_mode": round_mode, "dst_type": dst_type,
          "block_size": block_size, "scale_alg": scale_alg, "dst_type_max": dst_type_max,
          "max_low_bound": max_low_bound}
    code, alg, ax = check_dynamic_mx_quant(input, **kw)
    form, n = kernel_form(code, alg, round_mode), input.shape[-1]
    if (form is None or ax != input.dim() - 1 or block_size != MX_BLOCK or dst_type_max
            or max_low_bound or not mx.fits(n)):
        return dynamic_mx_quant_reference(input, **kw)
    return mx.run(mx_outputs_like(input, code), input, n, form)


# the aclnn API the binding calls (op-plugin's first choice): its GetWorkspaceSize prototype
MX_OPS_NN = ("hicann/ops-nn (commit e5c3fa9327ea95ba26d06227e746923580d10921, Ascend 950's "
             "MX APIs), ")
prototypes.declare("aclnnDynamicMxQuantV3",
                   "const aclTensor* x, int64_t axis, char* roundModeOptional, int64_t dstType, "
                   "int64_t blocksize, int64_t scaleAlg, double dstTypeMax, double maxLowBound, "
                   "const aclTensor* yOut, const aclTensor* mxscaleOut",
                   MX_OPS_NN + "quant/dynamic_mx_quant/docs/aclnnDynamicMxQuantV3.md",
                   cann="ops-nn e5c3fa9")
# float8 outputs: dstType is y's aclDataType and the scales go as ACL_FLOAT8_E8M0 (op-plugin's
# TensorWrappers); a float4 y is uint8 storage, which no dtype_of= can name: refused by name
MX_BINDING = dict(outputs=("y", "mxscale"), acl_dtypes={"mxscale": "ACL_FLOAT8_E8M0"},
                  dtype_of={"dstType": "y"}, requires={"dst_type": (23, 24, 291, 292)})


npu_dynamic_mx_quant = define_op(
    "npu_dynamic_mx_quant(Tensor input, *, int axis=-1, str round_mode=\"rint\", "
    "int dst_type=296, int block_size=32, int? scale_alg=0, float dst_type_max=0.0, "
    "float max_low_bound=0.0) -> (Tensor, Tensor)",
    reference=dynamic_mx_quant_reference, fake=dynamic_mx_quant_fake, native=("cpu",),
    kernels={"cuda": TritonKernel(dynamic_mx_quant_cuda)},
    aclnn=AclnnBinding("aclnnDynamicMxQuantV3", rename={"x": "input", "blocksize": "block_size"},
                       defaults={"scale_alg": 0}, **MX_BINDING),
    # other axes / block sizes, scale_alg 2, dst_type_max, max_low_bound: the launcher
    # routes them here
    reference_op=True,
    doc="MX quantisation along an axis: E8M0 scales per block, float8 or packed float4 "
        "values (Ascend 950).",
    benchmarks=(Benchmark(lambda t, h, dt: ((bench_randn(t, h, dtype=dt),),
                                          {"dst_type": 292})),),
)
