"""npu_format_cast, npu_format_cast.Tensor, npu_format_cast_.acl_format and get_npu_format:
torch_npu's storage formats, on CPU and CUDA.

On an NPU a tensor's storage carries a format (ND, NCHW, FRACTAL_NZ, ...: how its bytes
are laid out for the cube unit) and ``npu_format_cast`` rewrites the bytes into another;
torch_npu (torch_npu/csrc/aten/common/FormatCastKernelNpu.cpp) and the format table of its
FormatHelper.cpp are the contract read here. Off the NPU the values stay in torch's strided
layout and the format is *recorded* for the storage, so that code which casts its weights to
FRACTAL_NZ (29) and reads the format back (vllm-ascend, TorchAir's
``use_internal_format_weight``) runs unchanged and sees what it would see on the NPU:

* the record belongs to the storage, as torch_npu's storage descriptor does: every view of
  it, ``.data`` and ``detach()`` report it; it goes when the storage goes;
* a storage without a record has the format torch_npu gives a tensor it allocates: NCDHW
  (30) for 5 dims, NCHW (0) for 4, ND (2) otherwise (by the dims of the tensor asked);
* ``acl_format`` must be a format torch_npu knows (its FormatHelper table: 0, 1, 2, 3, 4,
  27, 29, 30, 32, 33, 50 - 54); FRACTAL_NZ on a tensor of fewer than 2 dims gives ND
  (torch_npu's ``ShouldFallbackNzToNd``);
* ``npu_format_cast`` always returns a new tensor with the input's values, sizes and strides
  (``empty_like``'s layout) and never changes the input's record. torch_npu returns the
  input itself when it has the format already and, between two base formats (ND, NCHW, NHWC,
  NDHWC, NCDHW), relabels the input's storage and returns the input: a functional schema
  may not return its input (torch.compile relies on that), so op_sdk returns a copy whose
  storage has the new record, and the input keeps its own;
* ``npu_format_cast_`` records the format for the input's storage and returns the input,
  its values unchanged. Inside a graph torch.compile compiles, it is functionalized (the
  copy above, written back into the input): the values are right, the record is not made,
  and tracing it warns so.
  torch_npu's other in-place overload, ``npu_format_cast_(input, Tensor src)``, is not
  defined: its kernel copies ``src``'s values on one path and leaves them on another while
  its document says it changes the format, and it has no functional form to compile;
* ``customize_dtype`` (the C0 of FRACTAL_NZ on Atlas A2 / A3) and ``input_dtype`` (the real
  dtype of packed int4 / float4 storage) change how the NPU lays the bytes out, not the
  values: each is None or a dtype code torch_npu knows;
* ``get_npu_format`` is an ``int``: under torch.compile the call is a graph break (Dynamo
  does not trace an operator that returns an ``int``), so it runs eagerly on the real tensor
  and reads its real record.

No aclnn binding (torch_npu defines these operators in every version, so a binding would
never register) and no GE converter (TorchAir has none: a weight's format is set before the
graph, which reads it from its inputs).
"""

from __future__ import annotations

import enum
import warnings
import weakref

import torch

from op_sdk.library import check_writable, define_op
from op_sdk.ops._common import DTYPE_CODES, NPU_DTYPE_NAMES, check, fail
from op_sdk.ops._formats import FLOAT4_E1M2, FLOAT4_E2M1


class Format(enum.IntEnum):
    """torch_npu.Format: the storage formats (torch_npu/npu/_format.py)."""

    UNDEFINED = -1
    NCHW = 0
    NHWC = 1
    ND = 2
    NC1HWC0 = 3
    FRACTAL_Z = 4
    NC1HWC0_C04 = 12
    HWCN = 16
    NDHWC = 27
    FRACTAL_NZ = 29
    NCDHW = 30
    NDC1HWC0 = 32
    FRACTAL_Z_3D = 33
    NC = 35
    NCL = 47
    FRACTAL_NZ_C0_16 = 50
    FRACTAL_NZ_C0_32 = 51
    FRACTAL_NZ_C0_2 = 52
    FRACTAL_NZ_C0_4 = 53
    FRACTAL_NZ_C0_8 = 54

    def __str__(self):
        return self.name


