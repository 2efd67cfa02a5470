"""npu_dtype_cast's numeric casts on CUDA (ops/dtype_cast.py's contract) in one pass: float ->
integer truncates toward zero with NaN -> 0 (aclnnCast), -> bool is ``x != 0`` (a NaN is
True, as torch's cast), integer -> integer keeps the low bits (two's complement, as torch's
cast), and every float target is reached through float32 (an integer source converted to
float32 first, then rounded half to even to float16 / bfloat16: the reference's two
roundings; a float16 / bfloat16 source widens exactly). A float outside the integer target's
range (+-inf included) has no value in the contract; the kernel leaves it to the device's
conversion.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from op_sdk.triton_kernels._common import Outputs, launch

# the dtypes the kernel reads and writes (others: float64, complex, float8 and the 950
# formats, run the reference)
FLOATS = (torch.float16, torch.bfloat16, torch.float32)
INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
DTYPES = FLOATS + INTS + (torch.bool,)
BLOCK = 1024


@triton.jit
def _cast(x_ptr, y_ptr, n, SRC_FLOAT: tl.constexpr, DST: tl.constexpr, BLOCK: tl.constexpr,
          WIDE: tl.constexpr):
    # DST: 0 a float, 1 an integer, 2 bool
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if WIDE:
        i = tl.cast(i, tl.int64)
    m = i < n
    x = tl.load(x_ptr + i, mask=m, other=0)
    out_ty = y_ptr.dtype.element_ty
    if DST == 2:
        y = x != 0
    elif DST == 1:
        if SRC_FLOAT:
            f = x.to(tl.float32)
            y = tl.where(f != f, 0.0, f).to(out_ty)
        else:
            y = x.to(out_ty)
    else:
        y = x.to(tl.float32).to(out_ty)
    tl.store(y_ptr + i, y, mask=m)


def covers(src: torch.dtype, dst: torch.dtype) -> bool:
    return src in DTYPES and dst in DTYPES


def run(input, out):
    """``input`` cast into ``out`` (its fake's allocation, ``out.dtype``); returns it."""
    o = Outputs(out)
    n = input.numel()
    if n:
        dst = out.dtype
        kind = 2 if dst == torch.bool else 1 if dst in INTS else 0
        launch(_cast, (triton.cdiv(n, BLOCK),), input.contiguous(), o.bufs[0], n,
               SRC_FLOAT=input.dtype in FLOATS, DST=kind, BLOCK=BLOCK, WIDE=n >= 2**31,
               num_warps=4)
    return o.done()[0]
