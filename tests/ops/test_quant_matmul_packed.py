"""Prepacked int8 weights, op_sdk's own operators (outside the contract, so no SCHEMAS):
op_sdk::pack_quant_weight against its reference, op_sdk::quant_matmul_packed against
npu_quant_matmul (bit for bit) over epilogues, sizes, batched, strided and empty inputs, a
replaced weight, the kernel paths of other CPUs; their constraints; the kernel benchmark's
case."""

import json
import os
import subprocess
import sys

import pytest
import torch

import op_sdk
from op_sdk.ops.quant_matmul_packed import (
    pack_quant_weight_reference,
    packed_weight_bytes,
    quant_matmul_packed_reference,
)
from tests.ops._helpers import T, bf16, i8, npu, rand_i8

ops = torch.ops.op_sdk
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"op_sdk::quant_matmul_packed": "QuantBatchMatmulV3"}
# operators with no converter, and why
NO_GE_CONVERTER = {"op_sdk::pack_quant_weight": "runs at compile time (weight prepacking): its "
                                                "result is a graph constant"}


def samples():
    x2 = rand_i8(16, 64).t()
    packed = ops.pack_quant_weight(x2)
    return [
        ("op_sdk::quant_matmul_packed", (rand_i8(3, 64), x2, packed, torch.rand(16)),
         {"pertoken_scale": torch.rand(3), "output_dtype": bf16}),
        ("op_sdk::pack_quant_weight", (x2,), {}),
    ]


# the packed bytes record x2's address, so outputs of cloned inputs differ there: opcheck
# checks schema and fake only
OPCHECK_TEST_UTILS = {"op_sdk::pack_quant_weight": ("test_schema", "test_faketensor")}

# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("pack/x2-dtype", "op_sdk::pack_quant_weight", (T(4, 4),), {}, "x2", RuntimeError),
    ("pack/x2-dims", "op_sdk::pack_quant_weight", (T(2, 4, 4, dtype=i8),), {}, "x2", RuntimeError),
    ("packed/packed-size", "op_sdk::quant_matmul_packed",
     (T(2, 64, dtype=i8), T(64, 16, dtype=i8), T(packed_weight_bytes(64, 16) - 1, dtype=i8), T(16)), {},
     "packed", RuntimeError),
    ("packed/x2-dims", "op_sdk::quant_matmul_packed",
     (T(2, 64, dtype=i8), T(1, 64, 16, dtype=i8), T(packed_weight_bytes(64, 16), dtype=i8), T(16)), {},
     "x2", RuntimeError),
    ("packed/k", "op_sdk::quant_matmul_packed",
     (T(2, 32, dtype=i8), T(64, 16, dtype=i8), T(packed_weight_bytes(64, 16), dtype=i8), T(16)), {},
     "x2", RuntimeError),
    ("packed/pertoken-int8-out", "op_sdk::quant_matmul_packed",
     (T(2, 64, dtype=i8), T(64, 16, dtype=i8), T(packed_weight_bytes(64, 16), dtype=i8), T(16)),
     {"pertoken_scale": T(2)}, "pertoken_scale", NotImplementedError),
]


# ---- op_sdk::pack_quant_weight ------------------------------------------------------------

# k: whole 64-byte steps, tails, k < 4; n: whole 16-column blocks and tails
SHAPES = [(64, 16), (1024, 48), (100, 37), (3, 5), (130, 1), (7168, 20)]


@pytest.mark.parametrize("k,n", SHAPES)
@pytest.mark.parametrize("layout", ["nk", "kn", "strided"])
def test_pack_matches_reference(k, n, layout):
    if layout == "nk":
        x2 = rand_i8(n, k).t()  # the (k, n) view of an (n, k) weight, as models pass it
    elif layout == "kn":
        x2 = rand_i8(k, n)
    else:
        x2 = rand_i8(k, 2 * n + 3)[:, 1:2 * n + 1:2]
    packed = ops.pack_quant_weight(x2)
    assert packed.dtype == torch.int8 and packed.shape == (packed_weight_bytes(k, n),)
    assert torch.equal(packed, pack_quant_weight_reference(x2))


def test_pack_column_sums_follow_the_blocks():
    x2 = torch.full((4, 3), 127, dtype=torch.int8)
    sums = pack_quant_weight_reference(x2)[64 * 16:64 * 16 + 64].view(torch.int32)
    assert sums.tolist() == [508, 508, 508] + [0] * 13


# ---- op_sdk::quant_matmul_packed ----------------------------------------------------------

