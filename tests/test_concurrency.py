"""The native kernels called from 8 Python threads at once, with outputs large enough to come
from the CPU output pool (csrc/output_pool.cpp): every result equals the single-threaded
run's, bit for bit, and the pool ends with nothing in use. Runs in its own process (fresh
pool counters, a pool budget that forces reuse)."""

import os
import subprocess
import sys

import pytest

from op_sdk import _native

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.skipif(not _native.load(), reason="op_sdk._C is not built")

_SCRIPT = r"""
import random, threading
import torch, op_sdk
from op_sdk.ops._common import pack_quant_scale
from tests.ops import gather, opdef

npu = torch.ops.npu
torch.manual_seed(0)
bf16, fp16 = torch.bfloat16, torch.float16
T, H = 384, 4096  # 3 MiB of bf16 per tensor: pooled outputs
x1, x2 = torch.randn(T, H, dtype=bf16), torch.randn(T, H, dtype=bf16)
g = torch.rand(H, dtype=bf16) + 0.5
w = torch.randint(-128, 128, (H, 1024), dtype=torch.int8)
calls = [
    (npu.npu_rms_norm, (x1, g), {}),
    (npu.npu_add_rms_norm, (x1, x2, g), {}),
    (npu.npu_add_rms_norm_cast, (x1, x2, g), {}),
    (npu.npu_add_rms_norm_quant, (x1, x2, g, torch.rand(H, dtype=bf16) + 0.5,
                                  torch.randint(-3, 3, (H,)).to(bf16)), {}),
    (npu.npu_add_rms_norm_dynamic_quant, (x1, x2, g), {"smooth_scale1": g, "smooth_scale2": g}),
    (npu.npu_dynamic_quant, (x1,), {}),
    (npu.npu_dynamic_quant, (x1,), {"quant_mode": "pertensor"}),
    (npu.npu_quantize, (x1, torch.rand(H) + 0.5, None, torch.qint8, -1, True), {}),
    (npu.npu_quant_matmul, (torch.randint(-128, 128, (T, H), dtype=torch.int8), w,
                            pack_quant_scale(torch.rand(1024) / 4096)),
     {"output_dtype": bf16}),
    (npu.npu_quant_matmul, (torch.randint(-128, 128, (4, H), dtype=torch.int8), w,
                            torch.rand(1024) / 4096), {"output_dtype": bf16}),
    (npu.npu_transpose_batchmatmul, (torch.randn(8, 96, 128, dtype=bf16),
                                     torch.randn(8, 128, 512, dtype=bf16)), {}),
]
# every operator's own sample calls too (small outputs: the allocator's, not the pool's)
for name, args, kwargs in gather("samples"):
    d = opdef(name)
    if "cpu" in d.native and not d.mutated_args:
        calls.append((d.op, args, kwargs))

def run(c):
    fn, args, kwargs = c
    with torch.no_grad():
        out = fn(*args, **kwargs)
    return out if isinstance(out, tuple) else (out,)

want = [run(c) for c in calls]
bad = []

def work(seed):
    rng = random.Random(seed)
    order = list(range(len(calls))) * 3
    rng.shuffle(order)
    for i in order:
        got = run(calls[i])
        for a, b in zip(got, want[i]):
            same = a.shape == b.shape and a.dtype == b.dtype and torch.equal(
                a.view(torch.uint8) if a.dtype.is_floating_point and a.element_size() == 1 else a,
                b.view(torch.uint8) if b.dtype.is_floating_point and b.element_size() == 1 else b)
            if not same and not (a.dtype.is_floating_point and torch.equal(a.isnan(), b.isnan())
                                 and torch.equal(a.nan_to_num(), b.nan_to_num())):
                bad.append((seed, i))

threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
assert not bad, bad[:10]
stats = op_sdk.cpu_output_pool()
assert stats["hits"] > 0, stats
del want
assert op_sdk.cpu_output_pool()["in_use_bytes"] == 0, op_sdk.cpu_output_pool()
print("ok", len(calls), stats)
"""


def test_eight_threads_match_the_single_threaded_run():
    result = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT, OP_SDK_CPU_POOL_MB="64"),
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0 and "ok" in result.stdout, \
        result.stdout[-2000:] + result.stderr[-3000:]