# the formats a cast may target: torch_npu's FormatHelper table, each with its base format
# (a cast to any other value fails there with "unknown format type:N")
BASE_FORMAT = {
    Format.NC1HWC0: Format.NCHW, Format.ND: Format.ND, Format.NCHW: Format.NCHW,
    Format.NHWC: Format.NHWC, Format.FRACTAL_NZ: Format.ND, Format.FRACTAL_Z: Format.NCHW,
    Format.NDHWC: Format.NCDHW, Format.NCDHW: Format.NCDHW, Format.NDC1HWC0: Format.NCDHW,
    Format.FRACTAL_Z_3D: Format.NCDHW, Format.FRACTAL_NZ_C0_16: Format.ND,
    Format.FRACTAL_NZ_C0_32: Format.ND, Format.FRACTAL_NZ_C0_2: Format.ND,
    Format.FRACTAL_NZ_C0_4: Format.ND, Format.FRACTAL_NZ_C0_8: Format.ND,
}
_DTYPE_CODES = sorted(set(DTYPE_CODES) | set(NPU_DTYPE_NAMES) | {FLOAT4_E2M1, FLOAT4_E1M2})

# storage -> its recorded format (weak: the record goes with the storage)
_RECORDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def default_format(t: torch.Tensor) -> int:
    """The format torch_npu gives a tensor of ``t``'s dims that it allocates."""
    return {5: Format.NCDHW, 4: Format.NCHW}.get(t.dim(), Format.ND).value


def recorded_format(t: torch.Tensor) -> int:
    """``t``'s storage's recorded format, or the default for its dims."""
    return _RECORDS.get(t.untyped_storage(), default_format(t))


def _record(t: torch.Tensor, fmt: int) -> None:
    _RECORDS[t.untyped_storage()] = fmt


def check_format_cast(op, input, acl_format, customize_dtype=None, input_dtype=None) -> int:
    """The rules of a cast to ``acl_format``; returns the format the result has (FRACTAL_NZ
    on fewer than 2 dims gives ND)."""
    if acl_format not in BASE_FORMAT.keys():
        known = ", ".join(f"{f.value} ({f.name})" for f in sorted(BASE_FORMAT))
        fail(op, "acl_format", f"must be a format torch_npu can cast to: {known}; got "
             f"{acl_format} (torch_npu: unknown format type:{acl_format})")
    for arg, value in (("customize_dtype", customize_dtype), ("input_dtype", input_dtype)):
        check(value is None or value in _DTYPE_CODES, op, arg,
              f"must be None or a dtype code torch_npu knows ({', '.join(map(str, _DTYPE_CODES))}), "
              f"got {value}")
    if acl_format == Format.FRACTAL_NZ and input.dim() < 2:
        return Format.ND.value
    return int(acl_format)


def format_cast_reference(input, acl_format, *, customize_dtype=None, input_dtype=None):
    fmt = check_format_cast("npu_format_cast", input, acl_format, customize_dtype, input_dtype)
    out = input.clone()  # empty_like's layout: the input's strides where dense
    _record(out, fmt)
    return out


def format_cast_fake(input, acl_format, *, customize_dtype=None, input_dtype=None):
    fmt = check_format_cast("npu_format_cast", input, acl_format, customize_dtype, input_dtype)
    out = torch.empty_like(input)
    _record(out, fmt)  # a fake storage's record: what a traced get_npu_format reads
    return out


def format_cast_like_reference(input, dst, *, customize_dtype=None, input_dtype=None):
    return format_cast_reference(input, recorded_format(dst), customize_dtype=customize_dtype,
                                 input_dtype=input_dtype)


