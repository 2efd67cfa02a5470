"""op_sdk::pack_quant_weight and op_sdk::quant_matmul_packed: npu_quant_matmul over a weight
prepacked once at compile time (op_sdk's own operators).

Native CPU kernels: csrc/quant_matmul_packed.cpp (over kernels/quant_matmul_packed.h).
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.ops._common import check
from op_sdk.ops.quant_matmul import (
    _OUT_DTYPES,
    bench_composite,
    bench_inputs,
    check_quant_matmul,
    quant_matmul_reference,
)


# ---- prepacked weights (op_sdk's own) -------------------------------------------------------
#
# op_sdk's weight prepacking (compiler/prepack.py, on with experimental_config.frozen_parameter
# on CPU) replaces npu_quant_matmul(x1, W, ...) on a frozen 2-D weight W with
# quant_matmul_packed(x1, W, pack_quant_weight(W), ...), the weight packed once at compile
# time. The packed layout (kernels/quant_matmul_packed.h): 16-column blocks, each kpad / 4
# rows of 64 bytes holding 4 consecutive k-values of its 16 columns (the operand order of
# AVX-512 VNNI and AMX), k padded to a multiple of 64 with zeros; then the int32 column
# sums (16 per block, zero past n), as bytes; then what it was packed from, five int64:
# the address of x2's first element, k, n and x2's two strides. quant_matmul_packed uses
# the packed copy only while its x2 is that same weight viewed the same way (a parameter
# replaced after the compile, or a view of its memory with another shape or strides, is
# multiplied as it lies; one changed in place is not seen, the frozen_parameter contract). On the NPU the same idea is the  # noqa: E501
# FRACTAL_NZ weight format that TorchAir's frozen_parameter lets GE convert weights to.


def _packed_dims(k: int, n: int) -> tuple[int, int]:
    """(k padded to whole 64-byte rows, number of 16-column blocks)."""
    return (k + 63) // 64 * 64, (n + 15) // 16


def packed_weight_bytes(k: int, n: int) -> int:
    kpad, blocks = _packed_dims(k, n)
    return blocks * 16 * kpad + blocks * 16 * 4 + 5 * 8


def _check_pack_x2(op, x2):
    check(x2.dtype == torch.int8, op, "x2", f"must be int8, got {x2.dtype}")
    check(x2.dim() == 2, op, "x2", f"must be 2-D (k, n), got {x2.dim()} dims")


def pack_quant_weight_reference(x2):
    _check_pack_x2("pack_quant_weight", x2)
    k, n = x2.shape
    kpad, blocks = _packed_dims(k, n)
    w = x2.new_zeros((blocks * 16, kpad))
    w[:n, :k] = x2.t()
    tiles = w.view(blocks, 16, kpad // 4, 4).permute(0, 2, 1, 3).reshape(-1)
    sums = torch.zeros(blocks * 16, dtype=torch.int64, device=x2.device)
    sums[:n] = x2.sum(0, dtype=torch.int64)
    # the low 32 bits (int32 wrap-around: int64 -> int32 conversion truncates), as bytes
    source = torch.tensor([x2.data_ptr(), k, n, x2.stride(0), x2.stride(1)], dtype=torch.int64,
                          device=x2.device)
    return torch.cat([tiles, sums.to(torch.int32).view(torch.int8), source.view(torch.int8)])


def pack_quant_weight_fake(x2):
    _check_pack_x2("pack_quant_weight", x2)
    return x2.new_empty((packed_weight_bytes(x2.shape[0], x2.shape[1]),))


pack_quant_weight = define_op(
    "pack_quant_weight(Tensor x2) -> Tensor",
    reference=pack_quant_weight_reference, fake=pack_quant_weight_fake, native=("cpu",),
    namespace="op_sdk",
    doc="An int8 (k, n) weight in the layout of quant_matmul_packed (1-D int8 bytes).",
)


def _check_packed(x1, x2, packed, scale, offset, pertoken_scale, bias, output_dtype):
    op = "quant_matmul_packed"
    _check_pack_x2(op, x2)
    code = check_quant_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                              None, None, None, None, None, None, op=op)
    want = packed_weight_bytes(x2.shape[0], x2.shape[1])
    check(packed.dtype == torch.int8 and packed.dim() == 1 and packed.shape[0] == want
          and packed.is_contiguous(), op, "packed",
          f"must be pack_quant_weight(x2): contiguous int8 of {want} bytes, got "
          f"{packed.dtype} {list(packed.shape)}")
    return code


def quant_matmul_packed_reference(x1, x2, packed, scale, *, offset=None, pertoken_scale=None,
                                  bias=None, output_dtype=None):
    # the packed copy is x2 rearranged (or stale, when x2 is no longer its source: then x2
    # is what counts): the result is npu_quant_matmul's
    _check_packed(x1, x2, packed, scale, offset, pertoken_scale, bias, output_dtype)
    return quant_matmul_reference(x1, x2, scale, offset=offset, pertoken_scale=pertoken_scale,
                                  bias=bias, output_dtype=output_dtype)


def quant_matmul_packed_fake(x1, x2, packed, scale, *, offset=None, pertoken_scale=None,
                             bias=None, output_dtype=None):
    code = _check_packed(x1, x2, packed, scale, offset, pertoken_scale, bias, output_dtype)
    return x1.new_empty((*x1.shape[:-1], x2.shape[-1]), dtype=_OUT_DTYPES[code])



def _bench_inputs(t, k, dt):
    (x1, x2, scale), kw = bench_inputs(5632)(t, k, dt)
    return (x1, x2, torch.ops.op_sdk.pack_quant_weight(x2), scale), kw


def _bench_composite(x1, x2, packed, scale, *, pertoken_scale, output_dtype):
    """The model's own graph, where frozen_parameter put the packed operator."""
    return bench_composite(x1, x2, scale, pertoken_scale=pertoken_scale, output_dtype=output_dtype)


quant_matmul_packed = define_op(
    "quant_matmul_packed(Tensor x1, Tensor x2, Tensor packed, Tensor scale, *, "
    "Tensor? offset=None, Tensor? pertoken_scale=None, Tensor? bias=None, "
    "int? output_dtype=None) -> Tensor",
    reference=quant_matmul_packed_reference, fake=quant_matmul_packed_fake, native=("cpu",),
    namespace="op_sdk",
    doc="npu_quant_matmul(x1, x2, scale, ...) with x2 (2-D) also given prepacked "
        "(packed = pack_quant_weight(x2)); the CPU kernel reads the packed copy.",
    benchmarks=(Benchmark(_bench_inputs, _bench_composite, "torch._int_mm + dequant (eager)",
                          composite=_bench_composite, n=5632,
                          shapes=tuple((t, 1024) for t in (1, 4, 8, 16, 32, 64)),
                          # x2 is kept only for the unpacked fallback: the bytes count the
                          # packed copy
                          unread=(1,)),),
)
