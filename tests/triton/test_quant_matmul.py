"""npu_quant_matmul's Triton kernel (the int8 and A4W4 forms) against the reference, bit for bit:
the int32 product is exact, and the epilogue rounds each step as the reference does. The
tiles ``tiles`` picks and small ones (several k blocks, partial tiles), every output dtype,
scale / offset / bias form, batched x1 and batched weights, transposed and strided operands,
empty and non-finite cases."""

import pytest
import torch

from op_sdk.ops._common import pack_int4, pack_quant_scale
from op_sdk.triton_kernels import quant_matmul as qmm
from tests.ops._helpers import bf16, fp16, fp32
from tests.triton.test_kernels import K, _run

npu = torch.ops.npu

SMALL = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32, "num_warps": 1, "num_stages": 1}


def _i8(*shape):
    return torch.randint(-128, 128, shape, dtype=torch.int8)


def _launcher(path):
    """The CUDA kernel with the tiles ``qmm.tiles`` picks ("picked"), or 16 x 16 x 32 tiles
    ("small": many k blocks, partial tiles)."""
    kernel = K("npu_quant_matmul")
    if path == "picked":
        return kernel

    def run(*args, **kwargs):
        real = {name: getattr(qmm, name) for name in ("run", "run_grouped", "run_block_scaled")}
        for name, fn in real.items():
            setattr(qmm, name, lambda *a, fn=fn, **k: fn(*a, config=SMALL, **k))
        try:
            return kernel(*args, **kwargs)
        finally:
            for name, fn in real.items():
                setattr(qmm, name, fn)
    return run


PATHS = ["picked", "small"]
# (m, k, n): decode rows, odd sizes, k within one block and over several, more than 64
# rows (prefill tiles)
SHAPES = [(1, 32, 24), (5, 40, 7), (17, 264, 48), (70, 16, 8)]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("out,bias", [(bf16, None), (fp16, fp32), (bf16, bf16), (fp16, fp16),
                                      (bf16, torch.int32)])
@pytest.mark.parametrize("weight", ["nk_transposed", "kn"])
def test_per_token_dequant_is_bit_exact(path, m, k, n, out, bias, weight, device):
    torch.manual_seed(0)
    x2 = _i8(n, k).t() if weight == "nk_transposed" else _i8(k, n)
    kw = {"pertoken_scale": torch.rand(m) + 0.5, "output_dtype": out}
    if bias is not None:
        kw["bias"] = (torch.randint(-1000, 1000, (n,), dtype=bias) if bias == torch.int32
                      else torch.randn(n).to(bias))
    _run(_launcher(path), npu.npu_quant_matmul, (_i8(m, k), x2, torch.rand(n) * 1e-3), kw,
         device, exact=(0,))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("scale", ["fp32_n", "fp32_1", "bf16_n", "int32_out"])
def test_scale_forms_and_int32_output(path, scale, device):
    torch.manual_seed(1)
    m, k, n = 24, 48, 40
    kw = {"bias": torch.randint(-2**20, 2**20, (n,), dtype=torch.int32)}
    s = torch.rand(n if scale != "fp32_1" else 1) * 1e-2
    if scale == "bf16_n":
        s, kw["output_dtype"] = s.to(bf16), bf16
    elif scale == "int32_out":
        kw["output_dtype"] = torch.int32
    else:
        kw["output_dtype"] = fp16
    _run(_launcher(path), npu.npu_quant_matmul, (_i8(m, k), _i8(k, n), s), kw, device,
         exact=(0,))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("form", ["float_offset_n", "float_offset_1", "float_no_offset",
                                  "packed_int64", "packed_uint64"])
def test_int8_output_requantises_bit_exact(path, form, device):
    torch.manual_seed(2)
    m, k, n = 24, 64, 32
    s = torch.rand(n) * 2e-3 + 1e-4
    kw = {"output_dtype": torch.int8, "bias": torch.randint(-500, 500, (n,), dtype=torch.int32)}
    if form.startswith("float_offset"):
        kw["offset"] = torch.randn(n if form.endswith("_n") else 1) * 20
    elif form.startswith("packed"):
        s = pack_quant_scale(s, torch.randn(n) * 20)
        if form == "packed_uint64":
            s = s.view(torch.uint64)
    _run(_launcher(path), npu.npu_quant_matmul, (_i8(m, k), _i8(k, n), s), kw, device,
         exact=(0,))


