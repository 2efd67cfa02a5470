"""The native CPU kernels (op_sdk._C) across operators: the other code paths (AVX2, the
portable kernels, streaming stores, the matmuls' ATen-only and few-row-for-every-m
choices) against the references, forced per process; empty inputs of every operator; a
large all-zero output. Each operator's own kernel tests are in tests/ops/test_<slice>.py.
"""

import os
import platform
import subprocess
import sys

import pytest
import torch

import op_sdk  # noqa: F401

npu = torch.ops.npu
bf16 = torch.bfloat16
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_script(script, env):
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT, **env),
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]


# ---- the matmuls' other paths -------------------------------------------------------------

_MATMUL_SCRIPT = r"""
import torch
from tests.ops import test_quant_matmul as qmm, test_transpose_batchmatmul as tbmm
torch.manual_seed(0)
for m, k, n in [(1, 96, 40), (1, 1, 5), (3, 77, 45), (8, 200, 70), (17, 100, 31),
                (40, 100, 31), (64, 64, 48), (2, 0, 3)]:
    for layout in ("nk", "kn"):
        qmm.test_quant_matmul(m, k, n, layout)
qmm.test_quant_matmul_non_contiguous_batched_and_empty()
# 33 rows: above the few-row limit (ATen's bmm, or the blocked kernel on the AVX2 paths)
for m in (1, 4, 9, 33):
    tbmm.test_transpose_batchmatmul(torch.bfloat16, m, 3, 40, 70, [1, 0, 2], [0, 1, 2])
    tbmm.test_transpose_batchmatmul(torch.float16, m, 3, 40, 70, [1, 0, 2], [0, 1, 2])
tbmm.test_transpose_batchmatmul_non_contiguous_and_empty()
print("ok")
"""


@pytest.mark.parametrize("env", [
    {"OP_SDK_CPU_ISA": "avx2"},
    {"OP_SDK_CPU_ISA": "avx2_vnni"},
    {"OP_SDK_CPU_ISA": "generic"},
    {"OP_SDK_QMM_VNNI_MAX_M": "0", "OP_SDK_QMM_AMX_MAX_M": "0", "OP_SDK_TBMM_MAX_M": "0"},
    {"OP_SDK_QMM_VNNI_MAX_M": "1000", "OP_SDK_TBMM_MAX_M": "1000"},
    {"OP_SDK_QMM_VNNI_MAX_M": "0", "OP_SDK_QMM_AMX_MAX_M": "64"}],
    ids=["avx2", "avx2_vnni", "generic", "aten-only", "vnni-every-m", "amx-every-m"])
def test_matmul_other_paths_match_reference(env):
    """npu_quant_matmul / npu_transpose_batchmatmul with the product from ATen only, or from
    op_sdk's few-row kernels for every m (the choice is made once per process)."""
    _run_script(_MATMUL_SCRIPT, env)


# ---- the int8 GEMMs: every path bit for bit ------------------------------------------------