def _epilogues(m, n):
    pt = torch.rand(m) + 0.5
    return {
        "int8": {},
        "int8-offset": {"offset": torch.randn(n) * 3},
        "int32-bias": {"output_dtype": torch.int32,
                       "bias": torch.randint(2**31 - 3000, 2**31 - 1, (n,), dtype=torch.int32)},
        "bf16-pertoken-bias": {"pertoken_scale": pt, "output_dtype": bf16,
                               "bias": torch.randn(n).to(bf16)},
        "fp16-pertoken": {"pertoken_scale": pt, "output_dtype": torch.float16},
    }


# m = 1..4: the packed VNNI kernel; 5..64: the packed AMX kernel (on CPUs that have them);
# more: the unpacked path
@pytest.mark.parametrize("m", [1, 2, 4, 5, 16, 17, 33, 64, 65])
@pytest.mark.parametrize("k,n", [(1024, 48), (100, 37), (3, 5)])
def test_packed_matmul_equals_quant_matmul(m, k, n):
    x1 = rand_i8(m, k)
    x2 = rand_i8(n, k).t()
    packed = ops.pack_quant_weight(x2)
    scale = torch.rand(n) * 1e-3
    for name, kw in _epilogues(m, n).items():
        out = ops.quant_matmul_packed(x1, x2, packed, scale, **kw)
        ref = npu.npu_quant_matmul(x1, x2, scale, **kw)
        assert out.dtype == ref.dtype and torch.equal(out, ref), (name, m)
    assert torch.equal(quant_matmul_packed_reference(x1, x2, packed, scale),
                       ops.quant_matmul_packed(x1, x2, packed, scale))


def test_packed_matmul_batched_strided_and_empty():
    x2 = rand_i8(40, 96).t()
    packed = ops.pack_quant_weight(x2)
    scale = torch.rand(40)
    x1 = rand_i8(2, 3, 96)
    assert torch.equal(ops.quant_matmul_packed(x1, x2, packed, scale),
                       npu.npu_quant_matmul(x1, x2, scale))
    x1 = rand_i8(6, 300)[:, ::3][:, :96]
    assert torch.equal(ops.quant_matmul_packed(x1, x2, packed, scale),
                       npu.npu_quant_matmul(x1, x2, scale))
    assert ops.quant_matmul_packed(rand_i8(0, 96), x2, packed, scale).shape == (0, 40)


def test_packed_copy_of_another_weight_is_not_used():
    """The packed copy stands for x2 only while x2 is the tensor it was packed from: a
    replaced weight (another tensor) is multiplied as it lies."""
    w = rand_i8(48, 128)
    packed = ops.pack_quant_weight(w.t())
    other = rand_i8(48, 128)
    x1, scale = rand_i8(3, 128), torch.rand(48)
    out = ops.quant_matmul_packed(x1, other.t(), packed, scale, output_dtype=torch.int32)
    assert torch.equal(out, npu.npu_quant_matmul(x1, other.t(), scale, output_dtype=torch.int32))
    assert not torch.equal(out, npu.npu_quant_matmul(x1, w.t(), scale, output_dtype=torch.int32))


def test_constraints_name_operator_and_argument():
    x2 = rand_i8(16, 64).t()
    packed = ops.pack_quant_weight(x2)
    x1, scale = rand_i8(2, 64), torch.rand(16)
    with pytest.raises(RuntimeError, match="pack_quant_weight: argument 'x2' must be int8"):
        ops.pack_quant_weight(torch.zeros(4, 4))
    with pytest.raises(RuntimeError, match="pack_quant_weight: argument 'x2' must be 2-D"):
        ops.pack_quant_weight(rand_i8(2, 4, 4))
    with pytest.raises(RuntimeError, match="quant_matmul_packed: argument 'packed' must be "
                                           "pack_quant_weight"):
        ops.quant_matmul_packed(x1, x2, packed[:-1], scale)
    with pytest.raises(RuntimeError, match="quant_matmul_packed: argument 'x2' must be 2-D"):
        ops.quant_matmul_packed(x1, rand_i8(1, 64, 16), packed, scale)
    with pytest.raises(RuntimeError, match="quant_matmul_packed: argument 'x2' must have k"):
        ops.quant_matmul_packed(rand_i8(2, 32), x2, packed, scale)
    with pytest.raises(NotImplementedError, match="quant_matmul_packed: argument "
                                                  "'pertoken_scale' requires output_dtype"):
        ops.quant_matmul_packed(x1, x2, packed, scale, pertoken_scale=torch.rand(2))
    # the reference / fake give the same messages
    for fn in (quant_matmul_packed_reference,
               op_sdk.get_op("quant_matmul_packed", "op_sdk").fake):
        with pytest.raises(RuntimeError, match="quant_matmul_packed: argument 'packed'"):
            fn(x1, x2, packed[:-1], scale)