@pytest.mark.parametrize("path", PATHS)
def test_batched_x1_with_a_bias_per_batch(path, device):
    """x1 (b, m, k) against a 2-D weight: the per-token scale is each batch's row's, the
    (b, 1, n) bias the batch's."""
    torch.manual_seed(3)
    b, m, k, n = 3, 6, 32, 16
    kw = {"pertoken_scale": torch.rand(m) + 0.5, "output_dtype": bf16,
          "bias": torch.randn(b, 1, n)}
    _run(_launcher(path), npu.npu_quant_matmul, (_i8(b, m, k), _i8(k, n), torch.rand(n) * 1e-3),
         kw, device, exact=(0,))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("x1_shape,x2_shape", [
    ((3, 6, 32), (3, 32, 16)),        # one weight per batch
    ((6, 32), (3, 32, 16)),           # x1 broadcast to the weights' batches
    ((1, 5, 40), (4, 40, 7)),         # odd sizes, x1's batch of 1 broadcast
    ((4, 17, 264), (1, 264, 48)),     # one weight broadcast to x1's batches
    ((2, 3, 5, 32), (3, 32, 24)),     # two batch dims
])
@pytest.mark.parametrize("form", ["pertoken_bias", "int8", "int32"])
def test_batched_weights_are_bit_exact(path, x1_shape, x2_shape, form, device):
    """x2 (..., k, n): one GEMM per batch of the broadcast batch dims (a grid axis), the
    epilogue's per-token scale each batch's row's, a (b, 1, n) bias the batch's; the kernel
    runs (not the reference)."""
    torch.manual_seed(7)
    n = x2_shape[-1]
    batch = torch.broadcast_shapes(x1_shape[:-2], x2_shape[:-2])
    x1, x2, s = _i8(*x1_shape), _i8(*x2_shape), torch.rand(n) * 1e-3
    if form == "pertoken_bias":
        kw = {"pertoken_scale": torch.rand(x1_shape[-2]) + 0.5, "output_dtype": bf16}
        if len(batch) == 1:
            kw["bias"] = torch.randn(batch[0], 1, n)
    elif form == "int8":
        kw = {"output_dtype": torch.int8, "offset": torch.randn(n) * 3}
    else:
        kw = {"output_dtype": torch.int32, "bias": torch.randint(-99, 99, (n,), dtype=torch.int32)}
        s = torch.rand(n)
    calls = []
    real = qmm.run
    qmm.run = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        _run(_launcher(path), npu.npu_quant_matmul, (x1, x2, s), kw, device, exact=(0,))
    finally:
        qmm.run = real
    assert calls


def test_batched_weights_transposed_strided_and_empty(device):
    torch.manual_seed(8)
    x2 = _i8(3, 16, 32).transpose(1, 2)  # (3, 32, 16), each batch's weight transposed
    _run(K("npu_quant_matmul"), npu.npu_quant_matmul, (_i8(3, 5, 64)[..., ::2], x2, torch.rand(16)),
         {"output_dtype": fp16}, device, exact=(0,))
    for x1_shape, x2_shape in [((0, 4, 16), (0, 16, 8)), ((2, 0, 16), (2, 16, 8)),
                               ((2, 4, 16), (2, 16, 0))]:
        _run(K("npu_quant_matmul"), npu.npu_quant_matmul,
             (_i8(*x1_shape), _i8(*x2_shape), torch.rand(1)), {"output_dtype": bf16}, device,
             exact=(0,))


def test_strided_x1_and_empty_products(device):
    torch.manual_seed(4)
    x1 = _i8(20, 64)[:, ::2]  # k = 32 with stride 2
    _run(K("npu_quant_matmul"), npu.npu_quant_matmul, (x1, _i8(32, 8), torch.rand(8)),
         {"output_dtype": fp16}, device, exact=(0,))
    for m, k, n in [(0, 16, 8), (4, 0, 8), (4, 16, 0)]:
        _run(K("npu_quant_matmul"), npu.npu_quant_matmul, (_i8(m, k), _i8(k, n), torch.rand(1)),
             {"output_dtype": bf16, "pertoken_scale": torch.rand(m)}, device, exact=(0,))