_INT8_GEMM_SCRIPT = r"""
import hashlib, sys
import torch, op_sdk
from op_sdk import _native
from op_sdk.ops.quant_matmul import quant_matmul_reference
from op_sdk.ops.quant_matmul_packed import quant_matmul_packed_reference
from tests.ops import test_quant_matmul as qmm
npu, ops = torch.ops.npu, torch.ops.op_sdk
expected = dict(kv.split("=") for kv in sys.argv[1].split(",") if kv)
for (m, packed), name in ((tuple(map(int, key.split(":"))), v) for key, v in expected.items()):
    assert _native.int8_gemm(m, bool(packed)) == name, (m, packed, _native.int8_gemm(m, bool(packed)), name)
torch.manual_seed(0)
digest = hashlib.sha256()
# odd sizes: every row count to 17 (the row groups and their tails), k not a multiple of
# 4 / 16 / 32 / 64, n odd (the column pairs, 8- and 16-column blocks and their tails; 113:
# 8 blocks, the 3-block groups of the 8-row VNNI kernel and their tail)
for k, n in ((1, 5), (7, 3), (33, 17), (100, 31), (130, 45), (1027, 37), (64, 113)):
    w = torch.randint(-128, 128, (n, k), dtype=torch.int8)
    w[0, :] = -128  # the extremes: products of -128 x -128 summed
    x2, p = w.t(), ops.pack_quant_weight(w.t())
    for m in list(range(1, 18)) + [33, 64, 65]:
        x1 = torch.randint(-128, 128, (m, k), dtype=torch.int8)
        x1[0, :] = -128
        epilogues = qmm._qmm_epilogues(m, n)
        for name in (("int32", "int8-offset", "bf16-pertoken-bf16-bias", "fp16-pertoken-fp32-bias",
                      "int32-bias") if m in (1, 4, 9, 17, 65) else ("int32",)):
            kw = epilogues[name]
            for s in ((torch.rand(n) * 1e-3, torch.rand(1) * 1e-3) if name != "int32" else (torch.ones(1),)):
                ref = quant_matmul_reference(x1, x2, s, **kw)
                out = npu.npu_quant_matmul(x1, x2, s, **kw)
                assert out.dtype == ref.dtype and torch.equal(out, ref), (m, k, n, name)
                outp = ops.quant_matmul_packed(x1, x2, p, s, **kw)
                assert torch.equal(outp, ref), ("packed", m, k, n, name)
                if name == "int32":
                    digest.update(out.numpy().tobytes())
        # the "kn" layout (ATen's GEMM) stays exact too
        assert torch.equal(npu.npu_quant_matmul(x1, w.t().contiguous(), torch.ones(1), output_dtype=torch.int32),
                           quant_matmul_reference(x1, w.t().contiguous(), torch.ones(1), output_dtype=torch.int32))
print("digest", digest.hexdigest())
print("ok", _native.cpu_isa())
"""


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return set(f.read().split("\n\n")[0].split("flags", 1)[-1].split())
    except OSError:
        return set()


