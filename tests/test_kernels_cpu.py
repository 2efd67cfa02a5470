"""The native CPU kernels (op_sdk._C) across operators: the other code paths (AVX2, the
portable kernels, streaming stores, the matmuls' ATen-only and few-row-for-every-m
choices) against the references, forced per process; empty inputs of every operator; a
large all-zero output. Each operator's own kernel tests are in tests/ops/test_<slice>.py.
"""

import os
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
for m, k, n in [(1, 96, 40), (3, 77, 45), (8, 200, 70), (17, 100, 31), (40, 100, 31),
                (64, 64, 48), (2, 0, 3)]:
    for layout in ("nk", "kn"):
        qmm.test_quant_matmul(m, k, n, layout)
qmm.test_quant_matmul_non_contiguous_batched_and_empty()
for m in (1, 4, 9):
    tbmm.test_transpose_batchmatmul(torch.bfloat16, m, 3, 40, 70, [1, 0, 2], [0, 1, 2])
tbmm.test_transpose_batchmatmul_non_contiguous_and_empty()
print("ok")
"""


@pytest.mark.parametrize("env", [
    {"OP_SDK_CPU_ISA": "avx2"},
    {"OP_SDK_CPU_ISA": "generic"},
    {"OP_SDK_QMM_VNNI_MAX_M": "0", "OP_SDK_QMM_AMX_MAX_M": "0", "OP_SDK_TBMM_MAX_M": "0"},
    {"OP_SDK_QMM_VNNI_MAX_M": "1000", "OP_SDK_TBMM_MAX_M": "1000"},
    {"OP_SDK_QMM_VNNI_MAX_M": "0", "OP_SDK_QMM_AMX_MAX_M": "64"}],
    ids=["avx2", "generic", "aten-only", "vnni-every-m", "amx-every-m"])
def test_matmul_other_paths_match_reference(env):
    """npu_quant_matmul / npu_transpose_batchmatmul with the product from ATen only, or from
    op_sdk's few-row kernels for every m (the choice is made once per process)."""
    _run_script(_MATMUL_SCRIPT, env)


# ---- the other code paths: AVX2, streaming stores ----------------------------------------

_PATHS_SCRIPT = r"""
import torch
from tests.ops import (test_add_rms_norm as add, test_add_rms_norm_cast as cast,
                       test_add_rms_norm_dynamic_quant as ardq, test_add_rms_norm_quant as arq,
                       test_dynamic_quant as dq, test_quantize as q, test_rms_norm as rms)
torch.manual_seed(0)
rms.test_rms_norm(torch.bfloat16, torch.float32, (257, 96), 1)
rms.test_rms_norm(torch.float16, torch.float16, (2, 3, 7), 1)
rms.test_rms_norm(torch.float32, torch.float32, (3, 7168), 1)
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


def test_large_all_zero_output_is_zero_and_writable():
    # npu_add_rms_norm_quant's y2 without scales2 maps fresh zero pages when it is large
    x = torch.randn(2048, 2048, dtype=bf16)
    s = torch.full((2048,), 0.05, dtype=bf16)
    y1, y2, _ = npu.npu_add_rms_norm_quant(x, x, torch.ones(2048, dtype=bf16), s, None)
    assert y2.shape == y1.shape and y2.dtype == torch.int8 and not y2.any()
    y2.fill_(3)
    assert int(y2.sum()) == 3 * y2.numel()