@pytest.mark.parametrize("path", PATHS)
def test_nonfinite_scales_and_int32_wraparound(path, device):
    """inf / NaN scales give the reference's inf / NaN (a NaN requantises to -128: the s9
    low bound, saturated); an int32 bias that overflows the sum wraps as the reference's."""
    torch.manual_seed(5)
    m, k, n = 24, 16, 16
    x1, x2 = _i8(m, k), _i8(k, n)
    s = torch.rand(n) * 1e-3
    s[1], s[2] = float("inf"), float("nan")
    p = torch.rand(m) + 0.5
    p[3] = float("inf")
    _run(_launcher(path), npu.npu_quant_matmul, (x1, x2, s),
         {"pertoken_scale": p, "output_dtype": bf16}, device, exact=(0,))
    bias = torch.full((n,), 2**31 - 1, dtype=torch.int32)
    _run(_launcher(path), npu.npu_quant_matmul, (x1, x2, s),
         {"bias": bias, "output_dtype": torch.int8}, device, exact=(0,))
    _run(_launcher(path), npu.npu_quant_matmul, (x1, x2, torch.rand(n)),
         {"bias": bias, "output_dtype": torch.int32}, device, exact=(0,))


def test_other_forms_run_the_reference_and_rules_are_the_operators(device):
    torch.manual_seed(6)
    with pytest.raises(Exception, match="npu_quant_matmul.*x2.*k = 16"):
        K("npu_quant_matmul")(_i8(3, 16).to(device), _i8(8, 8).to(device),
                              torch.rand(8).to(device))
    with pytest.raises(Exception, match="npu_quant_matmul.*pertoken_scale.*float32"):
        K("npu_quant_matmul")(_i8(3, 16).to(device), _i8(16, 8).to(device),
                              torch.rand(8).to(device), pertoken_scale=torch.rand(3).half().to(device),
                              output_dtype=bf16)


def test_tiles_follow_the_shape_and_the_sm_count(monkeypatch):
    """Decode rows take 16-row tiles (up to 64 rows where k is deep); more take the widest
    tiles that give each SM a program (132 here), narrowing to 64 x 64."""
    from op_sdk.triton_kernels import _common

    monkeypatch.setattr(_common, "sm_count", lambda device: 132)
    pick = lambda m, k, n: (lambda t: (t["BLOCK_M"], t["BLOCK_N"]))(qmm.tiles(m, k, n, None))  # noqa: E731
    assert pick(1, 2048, 4096) == pick(16, 64, 64) == pick(64, 4096, 2048) == (16, 64)
    assert pick(64, 2048, 7168) == pick(17, 64, 64) == (64, 64)
    assert pick(4096, 64, 4096) == (128, 128)
    assert pick(512, 64, 4096) == (64, 128)  # 128 x 128 gives 4 x 32 = 128 programs
    assert pick(512, 64, 2048) == (64, 64)
    assert pick(65, 64, 8) == (64, 64)
    assert all(t["BLOCK_K"] >= 32 for t in (qmm.tiles(m, 64, 64, None) for m in (1, 40, 100, 10**4)))


# ---- A4W4: int4 x1 and weight, 8 values an int32 (element 0 in the low nibble) ----------

def _i4(*shape):
    """int4 values packed 8 an int32 along the last dim: (..., k) values -> (..., k / 8)."""
    return pack_int4(torch.randint(-8, 8, shape, dtype=torch.int8))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("m,k,n", [(1, 64, 16), (5, 40, 24), (17, 264, 48), (70, 16, 8)])
@pytest.mark.parametrize("layout", ["kn", "nk_transposed"])
@pytest.mark.parametrize("form", ["fp16", "fp16_int_bias", "pertoken_bf16_bias",
                                  "pertoken_fp16_int_bias"])
def test_a4w4_is_bit_exact(path, m, k, n, layout, form, device):
    """x1 (m, k/8) and the weight (k, n/8) packed along n, or the (k/8, n) transpose of an
    (n, k/8) tensor packed along k (which one the shapes tell): unpacked in the kernel's
    registers, the int8 form's product and epilogue (float16 without pertoken_scale; with
    it float16 / bfloat16, an int32 or a float bias): the reference's bits."""
    torch.manual_seed(7)
    x2 = _i4(n, k).t() if layout == "nk_transposed" else _i4(k, n)
    kw = {"output_dtype": fp16}
    if form.startswith("pertoken"):
        kw = {"pertoken_scale": torch.rand(m) + 0.5, "output_dtype": bf16 if "bf16" in form else fp16}
    if form.endswith("int_bias"):
        kw["bias"] = torch.randint(-500, 500, (n,), dtype=torch.int32)
    elif form.endswith("bias"):
        kw["bias"] = torch.randn(n).to(bf16)
    _run(_launcher(path), npu.npu_quant_matmul, (_i4(m, k), x2, torch.rand(n) * 1e-2), kw, device,
         exact=(0,))