def _int8_gemm_paths():
    """(id, env, {"m:packed": expected kernel}) for every int8 GEMM path this CPU can run."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return [("generic", {"OP_SDK_CPU_ISA": "generic"}, {"1:0": "aten", "1:1": "aten"})]
    flags = _cpu_flags()
    vnni = "avx_vnni" in flags
    paths = [
        ("generic", {"OP_SDK_CPU_ISA": "generic"}, {"1:0": "aten", "8:1": "aten"}),
        ("avx2", {"OP_SDK_CPU_ISA": "avx2", "OP_SDK_QMM_AVX2_MAX_M": "64",
                  "OP_SDK_QMM_PACKED_MAX_M": "64"}, {"1:0": "avx2", "17:0": "avx2", "8:1": "avx2",
                                              "65:0": "aten", "65:1": "aten"}),
        ("avx2-aten", {"OP_SDK_CPU_ISA": "avx2", "OP_SDK_QMM_AVX2_MAX_M": "0",
                       "OP_SDK_QMM_PACKED_MAX_M": "0"}, {"1:0": "aten", "1:1": "aten"}),
        ("avx2_vnni", {"OP_SDK_CPU_ISA": "avx2_vnni"},
         {"1:0": "avx_vnni" if vnni else "avx2", "8:1": "avx_vnni" if vnni else "avx2"}),
    ]
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        v512, amx = "avx512_vnni" in flags, "amx_int8" in flags
        paths.append(("avx512", {"OP_SDK_CPU_ISA": "avx512"},
                      {"1:0": "avx512_vnni" if v512 else ("amx" if amx else "aten"),
                       "8:0": "amx" if amx else ("avx512_vnni" if v512 else "aten"),
                       "8:1": "amx" if amx else ("avx512_vnni" if v512 else "aten")}))
        if v512:
            # a CPU with AVX-512 VNNI and no AMX (Ice Lake, AMD Zen 4 / 5): the 8-row VNNI
            # blocks on a packed weight up to 64 rows; on an unpacked one the in-place VNNI
            # kernel up to 8 rows, ATen's GEMM above
            paths.append(("avx512-vnni-no-amx", {"OP_SDK_CPU_ISA": "avx512", "OP_SDK_AMX": "0"},
                          {"1:1": "avx512_vnni", "5:1": "avx512_vnni", "64:1": "avx512_vnni",
                           "65:1": "aten", "8:0": "avx512_vnni", "9:0": "aten",
                           "2:0": "avx512_vnni"}))
        if v512:
            paths.append(("avx512-vnni-every-m", {"OP_SDK_QMM_VNNI_MAX_M": "1000",
                                                  "OP_SDK_QMM_PACKED_MAX_M": "4"},
                          {"17:0": "avx512_vnni", "4:1": "avx512_vnni"}))
        if amx:
            paths.append(("amx-every-m", {"OP_SDK_QMM_VNNI_MAX_M": "0",
                                          "OP_SDK_QMM_AMX_MAX_M": "64"},
                          {"1:0": "amx", "64:0": "amx", "5:1": "amx"}))
    return paths


def test_int8_gemm_every_path_bit_exact():
    """npu_quant_matmul and quant_matmul_packed on every int8 GEMM path this CPU has (AVX2
    with VPMADDWD, AVX-VNNI, AVX-512 VNNI, AMX, ATen's GEMM; forced per process), over
    odd sizes, scales, bias and output dtypes: each equal to the reference, and the int32
    products of all paths identical."""
    digests = {}
    for name, env, expected in _int8_gemm_paths():
        arg = ",".join(f"{key}={v}" for key, v in expected.items())
        result = subprocess.run([sys.executable, "-c", _INT8_GEMM_SCRIPT, arg], cwd=ROOT,
                                env=dict(os.environ, PYTHONPATH=ROOT, **env),
                                capture_output=True, text=True, timeout=600, check=False)
        assert result.returncode == 0 and "ok" in result.stdout, (name, result.stderr[-3000:])
        digests[name] = next(line for line in result.stdout.splitlines()
                             if line.startswith("digest"))
    assert len(set(digests.values())) == 1, digests


def test_int8_gemm_benchmark_records_the_path(tmp_path):
    """benchmarks/bench_int8_gemm.py runs each path in a process with its ISA caps and
    records which kernel ran and the environment."""
    out = tmp_path / "g.json"
    result = subprocess.run([sys.executable, "benchmarks/bench_int8_gemm.py", "--paths", "avx2",
                             "--shapes", "2x64x40", "--calls", "2", "--out", str(out)],
                            cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    import json
    run = json.loads(out.read_text())["paths"]["avx2"]
    assert run["env"]["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert run["machine"]["env"]["OP_SDK_CPU_ISA"] == "avx2"
    (row,) = run["rows"]
    assert (row["m"], row["k"], row["n"]) == (2, 64, 40)
    if platform.machine() in ("x86_64", "AMD64"):
        assert run["machine"]["op_sdk_kernels"]["isa"] == "avx2"
        assert row["kernel"] == row["kernel_packed"] == "avx2"
    assert row["npu_quant_matmul"]["min_us"] > 0 and row["weight_copy"]["min_us"] > 0


# ---- the other code paths: AVX2, streaming stores ----------------------------------------

_PATHS_SCRIPT = r"""
import torch
from tests.ops import (test_add_rms_norm as add, test_add_rms_norm_cast as cast,
                       test_add_rms_norm_dynamic_quant as ardq, test_add_rms_norm_quant as arq,
                       test_dynamic_quant as dq, test_quantize as q, test_rms_norm as rms,
                       test_rotary_mul as rope, test_swiglu as swiglu,
                       test_swiglu_quant as sq, test_interleave_rope as irope,
                       test_apply_rotary_pos_emb as arope, test_gemma_rms_norm as gemma,
                       test_rms_norm_quant as rnq, test_dynamic_mx_quant as mx,
                       test_rms_norm_dynamic_mx_quant as rmx,
                       test_add_rms_norm_dynamic_mx_quant as armx,
                       test_kv_rmsnorm_rope_cache as kvc, test_qkv_rms_norm_rope_cache as qkvc)
torch.manual_seed(0)
for dt in (torch.float16, torch.bfloat16):  # the qkv cache kernel against its reference
    for quant, offset in ((False, False), (True, True)):
        qkvc.test_native_kernel_against_the_reference(quant, offset, dt)
for mode in kvc.MODES:  # the kv cache kernel against its reference, int8 and float caches
    for quant in (False, True):
        kvc.test_native_kernel_against_the_reference(mode, quant, torch.bfloat16)
kvc.test_native_kernel_against_the_reference("PA_NZ", True, torch.float16)
kvc.test_nan_and_inf()
for dst in mx.DSTS:  # bit for bit (the MX kernels: every destination, odd and full blocks)
    mx.test_matches_formula(torch.bfloat16, dst, (2, 3, 130))
    mx.test_matches_formula(torch.float32, dst, (1, 34))
    rmx.test_matches_formula(torch.float16, torch.float32, dst, (2, 3, 130))
    armx.test_matches_formula(torch.bfloat16, None, dst, (5, 70))
for dst in (mx.E4M3, mx.E5M2):
    mx.test_cublas_scale(dst, torch.float16)
    rmx.test_cublas(dst)
mx.test_cublas_worked_example()
mx.test_ocp_code_zero_block_is_zero()
mx.test_all_zero_and_saturation()
for dst in (mx.E4M3, mx.E2M1):
    mx.test_nan_inf_blocks(dst)
    mx.test_layouts(dst)
rmx.test_composite_bit_for_bit()
rmx.test_nan_inf_zero_rows()
armx.test_composite_bit_for_bit()
armx.test_nan_inf_layouts_empty()
for mode in rope.MODES:  # bit for bit; every layout of cos / sin broadcasting
    for shape, rshape in rope.LAYOUTS:
        if mode != "quarter" or shape[-1] % 4 == 0:
            rope.test_matches_reference_and_formula(torch.bfloat16, mode, shape, rshape)
    rope.test_matches_reference_and_formula(torch.float16, mode, *rope.LAYOUTS[0])
rope.test_non_contiguous_stride_zero_empty_and_nonfinite()
for shape, rshape in irope.LAYOUTS:
    irope.test_matches_the_formula_and_rotary_mul(torch.bfloat16, shape, rshape)
irope.test_layouts_stride_zero_empty_and_nonfinite()
for layout in arope.SHAPES:
    for mode in arope.MODES:
        arope.test_matches_the_formulas_and_rotary_mul(torch.bfloat16, mode, layout)
arope.test_layouts_empty_and_nonfinite()
for dtype in (torch.float32, torch.bfloat16):
    for shape, dim in swiglu.SHAPES:
        swiglu.test_matches_reference_and_formula(dtype, shape, dim)
        swiglu.test_backward_matches_reference_and_formula(dtype, shape, dim)
swiglu.test_inf_and_nan_follow_the_formula()
for left in (False, True):
    for mode in (0, 1):
        sq.test_matches_the_golden(torch.bfloat16, left, mode, (2, 5, 130))
sq.test_matches_the_golden(torch.float32, True, 1, (7, 34))
sq.test_layouts_empty_zero_and_nonfinite()
swiglu.test_non_contiguous_stride_zero_empty_and_nan()
rms.test_rms_norm(torch.bfloat16, torch.float32, (257, 96), 1)
rms.test_rms_norm(torch.float16, torch.float16, (2, 3, 7), 1)
rms.test_rms_norm(torch.float32, torch.float32, (3, 7168), 1)
for dtype in (torch.bfloat16, torch.float32):
    gemma.test_matches_reference_and_formula(dtype, (257, 96), 1)
gemma.test_layouts_empty_and_nonfinite()
for int4 in (False, True):
    rnq.test_matches_reference_and_formula(torch.float16, (257, 96), int4)
rnq.test_float16_step_and_reciprocal()
rnq.test_layouts_empty_and_nonfinite()
add.test_add_rms_norm(torch.float32, (2, 5, 7))
add.test_add_rms_norm(torch.bfloat16, (257, 96))
cast.test_add_rms_norm_cast(torch.float16, (257, 96))
dq.test_dynamic_quant_per_token_int8(torch.bfloat16, (3, 7168), "same")
for mode in ("pertoken", "pertensor", "perchannel"):
    dq.test_dynamic_quant_modes_and_int4(torch.float16, mode, torch.quint4x2)
dq.test_dynamic_quant_moe_group_index([2, 2, 6], torch.int8)
dq.test_dynamic_quant_all_zero_rows_and_empty()
q.test_quantize_div_mode(torch.bfloat16, torch.uint8, torch.uint8, 1, "n")
q.test_quantize_mul_mode_axis_coercion(torch.float16, -2, torch.quint4x2)
q.test_quantize_saturates_and_rounds_half_to_even()
for two, zp, beta, div in [(True, True, True, True), (False, False, False, False)]:
    arq.test_add_rms_norm_quant(torch.float16, (257, 96), two, zp, beta, div)
ardq.test_add_rms_norm_dynamic_quant(torch.bfloat16, (2, 3, 7), True, True, None, True)
ardq.test_add_rms_norm_dynamic_quant(torch.float16, (257, 96), False, True, [False, True], False)
ardq.test_add_rms_norm_dynamic_quant(torch.bfloat16, (257, 96), True, True, None, False)
print("ok")
"""


@pytest.mark.parametrize("env", [{"OP_SDK_CPU_ISA": "avx2"},
                                 {"OP_SDK_CPU_ISA": "generic"},
                                 {"OP_SDK_CPU_STREAM": "always"},
                                 {"OP_SDK_CPU_ISA": "avx2", "OP_SDK_CPU_STREAM": "always"},
                                 {"OP_SDK_CPU_ISA": "generic", "OP_SDK_CPU_STREAM": "always"}],
                         ids=["avx2", "generic", "stream", "avx2-stream", "generic-stream"])
def test_other_code_paths_match_reference(env):
    """The baseline (AVX2) kernels, the portable kernels (the only ones on aarch64), and the
    non-temporal-store variants, forced by environment variables in a fresh process (the
    choice is made once per process)."""
    _run_script(_PATHS_SCRIPT, env)


# ---- the NaN / inf rules of docs/operators.md, on every code path ---------------------------

_NAN_SCRIPT = r"""
import torch, op_sdk
npu = torch.ops.npu
nan, inf = float("nan"), float("inf")
# npu_dynamic_quant: the row max propagates NaN (scale NaN, y 0); a NaN stores 0
for dt in (torch.float32, torch.bfloat16, torch.float16):
    h = 37
    x = torch.randn(4, h).to(dt)
    x[0, 5], x[1, 7], x[2, 9] = nan, inf, -inf
    y, s = npu.npu_dynamic_quant(x)
    assert torch.isnan(s[0]) and torch.equal(y[0], torch.zeros(h, dtype=torch.int8)), (y[0], s)
    assert s[1] == inf and s[2] == inf and not y[1].any() and not y[2].any(), (y, s)
    assert torch.isfinite(s[3]) and y[3].abs().max() == 127
    y, s = npu.npu_dynamic_quant(x, quant_mode="pertensor")
    assert torch.isnan(s).all() and not y.any()
    y, s = npu.npu_dynamic_quant(torch.tensor([[1., 2., nan, 3.]]))
    assert y.tolist() == [[0, 0, 0, 0]] and torch.isnan(s).all()
    # the fused norm + dynamic quant (16-bit inputs): the same rule per row
    if dt != torch.float32:
        x1 = torch.randn(3, 32).to(dt)
        x1[1, 3] = nan
        y1, _, _, s1, _ = npu.npu_add_rms_norm_dynamic_quant(x1, torch.zeros_like(x1),
                                                             torch.ones(32, dtype=dt))
        assert torch.isnan(s1[1]) and not y1[1].any() and y1[0].abs().max() == 127
    # static quantisation: NaN stores 0, +-inf saturate
    q = npu.npu_quantize(torch.tensor([1., nan, inf, -inf, 300.]).to(dt), torch.tensor([1.0]),
                         None, torch.qint8, -1, True)
    assert q.tolist() == [1, 0, 127, -128, 127], q
    q = npu.npu_quantize(torch.tensor([nan, inf, -inf]).to(dt), torch.tensor([1.0]), None,
                         torch.quint8, -1, True)
    assert q.tolist() == [0, 255, 0], q
    q = npu.npu_quantize(torch.tensor([nan, inf, -inf]), torch.tensor([1.0]), None,
                         torch.int32, -1, True)
    assert q.tolist() == [0, 2**31 - 1, -2**31], q
    # npu_add_rms_norm_quant: a NaN row stores 0 in y1 and y2
    x1 = torch.randn(2, 16).to(dt)
    x1[0, 0] = nan
    sc = torch.ones(16, dtype=dt)
    y1, y2, _ = npu.npu_add_rms_norm_quant(x1, torch.zeros_like(x1), torch.ones(16, dtype=dt),
                                           sc, torch.zeros(16, dtype=dt), scales2=sc,
                                           zero_points2=torch.zeros(16, dtype=dt))
    assert not y1[0].any() and not y2[0].any() and y1[1].any()
# npu_quant_matmul's int8 output: CANN's requantisation, NaN -> -256 in s9 -> -128
x1 = torch.ones(1, 4, dtype=torch.int8)
out = npu.npu_quant_matmul(x1, torch.ones(4, 3, dtype=torch.int8), torch.tensor([nan, 1.0, inf]),
                           output_dtype=torch.int8)
assert out.tolist() == [[-128, 4, 127]], out
print("ok")
"""


@pytest.mark.parametrize("env", [{}, {"OP_SDK_CPU_ISA": "avx2"}, {"OP_SDK_CPU_ISA": "generic"},
                                 {"OP_SDK_CPU_STREAM": "always"}],
                         ids=["default", "avx2", "generic", "stream"])
def test_nan_and_inf_rules_on_every_path(env):
    """One NaN / inf rule per store (docs/operators.md, "NaN and inf in quantised stores"),
    the same from every instruction set's kernels (the references are checked against the
    kernels by the fuzz campaign)."""
    _run_script(_NAN_SCRIPT, env)


def test_nan_and_inf_rules_in_the_references():
    from op_sdk.ops.dynamic_quant import dynamic_quant_reference
    from op_sdk.ops.quantize import quantize_reference

    nan = float("nan")
    y, s = dynamic_quant_reference(torch.tensor([[1., 2., nan, 3.]]))
    assert y.tolist() == [[0, 0, 0, 0]] and torch.isnan(s).all()
    q = quantize_reference(torch.tensor([1., nan, float("inf")]), torch.tensor([1.0]), None,
                           torch.qint8, -1, True)
    assert q.tolist() == [1, 0, 127]


# ---- every operator's empty inputs, a large zero output ------------------------------------

def test_empty_inputs_give_empty_outputs():
    e = torch.empty(0, 16, dtype=bf16)
    g = torch.ones(16, dtype=bf16)
    y, r = npu.npu_rms_norm(e, g)
    assert y.shape == (0, 16) and r.shape == (0, 1)
    outs = npu.npu_add_rms_norm(e, e, g)
    assert [t.shape for t in outs] == [(0, 16), (0, 1), (0, 16)]
    outs = npu.npu_add_rms_norm_cast(e, e, g)
    assert [t.shape for t in outs] == [(0, 16), (0, 16), (0, 1), (0, 16)]
    y, s = npu.npu_dynamic_quant(e)
    assert y.shape == (0, 16) and s.shape == (0,)
    q = npu.npu_quantize(e, torch.ones(1), None, 1, -1)
    assert q.shape == (0, 16)
    outs = npu.npu_add_rms_norm_quant(e.half(), e.half(), g.half(), torch.ones(16), None)
    assert [t.shape for t in outs] == [(0, 16)] * 3
    outs = npu.npu_add_rms_norm_dynamic_quant(e, e, g)
    assert [t.shape for t in outs] == [(0, 16), (0,), (0, 16), (0,), (0,)]
    e3 = torch.empty(2, 0, 16, dtype=bf16)
    outs = npu.npu_add_rms_norm_dynamic_quant(e3, e3, g, output_mask=[True, True])
    assert [t.shape for t in outs] == [(2, 0, 16), (2, 0, 16), (2, 0, 16), (2, 0), (2, 0)]
    mm = npu.npu_quant_matmul(torch.empty(0, 32, dtype=torch.int8),
                              torch.ones(32, 8, dtype=torch.int8), torch.ones(8))
    assert mm.shape == (0, 8)


@pytest.mark.parametrize("fn", ["kernel", "reference"])
def test_empty_rows_and_empty_reductions(fn):
    """A 0-size dim anywhere: outputs of the fake's shapes from kernel and reference alike;
    an empty reduction is the all-zero row's answer (scale 0). The calls the fuzz campaign
    found raising IndexError or an unnamed error."""

    def call(name, *args, **kwargs):
        d = op_sdk.get_op(name)
        return (d.op if fn == "kernel" else d.reference)(*args, **kwargs)

    for mode in ("pertoken", "pertensor", "perchannel"):
        for dst in (None, torch.float8_e4m3fn, 290):
            for shape in ((5, 0), (0, 24), (2, 0, 8), (5, 8, 0)):
                y, s = call("npu_dynamic_quant", torch.randn(shape, dtype=torch.float16),
                            quant_mode=mode, dst_type=dst)
                assert y.shape == shape and not s.float().any(), (mode, dst, shape, s)
    for y_dtype in (None, torch.float8_e5m2, 285):
        x = torch.randn(2, 3, 0, dtype=torch.float16)
        outs = call("npu_add_rms_norm_dynamic_quant", x, x, torch.ones(0, dtype=torch.float16),
                    y_dtype=y_dtype)
        assert outs[3].shape == (2, 3) and not outs[3].any()
    # a float4 relabelling of a 0-size tensor: two values per byte, zero of them
    out = call("npu_dtype_cast", torch.empty(0, 100, 6, dtype=torch.uint8), torch.float8_e4m3fn,
               input_dtype=296)
    assert out.shape == (0, 100, 12) and out.dtype == torch.float8_e4m3fn
    # scatter into a tensor with a 0-size trailing dim
    out = call("npu_scatter_nd_update", torch.zeros(24, 4, 0), torch.tensor([[1], [2]]),
               torch.zeros(2, 4, 0))
    assert out.shape == (24, 4, 0)


def test_large_all_zero_output_is_zero_and_writable():
    # npu_add_rms_norm_quant's y2 without scales2 maps fresh zero pages when it is large
    x = torch.randn(2048, 2048, dtype=bf16)
    s = torch.full((2048,), 0.05, dtype=bf16)
    y1, y2, _ = npu.npu_add_rms_norm_quant(x, x, torch.ones(2048, dtype=bf16), s, None)
    assert y2.shape == y1.shape and y2.dtype == torch.int8 and not y2.any()
    y2.fill_(3)
    assert int(y2.sum()) == 3 * y2.numel()
