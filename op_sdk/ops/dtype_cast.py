"""npu_dtype_cast and _npu_dtype_cast: a cast that always returns a new tensor.

Beyond the numeric dtypes (ScalarType codes 0 - 11, 15), npu_dtype_cast takes torch_npu's
Ascend 950 formats, as torch_npu 2.13.0 implements them (op-plugin
``op_plugin/ops/opapi/CastKernelNpuOpApi.cpp`` and torch_npu's Meta function
``npu_dtype_cast_meta``, Ascend/op-plugin @ 517f2e7d0f202f38b76310706cb977ca2388ad21):

* ``dtype`` 23 / 291 float8_e5m2, 24 / 292 float8_e4m3fn (torch dtypes), 290 HiFloat8
  (uint8 bits), 296 float4_e2m1 / 297 float4_e1m2 and 285 int4 (two values per uint8 byte,
  element 2i in the low nibble: the last dim halves and must be even);
* ``input_dtype`` relabels the input's storage as the source format: 290 (a 1-byte tensor
  holding HiFloat8 bits), 296 / 297 (uint8 holding two float4 values per byte: the source's
  last dim doubles), a float8 code (a 1-byte tensor holding float8 bits), or any numeric
  code of the input's element size (its bits read as that dtype). int4 (285) is an output
  only (CANN's aclnnCast lists INT4 among the outputs alone) and is refused as input_dtype.

Where a 950 format is the source or the target, only aclnnCast's documented paths run
(CANN ops-math ``math/cast/docs/aclnnCast.md``): float32 / float16 / bfloat16 <-> float8 /
HiFloat8 / float4, float8 / HiFloat8 <-> float4, int32 -> int4; same format to same format
copies. Values (CANN ops-math arch35 castMap, ``math/cast/op_kernel/arch35/cast_struct.h``
@ 4d5f24e8010da735c50c4630cd7285846f0f156e, for the rounding; aclnnCast's documentation
gives no overflow / NaN rule, so op_sdk applies the 950 conversions it documents in
``_formats.py``): float8 rounds half to even and saturates to +-448 / +-57344 (+-inf too),
NaN stays NaN; HiFloat8 rounds half away from zero and saturates to +-32768, NaN becomes 0;
float4 goes through bfloat16 (half to even), then to the nearest float4 value (ties to the
even code), saturating at +-6 (e2m1) / +-1.75 (e1m2), NaN becomes +0; int32 -> int4 keeps
each value's low 4 bits (the kernel packs by shifting: 8 wraps to -8). Decoding (float8 /
HiFloat8 / float4 -> float) is exact.
"""

from __future__ import annotations

import torch

from op_sdk.library import define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import check
from op_sdk.ops._formats import (
    FLOAT4_E1M2,
    FLOAT4_E2M1,
    HIFLOAT8,
    fp4_codes_to_float,
    float_to_fp4_codes,
    float_to_hif8,
    hif8_to_float,
    pack_nibbles,
    quantize_float8,
    unpack_nibbles,
)

INT4 = 285

# ScalarType codes a cast may target (the plain numeric dtypes; quantized ones are not
# value types and raise).
_CAST_TARGETS = {
    0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64,
    5: torch.float16, 6: torch.float32, 7: torch.float64, 8: torch.complex32,
    9: torch.complex64, 10: torch.complex128, 11: torch.bool, 15: torch.bfloat16,
}
_FLOAT8 = {23: torch.float8_e5m2, 24: torch.float8_e4m3fn, 291: torch.float8_e5m2,
           292: torch.float8_e4m3fn}
_FLOAT8_CODE = {torch.float8_e5m2: 23, torch.float8_e4m3fn: 24}
# the 950 formats without a torch dtype, by code (their storage is uint8)
_PACKED = {HIFLOAT8: "hifloat8", FLOAT4_E2M1: "float4_e2m1", FLOAT4_E1M2: "float4_e1m2",
           INT4: "int4"}
_FOUR_BIT = ("float4_e2m1", "float4_e1m2", "int4")
_FP4_CODE = {"float4_e2m1": FLOAT4_E2M1, "float4_e1m2": FLOAT4_E1M2}
_HALF_UP = (torch.float32, torch.float16, torch.bfloat16)
_F8 = (torch.float8_e5m2, torch.float8_e4m3fn, "hifloat8")
_F4 = ("float4_e2m1", "float4_e1m2")


def _name(fmt) -> str:
    return str(fmt).replace("torch.", "")


def _format_of(op: str, arg: str, code):
    """A dtype argument (code or torch.dtype) -> its format: a torch.dtype, or the name of a
    950 format stored in uint8."""
    if isinstance(code, torch.dtype):
        check(code in _CAST_TARGETS.values() or code in _FLOAT8_CODE, op, arg,
              f"cannot be {code}")
        return code
    if code in _CAST_TARGETS:
        return _CAST_TARGETS[code]
    if code in _FLOAT8:
        return _FLOAT8[code]
    check(code in _PACKED, op, arg,
          f"must be a numeric dtype code {sorted(_CAST_TARGETS)}, a float8 code (23 / 291 "
          f"float8_e5m2, 24 / 292 float8_e4m3fn), torch_npu.hifloat8 (290), "
          f"torch_npu.float4_e2m1fn_x2 (296), torch_npu.float4_e1m2fn_x2 (297) or "
          f"torch_npu.int4 (285), got {code}")
    return _PACKED[code]


