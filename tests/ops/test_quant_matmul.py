"""npu_quant_matmul: the native CPU kernel against the reference, bit for bit (the int32
product is exact and the epilogue does the contract's fp32 steps in its order), over every
epilogue, sizes (the VNNI / AMX few-row kernels and ATen's int8 GEMM), layouts, batched,
strided and empty inputs, saturation and rounding; the formulas on hand-built cases; the
int4 weights A4W4 (per channel and per group of k) / A8W4 (torch_npu's documented contract
beyond A2 / A3) and their rules."""

import pytest
import torch

from op_sdk.ops._common import CODE_OF, pack_int4, pack_quant_scale, unpack_quant_scale
from op_sdk.ops.quant_matmul import quant_matmul_reference
from tests.ops._helpers import T, bf16, fp16, i8, i32, npu, rand_i8, strided

SCHEMAS = [
    "npu_quant_matmul(Tensor x1, Tensor x2, Tensor scale, *, Tensor? offset=None, Tensor? pertoken_scale=None, Tensor? bias=None, int? output_dtype=None, int? x1_dtype=None, int? x2_dtype=None, int? pertoken_scale_dtype=None, int? scale_dtype=None, int[]? group_sizes=None, Tensor? y_scale=None) -> Tensor",  # noqa: E501
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_quant_matmul": "QuantBatchMatmulV3"}
# sample calls the converter refuses, by words of the error: forms it does not write
# the forms TorchAir's own converter writes
GE_REFUSED = {"npu::npu_quant_matmul": ("x1_dtype", "x2_dtype", "scale_dtype", "group_sizes",
                               "pertoken_scale_dtype", "y_scale", "only int8", "per-block scales")}



def _f8(*shape, dtype):
    """float8 values of every magnitude (no NaN): normal values times a random power of two."""
    v = torch.randn(*shape) * torch.pow(2.0, torch.randint(-6, 6, shape).float())
    return v.clamp(-448, 448).to(dtype)


def _hif8(*shape):
    """HiFloat8 codes without NaN (0x80) or +-inf (0x6F / 0xEF)."""
    c = torch.randint(0, 256, shape, dtype=torch.uint8)
    bad = (c == 0x80) | (c == 0x6F) | (c == 0xEF)
    return torch.where(bad, torch.zeros_like(c), c)


def samples():
    return [
        ("npu_quant_matmul", (rand_i8(5, 32), rand_i8(32, 16), torch.rand(16) / 100), {}),
        ("npu_quant_matmul", (rand_i8(5, 32), rand_i8(32, 16), torch.rand(16) / 100),
         {"pertoken_scale": torch.rand(5), "output_dtype": torch.bfloat16,
          "bias": torch.randn(16).to(bf16)}),
        ("npu_quant_matmul", (rand_i8(2, 5, 32), rand_i8(32, 16), torch.rand(1)),
         {"bias": torch.randint(-9, 9, (16,), dtype=torch.int32), "output_dtype": torch.int32}),
        # a (batch, 1, n) bias of a 3-D output
        ("npu_quant_matmul", (rand_i8(3, 5, 32), rand_i8(32, 16), torch.rand(16) / 100),
         {"bias": torch.randint(-9, 9, (3, 1, 16), dtype=torch.int32)}),
        # HiFloat8 inputs (Ascend 950); float8 inputs are not samples: opcheck's schema check
        # multiplies the inputs, which torch does not for float8 (meta_grid and
        # test_float8_inputs cover them)
        ("npu_quant_matmul", (_hif8(5, 32), _hif8(32, 16), torch.rand(1)),
         {"x1_dtype": 290, "x2_dtype": 290, "output_dtype": torch.float32}),
        # int8 inputs with npu_trans_quant_param's int64 scale and an int32 bias
        ("npu_quant_matmul", (rand_i8(5, 32), rand_i8(32, 16), pack_quant_scale(torch.rand(16) / 100)),
         {"bias": torch.randint(-9, 9, (16,), dtype=torch.int32), "output_dtype": torch.float16}),
        # the static form: npu_trans_quant_param's int64 scale and a float32 bias
        ("npu_quant_matmul", (_hif8(5, 32), _hif8(32, 16), pack_quant_scale(torch.rand(16) + 0.5)),
         {"bias": torch.randn(16), "x1_dtype": 290, "x2_dtype": 290, "output_dtype": torch.bfloat16}),        # per-block (G-B) scales on int8 inputs: k = 200 and n = 136 (2 groups each)  # noqa: E501
        ("npu_quant_matmul", (rand_i8(5, 200), rand_i8(136, 200).t(), torch.rand(2, 2)),
         {"pertoken_scale": torch.rand(5, 2), "bias": torch.randn(136), "output_dtype": torch.bfloat16,
          "group_sizes": [1, 128, 128]}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real): 2-D and 3-D x1, every output dtype,
    per-token scales, int32 bias; A4W4 with both x2 layouts; A8W4 per group."""
    def pos(*shape):
        return torch.rand(*shape) + 0.05

    cases = []
    for lead in [(), (2,)]:
        for out in [None, fp16, bf16, torch.int32, i8]:
            x1, x2 = rand_i8(*lead, 5, 32), rand_i8(32, 16)
            kw = {"output_dtype": out} if out is not None else {}
            if out in (fp16, bf16):
                cases.append(("npu_quant_matmul", (x1, x2, pos(16) / 100), dict(kw, pertoken_scale=pos(5))))
            cases.append(("npu_quant_matmul", (x1, x2, pos(1) / 100), kw))
            if out in (bf16, torch.int32):  # a bfloat16 scale
                cases.append(("npu_quant_matmul", (x1, x2, (pos(16) / 100).to(bf16)), kw))
            if out == torch.int32:
                cases.append(("npu_quant_matmul", (x1, x2, pos(16)),
                              dict(kw, bias=torch.randint(-9, 9, (16,), dtype=torch.int32))))
            if lead:  # a (batch, 1, n) bias of a 3-D output, int32 and (with pertoken) float
                bias = (torch.randn(*lead, 1, 16).to(out) if out in (fp16, bf16)
                        else torch.randint(-9, 9, (*lead, 1, 16), dtype=torch.int32))
                extra = {"pertoken_scale": pos(5)} if out in (fp16, bf16) else {}
                cases.append(("npu_quant_matmul", (x1, x2, pos(16) / 100),
                              dict(kw, bias=bias, **extra)))
    for lead in [(), (2,)]:  # int8 inputs, npu_trans_quant_param's int64 / uint64 scale
        for out in [None, fp16, bf16]:
            x1, x2 = rand_i8(*lead, 5, 32), rand_i8(32, 16)
            kw = {"output_dtype": out} if out is not None else {}
            packed = pack_quant_scale(pos(16) / 100)
            cases.append(("npu_quant_matmul", (x1, x2, packed), kw))
            if out is None:  # the int8 output with an offset: packed, and the tensor beside it
                off = torch.randn(16) * 5
                cases.append(("npu_quant_matmul", (x1, x2, pack_quant_scale(pos(16) / 100, off)),
                              {"offset": off}))
                cases.append(("npu_quant_matmul", (x1, x2, pos(16) / 100), {"offset": off[:1]}))
            cases.append(("npu_quant_matmul", (x1, x2, packed[:1].view(torch.uint64)),
                          dict(kw, bias=torch.randint(-9, 9, (*lead, 1, 16) if lead else (16,),
                                                      dtype=torch.int32))))
    for m in (1, 5):  # A4W4, both x2 layouts
        for cont in (False, True):
            q2 = torch.randint(-8, 8, (64, 24), dtype=i8)
            x2 = pack_int4(q2.t().contiguous()).t() if cont else pack_int4(q2)
            x1 = pack_int4(torch.randint(-8, 8, (m, 64), dtype=i8))
            cases.append(("npu_quant_matmul", (x1, x2, pos(24)), {"output_dtype": fp16}))
            cases.append(("npu_quant_matmul", (x1, x2, pos(24)), {"output_dtype": bf16, "pertoken_scale": pos(m)}))
    for out in (fp16, bf16, torch.float32):  # float8 / HiFloat8 inputs
        for lead in ((), (2,)):
            cases.append(("npu_quant_matmul", (_f8(*lead, 5, 32, dtype=E4M3), _f8(32, 16, dtype=E4M3), pos(16)),
                          {"output_dtype": out}))
            cases.append(("npu_quant_matmul", (_f8(*lead, 5, 32, dtype=E5M2), _f8(32, 16, dtype=E4M3), pos(1)),
                          {"pertoken_scale": pos(5), "output_dtype": out}))
            cases.append(("npu_quant_matmul", (_hif8(*lead, 5, 32), _hif8(32, 16), pos(16)),
                          {"pertoken_scale": pos(5), "x1_dtype": 290, "x2_dtype": 290, "output_dtype": out}))
            # float32 scales with a float32 bias (n,) / (batch, 1, n) (the T-C / K-C rows)
            fbias = torch.randn(*lead, 1, 16) if lead else torch.randn(16)
            cases.append(("npu_quant_matmul", (_f8(*lead, 5, 32, dtype=E4M3), _f8(32, 16, dtype=E5M2), pos(16)),
                          {"pertoken_scale": pos(5), "bias": fbias, "output_dtype": out}))
            cases.append(("npu_quant_matmul", (_hif8(*lead, 5, 32), _hif8(32, 16), pos(1)),
                          {"bias": fbias, "x1_dtype": 290, "x2_dtype": 290, "output_dtype": out}))
            # the static form: int64 scale (n,) / (1,), float32 bias (n,) / (batch, 1, n)
            packed = pack_quant_scale(pos(16))
            cases.append(("npu_quant_matmul", (_f8(*lead, 5, 32, dtype=E4M3), _f8(32, 16, dtype=E5M2), packed),
                          {"bias": torch.randn(*lead, 1, 16) if lead else torch.randn(16), "output_dtype": out}))
            cases.append(("npu_quant_matmul", (_hif8(*lead, 5, 32), _hif8(32, 16), packed[:1]),
                          {"x1_dtype": 290, "x2_dtype": 290, "output_dtype": out}))
    # a uint64 scale, a batched x2
    cases.append(("npu_quant_matmul", (_f8(2, 5, 32, dtype=E5M2), _f8(2, 32, 16, dtype=E5M2),
                                       pack_quant_scale(pos(16)).view(torch.uint64)),
                  {"bias": torch.randn(16), "output_dtype": torch.float32}))
    for out in (fp16, bf16):  # A8W4 per group
        cases.append(("npu_quant_matmul", (rand_i8(3, 512), pack_int4(torch.randint(-8, 8, (512, 16), dtype=i8)),
                                           torch.randint(1, 2**30, (2, 16))),
                      {"pertoken_scale": pos(3, 1), "offset": torch.randn(16), "output_dtype": out}))
    # per-block scales (G-B, B-B): k = 300 and n = 260 (3 groups each, the last short)
    m, k, n = 5, 300, 260
    gb, bb = [1, 128, 128], [128, 128, 128]
    cases.append(("npu_quant_matmul", (rand_i8(m, k), rand_i8(n, k).t(), pos(3, 3)),
                  {"pertoken_scale": pos(m, 3), "output_dtype": bf16, "group_sizes": gb}))
    cases.append(("npu_quant_matmul", (rand_i8(2, m, k), rand_i8(k, n), pos(3, 3)),
                  {"pertoken_scale": pos(m, 3), "bias": torch.randn(n), "output_dtype": bf16,
                   "group_sizes": gb}))
    for out in (fp16, bf16, torch.float32):
        cases.append(("npu_quant_matmul", (_f8(2, m, k, dtype=E4M3), _f8(n, k, dtype=E5M2).t(), pos(3, 3)),
                      {"pertoken_scale": pos(1, 3), "output_dtype": out, "group_sizes": bb}))
        cases.append(("npu_quant_matmul", (_f8(m, k, dtype=E4M3), _f8(k, n, dtype=E4M3), pos(3, 3)),
                      {"pertoken_scale": pos(m, 3), "output_dtype": out, "group_sizes": gb}))
        cases.append(("npu_quant_matmul", (_hif8(m, k), _hif8(k, n), pos(3, 3)),
                      {"pertoken_scale": pos(1, 3), "output_dtype": out, "group_sizes": bb,
                       "x1_dtype": 290, "x2_dtype": 290}))
    cases.append(("npu_quant_matmul", (_f8(2, m, k, dtype=E5M2), _f8(2, k, n, dtype=E5M2), pos(2, 3, 3)),
                  {"pertoken_scale": pos(2, m, 3), "output_dtype": torch.float32, "group_sizes": gb}))
    # MX scales: E8M0 codes (..., m, ceil(k / 64), 2) / (..., ceil(k / 64), n, 2), k = 200
    m, k, n = 5, 200, 24
    mx = {"scale_dtype": 293, "pertoken_scale_dtype": 293, "group_sizes": [1, 1, 32]}
    for out in (fp16, bf16, torch.float32):
        cases.append(("npu_quant_matmul", (_f8(m, k, dtype=E4M3), _f8(n, k, dtype=E5M2).t(), _e8m0(4, n, 2)),
                      {"pertoken_scale": _e8m0(m, 4, 2), "output_dtype": out, **mx}))
        cases.append(("npu_quant_matmul", (_f8(2, m, k, dtype=E4M3), _f8(2, k, n, dtype=E4M3), _e8m0(2, 4, n, 2)),
                      {"pertoken_scale": _e8m0(2, m, 4, 2), "bias": torch.randn(2, 1, n), "output_dtype": out, **mx}))
    cases.append(("npu_quant_matmul", (_f8(m, k, dtype=E5M2), _f8(k, n, dtype=E5M2), _e8m0(4, n, 2)),
                  {"pertoken_scale": _e8m0(m, 4, 2), "bias": torch.randn(n), "output_dtype": bf16, **mx}))
    # MX float4_e2m1 pairs (x1_dtype = x2_dtype = 296): x1 (m, k / 2); x2 (k, n / 2) or the
    # transpose view (k / 2, n); k = 256
    fp4 = dict(mx, x1_dtype=296, x2_dtype=296)
    for out in (fp16, bf16, torch.float32):
        cases.append(("npu_quant_matmul", (_fp4(m, 128), _fp4(n, 128).t(), _e8m0(4, n, 2)),
                      {"pertoken_scale": _e8m0(m, 4, 2), "output_dtype": out, **fp4}))
        cases.append(("npu_quant_matmul", (_fp4(2, m, 128), _fp4(256, n // 2), _e8m0(2, 4, n, 2)),
                      {"pertoken_scale": _e8m0(2, m, 4, 2), "bias": torch.randn(n), "output_dtype": out,
                       **fp4}))
    return cases


def _fp4(*shape):
    """float4_e2m1 pairs: random bytes (every code is a number)."""
    return torch.randint(0, 256, shape, dtype=torch.uint8)


def _e8m0(*shape):
    """E8M0 codes 120 - 134 (scales 2^-7 .. 2^7) in uint8."""
    return torch.randint(120, 135, shape, dtype=torch.uint8)


E4M3, E5M2, f32 = torch.float8_e4m3fn, torch.float8_e5m2, torch.float32
F8 = (T(4, 8, dtype=E4M3), T(8, 6, dtype=E5M2), T(6))
HIF8_ARGS = (T(4, 8, dtype=torch.uint8), T(8, 6, dtype=torch.uint8), T(6))
HIF8 = {"x1_dtype": 290, "x2_dtype": 290}

# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("qmm/x1-dtype", "npu_quant_matmul", (T(4, 8), T(8, 6, dtype=i8), T(6)), {}, "x1", NotImplementedError),
    ("qmm/group-sizes", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"group_sizes": [1, 1, 1]}, "group_sizes", NotImplementedError),
    ("qmm/y-scale", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"y_scale": T(6)}, "y_scale", NotImplementedError),
    ("qmm/k", "npu_quant_matmul", (T(4, 8, dtype=i8), T(7, 6, dtype=i8), T(6)), {}, "x2", RuntimeError),
    ("qmm/scale-shape", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(5)), {}, "scale",
     RuntimeError),
    ("qmm/pertoken-shape", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"pertoken_scale": T(3), "output_dtype": torch.float16}, "pertoken_scale", RuntimeError),
    ("qmm/pertoken-int8-out", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"pertoken_scale": T(4)}, "pertoken_scale", NotImplementedError),
    ("qmm/output-dtype", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"output_dtype": torch.float32}, "output_dtype", RuntimeError),
    # a bfloat16 scale takes bfloat16 / int32 outputs (torch_npu's Meta, CANN's checker)
    ("qmm/scale-bf16-int8-output", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6, dtype=bf16)),
     {}, "output_dtype", RuntimeError),
    ("qmm/scale-bf16-fp16-output", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6, dtype=bf16)),
     {"output_dtype": fp16, "pertoken_scale": T(4)}, "output_dtype", RuntimeError),
    ("qmm/float-bias-no-pertoken", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"bias": T(6, dtype=bf16), "output_dtype": torch.bfloat16}, "bias", NotImplementedError),
    ("qmm/3d-bias-2d-output", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"bias": T(1, 1, 6, dtype=torch.int32)}, "bias", RuntimeError),
    ("qmm/3d-bias-batch", "npu_quant_matmul", (T(2, 4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"bias": T(3, 1, 6, dtype=torch.int32)}, "bias", RuntimeError),
    ("qmm/3d-bias-middle-dim", "npu_quant_matmul", (T(2, 4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"bias": T(2, 4, 6, dtype=torch.int32)}, "bias", RuntimeError),
    ("qmm/3d-bias-4d-output", "npu_quant_matmul", (T(2, 2, 4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"bias": T(2, 1, 6, dtype=torch.int32)}, "bias", RuntimeError),
    ("qmm/2d-bias", "npu_quant_matmul", (T(2, 4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"bias": T(1, 6, dtype=torch.int32)}, "bias", RuntimeError),
    # float8 / HiFloat8 inputs
    ("qmm/f8-output-int8", "npu_quant_matmul", F8, {}, "output_dtype", RuntimeError),
    ("qmm/f8-output-int32", "npu_quant_matmul", F8, {"output_dtype": torch.int32}, "output_dtype", RuntimeError),
    ("qmm/f8-x2-int8", "npu_quant_matmul", (T(4, 8, dtype=E4M3), T(8, 6, dtype=i8), T(6)),
     {"output_dtype": f32}, "x2", NotImplementedError),
    ("qmm/f8-x1-dtype", "npu_quant_matmul", F8, {"x1_dtype": 296, "output_dtype": f32}, "x1_dtype",
     NotImplementedError),
    ("qmm/f8-offset", "npu_quant_matmul", F8, {"offset": T(6), "output_dtype": f32}, "offset",
     NotImplementedError),
    ("qmm/f8-bias-bf16", "npu_quant_matmul", F8, {"bias": T(6, dtype=bf16), "output_dtype": f32}, "bias",
     RuntimeError),
    ("qmm/f8-bias-shape", "npu_quant_matmul", F8, {"bias": T(5), "output_dtype": f32}, "bias", RuntimeError),
    ("qmm/f8-mx-scale", "npu_quant_matmul", F8, {"scale_dtype": 293, "output_dtype": f32},
     "pertoken_scale_dtype", RuntimeError),
    ("qmm/f8-group-sizes", "npu_quant_matmul", F8, {"group_sizes": [1, 1, 32], "output_dtype": f32},
     "group_sizes", NotImplementedError),
    ("qmm/f8-scale-bf16", "npu_quant_matmul", (T(4, 8, dtype=E4M3), T(8, 6, dtype=E5M2), T(6, dtype=bf16)),
     {"output_dtype": bf16}, "scale", RuntimeError),
    ("qmm/f8-scale-shape", "npu_quant_matmul", (T(4, 8, dtype=E4M3), T(8, 6, dtype=E5M2), T(5)),
     {"output_dtype": f32}, "scale", RuntimeError),
    ("qmm/f8-pertoken-shape", "npu_quant_matmul", F8, {"pertoken_scale": T(3), "output_dtype": f32},
     "pertoken_scale", RuntimeError),
    ("qmm/f8-k", "npu_quant_matmul", (T(4, 8, dtype=E4M3), T(7, 6, dtype=E5M2), T(6)),
     {"output_dtype": f32}, "x2", RuntimeError),
    ("qmm/hif8-storage", "npu_quant_matmul", (T(4, 8, dtype=torch.int16), T(8, 6, dtype=torch.uint8), T(6)),
     {**HIF8, "output_dtype": f32}, "x1", RuntimeError),
    ("qmm/hif8-float8-storage", "npu_quant_matmul", (T(4, 8, dtype=E4M3), T(8, 6, dtype=torch.uint8), T(6)),
     {**HIF8, "output_dtype": f32}, "x1", RuntimeError),
    ("qmm/hif8-output", "npu_quant_matmul", HIF8_ARGS, {**HIF8, "output_dtype": 290}, "output_dtype",
     NotImplementedError),
] + [
    # float8 / HiFloat8 inputs with an int64 scale (the static form); each entry breaks one
    # rule of an otherwise valid call (x1 (4, 8) e4m3 or HiFloat8, n = 6, float32 bias)
    (f"qmm/f8-static/{cid}", "npu_quant_matmul",
     (change.pop("x1", T(4, 8, dtype=E4M3)), change.pop("x2", T(8, 6, dtype=E5M2)),
      change.pop("scale", T(6, dtype=torch.int64))),
     {"bias": T(6), "output_dtype": f32, **change}, arg, exc)
    for cid, change, arg, exc in [
        ("scale-shape", {"scale": T(5, dtype=torch.int64)}, "scale", RuntimeError),
        ("scale-2d", {"scale": T(1, 6, dtype=torch.int64)}, "scale", NotImplementedError),
        ("pertoken", {"pertoken_scale": T(4)}, "pertoken_scale", RuntimeError),
        ("pertoken-uint64", {"scale": T(6, dtype=torch.uint64), "pertoken_scale": T(4)},
         "pertoken_scale", RuntimeError),
        ("bias-bf16", {"bias": T(6, dtype=bf16), "output_dtype": bf16}, "bias", RuntimeError),
        ("bias-fp16", {"bias": T(6, dtype=fp16), "output_dtype": fp16}, "bias", RuntimeError),
        ("bias-int32", {"bias": T(6, dtype=i32)}, "bias", RuntimeError),
        ("bias-shape", {"bias": T(5)}, "bias", RuntimeError),
        ("bias-1-n", {"bias": T(1, 6)}, "bias", RuntimeError),
        ("bias-3d-2d-output", {"bias": T(1, 1, 6)}, "bias", RuntimeError),
        ("bias-3d-batch", {"x1": T(2, 4, 8, dtype=E4M3), "bias": T(3, 1, 6)}, "bias", RuntimeError),
        ("bias-3d-4d-output", {"x1": T(2, 2, 4, 8, dtype=E4M3), "bias": T(2, 1, 6)}, "bias", RuntimeError),
        ("output-int8", {"output_dtype": None}, "output_dtype", RuntimeError),
        ("output-int32", {"output_dtype": torch.int32}, "output_dtype", RuntimeError),
        ("output-e4m3", {"output_dtype": E4M3}, "output_dtype", NotImplementedError),
        ("output-292", {"output_dtype": 292}, "output_dtype", NotImplementedError),
        ("output-hif8", {"x1": T(4, 8, dtype=torch.uint8), "x2": T(8, 6, dtype=torch.uint8),
                         **HIF8, "output_dtype": 290}, "output_dtype", NotImplementedError),
        ("hif8-bias-bf16", {"x1": T(4, 8, dtype=torch.uint8), "x2": T(8, 6, dtype=torch.uint8),
                            **HIF8, "bias": T(6, dtype=bf16), "output_dtype": bf16}, "bias", RuntimeError),
        ("offset", {"offset": T(6)}, "offset", NotImplementedError),
        ("x2-int8", {"x2": T(8, 6, dtype=i8)}, "x2", NotImplementedError),
    ]
] + [
    # int8 inputs with an int64 scale (npu_trans_quant_param's packed value); each entry
    # breaks one rule of an otherwise valid call (x1 (4, 8), n = 6, int32 bias, float16 output)
    (f"qmm/i8-int64/{cid}", "npu_quant_matmul",
     (change.pop("x1", T(4, 8, dtype=i8)), T(8, 6, dtype=i8),
      change.pop("scale", T(6, dtype=torch.int64))),
     {"bias": T(6, dtype=i32), "output_dtype": torch.float16, **change}, arg, exc)
    for cid, change, arg, exc in [
        ("scale-shape", {"scale": T(5, dtype=torch.int64)}, "scale", RuntimeError),
        ("scale-2d", {"scale": T(1, 6, dtype=torch.int64)}, "scale", RuntimeError),
        ("scale-int32", {"scale": T(6, dtype=i32)}, "scale", RuntimeError),
        ("output-int32", {"output_dtype": torch.int32}, "output_dtype", RuntimeError),
        ("output-int32-uint64", {"scale": T(6, dtype=torch.uint64), "output_dtype": torch.int32},
         "output_dtype", RuntimeError),
        ("pertoken", {"pertoken_scale": T(4)}, "pertoken_scale", NotImplementedError),
        ("offset-shape", {"offset": T(5), "output_dtype": None}, "offset", RuntimeError),
        ("offset-dtype", {"offset": T(6, dtype=fp16), "output_dtype": None}, "offset",
         RuntimeError),
        ("offset-float16-output", {"offset": T(6)}, "offset", NotImplementedError),
        ("bias-float32", {"bias": T(6)}, "bias", NotImplementedError),
        ("bias-bf16", {"bias": T(6, dtype=bf16), "output_dtype": torch.bfloat16}, "bias",
         NotImplementedError),
        ("bias-int64", {"bias": T(6, dtype=torch.int64)}, "bias", RuntimeError),
        ("bias-3d-2d-output", {"bias": T(1, 1, 6, dtype=i32)}, "bias", RuntimeError),
        ("x1-4d-bias-3d", {"x1": T(2, 2, 4, 8, dtype=i8), "bias": T(2, 1, 6, dtype=i32)}, "bias",
         RuntimeError),
    ]
] + [
    # per-block scales (G-B / B-B); each entry breaks one rule of an otherwise valid call: x1
    # (4, 300) e4m3, x2 (300, 260) e5m2, G-B scales, float32 output
    (f"qmm/per-block/{cid}", "npu_quant_matmul",
     (change.pop("x1", T(4, 300, dtype=E4M3)), change.pop("x2", T(300, 260, dtype=E5M2)),
      change.pop("scale", T(3, 3))),
     {"pertoken_scale": T(4, 3), "output_dtype": f32, "group_sizes": [1, 128, 128], **change}, arg, exc)
    for cid, change, arg, exc in [
        ("group-sizes", {"group_sizes": [1, 64, 128]}, "group_sizes", RuntimeError),
        ("group-sizes-length", {"group_sizes": [128, 128]}, "group_sizes", RuntimeError),
        ("group-sizes-inferred", {"group_sizes": None}, "group_sizes", RuntimeError),  # 300 / 3
        ("int8-b-b", {"x1": T(4, 300, dtype=i8), "x2": T(300, 260, dtype=i8), "pertoken_scale": T(1, 3),
                      "group_sizes": [128, 128, 128], "output_dtype": bf16}, "group_sizes", RuntimeError),
        ("int8-output-fp16", {"x1": T(4, 300, dtype=i8), "x2": T(300, 260, dtype=i8),
                              "output_dtype": fp16}, "output_dtype", RuntimeError),
        ("int8-bias-fp16", {"x1": T(4, 300, dtype=i8), "x2": T(300, 260, dtype=i8), "output_dtype": bf16,
                            "bias": T(260, dtype=fp16)}, "bias", RuntimeError),
        ("f8-bias", {"bias": T(260)}, "bias", RuntimeError),
        ("f8-output-int8", {"output_dtype": None}, "output_dtype", RuntimeError),
        ("k-groups", {"pertoken_scale": T(4, 2)}, "pertoken_scale", RuntimeError),
        ("pertoken-m", {"pertoken_scale": T(3, 3)}, "pertoken_scale", RuntimeError),
        ("pertoken-dtype", {"pertoken_scale": T(4, 3, dtype=bf16)}, "pertoken_scale", RuntimeError),
        ("scale-n", {"scale": T(3, 2)}, "scale", RuntimeError),
        ("scale-dtype", {"scale": T(3, 3, dtype=torch.int64)}, "scale", RuntimeError),
        ("scale-batch", {"scale": T(2, 3, 3)}, "scale", RuntimeError),
        ("offset", {"offset": T(260)}, "offset", NotImplementedError),
        ("scale-dtype-arg", {"scale_dtype": 293}, "pertoken_scale_dtype", RuntimeError),
        ("x2-int8", {"x2": T(300, 260, dtype=i8)}, "x2", NotImplementedError),
    ]
] + [
    # MX scales; each entry breaks one rule of an otherwise valid call: x1 (4, 200) e4m3, x2
    # (200, 24) e5m2, E8M0 scales (4, 4, 2) / (4, 24, 2), float32 output
    (f"qmm/mx/{cid}", "npu_quant_matmul",
     (change.pop("x1", T(4, 200, dtype=E4M3)), change.pop("x2", T(200, 24, dtype=E5M2)),
      change.pop("scale", T(4, 24, 2, dtype=torch.uint8))),
     {"pertoken_scale": T(4, 4, 2, dtype=torch.uint8), "scale_dtype": 293, "pertoken_scale_dtype": 293,
      "group_sizes": [1, 1, 32], "output_dtype": f32, **change}, arg, exc)
    for cid, change, arg, exc in [
        ("pertoken-dtype-arg", {"pertoken_scale_dtype": None}, "pertoken_scale_dtype", RuntimeError),
        ("scale-dtype-arg", {"scale_dtype": 5}, "scale_dtype", RuntimeError),
        ("scale-2d", {"scale": T(24, 7, dtype=torch.uint8)}, "scale", RuntimeError),
        ("scale-n", {"scale": T(4, 23, 2, dtype=torch.uint8)}, "scale", RuntimeError),
        ("scale-float", {"scale": T(4, 24, 2)}, "scale", RuntimeError),
        ("pertoken-none", {"pertoken_scale": None}, "pertoken_scale", RuntimeError),
        ("pertoken-k", {"pertoken_scale": T(4, 3, 2, dtype=torch.uint8)}, "pertoken_scale", RuntimeError),
        ("pertoken-batch", {"pertoken_scale": T(3, 4, 4, 2, dtype=torch.uint8)}, "pertoken_scale", RuntimeError),
        ("group-sizes", {"group_sizes": [1, 1, 64]}, "group_sizes", RuntimeError),
        ("group-sizes-inferred", {"group_sizes": None}, "group_sizes", RuntimeError),  # 200 / 8
        ("bias-bf16", {"bias": T(24, dtype=bf16)}, "bias", RuntimeError),
        ("bias-shape", {"bias": T(23)}, "bias", RuntimeError),
        ("output-int8", {"output_dtype": None}, "output_dtype", RuntimeError),
        ("offset", {"offset": T(24)}, "offset", NotImplementedError),
        ("int8-inputs", {"x1": T(4, 200, dtype=i8), "x2": T(200, 24, dtype=i8)}, "x1", NotImplementedError),
        ("hif8-inputs", {"x1": T(4, 200, dtype=torch.uint8), "x2": T(200, 24, dtype=torch.uint8),
                         "x1_dtype": 290, "x2_dtype": 290}, "x1", NotImplementedError),
        # float4_e2m1 pairs: x1 (4, 100) holds k = 200; x2 (k, n / 2) or the transpose view
        ("float4-x2-k", {"x1": T(4, 100, dtype=torch.uint8), "x2": T(100, 12, dtype=torch.uint8),
                         "x1_dtype": 296, "x2_dtype": 296}, "x2", RuntimeError),
        ("float4-x1-float", {"x1": T(4, 100), "x2": T(200, 12, dtype=torch.uint8),
                             "x1_dtype": 296, "x2_dtype": 296}, "x1", RuntimeError),
        ("float4-k-2", {"x1": T(4, 1, dtype=torch.uint8), "x2": T(2, 12, dtype=torch.uint8),
                        "pertoken_scale": T(4, 1, 2, dtype=torch.uint8), "scale": T(1, 24, 2, dtype=torch.uint8),
                        "x1_dtype": 296, "x2_dtype": 296}, "x1", RuntimeError),
    ]
] + [
    # per-group A4W4 (int32 x1 and x2, a 2-D scale): k = 520 (3 groups, the last of 8 rows),
    # n = 24; each entry breaks one rule of an otherwise valid call
    (f"qmm/a4w4-group/{cid}", "npu_quant_matmul",
     (change.pop("x1", T(4, 65, dtype=i32)), change.pop("x2", T(520, 3, dtype=i32)),
      change.pop("scale", T(3, 24))),
     {"offset": T(3, 24, dtype=fp16), "pertoken_scale": T(4, 1), "output_dtype": fp16,
      "group_sizes": [1, 1, 256], **change}, arg, exc)
    for cid, change, arg, exc in [
        ("x1-3d", {"x1": T(2, 4, 65, dtype=i32)}, "x1", RuntimeError),
        ("x2-k", {"x2": T(512, 3, dtype=i32)}, "x2", RuntimeError),
        ("group-sizes-none", {"group_sizes": None}, "group_sizes", RuntimeError),
        ("group-sizes-k", {"group_sizes": [1, 1, 128]}, "group_sizes", RuntimeError),
        ("group-sizes-m", {"group_sizes": [2, 1, 256]}, "group_sizes", RuntimeError),
        ("scale-rows", {"scale": T(2, 24)}, "scale", RuntimeError),
        ("scale-dtype", {"scale": T(3, 24, dtype=bf16)}, "scale", RuntimeError),
        ("offset-none", {"offset": None}, "offset", RuntimeError),
        ("offset-dtype", {"offset": T(3, 24)}, "offset", RuntimeError),
        ("offset-shape", {"offset": T(24, dtype=fp16)}, "offset", RuntimeError),
        ("pertoken-none", {"pertoken_scale": None}, "pertoken_scale", RuntimeError),
        ("pertoken-1d", {"pertoken_scale": T(4)}, "pertoken_scale", RuntimeError),
        ("bias", {"bias": T(24, dtype=i32)}, "bias", RuntimeError),
        ("output-dtype-int8", {"output_dtype": None}, "output_dtype", RuntimeError),
        ("output-dtype-int32", {"output_dtype": torch.int32}, "output_dtype", RuntimeError),
        ("x1-dtype", {"x1_dtype": 290}, "x1_dtype", NotImplementedError),
        ("y-scale", {"y_scale": T(1, 24, dtype=torch.int64)}, "y_scale", NotImplementedError),
    ]
]


# ---- the native kernel against the reference ------------------------------------------

def _qmm_epilogues(m, n):
    pt = torch.rand(m) + 0.5
    return {
        "int8": {},
        "int8-offset": {"offset": torch.randn(n) * 3},
        "int8-offset1": {"offset": torch.tensor([2.5])},
        # offsets beyond the s9 range [-256, 255], halves, NaN
        "int8-offset-wide": {"offset": torch.cat([torch.tensor([-300.0, 400.0, 0.5, -1.5,
                                                                float("nan")]),
                                                  torch.randn(n) * 200])[:n]},
        "int32": {"output_dtype": torch.int32},
        # values near the int32 limit: the bias add wraps like torch's int32 add
        "int32-bias": {"output_dtype": torch.int32,
                       "bias": torch.randint(2**31 - 3000, 2**31 - 1, (n,), dtype=torch.int32)},
        "int8-int-bias": {"bias": torch.randint(-5000, 5000, (n,), dtype=torch.int32)},
        "bf16-pertoken": {"pertoken_scale": pt, "output_dtype": torch.bfloat16},
        "fp16-pertoken-fp32-bias": {"pertoken_scale": pt, "output_dtype": torch.float16,
                                    "bias": torch.randn(n)},
        "bf16-pertoken-bf16-bias": {"pertoken_scale": pt, "output_dtype": torch.bfloat16,
                                    "bias": torch.randn(n).to(bf16)},
        "fp16-pertoken-fp16-bias": {"pertoken_scale": pt, "output_dtype": torch.float16,
                                    "bias": torch.randn(n).to(fp16)},
        "fp16-no-pertoken": {"output_dtype": torch.float16},
    }


def _qmm_check(x1, x2, scale, **kw):
    out = npu.npu_quant_matmul(x1, x2, scale, **kw)
    ref = quant_matmul_reference(x1, x2, scale, **kw)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    assert torch.equal(out, ref), f"max diff {(out.double() - ref.double()).abs().max()}"


# m = 1..3 take the VNNI kernel on CPUs that have it, 4..32 the AMX kernel, larger m
# ATen's int8 GEMM; k covers whole 64-byte steps, tails, k < 64 and k = 0; n covers the
# 4-row groups / 16-column tiles and their tails.
@pytest.mark.parametrize("m,k,n", [(1, 96, 40), (1, 1, 5), (2, 64, 4), (3, 77, 45),
                                   (4, 7168, 9), (7, 130, 33), (8, 200, 70), (9, 64, 16),
                                   (17, 100, 31), (32, 65, 17), (40, 100, 31), (64, 64, 48),
                                   (2, 0, 3)])
@pytest.mark.parametrize("layout", ["nk", "kn"])
def test_quant_matmul(m, k, n, layout):
    x1 = rand_i8(m, k)
    # "nk": the (k, n) view of an (n, k) row-major weight (w.t()), "kn": row-major (k, n)
    x2 = rand_i8(n, k).t() if layout == "nk" else rand_i8(k, n)
    scale = torch.rand(n) * 1e-3
    for name, kw in _qmm_epilogues(m, n).items():
        # a bfloat16 scale takes bfloat16 / int32 outputs only
        bf = (scale.to(bf16),) if kw.get("output_dtype") in (bf16, torch.int32) else ()
        for s in (scale, scale[:1], *bf):
            _qmm_check(x1, x2, s, **kw)


def test_quant_matmul_non_contiguous_batched_and_empty():
    # rows of x1 with a stride, a weight whose rows are a slice of wider ones
    x1 = rand_i8(5, 300)[:, ::3]
    wide = rand_i8(24, 160)
    _qmm_check(x1, wide[:, 20:120].t(), torch.rand(24) * 1e-2)
    _qmm_check(rand_i8(100, 6).t(), wide[:, :100].t(), torch.rand(24) * 1e-2)  # column-major x1
    pt = torch.rand(4)
    # broadcast batch dims on either side
    _qmm_check(rand_i8(2, 3, 4, 40), rand_i8(3, 24, 40).transpose(1, 2), torch.rand(24) * 1e-2,
               pertoken_scale=pt, output_dtype=bf16)
    _qmm_check(rand_i8(4, 40), rand_i8(2, 40, 24), torch.rand(24) * 1e-2, output_dtype=torch.int32)
    _qmm_check(rand_i8(3, 1, 4, 40), rand_i8(5, 40, 24), torch.rand(1), offset=torch.randn(24))
    # empty m / n / batch
    for x1, x2, n in [(rand_i8(0, 32), rand_i8(32, 8), 8), (rand_i8(4, 32), rand_i8(32, 0), 0),
                      (rand_i8(0, 4, 32), rand_i8(32, 8), 8)]:
        out = npu.npu_quant_matmul(x1, x2, torch.ones(max(n, 1)), output_dtype=torch.int32)
        assert out.shape == (*x1.shape[:-1], n) and out.dtype == torch.int32


def test_quant_matmul_saturates_and_rounds_half_to_even():
    # 1 x 1 products whose dequantised values sit on .5 and beyond the int8 range
    x1 = torch.tensor([[1], [3], [-5], [100], [-100]], dtype=torch.int8)
    x2 = torch.tensor([[1, 127]], dtype=torch.int8)
    out = npu.npu_quant_matmul(x1, x2, torch.tensor([0.5, 1.0]))
    assert out[:, 0].tolist() == [0, 2, -2, 50, -50]
    assert out[:, 1].tolist() == [127, 127, -128, 127, -128]
    _qmm_check(x1, x2, torch.tensor([0.5, 1.0]))


# ---- semantics on hand-built cases ----------------------------------------------------------

def test_quant_matmul_formulas():
    torch.manual_seed(8)
    a = torch.randint(-128, 128, (6, 40), dtype=torch.int8)
    b = torch.randint(-128, 128, (40, 10), dtype=torch.int8)
    acc = a.long() @ b.long()
    scale = torch.rand(10) / 1000
    out = npu.npu_quant_matmul(a, b, scale)
    assert out.dtype == torch.int8
    # rint(acc * scale) in fp32: within one step of the fp64 value
    assert (out.double() - torch.round(acc.double() * scale.double()).clamp(-128, 127)).abs().max() <= 1
    bias = torch.randint(-500, 500, (10,), dtype=torch.int32)
    raw = npu.npu_quant_matmul(a, b, scale, bias=bias, output_dtype=torch.int32)
    assert torch.equal(raw.long(), acc + bias)
    pt = torch.rand(6)
    fb = torch.randn(10, dtype=bf16)
    o16 = npu.npu_quant_matmul(a, b, scale, pertoken_scale=pt, bias=fb, output_dtype=torch.bfloat16)
    ref = acc.double() * scale.double() * pt.double()[:, None] + fb.double()
    torch.testing.assert_close(o16.double(), ref.to(bf16).double(), rtol=1e-2, atol=1e-2)
    o8 = npu.npu_quant_matmul(a, b, scale, offset=torch.full((10,), 3.0))
    expect8 = torch.round(acc.double() * scale.double() + 3).clamp(-128, 127)
    assert (o8.double() - expect8).abs().max() <= 1


# ---- int4 weights (the documented contract beyond A2 / A3) ------------------------------------

def _int4(*shape):
    return torch.randint(-8, 8, shape, dtype=torch.int8)


@pytest.mark.parametrize("m,k,n", [(1, 64, 24), (5, 128, 40), (33, 64, 16)])
@pytest.mark.parametrize("continuous", [False, True])
@pytest.mark.parametrize("epilogue", ["fp16", "pertoken-bf16", "pertoken-fp16-bias"])
def test_quant_matmul_a4w4(m, k, n, continuous, epilogue):
    torch.manual_seed(0)
    q1, q2 = _int4(m, k), _int4(k, n)
    x1 = pack_int4(q1)
    # (k, n/8) packed along n, or the transpose view of an (n, k/8) tensor packed along k
    x2 = pack_int4(q2.t().contiguous()).t() if continuous else pack_int4(q2)
    scale = torch.rand(n) / 50
    kw = {"output_dtype": torch.float16}
    if epilogue != "fp16":
        kw = {"pertoken_scale": torch.rand(m), "output_dtype": bf16 if "bf16" in epilogue else fp16}
    if "bias" in epilogue:
        kw["bias"] = torch.randn(n, dtype=fp16)
    out = npu.npu_quant_matmul(x1, x2, scale, **kw)
    ref = quant_matmul_reference(x1, x2, scale, **kw)
    assert out.shape == (m, n) and out.dtype == kw["output_dtype"]
    assert torch.equal(out, ref)
    int8 = quant_matmul_reference(q1, q2, scale, **kw)  # the same product on the int8 values
    assert torch.equal(out, int8)


def test_quant_matmul_a4w4_rules():
    x1, x2 = pack_int4(_int4(4, 64)), pack_int4(_int4(64, 16))
    with pytest.raises(RuntimeError, match="npu_quant_matmul: argument 'output_dtype' must be float16"):
        npu.npu_quant_matmul(x1, x2, torch.rand(16))
    with pytest.raises(RuntimeError, match="npu_quant_matmul: argument 'x2'"):
        npu.npu_quant_matmul(x1, pack_int4(_int4(32, 16)), torch.rand(16), output_dtype=fp16)
    with pytest.raises(RuntimeError, match="npu_quant_matmul: argument 'x2'"):
        npu.npu_quant_matmul(x1, x2.unsqueeze(0), torch.rand(16), output_dtype=fp16)


@pytest.mark.parametrize("m", [1, 7, 40])
@pytest.mark.parametrize("packed_scale", [True, False])
@pytest.mark.parametrize("out", [fp16, bf16])
def test_quant_matmul_a8w4_per_group(m, packed_scale, out):
    torch.manual_seed(0)
    k, n = 512, 24
    x1, q2 = torch.randint(-128, 128, (m, k), dtype=torch.int8), _int4(k, n)
    s32 = torch.rand(k // 256, n) / 100
    scale = pack_quant_scale(s32) if packed_scale else s32
    pt, off = torch.rand(m, 1), torch.randn(n)
    got = npu.npu_quant_matmul(x1, pack_int4(q2), scale, pertoken_scale=pt, offset=off,
                               output_dtype=out)
    ref = quant_matmul_reference(x1, pack_int4(q2), scale, pertoken_scale=pt, offset=off,
                                 output_dtype=out)
    assert got.shape == (m, n) and got.dtype == out
    assert torch.equal(got, ref)
    s = unpack_quant_scale(scale)
    # the NPU's convention: x1 - 8 (the documented y offset 8 * sum_k x2 * scale cancels it)
    expect = sum(((x1[:, g * 256:(g + 1) * 256].double() - 8) @ q2[g * 256:(g + 1) * 256].double())
                 * s[g] for g in range(k // 256))
    torch.testing.assert_close(got.double(), ((expect + off) * pt).to(out).double())


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_quant_matmul_a8w4_rules(device):
    x1 = torch.zeros(4, 512, dtype=torch.int8, device=device)
    x2 = torch.zeros(512, 3, dtype=torch.int32, device=device)
    s, pt = torch.ones(2, 24, device=device), torch.ones(4, 1, device=device)
    cases = [
        ({"scale": torch.ones(24, device=device)}, "scale"),
        ({"pertoken_scale": None}, "pertoken_scale"),
        ({"pertoken_scale": torch.ones(4, device=device)}, "pertoken_scale"),
        ({"output_dtype": None}, "output_dtype"),
        ({"offset": torch.ones(3, device=device)}, "offset"),
        ({"group_sizes": [0, 0, 128]}, "group_sizes"),
    ]
    for change, arg in cases:
        kw = {"scale": s, "pertoken_scale": pt, "output_dtype": fp16}
        kw.update(change)
        scale = kw.pop("scale")
        with pytest.raises(RuntimeError, match=f"npu_quant_matmul: argument '{arg}'"):
            npu.npu_quant_matmul(x1, x2, scale, **kw)
    with pytest.raises(RuntimeError, match="argument 'x1'"):
        npu.npu_quant_matmul(x1[:, :384], x2[:384], s[:1], pertoken_scale=pt, output_dtype=fp16)
    with pytest.raises(NotImplementedError, match="argument 'bias'"):
        npu.npu_quant_matmul(x1, x2, s, pertoken_scale=pt, output_dtype=fp16,
                             bias=torch.zeros(24, dtype=torch.int32, device=device))


# ---- per-group A4W4: int4 x1 and x2, a (ceil(k/256), n) scale and float16 zero points ----------

def _a4w4_group_call(m, k, n, continuous, integral=True, seed=0):
    """(int4 values of x1 and x2, the packed x1 / x2 and the per-group arguments) of a per-group
    A4W4 call; zero points integral (upstream's asymmetric quantization) or not."""
    torch.manual_seed(seed)
    q1, q2 = _int4(m, k), _int4(k, n)
    x1 = pack_int4(q1)
    x2 = pack_int4(q2.t().contiguous()).t() if continuous else pack_int4(q2)
    groups = -(-k // 256)
    off = torch.randint(-7, 8, (groups, n)).to(fp16)
    if not integral:
        off = off + torch.randn(groups, n).to(fp16)
    kw = {"offset": off, "pertoken_scale": torch.rand(m, 1) + 0.5, "group_sizes": [1, 1, 256]}
    return q1, q2, x1, x2, torch.rand(groups, n) / 50, kw


# m = 1 and 3 take the VNNI kernel (where the CPU has it), 17 the AMX kernel, 40 ATen's int8
# GEMM; k = 256 is one group, 1024 four, 520 three (the last 8 rows long); odd n where the
# layout allows it (the transposed x2 holds n unpacked)
@pytest.mark.parametrize("m,k,n", [(1, 256, 24), (3, 1024, 33), (17, 520, 16), (40, 768, 9)])
@pytest.mark.parametrize("continuous", [False, True])
@pytest.mark.parametrize("out", [fp16, bf16])
def test_quant_matmul_a4w4_per_group(m, k, n, continuous, out):
    if not continuous and n % 8:
        n = 8 * (n // 8 + 1)  # packed along n: a multiple of 8
    q1, q2, x1, x2, scale, kw = _a4w4_group_call(m, k, n, continuous)
    got = npu.npu_quant_matmul(x1, x2, scale, output_dtype=out, **kw)
    ref = quant_matmul_reference(x1, x2, scale, output_dtype=out, **kw)
    assert got.shape == (m, n) and got.dtype == out
    assert torch.equal(got, ref)
    # the formula on the int4 values: per group an int32 product with the zero point taken
    # off the weight, scaled and summed in fp32 in group order, then the per-token scale
    acc = torch.zeros(m, n)
    for g in range(scale.shape[0]):
        r = slice(g * 256, (g + 1) * 256)
        w = q2[r].long() - kw["offset"][g].long()
        acc = acc + (q1[:, r].long() @ w).float() * scale[g]
    assert torch.equal(got, (acc * kw["pertoken_scale"]).to(out))
    # [0, 0, 256]: the sizes in m and n taken from the shapes (1 each), the same call
    same = npu.npu_quant_matmul(x1, x2, scale, output_dtype=out, **dict(kw, group_sizes=[0, 0, 256]))
    assert torch.equal(same, got)


@pytest.mark.parametrize("continuous", [False, True])
def test_quant_matmul_a4w4_per_group_fractional_zero_points(continuous):
    """Zero points need not be integers: each group's value x1 @ (x2 - offset) is exact (fp64)
    before its one rounding to fp32, in the kernel and the reference alike."""
    m, k, n = 6, 1024, 40
    q1, q2, x1, x2, scale, kw = _a4w4_group_call(m, k, n, continuous, integral=False, seed=3)
    for out in (fp16, bf16):
        got = npu.npu_quant_matmul(x1, x2, scale, output_dtype=out, **kw)
        assert torch.equal(got, quant_matmul_reference(x1, x2, scale, output_dtype=out, **kw))
        exact = sum((q1[:, g * 256:(g + 1) * 256].double()
                     @ (q2[g * 256:(g + 1) * 256].double() - kw["offset"][g].double()))
                    * scale[g].double() for g in range(4)) * kw["pertoken_scale"].double()
        torch.testing.assert_close(got.double(), exact.to(out).double(), rtol=1e-2, atol=1e-2)


def test_quant_matmul_a4w4_per_group_non_contiguous_and_fake():
    from torch._subclasses.fake_tensor import FakeTensorMode

    m, k, n = 5, 512, 24
    q1, q2, x1, x2, scale, kw = _a4w4_group_call(m, k, n, True, seed=1)
    want = npu.npu_quant_matmul(x1, x2, scale, output_dtype=bf16, **kw)
    # every tensor argument a strided view with the same values; x1 rows taken with a step
    wide = torch.zeros(2 * m, k // 8, dtype=i32)
    wide[::2] = x1
    kws = dict(kw, offset=strided(kw["offset"]), pertoken_scale=strided(kw["pertoken_scale"]))
    for a in (wide[::2], strided(x1)):
        got = npu.npu_quant_matmul(a, x2, strided(scale), output_dtype=bf16, **kws)
        assert torch.equal(got, want)
        assert torch.equal(quant_matmul_reference(a, x2, strided(scale), output_dtype=bf16, **kws),
                           want)
    # the (k, n/8) layout of the same weight gives the same result
    flat = npu.npu_quant_matmul(x1, pack_int4(q2), scale, output_dtype=bf16, **kw)
    assert torch.equal(flat, want)
    with FakeTensorMode():
        out = npu.npu_quant_matmul(torch.empty(m, k // 8, dtype=i32),
                                   torch.empty(n, k // 8, dtype=i32).t(), torch.empty(2, n),
                                   offset=torch.empty(2, n, dtype=fp16),
                                   pertoken_scale=torch.empty(m, 1), output_dtype=fp16,
                                   group_sizes=[0, 0, 256])
        assert out.shape == (m, n) and out.dtype == fp16
    torch.library.opcheck(npu.npu_quant_matmul.default, (x1, x2, scale),
                          dict(kw, output_dtype=fp16))


# ---- a (batch, 1, n) bias (torch_npu's documented form for a 3-D output) ------------------------

@pytest.mark.parametrize("epilogue", ["int32", "int8", "int8-offset", "fp16-pertoken-fp32-bias",
                                      "bf16-pertoken-bf16-bias", "fp16-pertoken-fp16-bias"])
@pytest.mark.parametrize("x2_batched", [False, True])
def test_quant_matmul_batched_bias(epilogue, x2_batched):
    torch.manual_seed(0)
    b, m, k, n = 3, 5, 40, 17  # odd sizes
    x1 = rand_i8(b, m, k)
    x2 = rand_i8(b, k, n) if x2_batched else rand_i8(k, n).t().contiguous().t()  # strided x2
    scale = torch.rand(n) / 100
    kw = {}
    if epilogue == "int32":
        kw = {"output_dtype": torch.int32}
    elif epilogue == "int8-offset":
        kw = {"offset": torch.randn(n)}
    elif epilogue != "int8":
        out = fp16 if epilogue.startswith("fp16") else bf16
        bdt = {"fp32": torch.float32, "bf16": bf16, "fp16": fp16}[epilogue.split("-")[2]]
        kw = {"output_dtype": out, "pertoken_scale": torch.rand(m) + 0.5,
              "bias": torch.randn(b, 1, n).to(bdt)}
    if "bias" not in kw:
        kw["bias"] = torch.randint(-3000, 3000, (b, 1, n), dtype=torch.int32)
    got = npu.npu_quant_matmul(x1, x2, scale, **kw)
    ref = quant_matmul_reference(x1, x2, scale, **kw)
    assert got.shape == (b, m, n) and got.dtype == ref.dtype
    assert torch.equal(got, ref)
    # each batch is the 2-D call with its own bias row
    for i in range(b):
        kwi = dict(kw, bias=kw["bias"][i, 0])
        one = npu.npu_quant_matmul(x1[i], x2[i] if x2_batched else x2, scale, **kwi)
        assert torch.equal(got[i], one)


def test_quant_matmul_batched_bias_rules_and_fake():
    from torch._subclasses.fake_tensor import FakeTensorMode

    x1, x2, scale = rand_i8(2, 4, 8), rand_i8(8, 6), torch.rand(6)
    for bias, rule in [(torch.zeros(1, 1, 6, dtype=torch.int32), r"\(batch, 1, n\) = \(2, 1, 6\)"),
                       (torch.zeros(2, 2, 6, dtype=torch.int32), r"\(batch, 1, n\)"),
                       (torch.zeros(2, 1, 5, dtype=torch.int32), r"\(batch, 1, n\)")]:
        with pytest.raises(RuntimeError, match=f"npu_quant_matmul: argument 'bias' .*{rule}"):
            npu.npu_quant_matmul(x1, x2, scale, bias=bias)
    with pytest.raises(RuntimeError, match="npu_quant_matmul: argument 'bias' .*3-D output"):
        npu.npu_quant_matmul(x1[0], x2, scale, bias=torch.zeros(1, 1, 6, dtype=torch.int32))
    # int4 x1 and x2 take a 1-D bias only (torch_npu's rule)
    a = pack_int4(torch.randint(-8, 8, (2, 4, 64), dtype=i8))
    w = pack_int4(torch.randint(-8, 8, (64, 24), dtype=i8))
    with pytest.raises(RuntimeError, match="npu_quant_matmul: argument 'bias' must be 1-D"):
        npu.npu_quant_matmul(a, w, torch.rand(24), output_dtype=fp16,
                             bias=torch.zeros(2, 1, 24, dtype=torch.int32))
    with FakeTensorMode():
        out = npu.npu_quant_matmul(torch.empty(3, 5, 32, dtype=i8), torch.empty(32, 16, dtype=i8),
                                   torch.empty(16), bias=torch.empty(3, 1, 16, dtype=torch.int32),
                                   output_dtype=torch.int32)
        assert out.shape == (3, 5, 16) and out.dtype == torch.int32

    def f(a, w, s, bias):
        return torch.ops.npu.npu_quant_matmul(a, w, s, bias=bias, output_dtype=torch.int32)

    compiled = torch.compile(f, backend="eager", dynamic=True, fullgraph=True)
    for b in (2, 4):
        a, w, s = rand_i8(b, 3, 16), rand_i8(16, 8), torch.rand(8)
        bias = torch.randint(-9, 9, (b, 1, 8), dtype=torch.int32)
        assert torch.equal(compiled(a, w, s, bias), f(a, w, s, bias))


# ---- float8 / HiFloat8 inputs (Ascend 950) ------------------------------------------------

from tests.conformance._golden import hifloat8_to_float as _hif8_golden  # noqa: E402


def _golden_f8(a, b, scale, pertoken=None):
    """Independent: decoded values, an fp64 einsum (exact for float8_e4m3fn; the
    reference's fp64 matmul sums in another order), one rounding to fp32, the scales."""
    acc = torch.einsum("...mk,...kn->...mn", a.double(), b.double()).float()
    out = acc * scale
    return out if pertoken is None else out * pertoken[:, None]


@pytest.mark.parametrize("out", [fp16, bf16, torch.float32])
@pytest.mark.parametrize("d1,d2", [(torch.float8_e4m3fn, torch.float8_e4m3fn),
                                   (torch.float8_e4m3fn, torch.float8_e5m2),
                                   (torch.float8_e5m2, torch.float8_e5m2)])
def test_float8_inputs(d1, d2, out):
    torch.manual_seed(0)
    x1, x2 = _f8(3, 7, 48, dtype=d1), _f8(48, 20, dtype=d2)
    scale, pt = torch.rand(20) + 0.5, torch.rand(7) + 0.5
    got = npu.npu_quant_matmul(x1, x2, scale, pertoken_scale=pt, output_dtype=out)
    want = _golden_f8(x1.float(), x2.float(), scale, pt).to(out)
    assert got.dtype == out and got.shape == (3, 7, 20)
    assert torch.equal(got, want)
    # per-tensor scale, no pertoken_scale, x1 a transposed view (upstream's fp8_pertensor)
    x1t = _f8(48, 7, dtype=d1)
    got = npu.npu_quant_matmul(x1t.t(), x2, scale[:1], output_dtype=out)
    assert torch.equal(got, _golden_f8(x1t.float().t(), x2.float(), scale[:1]).to(out))
    assert torch.equal(got, quant_matmul_reference(x1t.t(), x2, scale[:1], output_dtype=out))


@pytest.mark.parametrize("storage", [torch.uint8, torch.int8])
def test_hifloat8_inputs(storage):
    torch.manual_seed(0)
    c1, c2 = _hif8(9, 40), _hif8(40, 12)
    scale, pt = torch.rand(12) + 0.5, torch.rand(1) + 0.5
    got = npu.npu_quant_matmul(c1.view(storage), c2.view(storage), scale, pertoken_scale=pt,
                               x1_dtype=290, x2_dtype=290, output_dtype=torch.float32)
    want = _golden_f8(_hif8_golden(c1), _hif8_golden(c2), scale, pt)
    torch.testing.assert_close(got, want, rtol=2e-7, atol=0)  # fp64 sums in another order
    ref = quant_matmul_reference(c1.view(storage), c2.view(storage), scale, pertoken_scale=pt,
                                 x1_dtype=290, x2_dtype=290, output_dtype=torch.float32)
    assert torch.equal(got, ref)


def test_float8_special_values_propagate():
    x1 = torch.tensor([[1.0, float("nan")], [2.0, 3.0]]).to(torch.float8_e5m2)
    x2 = torch.tensor([[1.0, float("inf")], [1.0, 1.0]]).to(torch.float8_e5m2)
    out = npu.npu_quant_matmul(x1, x2, torch.ones(1), output_dtype=torch.float32)
    assert torch.isnan(out[0]).all() and out[1, 0] == 5.0 and out[1, 1] == float("inf")
    # HiFloat8 NaN (0x80) and inf (0x6F) codes decode as such
    c1 = torch.tensor([[0x80, 0x08]], dtype=torch.uint8)  # NaN, 1.0
    c2 = torch.tensor([[0x08], [0x6F]], dtype=torch.uint8)  # 1.0, inf
    out = npu.npu_quant_matmul(c1, c2, torch.ones(1), x1_dtype=290, x2_dtype=290,
                               output_dtype=torch.float32)
    assert torch.isnan(out).all()
    assert npu.npu_quant_matmul(c1[:, 1:], c2[1:], torch.ones(1), x1_dtype=290, x2_dtype=290,
                                output_dtype=torch.float32).item() == float("inf")


def test_float8_fake_matches_kernel():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from op_sdk.ops.quant_matmul import quant_matmul_fake

    for name, args, kwargs in meta_grid():
        if not (args[0].dtype in (torch.float8_e4m3fn, torch.float8_e5m2) or "x1_dtype" in kwargs):
            continue
        real = npu.npu_quant_matmul(*args, **kwargs)
        with FakeTensorMode() as mode:
            fake = quant_matmul_fake(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a
                                       for a in args], **{k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v
                                                          for k, v in kwargs.items()})
        assert (fake.shape, fake.dtype) == (real.shape, real.dtype)


# ---- float8 / HiFloat8 inputs with an int64 scale (aclnnQuantMatmulV5's static T-C / T-T) --

def _scale_bits_golden(packed):
    """Independent decoding of npu_trans_quant_param's int64: bits 13-31 of the low word are
    the fp32 scale's bits (the low 13 mantissa bits, the offset field and bit 46 unused)."""
    words = [int(v) & 0xFFFFE000 for v in packed.view(torch.int64).tolist()]
    return torch.tensor(words, dtype=torch.int64).to(torch.int32).view(torch.float32)


def _golden_f8_static(a, b, packed, bias, out):
    """(fp32(a @ b) + bias) * scale in fp32, one rounding to `out`: fp64 einsum of the
    decoded values (exact here), then the documented steps."""
    acc = torch.einsum("...mk,...kn->...mn", a.double(), b.double()).float()
    if bias is not None:
        acc = acc + bias
    return (acc * _scale_bits_golden(packed)).to(out)


def _hif8_moderate(*shape):
    """HiFloat8 codes of values 0 or 2^-6 <= |v| <= 2^8 (an fp64 sum of their products is
    exact, so the golden is bit-exact)."""
    c = _hif8(*shape)
    v = _hif8_golden(c).abs()
    return torch.where((v == 0) | ((v >= 2.0 ** -6) & (v <= 2.0 ** 8)), c, torch.zeros_like(c))


def _static_inputs(kind, lead, m, k, n):
    """(x1, x2 as the transpose of an (n, k) weight, kwargs, decoded x1, decoded x2)."""
    if kind == "hif8":
        c1, c2 = _hif8_moderate(*lead, m, k), _hif8_moderate(n, k)
        return c1, c2.t(), dict(HIF8), _hif8_golden(c1), _hif8_golden(c2).t()
    d1, d2 = {"e4m3": (E4M3, E4M3), "mixed": (E4M3, E5M2), "e5m2": (E5M2, E5M2)}[kind]
    x1, w = _f8(*lead, m, k, dtype=d1), _f8(n, k, dtype=d2)
    return x1, w.t(), {}, x1.float(), w.float().t()


@pytest.mark.parametrize("out", [fp16, bf16, torch.float32])
@pytest.mark.parametrize("kind", ["e4m3", "mixed", "e5m2", "hif8"])
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("bias", ["none", "n", "batch"])
def test_float8_int64_scale(kind, out, per_channel, bias):
    torch.manual_seed(0)
    lead, m, k, n = ((2,) if bias == "batch" else ()), 7, 37, 19  # odd sizes
    x1, x2, kw, a, b = _static_inputs(kind, lead, m, k, n)
    assert not x2.is_contiguous()  # the transposed weight, read in place
    packed = pack_quant_scale(torch.rand(n if per_channel else 1) * 0.02 + 0.001)
    bvec = {"none": None, "n": torch.randn(n) * 8, "batch": torch.randn(2, 1, n) * 8}[bias]
    if bvec is not None:
        kw["bias"] = bvec
    got = npu.npu_quant_matmul(x1, x2, packed, output_dtype=out, **kw)
    want = _golden_f8_static(a, b, packed, bvec, out)
    assert got.dtype == out and got.shape == (*lead, m, n)
    assert torch.equal(got, want), f"max diff {(got.double() - want.double()).abs().max()}"
    assert torch.equal(got, quant_matmul_reference(x1, x2, packed, output_dtype=out, **kw))
    # the same call with the scale as uint64 (the same bits)
    assert torch.equal(got, npu.npu_quant_matmul(x1, x2, packed.view(torch.uint64),
                                                 output_dtype=out, **kw))


def test_float8_int64_scale_formula():
    """(x1 @ x2 + bias) * scale with the scale's 19 bits, rounded in that order."""
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    x1 = torch.tensor([[1.0, 2.0]]).to(e4)
    x2 = torch.tensor([[1.0], [1.0]]).to(e4)
    s = torch.tensor([1.5 + 2.0 ** -20])  # its low mantissa bits are dropped: 1.5
    out = npu.npu_quant_matmul(x1, x2, pack_quant_scale(s), bias=torch.tensor([0.5]),
                               output_dtype=torch.float32)
    assert out.item() == (3.0 + 0.5) * 1.5
    # the low 13 bits of the word, the offset field (bits 37-45) and bit 46 are not read
    raw = pack_quant_scale(torch.tensor([2.0])) | 0x1FFF | (0x1FF << 37)
    out = npu.npu_quant_matmul(x1, x2, raw, output_dtype=torch.float32)
    assert out.item() == 6.0
    assert quant_matmul_reference(x1, x2, raw, output_dtype=torch.float32).item() == 6.0
    # the bias is added to the fp32 product before the scale, in fp32: 2^24 + 1 rounds to
    # 2^24 (half to even), then * 0.75; one rounding of the exact (2^24 + 1) * 0.75 would
    # give 12582913
    y1 = torch.tensor([[4096.0]]).to(e5)
    y2 = torch.tensor([[4096.0]]).to(e5)
    kw = {"bias": torch.tensor([1.0]), "output_dtype": torch.float32}
    for fn in (npu.npu_quant_matmul, quant_matmul_reference):
        assert fn(y1, y2, pack_quant_scale(torch.tensor([0.75])), **kw).item() == 12582912.0


def _build_case_value(v):
    if isinstance(v, tuple) and len(v) == 3 and v[0] == "T":
        return torch.zeros(v[1], dtype=v[2])
    if isinstance(v, (list, tuple)):
        return type(v)(_build_case_value(x) for x in v)
    if isinstance(v, dict):
        return {k: _build_case_value(x) for k, x in v.items()}
    return v


@pytest.mark.parametrize("prefix,least,with_fake", [("qmm/f8-static/", 15, False),
                                                    ("qmm/i8-int64/", 12, True)])
def test_int64_scale_errors_match_reference(prefix, least, with_fake):
    """The native kernel and the reference (and, for the int8 form, the fake) refuse each
    rule of the float8 / HiFloat8 static form and of the int8 int64-scale form in the same
    words, naming operator and argument."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from op_sdk.ops.quant_matmul import quant_matmul_fake

    cases = [c for c in CASES if c[0].startswith(prefix)]
    assert len(cases) >= least

    for cid, _, args, kwargs, arg, exc in cases:
        args, kwargs = _build_case_value(args), _build_case_value(kwargs)
        if isinstance(kwargs.get("output_dtype"), torch.dtype):  # the code the kernel sees
            kwargs["output_dtype"] = CODE_OF[kwargs["output_dtype"]]
        msgs = []
        for fn in (npu.npu_quant_matmul, quant_matmul_reference):
            with pytest.raises(exc) as info:
                fn(*args, **kwargs)
            msgs.append(str(info.value).splitlines()[0])
        if with_fake:
            with FakeTensorMode(allow_non_fake_inputs=True):
                with pytest.raises(exc) as info:
                    quant_matmul_fake(*args, **kwargs)
                msgs.append(str(info.value).splitlines()[0])
        assert len(set(msgs)) == 1, (cid, msgs)
        assert f"npu_quant_matmul: argument '{arg}'" in msgs[0], (cid, msgs[0])


def test_float8_int64_scale_empty_and_compiled():
    from torch._subclasses.fake_tensor import FakeTensorMode

    packed = pack_quant_scale(torch.rand(6) + 0.5)
    out = npu.npu_quant_matmul(torch.empty(0, 8, dtype=E4M3), torch.empty(8, 6, dtype=E4M3),
                               packed, bias=torch.randn(6), output_dtype=bf16)
    assert out.shape == (0, 6) and out.dtype == bf16
    with FakeTensorMode():
        out = npu.npu_quant_matmul(torch.empty(3, 5, 32, dtype=torch.uint8),
                                   torch.empty(32, 16, dtype=torch.uint8),
                                   torch.empty(16, dtype=torch.int64), bias=torch.empty(3, 1, 16),
                                   output_dtype=fp16, **HIF8)
        assert out.shape == (3, 5, 16) and out.dtype == fp16

    def f(a, w, s, bias):
        return torch.ops.npu.npu_quant_matmul(a, w, s, bias=bias, output_dtype=torch.float32)

    compiled = torch.compile(f, backend="eager", dynamic=True, fullgraph=True)
    for m in (3, 5):
        a, w = _f8(2, m, 16, dtype=E4M3), _f8(16, 8, dtype=E5M2)
        s, bias = pack_quant_scale(torch.rand(8) + 0.5), torch.randn(2, 1, 8)
        assert torch.equal(compiled(a, w, s, bias), f(a, w, s, bias))


# ---- int8 inputs with an int64 scale (npu_trans_quant_param's packed value) ----------------

def _golden_i8_int64(a, b, packed, bias, out):
    """The documented A8W8 steps on an int64 scale, from the bit layout: the exact integer
    product (int64 here), + the int32 bias, then * the decoded 19-bit fp32 scale in fp32, and
    one rounding to `out` (int8: round half to even, saturate)."""
    acc = torch.einsum("...mk,...kn->...mn", a.long(), b.long())
    if bias is not None:
        acc = acc + bias.long()
    y = acc.float() * _scale_bits_golden(packed)
    if out == i8:
        return torch.round(y).clamp(-128, 127).to(i8)
    return y.to(out)


@pytest.mark.parametrize("out", [i8, fp16, bf16])
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("bias", ["none", "n", "batch"])
@pytest.mark.parametrize("m", [3, 37])
def test_int8_int64_scale(out, per_channel, bias, m):
    torch.manual_seed(m)
    lead, k, n = ((2,) if bias != "n" else ()), 37, 19  # odd sizes, a 3-D x1
    x1, w = rand_i8(*lead, m, k), rand_i8(n, k)
    x2 = w.t()
    assert not x2.is_contiguous()  # the transposed weight, read in place
    # scales whose low 13 mantissa bits are not zero: the 19-bit truncation shows
    packed = pack_quant_scale(torch.rand(n if per_channel else 1) * 2e-3 + 1e-4)
    bvec = {"none": None, "n": torch.randint(-3000, 3000, (n,), dtype=i32),
            "batch": torch.randint(-3000, 3000, (2, 1, n), dtype=i32)}[bias]
    kw = {"output_dtype": out} if out != i8 else {}
    if bvec is not None:
        kw["bias"] = bvec
    got = npu.npu_quant_matmul(x1, x2, packed, **kw)
    want = _golden_i8_int64(x1, x2, packed, bvec, out)
    assert got.dtype == out and got.shape == (*lead, m, n)
    assert torch.equal(got, want), f"max diff {(got.double() - want.double()).abs().max()}"
    assert torch.equal(got, quant_matmul_reference(x1, x2, packed, **kw))
    # the same bits as uint64
    assert torch.equal(got, npu.npu_quant_matmul(x1, x2, packed.view(torch.uint64), **kw))
    # the fake: the kernel's shape and dtype
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fk = npu.npu_quant_matmul(*(mode.from_tensor(t) for t in (x1, x2, packed)),
                                  **{a: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v
                                     for a, v in kw.items()})
    assert fk.shape == got.shape and fk.dtype == got.dtype


def test_int8_int64_scale_formula():
    """(x1 @ x2 + bias) * scale with the scale's 19 bits; the fp32 scale it packs, not the
    one given to npu_trans_quant_param."""
    x1 = torch.tensor([[1, 2]], dtype=i8)
    x2 = torch.tensor([[1], [1]], dtype=i8)
    s = torch.tensor([1.5 + 2.0 ** -20])  # its low mantissa bits are dropped: 1.5
    bias = torch.tensor([4], dtype=i32)
    for fn in (npu.npu_quant_matmul, quant_matmul_reference):
        assert fn(x1, x2, pack_quant_scale(s), bias=bias, output_dtype=torch.float16).item() == 10.5
        # int8: 3 * 0.8333 = 2.4999..: the 19-bit scale (0.83331298828125) gives 2.49993896
        assert fn(x1, x2, pack_quant_scale(torch.tensor([2.5 / 3]))).item() == 2
        # 1 * 2.5 rounds half to even; 100 * 2 saturates
        assert fn(torch.tensor([[1], [100]], dtype=i8), torch.tensor([[1]], dtype=i8),
                  pack_quant_scale(torch.tensor([2.5]))).tolist() == [[2], [127]]
    # the low 13 bits of the word, bit 46 and (for a float output) the offset field are not read
    raw = pack_quant_scale(torch.tensor([2.0])) | 0x1FFF
    for fn in (npu.npu_quant_matmul, quant_matmul_reference):
        assert fn(x1, x2, raw).item() == 6
        assert fn(x1, x2, raw | (0x1FF << 37), output_dtype=torch.bfloat16).item() == 6.0


def _golden_per_block(x1, x2, x1_scale, x2_scale, gs):
    """CANN's per-block golden, ported from hicann/ops-nn @
    e5c3fa9327ea95ba26d06227e746923580d10921, matmul/quant_batch_matmul_v3/tests/assets/
    qbmmv3_kernel_golden.py (the B-B / G-B computation): the inputs in float32, x1Scale
    repeated gsM times along m and x2Scale gsN times along n, then per k block of gsK
    matmul(x1[:, block], x2[block, :]) * (x1Scale[:, j] * x2Scale[j, :]), accumulated in
    float32. Its float32 matmul rounds within a block; op_sdk's block product is exact."""
    gm, gn, gk = gs
    a, b = x1.float(), x2.float()
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    xs = x1_scale.float().repeat_interleave(gm, dim=-2)[..., :m, :]
    ws = x2_scale.float().repeat_interleave(gn, dim=-1)[..., :n]
    out = torch.zeros(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (m, n))
    for j in range(-(-k // gk)):
        blk = slice(j * gk, min(k, (j + 1) * gk))
        out = out + torch.matmul(a[..., blk], b[..., blk, :]) * (xs[..., j:j + 1] * ws[..., j:j + 1, :])
    return out


@pytest.mark.parametrize("form", ["int8-G-B", "e4m3-G-B", "e5m2-B-B", "hif8-B-B"])
@pytest.mark.parametrize("shape", [(5, 300, 260), (1, 128, 128), (130, 257, 129)])
def test_per_block_scales(form, shape):
    """G-B / B-B (aclnnQuantMatmulV5): native kernel and reference bit for bit, against CANN's
    golden (bit for bit where its float32 block products are exact: int8, |acc| < 2^24), 3-D
    x1, the transposed weight read in place, a batched scale, and the fake."""
    from op_sdk.ops._formats import hif8_to_float
    torch.manual_seed(shape[0])
    m, k, n = shape
    gs = [1, 128, 128] if form.endswith("G-B") else [128, 128, 128]
    kb, mb, nb = -(-k // 128), -(-m // gs[0]), -(-n // 128)
    kw = {"group_sizes": gs}
    if form.startswith("int8"):
        x1, x2 = rand_i8(2, m, k), rand_i8(n, k).t()
        v1, v2 = x1, x2
        kw.update(output_dtype=bf16, bias=torch.randn(n))
    elif form.startswith("hif8"):
        x1, x2 = _hif8(2, m, k), _hif8(n, k).t()
        v1, v2 = hif8_to_float(x1), hif8_to_float(x2)
        kw.update(output_dtype=torch.float32, x1_dtype=290, x2_dtype=290)
    else:
        dt = E4M3 if form.startswith("e4m3") else E5M2
        x1, x2 = _f8(2, m, k, dtype=dt), _f8(n, k, dtype=dt).t()
        v1, v2 = x1, x2
        kw.update(output_dtype=fp16)
    pt = torch.rand(mb, kb) + 0.05
    sc = torch.rand(2, kb, nb) + 0.05  # one per batch
    got = npu.npu_quant_matmul(x1, x2, sc, pertoken_scale=pt, **kw)
    ref = quant_matmul_reference(x1, x2, sc, pertoken_scale=pt, **kw)
    assert got.shape == (2, m, n) and got.dtype == kw["output_dtype"]
    assert torch.equal(got, ref)
    gold = _golden_per_block(v1, v2, pt, sc, gs)
    if "bias" in kw:
        gold = gold + kw["bias"]
    if form.startswith("int8"):
        assert torch.equal(got, gold.to(bf16))
    else:
        torch.testing.assert_close(got.float(), gold.to(got.dtype).float(), rtol=2e-3, atol=1e-3)
    # each batch is the 2-D call with its own scale
    for i in range(2):
        one = npu.npu_quant_matmul(x1[i], x2, sc[i], pertoken_scale=pt, **kw)
        assert torch.equal(one, got[i])
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fk = npu.npu_quant_matmul(*(mode.from_tensor(t) for t in (x1, x2, sc)),
                                  pertoken_scale=mode.from_tensor(pt),
                                  **{a: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v
                                     for a, v in kw.items()})
    assert fk.shape == got.shape and fk.dtype == got.dtype


def test_native_kernel_routes_the_forms_off_its_hot_path_to_the_reference():
    """float8 / HiFloat8, per-block and MX calls have one implementation, the reference:
    csrc/quant_matmul.cpp calls op_sdk_reference::npu_quant_matmul for them, and its own
    kernels for the int8 / int4 forms."""
    import op_sdk

    if "cpu" in op_sdk.get_op("npu_quant_matmul").native_missing:
        pytest.skip("the native kernel is not loaded")
    f8 = _f8(3, 64, dtype=E4M3), _f8(64, 16, dtype=E4M3)
    gb = rand_i8(2, 256), rand_i8(256, 256), torch.rand(2, 2) + 0.05
    routed = [lambda: npu.npu_quant_matmul(*f8, torch.rand(16), output_dtype=fp16),
              lambda: npu.npu_quant_matmul(*gb, pertoken_scale=torch.rand(2, 2) + 0.05,
                                           output_dtype=bf16, group_sizes=[1, 128, 128])]
    for call in routed:
        with torch.profiler.profile() as prof:
            call()
        assert "op_sdk_reference::npu_quant_matmul" in {e.name for e in prof.events()}
    with torch.profiler.profile() as prof:
        npu.npu_quant_matmul(rand_i8(3, 64), rand_i8(64, 16), torch.rand(16), output_dtype=bf16)
    assert "op_sdk_reference::npu_quant_matmul" not in {e.name for e in prof.events()}


def test_per_block_formula():
    """Hand values: the scales multiply each block's product, blocks sum in order, the bias
    comes last; group_sizes 0 is inferred (k = 256 and n = 256: 2 groups each)."""
    x1 = torch.ones(1, 256, dtype=i8)
    x2 = torch.ones(256, 256, dtype=i8)
    pt = torch.tensor([[2.0, 3.0]])
    sc = torch.tensor([[1.0, 10.0], [100.0, 1000.0]])
    for fn in (npu.npu_quant_matmul, quant_matmul_reference):
        out = fn(x1, x2, sc, pertoken_scale=pt, bias=torch.full((256,), 0.5),
                 output_dtype=bf16, group_sizes=[0, 0, 0])
        # columns < 128: 128 * 2 * 1 + 128 * 3 * 100; columns >= 128: 128 * 2 * 10 + 128 * 3 * 1000
        want = torch.cat([torch.full((1, 128), 38656.5), torch.full((1, 128), 386560.5)], 1)
        assert torch.equal(out, want.to(bf16))


def _golden_mx(x1, x2, x1_scale, x2_scale):
    """Upstream's MX golden, ported from op-plugin @ 517f2e7d0f202f38b76310706cb977ca2388ad21,
    test/test_custom_ops/test_npu_quant_matmul.py (test_npu_quant_matmul_mxfp8_scale_with_batch):
    the E8M0 scales decoded (2^(e - 127)), x1Scale reshaped to (..., m, 2 * ceil(k / 64)) and
    x2Scale transposed and reshaped to (..., 2 * ceil(k / 64), n), each repeated 32 times
    along k and multiplied into its operand, then one matmul (here in fp64: the scaled
    values are exact, the sum is not rounded). Upstream decodes code 0 as 0; the codes here
    avoid it."""
    def e8m0(t):
        return torch.pow(2.0, t.double() - 127.0)
    k = x1.shape[-1]
    ps = e8m0(x1_scale).flatten(-2)
    sc = e8m0(x2_scale).transpose(-1, -2).flatten(-3, -2)
    return torch.matmul(x1.double() * ps.repeat_interleave(32, dim=-1)[..., :k],
                        x2.double() * sc.repeat_interleave(32, dim=-2)[..., :k, :])


@pytest.mark.parametrize("shape", [(5, 200, 24), (1, 64, 16), (33, 130, 40)])
@pytest.mark.parametrize("dtypes", [(E4M3, E4M3), (E5M2, E4M3)])
def test_mx_scales(shape, dtypes):
    """MX scales: native kernel and reference bit for bit, within fp32 rounding of upstream's
    golden, 3-D x1 with per-batch scales, the transposed weight, a (batch, 1, n) bias, the
    fake."""
    torch.manual_seed(shape[0])
    m, k, n = shape
    kb = -(-k // 64)
    x1, x2 = _f8(2, m, k, dtype=dtypes[0]), _f8(n, k, dtype=dtypes[1]).t()
    pt, sc = _e8m0(2, m, kb, 2), _e8m0(2, kb, n, 2)
    bias = torch.randn(2, 1, n)
    for out in (fp16, bf16, torch.float32):
        kw = {"pertoken_scale": pt, "scale_dtype": 293, "pertoken_scale_dtype": 293,
              "group_sizes": [1, 1, 32], "bias": bias, "output_dtype": out}
        got = npu.npu_quant_matmul(x1, x2, sc, **kw)
        assert got.shape == (2, m, n) and got.dtype == out
        assert torch.equal(got, quant_matmul_reference(x1, x2, sc, **kw))
        gold = _golden_mx(x1, x2, pt, sc) + bias.double()
        if out == torch.float32:
            torch.testing.assert_close(got.double(), gold, rtol=1e-5, atol=1e-3)
        else:
            torch.testing.assert_close(got.float(), gold.to(out).float(), rtol=1e-2, atol=1e-2)
        # group_sizes inferred where k is a multiple of 64
        if k % 64 == 0:
            assert torch.equal(got, npu.npu_quant_matmul(x1, x2, sc, **dict(kw, group_sizes=None)))
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fk = npu.npu_quant_matmul(*(mode.from_tensor(t) for t in (x1, x2, sc)),
                                      **{a: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v
                                         for a, v in kw.items()})
        assert fk.shape == got.shape and fk.dtype == got.dtype


@pytest.mark.parametrize("x2_layout", ["transposed", "packed-along-n"])
@pytest.mark.parametrize("shape", [(5, 256, 24), (4, 130, 10), (1, 64, 2)])
def test_mx_float4(shape, x2_layout):
    """MX float4_e2m1 x float4_e2m1: native kernel and reference bit for bit, both x2 layouts
    give the same result, against an fp64 golden on the decoded grid values (every code of
    e2m1 is a number), 3-D x1, the fake."""
    from op_sdk.ops._formats import fp4_codes_to_float, pack_nibbles
    torch.manual_seed(shape[0])
    m, k, n = shape
    kb = -(-k // 64)
    c1, c2 = torch.randint(0, 16, (2, m, k)), torch.randint(0, 16, (n, k))
    x1 = pack_nibbles(c1)
    x2 = pack_nibbles(c2).t() if x2_layout == "transposed" else pack_nibbles(c2.t().contiguous())
    pt, sc = _e8m0(2, m, kb, 2), _e8m0(kb, n, 2)
    kw = {"pertoken_scale": pt, "scale_dtype": 293, "pertoken_scale_dtype": 293, "x1_dtype": 296,
          "x2_dtype": 296, "group_sizes": [1, 1, 32], "output_dtype": torch.float32}
    got = npu.npu_quant_matmul(x1, x2, sc, **kw)
    assert got.shape == (2, m, n) and torch.equal(got, quant_matmul_reference(x1, x2, sc, **kw))
    gold = _golden_mx(fp4_codes_to_float(c1, 296), fp4_codes_to_float(c2, 296).t(), pt, sc)
    torch.testing.assert_close(got.double(), gold, rtol=1e-5, atol=1e-3)
    other = pack_nibbles(c2.t().contiguous()) if x2_layout == "transposed" else pack_nibbles(c2).t()
    assert torch.equal(got, npu.npu_quant_matmul(x1, other, sc, **kw))
    # x1 as the transpose view of a tensor packed along m (m even)
    if m % 2 == 0:
        x1t = pack_nibbles(c1.transpose(-1, -2).contiguous()).transpose(-1, -2)
        for fn in (npu.npu_quant_matmul, quant_matmul_reference):
            assert torch.equal(fn(x1t, x2, sc, **kw), got)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fk = npu.npu_quant_matmul(*(mode.from_tensor(t) for t in (x1, x2, sc)),
                                  **{a: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v
                                     for a, v in kw.items()})
    assert fk.shape == got.shape and fk.dtype == got.dtype


def test_mx_formula_and_e8m0_codes():
    """E8M0: 2^(e - 127), code 0 is 2^-127 (as torch.float8_e8m0fnu), 255 is NaN; each 32-wide
    block of k takes its own pair entry, in the order [j // 2, j % 2]."""
    from op_sdk.ops.quant_matmul import e8m0_to_float
    codes = torch.tensor([0, 1, 126, 127, 128, 254, 255], dtype=torch.uint8)
    want = codes.view(torch.float8_e8m0fnu).float()
    got = e8m0_to_float(codes)
    assert torch.equal(got[:-1], want[:-1]) and got[-1].isnan() and want[-1].isnan()
    x1 = torch.ones(1, 128).to(E4M3)
    x2 = torch.ones(128, 1).to(E4M3)
    pt = torch.tensor([[[127, 128], [129, 130]]], dtype=torch.uint8)  # 1, 2, 4, 8
    sc = torch.tensor([[[127, 127]], [[127, 131]]], dtype=torch.uint8)  # 1, 1, 1, 16
    for fn in (npu.npu_quant_matmul, quant_matmul_reference):
        out = fn(x1, x2, sc, pertoken_scale=pt, scale_dtype=293, pertoken_scale_dtype=293,
                 group_sizes=[1, 1, 32], output_dtype=torch.float32)
        assert out.item() == 32 * (1 * 1 + 2 * 1 + 4 * 1 + 8 * 16)


def _golden_requant(acc, scale, offset):
    """CANN's int8 requantisation, ported from hicann/ops-nn @
    e5c3fa9327ea95ba26d06227e746923580d10921, matmul/quant_batch_matmul_v3/tests/assets/
    qbmmv3_kernel_golden.py (compute_requant; QuantBatchMatmulV3TestSpec.golden decodes a
    uint64 scale with matmul/common/tests/st/arch35/matmul_quant_util.py's u64_to_deq_scale /
    u64_to_offset, f32_2_s9 = clip(round(x), -256, 255)), over the int32 products `acc` (int
    bias added): f32_2_s9(fp32(acc) * scale), + f32_2_s9(offset), clipped to int8. numpy's
    round is half to even, as torch.round."""
    def s9(x):
        return torch.round(x).clamp(-256, 255)
    out = s9(acc.float() * scale)
    if offset is not None:
        out = s9(out) + s9(offset)
    return out.clamp(-128, 127).to(i8)


def _u64_offset_golden(packed):
    """matmul_quant_util.u64_to_offset: bits 37..45, sign bit 0x100."""
    raw = (packed.view(torch.int64) >> 37) & 0x1FF
    return torch.where((raw & 0x100) != 0, raw - 0x200, raw).float()


@pytest.mark.parametrize("form", ["packed", "packed+tensor", "float32+tensor"])
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("m", [2, 9, 40])  # the VNNI / AMX few-row kernels and ATen's GEMM
def test_int8_output_requantisation(form, per_channel, m):
    """The int8 output with an offset, against the port of CANN's golden: an int64 / uint64
    scale applies the offset npu_trans_quant_param packed in it (an offset tensor beside it is
    not read: no QuantBatchMatmulV3 kernel reads it); a float32 scale with an offset tensor
    applies f32_2_s9(offset), as the NPU does after op-plugin packs both. Products and scales
    reach the s9 and int8 bounds (|acc * scale| up to ~600, offsets up to ~+-300)."""
    from op_sdk.ops.quant_matmul_packed import quant_matmul_packed_reference
    torch.manual_seed(m)
    lead, k, n = (2,), 45, 19  # a 3-D x1, odd sizes
    x1 = rand_i8(*lead, m, k)
    w = rand_i8(n, k)
    x2 = w.t()  # the transposed weight, read in place
    nn = n if per_channel else 1
    # 19-bit scales (what npu_trans_quant_param keeps), so that both forms are comparable
    s = unpack_quant_scale(pack_quant_scale((torch.rand(nn) + 0.2) * 0.006))
    off = torch.randn(nn) * 100
    bias = torch.randint(-4000, 4000, (n,), dtype=i32)
    packed = pack_quant_scale(s, off)
    acc = torch.einsum("...mk,...kn->...mn", x1.long(), x2.long()) + bias.long()
    if form == "float32+tensor":
        scale, kw = s, {"offset": off}
        want = _golden_requant(acc, s, off)
    else:
        scale = packed
        # the tensor beside a packed scale is not read: any float32 (1,) / (n,) tensor
        kw = {"offset": torch.randn(nn) * 1e3} if form == "packed+tensor" else {}
        want = _golden_requant(acc, _scale_bits_golden(packed), _u64_offset_golden(packed))
    # saturation and the values between are exercised
    assert ((want == 127) | (want == -128)).any() and (want.abs() < 100).any()
    got = npu.npu_quant_matmul(x1, x2, scale, bias=bias, **kw)
    assert got.dtype == i8 and got.shape == (*lead, m, n)
    assert torch.equal(got, want), f"{(got != want).sum()} of {got.numel()} differ"
    assert torch.equal(quant_matmul_reference(x1, x2, scale, bias=bias, **kw), want)
    if scale.dtype == torch.int64:  # the same bits as uint64
        assert torch.equal(npu.npu_quant_matmul(x1, x2, scale.view(torch.uint64), bias=bias,
                                                **kw), want)
    # the prepacked weight (2-D x1)
    ops = torch.ops.op_sdk
    pw = ops.pack_quant_weight(x2)
    for fn in (ops.quant_matmul_packed, quant_matmul_packed_reference):
        assert torch.equal(fn(x1[0], x2, pw, scale, bias=bias, **kw), want[0])


def test_int8_output_float_scale_and_packed_scale_agree():
    """torch_npu's documentation: npu_quant_matmul(x1, x2, scale, offset=offset) ("Method 1")
    and npu_quant_matmul(x1, x2, npu_trans_quant_param(scale, offset)) ("Method 2") give the
    same int8 output. op_sdk keeps a float32 scale at full precision, so they agree whenever
    the scale has 19 significant bits."""
    torch.manual_seed(0)
    x1, x2 = rand_i8(7, 64), rand_i8(64, 33)
    s = unpack_quant_scale(pack_quant_scale(torch.rand(33) * 0.05 + 0.001))
    for off in (torch.randn(33) * 40, torch.tensor([-3.5]), torch.tensor([300.0])):
        m1 = npu.npu_quant_matmul(x1, x2, s, offset=off)
        m2 = npu.npu_quant_matmul(x1, x2, pack_quant_scale(s, off))
        assert torch.equal(m1, m2)
        assert torch.equal(m1, npu.npu_quant_matmul(x1, x2, pack_quant_scale(s, off), offset=off))


def test_int8_output_requantisation_steps():
    """Hand-built values that pin each step: the s9 rounding of the scaled value before the
    offset, the s9 saturation of both, the offset's own rounding, and NaN."""
    x2 = torch.tensor([[1]], dtype=i8)

    def run(acc_values, scale, offset):
        x1 = torch.tensor(acc_values, dtype=i8).reshape(-1, 1)
        s = torch.tensor([scale])
        o = torch.tensor([offset])
        outs = [fn(x1, x2, s, offset=o).flatten().tolist()
                for fn in (npu.npu_quant_matmul, quant_matmul_reference)]
        packed = pack_quant_scale(s, o)
        outs += [fn(x1, x2, packed).flatten().tolist()
                 for fn in (npu.npu_quant_matmul, quant_matmul_reference)]
        assert all(o == outs[0] for o in outs), outs
        return outs[0]

    # 2.5 rounds to 2 (half to even) before the odd offset 1 is added: 3, where rounding
    # 2.5 + 1 = 3.5 once would give 4; 3.5 + 1 gives 5 either way
    assert run([1, 7], 2.5, 1.0) == [3, 19]
    # the scaled value saturates to 255 before the offset: 100 * 4 = 400 -> 255 - 200 = 55
    # (one rounding of 400 - 200 would give 127); and -400 -> -256 + 200 = -56
    assert run([100, -100], 4.0, -200.0) == [55, -128] and run([-100], 4.0, 200.0) == [-56]
    # the offset rounds half to even and saturates to [-256, 255]: 0.5 -> 0, 1.5 -> 2,
    # -300 -> -256, 300 -> 255
    assert run([10], 1.0, 0.5) == [10] and run([10], 1.0, 1.5) == [12]
    assert run([127], 2.0, -300.0) == [-2] and run([-128], 2.0, 300.0) == [-1]
    # a NaN offset is -256, as a NaN lane of every quantised store takes the low bound
    x1 = torch.tensor([[100]], dtype=i8)
    for fn in (npu.npu_quant_matmul, quant_matmul_reference):
        assert fn(x1, x2, torch.tensor([2.0]), offset=torch.tensor([float("nan")])).item() == -56
        # a NaN scale: -256, then -128
        assert fn(x1, x2, torch.tensor([float("nan")])).item() == -128


def test_int8_output_offset_tensor_beside_packed_scale_is_not_read():
    """Only the packed offset counts with an int64 scale; its float output reads neither."""
    x1, x2 = rand_i8(3, 8), rand_i8(8, 4)
    s = torch.rand(4) / 2000  # |values| < 77: nothing saturates
    for fn in (npu.npu_quant_matmul, quant_matmul_reference):
        plain = fn(x1, x2, pack_quant_scale(s))
        assert torch.equal(fn(x1, x2, pack_quant_scale(s), offset=torch.full((4,), 50.0)), plain)
        shifted = fn(x1, x2, pack_quant_scale(s, torch.full((4,), 50.0)))
        assert torch.equal(shifted.long(), (plain.long() + 50).clamp(-128, 127))
        f16 = fn(x1, x2, pack_quant_scale(s, torch.full((4,), 50.0)), output_dtype=fp16)
        assert torch.equal(f16, fn(x1, x2, pack_quant_scale(s), output_dtype=fp16))


def test_pack_quant_scale_offset_layout():
    """pack_quant_scale(scale, offset): aclnnTransQuantParam's layout (19-bit scale, bit 46,
    the offset rounded, saturated to [-256, 255] and stored as 9 bits at bits 37..45)."""
    s = torch.tensor([1.0, 0.5, 2.0, 3.0])
    off = torch.tensor([-1.0, 255.6, -256.4, 2.5])
    p = pack_quant_scale(s, off)
    assert p.dtype == torch.int64
    assert ((p >> 46) & 1).tolist() == [1, 1, 1, 1]
    assert ((p >> 37) & 0x1FF).tolist() == [0x1FF, 255, 0x100, 2]
    assert torch.equal(unpack_quant_scale(p), s)
    assert torch.equal(_u64_offset_golden(p), torch.tensor([-1.0, 255.0, -256.0, 2.0]))
    # a (1,) offset broadcasts over the scales
    assert torch.equal(_u64_offset_golden(pack_quant_scale(s, torch.tensor([7.0]))),
                       torch.full((4,), 7.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_unpack_quant_scale_keeps_float_scales_and_decodes_packed_ones(dtype):
    s = torch.tensor([0.5, 1.0e-3, 3.0e-5, 7.25], dtype=dtype)
    assert unpack_quant_scale(s) is s
    packed = pack_quant_scale(s.float())
    want = (s.float().view(torch.int32) & -8192).view(torch.float32)  # low 13 bits cleared
    for p in (packed, packed.view(torch.uint64)):
        got = unpack_quant_scale(p)
        assert got.dtype == torch.float32 and torch.equal(got, want)


@pytest.mark.parametrize("continuous", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_quant_matmul_a4w4_int64_scale(continuous, bias):
    """A4W4 (int32-packed x1 / x2) with npu_trans_quant_param's int64 / uint64 scale
    (aclnnQuantMatmulV4's A4W4 row): the same (x1 @ x2 + int32 bias) * 19-bit scale as the
    int8 values give, float16 output."""
    torch.manual_seed(4)
    m, k, n = 5, 128, 40
    q1, q2 = _int4(m, k), _int4(k, n)
    x1 = pack_int4(q1)
    x2 = pack_int4(q2.t().contiguous()).t() if continuous else pack_int4(q2)
    scale = pack_quant_scale(torch.rand(n) / 50)
    kw = {"output_dtype": fp16}
    if bias:
        kw["bias"] = torch.randint(-300, 300, (n,), dtype=torch.int32)
    for s in (scale, scale.view(torch.uint64)):
        out = npu.npu_quant_matmul(x1, x2, s, **kw)
        assert out.shape == (m, n) and out.dtype == fp16
        assert torch.equal(out, quant_matmul_reference(x1, x2, s, **kw))
        assert torch.equal(out, npu.npu_quant_matmul(q1, q2, s, **kw))
        acc = q1.double() @ q2.double() + (kw["bias"].double() if bias else 0)
        want = (acc * unpack_quant_scale(s).double()).to(fp16)
        assert (out.double() - want.double()).abs().le(want.double().abs() * 2 ** -9).all()


def test_quant_matmul_dtype_code_errors_name_the_dtype():
    x1, x2 = pack_int4(_int4(4, 64)), pack_int4(_int4(64, 16))
    for call in (npu.npu_quant_matmul, quant_matmul_reference):
        with pytest.raises(RuntimeError, match=r"without pertoken_scale, got torch\.bfloat16 \(15\)"):
            call(x1, x2, torch.rand(16), output_dtype=bf16)
        with pytest.raises(RuntimeError, match=r"got torch\.float32 \(6\)$"):
            call(_int4(4, 64), _int4(64, 16), torch.rand(16), output_dtype=torch.float32)


@pytest.mark.parametrize("out", [fp16, bf16, torch.float32])
@pytest.mark.parametrize("pertoken", [False, True])
def test_float8_float32_scale_with_bias(out, pertoken):
    """aclnnQuantMatmulV5's float8 rows with float32 scales and a float32 bias: with x1Scale
    (pertoken_scale; T-T / K-C / K-T) out = x1 @ x2 * x2Scale * x1Scale + bias, the bias
    last (ops-nn's document since 72bdb38bd); without it the bias goes into the fp32 sum
    before the scale, as in the static form op-plugin packs such a scale into."""
    torch.manual_seed(6)
    x1, x2 = _f8(2, 5, 64, dtype=torch.float8_e4m3fn), _f8(64, 24, dtype=torch.float8_e5m2)
    scale, pt = torch.rand(24) + 0.5, torch.rand(5) + 0.5
    for bias in (torch.randn(24) * 50, torch.randn(2, 1, 24) * 50):
        kw = {"bias": bias, "output_dtype": out}
        if pertoken:
            kw["pertoken_scale"] = pt
        got = npu.npu_quant_matmul(x1, x2, scale, **kw)
        acc = torch.einsum("bmk,kn->bmn", x1.double(), x2.double()).float()
        want = acc * scale * pt[:, None] + bias if pertoken else (acc + bias) * scale
        assert got.shape == (2, 5, 24) and got.dtype == out
        assert torch.equal(got, want.to(out))
        assert torch.equal(got, quant_matmul_reference(x1, x2, scale, **kw))
    # where the bias goes: without pertoken_scale a bias of -x1 @ x2 cancels the product
    # exactly; with it, a bias of -(x1 @ x2 * scale * pertoken_scale) does
    x1, x2 = _f8(4, 32, dtype=torch.float8_e4m3fn), _f8(32, 8, dtype=torch.float8_e4m3fn)
    exact = (x1.double() @ x2.double()).float()
    for fn in (npu.npu_quant_matmul, quant_matmul_reference):
        zero = fn(x1, x2, scale[:8], bias=-exact[0], output_dtype=torch.float32)
        assert torch.equal(zero[0], torch.zeros(8))
        scaled = exact * scale[:8] * pt[:4, None]
        zero = fn(x1, x2, scale[:8], bias=-scaled[1], pertoken_scale=pt[:4],
                  output_dtype=torch.float32)
        assert torch.equal(zero[1], torch.zeros(8))


# ---- fuzz findings: layouts ATen's int8 GEMM cannot read ------------------------------------

@pytest.mark.parametrize("case", ["x2_expanded", "x1_unit_strides", "x1_expanded_rows",
                                  "x2_expanded_k"])
@pytest.mark.parametrize("out", [torch.int32, bf16])
def test_quant_matmul_stride0_and_odd_strides_are_computed(case, out):
    """ATen's int8 GEMM leaves its output unwritten for a stride-0 operand or a (1, k) x1
    with strides (1, 1); the kernel hands it layouts it reads (issue: leftover heap)."""
    torch.manual_seed(0)
    if case == "x2_expanded":
        x1, x2 = rand_i8(4, 64), rand_i8(64, 1).expand(64, 16)
    elif case == "x1_unit_strides":
        x1, x2 = rand_i8(64, 1).t(), rand_i8(64, 16)
    elif case == "x1_expanded_rows":
        x1, x2 = rand_i8(1, 64).expand(40, 64), rand_i8(64, 16)
    else:
        x1, x2 = rand_i8(40, 64), rand_i8(1, 16).expand(64, 16)
    scale = torch.full((1,), 0.01)
    got = npu.npu_quant_matmul(x1, x2, scale, output_dtype=out)
    want = quant_matmul_reference(x1, x2, scale, output_dtype=out)
    assert torch.equal(got, want)
    if out == torch.int32:
        assert torch.equal(got, x1.int() @ x2.int())