@pytest.mark.parametrize("layout", ["kn", "nk_transposed"])
def test_a4w4_reads_batched_strided_and_extreme_operands(layout, device):
    """x1 with batch dims and a row stride (a slice of wider words), every nibble at -8 / 7
    (the sign of the top nibble is bit 31 of its word), and an empty x1."""
    torch.manual_seed(8)
    k, n = 48, 24
    x1 = _i4(2, 3, k + 16)[..., : k // 8]
    x2 = _i4(n, k).t() if layout == "nk_transposed" else _i4(k, n)
    kw = {"pertoken_scale": torch.rand(3) + 0.5, "output_dtype": bf16}
    _run(K("npu_quant_matmul"), npu.npu_quant_matmul, (x1, x2, torch.rand(n) * 1e-2), kw,
         device, exact=(0,))
    lo, hi = pack_int4(torch.full((4, k), -8, dtype=torch.int8)), pack_int4(
        torch.full((k, n) if layout == "kn" else (n, k), 7, dtype=torch.int8))
    _run(K("npu_quant_matmul"), npu.npu_quant_matmul,
         (lo, hi.t() if layout == "nk_transposed" else hi, torch.ones(n)),
         {"output_dtype": fp16}, device, exact=(0,))
    _run(K("npu_quant_matmul"), npu.npu_quant_matmul,
         (_i4(0, k), x2, torch.rand(n)), {"output_dtype": fp16}, device, exact=(0,))


def test_a4w4_rules_are_the_operators(device):
    with pytest.raises(Exception, match="npu_quant_matmul.*output_dtype.*float16"):
        K("npu_quant_matmul")(_i4(3, 16).to(device), _i4(16, 8).to(device),
                              torch.rand(8).to(device), output_dtype=bf16)


# ---- A8W4: int8 x1, int4 weights (k, n/8), a scale row per 256 rows of k -----------------

@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("m,k,n", [(1, 256, 8), (5, 512, 24), (70, 768, 40)])
@pytest.mark.parametrize("out", [bf16, fp16])
@pytest.mark.parametrize("offset,packed", [(False, False), (True, True)])
def test_a8w4_is_bit_exact(path, m, k, n, out, offset, packed, device):
    """Per group of 256 rows of k, in order: the exact int32 product of x1 - 8 and the
    weight (x1 @ w - 8 * w's column sums) times the group's scale row, summed in fp32; + the
    y offset; times the per-token scale: the reference's bits, with a float32 or an int64
    (npu_trans_quant_param) scale."""
    torch.manual_seed(9)
    s = torch.rand(k // 256, n) * 1e-2
    kw = {"pertoken_scale": torch.rand(m, 1) + 0.5, "output_dtype": out,
          "offset": torch.randn(n) * 4 if offset else None}
    _run(_launcher(path), npu.npu_quant_matmul,
         (_i8(m, k), _i4(k, n), pack_quant_scale(s) if packed else s), kw, device, exact=(0,))


def test_a8w4_extremes_and_empty(device):
    """x1 at -128 / 127 against weights at -8 / 7 (the largest group products), a non-finite
    scale column, and no rows."""
    k, n = 512, 16
    x1 = torch.tensor([[-128] * k, [127] * k, [-128, 127] * (k // 2)], dtype=torch.int8)
    w = pack_int4(torch.tensor([[-8, 7] * (n // 2)] * k, dtype=torch.int8))
    s = torch.rand(2, n) * 1e-3
    s[1, 3] = float("inf")
    kw = {"pertoken_scale": torch.rand(3, 1) + 0.5, "output_dtype": bf16}
    _run(K("npu_quant_matmul"), npu.npu_quant_matmul, (x1, w, s), kw, device, exact=(0,))
    _run(K("npu_quant_matmul"), npu.npu_quant_matmul, (_i8(0, k), w, s),
         {"pertoken_scale": torch.rand(0, 1), "output_dtype": fp16}, device, exact=(0,))


def test_a8w4_rules_are_the_operators(device):
    with pytest.raises(Exception, match="npu_quant_matmul.*x1.*multiple of 256"):
        K("npu_quant_matmul")(_i8(3, 128).to(device), _i4(128, 8).to(device),
                              torch.rand(1, 8).to(device),
                              pertoken_scale=torch.rand(3, 1).to(device), output_dtype=bf16)


# ---- per-group A4W4: int4 x1 and weight, a 2-D scale and float16 zero points -------------

@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("m,k,n", [(1, 256, 8), (5, 520, 24), (70, 768, 40)])
@pytest.mark.parametrize("layout", ["kn", "nk_transposed"])
@pytest.mark.parametrize("out", [bf16, fp16])
def test_a4w4_per_group_is_bit_exact(path, m, k, n, layout, out, device):
    """Per group of 256 rows of k (the last shorter where 256 does not divide k), in order:
    x1 @ (w - zero), its value rounded once to fp32 (x1 @ w - x1's row sums * zero, the
    product exact), times the group's scale row, summed in fp32; times the per-token scale:
    the reference's bits, with fractional zero points."""
    torch.manual_seed(10)
    groups = -(-k // 256)
    x2 = _i4(n, k).t() if layout == "nk_transposed" else _i4(k, n)
    kw = {"offset": (torch.randn(groups, n) * 3).to(fp16), "pertoken_scale": torch.rand(m, 1) + 0.5,
          "output_dtype": out, "group_sizes": [0, 0, 256]}
    _run(_launcher(path), npu.npu_quant_matmul, (_i4(m, k), x2, torch.rand(groups, n) * 1e-2),
         kw, device, exact=(0,))


def test_a4w4_per_group_extremes(device):
    """Every x1 nibble -8 against weights at 7 with zero points near float16's largest
    integers and smallest subnormal: the group value still rounded once."""
    k, n = 512, 16
    x1 = pack_int4(torch.full((3, k), -8, dtype=torch.int8))
    w = pack_int4(torch.full((k, n), 7, dtype=torch.int8))
    zero = torch.tensor([[2047.0, -6e-8] * (n // 2), [-0.333, 1e4] * (n // 2)]).to(fp16)
    _run(K("npu_quant_matmul"), npu.npu_quant_matmul, (x1, w, torch.rand(2, n)),
         {"offset": zero, "pertoken_scale": torch.rand(3, 1) + 0.5, "output_dtype": bf16,
          "group_sizes": [1, 1, 256]}, device, exact=(0,))


# ---- int8 G-B: a scale per row's group of 128 of k and per 128 x 128 weight block ---------

@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("m,k,n", [(1, 128, 24), (5, 256, 128), (17, 300, 200), (70, 640, 136)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("weight", ["kn", "nk_transposed"])
def test_int8_per_block_is_bit_exact(path, m, k, n, bias, weight, device):
    """sum_j fp32(x1[:, Kj] @ x2[Kj]) * (pertoken[:, j] * scale[j, n / 128]) over the blocks
    of 128 of k in order (the last shorter), + the float32 bias, to bfloat16: the
    reference's bits."""
    torch.manual_seed(11)
    kb, nb = -(-k // 128), -(-n // 128)
    x2 = _i8(n, k).t() if weight == "nk_transposed" else _i8(k, n)
    kw = {"pertoken_scale": torch.rand(m, kb) * 1e-2, "output_dtype": bf16,
          "group_sizes": [1, 128, 128], "bias": torch.randn(n) if bias else None}
    _run(_launcher(path), npu.npu_quant_matmul, (_i8(m, k), x2, torch.rand(kb, nb) * 1e-2), kw,
         device, exact=(0,))


# ---- float8 G-B / B-B: each block's product accumulated in fp32 by tl.dot -----------------

@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("gm", [1, 128])
@pytest.mark.parametrize("m,k,n", [(1, 128, 24), (17, 300, 200), (130, 256, 136)])
@pytest.mark.parametrize("out", [fp16, fp32])
def test_float8_per_block_is_within_the_output_rounding(path, fp8, gm, m, k, n, out, device):
    """G-B (a scale per row and 128 of k) and B-B (per 128 rows and 128 of k), times a scale
    per 128 x 128 weight block, the blocks summed in fp32 in order: within the output dtype's
    tolerance of the reference, which takes each block's product exactly (the kernel's
    tl.dot sums a block's 128 products in fp32)."""
    torch.manual_seed(12)
    kb, nb, mb = -(-k // 128), -(-n // 128), -(-m // gm)
    x1 = (torch.randn(m, k) * 4).to(fp8)
    x2 = (torch.randn(k, n) * 4).to(fp8)
    kw = {"pertoken_scale": torch.rand(mb, kb) + 0.5, "output_dtype": out,
          "group_sizes": [gm, 128, 128]}
    _run(_launcher(path), npu.npu_quant_matmul, (x1, x2, torch.rand(kb, nb) + 0.5), kw, device)