def _source(op: str, input, input_dtype):
    """The format the input's storage holds (input_dtype relabels it)."""
    if input_dtype is None:
        return input.dtype
    src = _format_of(op, "input_dtype", input_dtype)
    check(src != "int4", op, "input_dtype",
          "cannot be torch_npu.int4 (285): aclnnCast takes int4 as an output only")
    size = 1 if isinstance(src, str) else torch.empty((), dtype=src).element_size()
    check(input.element_size() == size, op, "input_dtype",
          f"must name a format of the input's element size ({input.dtype}, "
          f"{input.element_size()} bytes), got {_name(src)} ({size} byte"
          f"{'s' if size > 1 else ''})")
    if src in _F4:
        check(input.dim() > 0, op, "input_dtype",
              f"cannot be {src} for a 0-dim input (two values per byte along the last dim)")
    return src


def _check_path(op: str, src, dst) -> None:
    """aclnnCast's Ascend 950 paths where a 950 format is the source or the target."""
    special = (*_F8, *_F4, "int4")
    if src == dst or (src not in special and dst not in special):
        return
    if dst == "int4":
        ok = src == torch.int32
    elif src in _F8:
        ok = dst in _HALF_UP or dst in _F4
    elif src in _F4:
        ok = dst in _HALF_UP or dst in _F8
    elif dst in _F8:
        ok = src in _HALF_UP or src in _F4
    else:  # dst is float4
        ok = src in _HALF_UP or src in _F8
    check(ok, op, "dtype",
          f"cannot cast {_name(src)} to {_name(dst)}: aclnnCast's paths for float8 / hifloat8 / "
          f"float4 / int4 are float32 / float16 / bfloat16 <-> float8 / hifloat8 / float4, "
          f"float8 / hifloat8 <-> float4 and int32 -> int4")


def _out_shape(op: str, input, src, dst) -> list:
    shape = list(input.shape)
    if src in _F4:
        shape[-1] *= 2
    if dst in _FOUR_BIT:
        check(len(shape) > 0 and shape[-1] % 2 == 0, op, "input",
              f"must have an even last dim when dtype is {dst} (two values per byte), got "
              f"shape {shape} (as {_name(src)})")
        shape[-1] //= 2
    return shape


def _out_dtype(dst) -> torch.dtype:
    return torch.uint8 if isinstance(dst, str) else dst


def _decode(x, src):
    """The input as values: fp32 for a 950 source format, else the tensor as its dtype."""
    if src == "hifloat8":
        return hif8_to_float(x.view(torch.uint8))
    if src in _F4:
        return fp4_codes_to_float(unpack_nibbles(x.view(torch.uint8)), _FP4_CODE[src])
    if x.dtype != src:
        return x.view(src)  # input_dtype relabels the bits (same element size)
    return x


def _cast(input, dtype):
    """aclnnCast's value rules for the numeric dtypes: complex -> real keeps the real part,
    real -> complex has a zero imaginary part, float -> integer truncates toward zero and
    NaN becomes 0. Always a new tensor (``copy=True`` when the dtype matches)."""
    x = input
    if x.is_complex() and not dtype.is_complex:
        x = torch.real(x)
    if x.is_floating_point() and not (dtype.is_floating_point or dtype.is_complex
                                      or dtype == torch.bool):
        x = torch.nan_to_num(x, nan=0.0, posinf=float("inf"), neginf=float("-inf"))
    return x.to(dtype, copy=True)


def _convert(op: str, input, src, dst):
    _check_path(op, src, dst)
    shape = _out_shape(op, input, src, dst)
    # contiguous whatever the input's layout, as torch_npu's Meta allocates y (new_empty)
    if src == dst and isinstance(src, str):  # same 950 format: the bytes, copied
        return input.view(torch.uint8).clone(memory_format=torch.contiguous_format)
    v = _decode(input, src)
    if dst == "int4":
        out = pack_nibbles(v)
    elif dst in _F4:
        out = pack_nibbles(float_to_fp4_codes(v.float(), _FP4_CODE[dst]))
    elif dst == "hifloat8":
        out = float_to_hif8(v.float())
    elif dst in _FLOAT8_CODE and v.dtype != dst:
        out = quantize_float8(v.float(), _FLOAT8_CODE[dst])
    else:
        out = _cast(v, dst)
    return out.reshape(shape).contiguous()


def dtype_cast_reference(input, dtype, input_dtype=None):
    op = "npu_dtype_cast"
    src, dst = _source(op, input, input_dtype), _format_of(op, "dtype", dtype)
    return _convert(op, input, src, dst)


