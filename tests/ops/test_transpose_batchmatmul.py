"""npu_transpose_batchmatmul: the native CPU kernel against the reference over dtypes,
sizes (the few-row kernel and ATen's bmm), permutations, batch_split_factor, strided and
empty inputs; the permutations' values on hand-built cases; the int8-output `scale`
(torch_npu's documented contract beyond A2 / A3) and its rules."""

import pytest
import torch

from op_sdk.ops._common import pack_quant_scale, unpack_quant_scale
from op_sdk.ops.transpose_batchmatmul import transpose_batchmatmul_reference
from tests.ops._helpers import TOL, T, bf16, fp16, fp32, npu, rand, strided

SCHEMAS = [
    "npu_transpose_batchmatmul(Tensor input, Tensor weight, *, Tensor? bias=None, Tensor? scale=None, int[]? perm_x1=None, int[]? perm_x2=None, int[]? perm_y=None, int? batch_split_factor=1) -> Tensor",  # noqa: E501
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_transpose_batchmatmul": "TransposeBatchMatMul"}



def samples():
    return [
        ("npu_transpose_batchmatmul", (rand(3, 5, 16), rand(3, 16, 8)), {}),
        ("npu_transpose_batchmatmul", (rand(5, 3, 16, dtype=bf16), rand(3, 8, 16, dtype=bf16)),
         {"perm_x1": [1, 0, 2], "perm_x2": [0, 2, 1], "batch_split_factor": 2}),
        ("npu_transpose_batchmatmul", (rand(3, 5, 16, dtype=fp16), rand(3, 16, 8, dtype=fp16)),
         {"scale": torch.rand(24) + 0.5}),
    ]


def fuzz_bound(name, args, kwargs):
    """The fuzz campaign's (tests/fuzz) extra error bound of each output element: the fp32
    accumulation's, k * 2^-24 * sum_k |x| |w| (in float64), summed in another order than
    ATen's; infinite where that sum leaves the fp32 range, where the result depends on the
    order (inf, NaN or the reordered sum's value, in any fp32 GEMM). None for the int8
    output (compared as it is)."""
    if kwargs.get("scale") is not None:
        return None
    f = kwargs.get("batch_split_factor", 1)
    x, w = args[0], args[1]
    if x.dim() != 3 or w.dim() != 3:
        return None
    if kwargs.get("perm_x1") == [1, 0, 2]:
        x = x.transpose(0, 1)
    if kwargs.get("perm_x2") == [0, 2, 1]:
        w = w.transpose(1, 2)
    if x.shape[0] != w.shape[0] or x.shape[2] != w.shape[1]:
        return None
    mag = torch.bmm(x.double().abs(), w.double().abs()).transpose(0, 1)  # (M, B, N)
    if isinstance(f, int) and f > 1 and (mag.shape[1] * mag.shape[2]) % f == 0:
        mag = mag.reshape(mag.shape[0], f, mag.shape[1] * mag.shape[2] // f).transpose(0, 1)
    bound = x.shape[2] * 2.0 ** -24 * mag
    return [torch.where(mag > torch.finfo(torch.float32).max, float("inf"), bound)]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real): every dtype, the permutations of x1 and
    x2, batch_split_factor 1 and 2, the int8-output scale."""
    b, m, k, n = 4, 5, 16, 6
    cases = []
    for dt in (fp16, bf16, fp32):
        for p1, p2 in [([0, 1, 2], [0, 1, 2]), ([1, 0, 2], [0, 1, 2]), ([0, 1, 2], [0, 2, 1])]:
            for f in (1, 2):
                x = rand(*([b, m, k] if p1 == [0, 1, 2] else [m, b, k]), dtype=dt)
                w = rand(*([b, k, n] if p2 == [0, 1, 2] else [b, n, k]), dtype=dt)
                cases.append(("npu_transpose_batchmatmul", (x, w), {"perm_x1": p1, "perm_x2": p2,
                                                                    "perm_y": [1, 0, 2], "batch_split_factor": f}))
    cases.append(("npu_transpose_batchmatmul", (rand(4, 5, 16, dtype=fp16), rand(4, 16, 6, dtype=fp16)),
                  {"scale": torch.randint(1, 2**30, (24,)), "batch_split_factor": 1}))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("tbmm/bias", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5)), {"bias": T(5)}, "bias", RuntimeError),
    ("tbmm/scale-fp32-input", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5)), {"scale": T(10)},
     "scale", RuntimeError),
    ("tbmm/scale-length", "npu_transpose_batchmatmul", (T(2, 3, 4, dtype=fp16), T(2, 4, 5, dtype=fp16)),
     {"scale": T(5)}, "scale", RuntimeError),
    ("tbmm/scale-dtype", "npu_transpose_batchmatmul", (T(2, 3, 4, dtype=fp16), T(2, 4, 5, dtype=fp16)),
     {"scale": T(10, dtype=fp16)}, "scale", RuntimeError),
    ("tbmm/perm-x1", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5)), {"perm_x1": [0, 2, 1]},
     "perm_x1", RuntimeError),
    ("tbmm/perm-x2", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5)), {"perm_x2": [1, 0, 2]},
     "perm_x2", RuntimeError),
    ("tbmm/perm-y", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5)), {"perm_y": [0, 1, 2]},
     "perm_y", RuntimeError),
    ("tbmm/2d", "npu_transpose_batchmatmul", (T(3, 4), T(2, 4, 5)), {}, "input", RuntimeError),
    ("tbmm/mixed-dtype", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5, dtype=bf16)), {},
     "weight", RuntimeError),
    ("tbmm/k-mismatch", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 6, 5)), {}, "weight", RuntimeError),
    ("tbmm/batch-limit", "npu_transpose_batchmatmul", (T(65536, 1, 1), T(65536, 1, 1)), {}, "input",
     RuntimeError),
    ("tbmm/n-limit", "npu_transpose_batchmatmul", (T(1, 1, 1), T(1, 1, 65536)), {}, "weight", RuntimeError),
    ("tbmm/split", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5)), {"batch_split_factor": 3},
     "batch_split_factor", RuntimeError),
]


# ---- the native kernel against the reference ------------------------------------------
# fp32 accumulation in another order than ATen's GEMM: float tolerances, scaled with sqrt(K)

def _tbmm_check(x, w, **kw):
    out = npu.npu_transpose_batchmatmul(x, w, **kw)
    ref = transpose_batchmatmul_reference(x.float(), w.float(), **kw).to(x.dtype)
    assert out.dtype == x.dtype and out.shape == ref.shape and out.is_contiguous()
    atol, rtol = TOL[x.dtype]
    k = x.shape[-1]
    torch.testing.assert_close(out, ref, atol=atol * max(1.0, k ** 0.5), rtol=rtol)


# m <= 16 takes the few-row kernel (above 8 rows only up to 2^23 multiply-adds: (12, 32,
# 128, 512) goes to ATen), larger m ATen's bmm; n covers 4-vector blocks and partial
# vectors; k = 1 and k = 0
@pytest.mark.parametrize("dtype", [fp32, bf16, fp16])
@pytest.mark.parametrize("m,b,k,n", [(1, 8, 128, 256), (4, 8, 128, 256), (3, 2, 7, 33),
                                     (8, 3, 64, 70), (9, 2, 40, 9), (5, 1, 1, 1),
                                     (2, 3, 0, 4), (13, 2, 40, 70), (16, 8, 128, 256),
                                     (17, 2, 40, 9), (12, 32, 128, 512)])
@pytest.mark.parametrize("perm_x1", [[0, 1, 2], [1, 0, 2]])
@pytest.mark.parametrize("perm_x2", [[0, 1, 2], [0, 2, 1]])
def test_transpose_batchmatmul(dtype, m, b, k, n, perm_x1, perm_x2):
    x = rand(*((b, m, k) if perm_x1 == [0, 1, 2] else (m, b, k)), dtype=dtype)
    w = rand(*((b, k, n) if perm_x2 == [0, 1, 2] else (b, n, k)), dtype=dtype)
    _tbmm_check(x, w, perm_x1=perm_x1, perm_x2=perm_x2)
    if (b * n) % 2 == 0:
        _tbmm_check(x, w, perm_x1=perm_x1, perm_x2=perm_x2, batch_split_factor=2)


def test_transpose_batchmatmul_non_contiguous_and_empty():
    # MLA's query: a slice of a projection's rows, viewed per head (strided rows and heads)
    qkv = rand(3, 8 * 32 + 48, dtype=bf16)
    q = qkv[:, : 8 * 32].reshape(3, 8, 32)
    _tbmm_check(q, rand(8, 32, 40, dtype=bf16), perm_x1=[1, 0, 2])
    _tbmm_check(strided(rand(3, 4, 24)), rand(4, 24, 20), perm_x1=[1, 0, 2])
    _tbmm_check(rand(2, 3, 24), rand(2, 48, 40)[:, ::2])  # weight rows with a stride
    for x, w in [(rand(0, 2, 8), rand(2, 8, 4)), (rand(3, 2, 8), rand(2, 8, 0))]:
        out = npu.npu_transpose_batchmatmul(x, w, perm_x1=[1, 0, 2])
        assert out.shape == (x.shape[0], 2, w.shape[2])


# ---- semantics on hand-built cases ----------------------------------------------------------

@pytest.mark.parametrize("p1", [[0, 1, 2], [1, 0, 2]])
@pytest.mark.parametrize("p2", [[0, 1, 2], [0, 2, 1]])
@pytest.mark.parametrize("f", [1, 2, 4])
def test_transpose_batchmatmul_perms(p1, p2, f):
    torch.manual_seed(7)
    b, m, k, n = 4, 5, 16, 6
    x = torch.randn(b, m, k) if p1 == [0, 1, 2] else torch.randn(m, b, k)
    w = torch.randn(b, k, n) if p2 == [0, 1, 2] else torch.randn(b, n, k)
    out = npu.npu_transpose_batchmatmul(x, w, perm_x1=p1, perm_x2=p2, batch_split_factor=f)
    xb = x if p1 == [0, 1, 2] else x.permute(1, 0, 2)
    wb = w if p2 == [0, 1, 2] else w.transpose(1, 2)
    ref = torch.einsum("bmk,bkn->mbn", xb.double(), wb.double())
    if f > 1:
        ref = ref.reshape(m, f, b * n // f).transpose(0, 1)
    assert out.shape == ref.shape
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


# ---- int8 output (the documented contract beyond A2 / A3) -------------------------------------

@pytest.mark.parametrize("perms", [([0, 1, 2], [0, 1, 2]), ([1, 0, 2], [0, 2, 1])])
@pytest.mark.parametrize("packed", [True, False])
def test_transpose_batchmatmul_scale_int8_output(perms, packed):
    torch.manual_seed(0)
    b, m, k, n = 3, 5, 16, 8
    x = torch.randn(*([b, m, k] if perms[0] == [0, 1, 2] else [m, b, k])).half()
    w = torch.randn(*([b, k, n] if perms[1] == [0, 1, 2] else [b, n, k])).half()
    s32 = torch.rand(b * n) * 4 + 1
    scale = pack_quant_scale(s32) if packed else s32
    out = npu.npu_transpose_batchmatmul(x, w, scale=scale, perm_x1=perms[0], perm_x2=perms[1])
    ref = transpose_batchmatmul_reference(x, w, scale=scale, perm_x1=perms[0], perm_x2=perms[1])
    assert out.dtype == torch.int8 and out.shape == (m, 1, b * n)
    assert torch.equal(out, ref)
    xb = x.float() if perms[0] == [0, 1, 2] else x.float().permute(1, 0, 2)
    wb = w.float() if perms[1] == [0, 1, 2] else w.float().transpose(1, 2)
    s_eff = unpack_quant_scale(scale).reshape(b, 1, n)
    expect = torch.round(torch.bmm(xb, wb) * s_eff).clamp(-128, 127).to(torch.int8)
    assert torch.equal(out, expect.permute(1, 0, 2).reshape(m, 1, b * n))
    if packed:  # the packed value keeps the top 19 bits of the fp32 scale
        assert (unpack_quant_scale(scale) - s32).abs().le(s32 * 2.0 ** -10).all()


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_transpose_batchmatmul_scale_rules(device):
    x, w = torch.randn(2, 3, 8, device=device).half(), torch.randn(2, 8, 4, device=device).half()
    s = torch.ones(8, dtype=torch.int64, device=device)
    with pytest.raises(RuntimeError, match="npu_transpose_batchmatmul: argument 'scale'"):
        npu.npu_transpose_batchmatmul(x.bfloat16(), w.bfloat16(), scale=s)
    with pytest.raises(RuntimeError, match="argument 'scale'"):
        npu.npu_transpose_batchmatmul(x, w, scale=torch.ones(7, dtype=torch.int64, device=device))
    with pytest.raises(RuntimeError, match="argument 'batch_split_factor'"):
        npu.npu_transpose_batchmatmul(x, w, scale=s, batch_split_factor=2)
    assert npu.npu_transpose_batchmatmul(x, w, scale=s).shape == (3, 1, 8)