_PATHS_SCRIPT = """
import torch, op_sdk

ops, npu = torch.ops.op_sdk, torch.ops.npu
for m in (1, 3, 4, 5, 16, 64, 65):
    for k, n in ((100, 37), (1024, 48)):
        x1 = torch.randint(-128, 128, (m, k), dtype=torch.int8)
        x2 = torch.randint(-128, 128, (n, k), dtype=torch.int8).t()
        p = ops.pack_quant_weight(x2)
        s = torch.rand(n)
        for kw in ({}, {"output_dtype": torch.int32},
                   {"pertoken_scale": torch.rand(m), "output_dtype": torch.bfloat16}):
            assert torch.equal(ops.quant_matmul_packed(x1, x2, p, s, **kw),
                               npu.npu_quant_matmul(x1, x2, s, **kw)), (m, k, n, kw)
print("ok")
"""


@pytest.mark.parametrize("env", [{"OP_SDK_CPU_ISA": "avx2"}, {"OP_SDK_CPU_ISA": "avx2_vnni"},
                                 {"OP_SDK_CPU_ISA": "generic"},
                                 {"OP_SDK_QMM_PACKED_MAX_M": "0"},
                                 {"OP_SDK_QMM_PACKED_MAX_M": "4"}],
                         ids=["avx2", "avx2_vnni", "generic", "packed-off", "packed-vnni-only"])
def test_other_packed_paths(env):
    """Without AVX-512 (the AVX2 / AVX-VNNI packed kernels up to their row limits, the
    unpacked path above), the portable build (no packed kernel), with the packed kernels
    off, and with only the few-row one: still npu_quant_matmul's result."""
    result = subprocess.run([sys.executable, "-c", _PATHS_SCRIPT], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT, **env),
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]


# ---- the kernel benchmark -----------------------------------------------------------------

def test_kernel_suite_times_the_packed_operator(tmp_path):
    """benchmarks/bench_kernels.py has a case for the packed operator; its byte count
    leaves out x2, which the packed kernels do not read."""
    out = tmp_path / "k"
    result = subprocess.run([sys.executable, "benchmarks/bench_kernels.py", "--ops",
                             "op_sdk.quant_matmul_packed", "--quick", "--repeats", "1",
                             "--wait-quiet", "0", "--dtypes", "bf16", "--out", str(out)],
                            cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(out.with_suffix(".json").read_text())["results"]
    assert [(r["T"], r["op"]) for r in rows] == [(1, "op_sdk.quant_matmul_packed"),
                                                 (64, "op_sdk.quant_matmul_packed")]
    k, n = 1024, 5632
    for r in rows:
        out_bytes = r["T"] * n * 2
        assert r["bytes"] == (r["T"] * k + packed_weight_bytes(k, n) + n * 4 + r["T"] * 4
                              + out_bytes)


def test_packed_weight_cut_short_or_of_another_shape_is_refused():
    """A packed copy must be pack_quant_weight(x2) of x2's own shape: one cut short (its
    source address dropped) or packed from the transpose is refused naming 'packed'."""
    w = rand_i8(64, 48)
    x1 = rand_i8(3, 64)
    for packed in (ops.pack_quant_weight(w)[:-8], ops.pack_quant_weight(w.t().contiguous())):
        with pytest.raises(RuntimeError, match="quant_matmul_packed: argument 'packed'"):
            torch.ops.op_sdk.quant_matmul_packed(x1, w, packed, torch.ones(1),
                                                 output_dtype=torch.int32)


def test_a_view_of_the_packed_memory_with_another_shape_or_strides_is_not_the_packed_weight():
    """The packed copy records its source's address, shape and strides: the transpose of a
    square weight and a slice of fewer k rows share its address and its packed size, and
    are multiplied as they lie."""
    torch.manual_seed(0)
    big = rand_i8(64, 64)
    x1 = rand_i8(3, 64)
    packed = ops.pack_quant_weight(big)
    assert packed_weight_bytes(60, 64) == packed.numel()
    for xa, other in ((x1, big.t()), (x1[:, :60], big[:60])):
        assert other.data_ptr() == big.data_ptr()
        got = ops.quant_matmul_packed(xa, other, packed, torch.ones(1), output_dtype=torch.int32)
        assert torch.equal(got, xa.int() @ other.int())
    # the weight itself still takes the packed copy, with the same answer
    got = ops.quant_matmul_packed(x1, big, packed, torch.ones(1), output_dtype=torch.int32)
    assert torch.equal(got, x1.int() @ big.int())