def dtype_cast_fake(input, dtype, input_dtype=None):
    op = "npu_dtype_cast"
    src, dst = _source(op, input, input_dtype), _format_of(op, "dtype", dtype)
    _check_path(op, src, dst)
    return input.new_empty(_out_shape(op, input, src, dst), dtype=_out_dtype(dst))


def _cuda(op, input, src, dst, fake):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/cast.py) for the numeric casts between
    float16 / bfloat16 / float32, the integers and bool; the other formats run the
    reference."""
    from op_sdk.triton_kernels import cast

    if not (isinstance(src, torch.dtype) and isinstance(dst, torch.dtype)
            and src == input.dtype and cast.covers(src, dst)):
        return _convert(op, input, src, dst)
    return cast.run(input, fake)


def dtype_cast_cuda(input, dtype, input_dtype=None):
    op = "npu_dtype_cast"
    src, dst = _source(op, input, input_dtype), _format_of(op, "dtype", dtype)
    return _cuda(op, input, src, dst, dtype_cast_fake(input, dtype, input_dtype))


def private_dtype_cast_cuda(input, dtype):
    op = "_npu_dtype_cast"
    src, dst = _source(op, input, None), _format_of(op, "dtype", dtype)
    return _cuda(op, input, src, dst, private_dtype_cast_fake(input, dtype))


def _cast_setup(ctx, inputs, output):
    ctx.in_dtype = inputs[0].dtype


def _grad_back(ctx, grad):
    if grad.is_complex() and not ctx.in_dtype.is_complex:
        grad = torch.real(grad)  # the input was real: its gradient is the real part
    return grad.to(ctx.in_dtype)


def _cast_backward(ctx, grad):
    return _grad_back(ctx, grad), None, None


def _private_cast_backward(ctx, grad):
    return _grad_back(ctx, grad), None


# the aclnn API the binding calls: its GetWorkspaceSize prototype, as CANN declares it
prototypes.declare("aclnnCast",
                   "const aclTensor* self, const aclDataType dtype, aclTensor* out",
                   prototypes.OPS_MATH + "math/cast/op_host/op_api/aclnn_cast.h", cann="8.5.0")


npu_dtype_cast = define_op(
    "npu_dtype_cast(Tensor input, int dtype, int? input_dtype=None) -> Tensor",
    # dtype chooses y's dtype and shape (the Meta function), which aclnnCast casts to;
    # input_dtype relabels the input's storage (its aclTensor's dtype on the NPU)
    # and the HiFloat8 / float4 / int4 targets are uint8-stored outputs whose aclTensor
    # needs its 950 aclDataType: the binding passes tensors in their torch dtype, so it
    # refuses those forms by name instead of casting to plain uint8
    aclnn=AclnnBinding("aclnnCast", outputs=("y",), rename={"self": "input"},
                       dtype_of={"dtype": "y"}, meta_only=("dtype", "input_dtype"),
                       requires={"dtype": tuple(sorted(_CAST_TARGETS)) + tuple(sorted(_FLOAT8)),
                                 "input_dtype": None}),
    reference=dtype_cast_reference, fake=dtype_cast_fake,
    kernels={"cuda": TritonKernel(dtype_cast_cuda)},
    backward=_cast_backward, setup_context=_cast_setup,
    # torch_npu's node names (torchgen over op-plugin's derivatives.yaml, which lists
    # npu_dtype_cast before _npu_dtype_cast: one counter per prefix NpuDtypeCastBackward)
    backward_name="NpuDtypeCastBackward0",
    doc="Cast to dtype (complex, float8, hifloat8, float4 and int4 too; input_dtype "
        "relabels the input's storage); always a new tensor; float -> int truncates toward "
        "zero, NaN -> 0.",
)


def private_dtype_cast_reference(input, dtype):
    op = "_npu_dtype_cast"
    return _convert(op, input, _source(op, input, None), _format_of(op, "dtype", dtype))


def private_dtype_cast_fake(input, dtype):
    op = "_npu_dtype_cast"
    src, dst = _source(op, input, None), _format_of(op, "dtype", dtype)
    _check_path(op, src, dst)
    return input.new_empty(input.shape, dtype=dst)  # contiguous, as torch_npu's Meta


_npu_dtype_cast = define_op(
    "_npu_dtype_cast(Tensor input, ScalarType dtype) -> Tensor",
    aclnn=AclnnBinding("aclnnCast", outputs=("y",), rename={"self": "input"}),
    reference=private_dtype_cast_reference, fake=private_dtype_cast_fake,
    kernels={"cuda": TritonKernel(private_dtype_cast_cuda)},
    backward=_private_cast_backward, setup_context=_cast_setup,
    backward_name="NpuDtypeCastBackward1",
    doc="The ScalarType spelling of npu_dtype_cast, as torch_npu's .to() lowers to.",
)