def format_cast_like_fake(input, dst, *, customize_dtype=None, input_dtype=None):
    return format_cast_fake(input, recorded_format(dst), customize_dtype=customize_dtype,
                            input_dtype=input_dtype)


def format_cast_inplace(input, acl_format, *, customize_dtype=None, input_dtype=None):
    """The in-place cast off a compiled graph: the record for the input's storage (an
    expanded input is refused, the rule of every in-place operator)."""
    check_writable("npu_format_cast_", "input", input)
    _record(input, check_format_cast("npu_format_cast_", input, acl_format, customize_dtype,
                                     input_dtype))
    return input


def format_cast_inplace_fake(input, acl_format, *, customize_dtype=None, input_dtype=None):
    """Traced (torch.compile's Dynamo runs it on fake tensors): the graph will hold the
    functional cast written back into the input, which keeps the values but records no
    format for the real input's storage: said, not silent."""
    format_cast_inplace(input, acl_format, customize_dtype=customize_dtype, input_dtype=input_dtype)
    warnings.warn("npu_format_cast_ inside a traced graph: the compiled graph keeps the "
                  "values but records no format for the input's storage; cast before "
                  "compiling (as weight loading does) or use npu_format_cast's result",
                  RuntimeWarning, stacklevel=2)
    return input


def get_npu_format_reference(input):
    return recorded_format(input)


def _backward(ctx, grad):
    """torch_npu's derivative (op-plugin derivatives.yaml): the gradient passes through."""
    return grad, None



npu_format_cast = define_op(
    "npu_format_cast(Tensor input, int acl_format, *, int? customize_dtype=None, "
    "int? input_dtype=None) -> Tensor",
    reference=format_cast_reference, fake=format_cast_fake, inline=False,
    backward=_backward,
    doc="The input's values in a new tensor whose storage is recorded in format acl_format "
        "(FRACTAL_NZ on fewer than 2 dims: ND).",
)

npu_format_cast_like = define_op(
    "npu_format_cast.Tensor(Tensor input, Tensor dst, *, int? customize_dtype=None, "
    "int? input_dtype=None) -> Tensor",
    reference=format_cast_like_reference, fake=format_cast_like_fake, inline=False,
    backward=_backward,
    doc="npu_format_cast to the recorded format of dst's storage.",
)

npu_format_cast_ = define_op(
    "npu_format_cast_.acl_format(Tensor(a!) input, int acl_format, *, int? customize_dtype=None, "
    "int? input_dtype=None) -> Tensor(a!)",
    reference=format_cast_reference, functional="npu_format_cast",
    kernels={"cpu": format_cast_inplace, "cuda": format_cast_inplace},
    fake=format_cast_inplace_fake,
    doc="Records format acl_format for the input's storage (FRACTAL_NZ on fewer than 2 dims: "
        "ND); the values are unchanged.",
)

get_npu_format_op = define_op(
    "get_npu_format(Tensor input) -> int",
    reference=get_npu_format_reference, inline=False,
    doc="The recorded format of the input's storage; without a record, NCDHW (30) for 5 "
        "dims, NCHW (0) for 4, ND (2) otherwise.",
)


def get_npu_format(tensor: torch.Tensor) -> Format:
    """torch_npu.get_npu_format: the storage's format as a ``Format``."""
    return Format(torch.ops.npu.get_npu_format(tensor))


# ---- TorchAir's npu_format_cast_via_cpu -----------------------------------------------------

def npu_format_cast_via_cpu(self: torch.Tensor, acl_format: int, customize_dtype: int | None = None,
                            input_dtype: int | None = None) -> torch.Tensor:
    """TorchAir's ``npu_format_cast_via_cpu``: the format cast computed on the host (the NPU's
    own copy avoids device memory peaks); here ``npu_format_cast`` itself."""
    return torch.ops.npu.npu_format_cast(self, acl_format, customize_dtype=customize_dtype,
                                         input_dtype=input_dtype)

