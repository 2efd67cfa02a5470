"""The pool of large CPU outputs (csrc/output_pool.cpp, op_sdk.cpu_output_pool): kernels'
multi-MB outputs come from blocks earlier outputs freed, within the byte budget; results
are the same with the pool on and off; live outputs never share memory; pooled tensors
behave as any CPU tensor (resize_, strides like the fake's). Each case runs in its own
process, where the budget (OP_SDK_CPU_POOL_MB) and the counters start fresh."""

import os
import subprocess
import sys

import pytest
import torch

import op_sdk
from op_sdk import _native

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = 1 << 20

pytestmark = pytest.mark.skipif(not _native.load(), reason="op_sdk._C is not built")

_PRELUDE = r"""
import torch, op_sdk
npu = torch.ops.npu
pool = op_sdk.cpu_output_pool
MB = 1 << 20
torch.manual_seed(0)
"""


def _run(body, **env):
    result = subprocess.run([sys.executable, "-c", _PRELUDE + body], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT, **env),
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]
    return result.stdout


def test_large_outputs_reuse_freed_blocks():
    _run(r"""
x = torch.randn(1024, 2048, dtype=torch.bfloat16)   # 4 MiB outputs
g = torch.randn(2048, dtype=torch.bfloat16)
s0 = pool()
assert s0["budget_bytes"] == 256 * MB, s0
y, _ = npu.npu_rms_norm(x, g)
s1 = pool()
assert s1["misses"] == s0["misses"] + 1 and s1["in_use_bytes"] == 4 * MB, s1
first = y.data_ptr()
del y
assert pool()["free_bytes"] == 4 * MB and pool()["in_use_bytes"] == 0
y, _ = npu.npu_rms_norm(x, g)
s2 = pool()
assert s2["hits"] == s1["hits"] + 1 and s2["misses"] == s1["misses"], s2
assert y.data_ptr() == first          # the freed block, handed out again
# live outputs never share a block
z, _ = npu.npu_rms_norm(x, g)
assert z.data_ptr() != y.data_ptr()
assert pool()["in_use_bytes"] == 8 * MB
print("ok")
""", OP_SDK_CPU_POOL_MB="256")


def test_small_outputs_bypass_the_pool():
    _run(r"""
x = torch.randn(16, 4096, dtype=torch.bfloat16)      # 128 KiB
g = torch.randn(4096, dtype=torch.bfloat16)
for _ in range(3):
    npu.npu_rms_norm(x, g)
s = pool()
assert s["hits"] == 0 and s["misses"] == 0 and s["free_bytes"] == 0, s
print("ok")
""")


def test_budget_bounds_the_kept_blocks_and_release_frees_them():
    _run(r"""
g = torch.randn(2048, dtype=torch.bfloat16)
# 4 MiB outputs under a 10 MiB budget: three freed at once, two are kept
ys = [npu.npu_rms_norm(torch.randn(1024, 2048, dtype=torch.bfloat16), g)[0] for _ in range(3)]
del ys
s = pool()
assert s["budget_bytes"] == 10 * MB and s["free_bytes"] == 8 * MB and s["in_use_bytes"] == 0, s
# an output above the budget is never kept
big, _ = npu.npu_rms_norm(torch.randn(4096, 2048, dtype=torch.bfloat16), g)   # 16 MiB
del big
assert pool()["free_bytes"] == 8 * MB, pool()
r = pool(release=True)
assert r["released_bytes"] == 8 * MB and r["free_bytes"] == 0, r
print("ok")
""", OP_SDK_CPU_POOL_MB="10")


def test_block_sizes_match_within_a_quarter():
    _run(r"""
g = torch.randn(2048, dtype=torch.bfloat16)
y, _ = npu.npu_rms_norm(torch.randn(2048, 2048, dtype=torch.bfloat16), g)   # 8 MiB
del y
y, _ = npu.npu_rms_norm(torch.randn(1792, 2048, dtype=torch.bfloat16), g)   # 7 MiB: reuses
assert pool()["hits"] == 1, pool()
del y
y, _ = npu.npu_rms_norm(torch.randn(1024, 2048, dtype=torch.bfloat16), g)   # 4 MiB: new
s = pool()
assert s["hits"] == 1 and s["misses"] == 2 and s["free_bytes"] == 8 * MB, s
print("ok")
""")


def test_pool_off_gives_the_same_results():
    body = r"""
x1 = torch.randn(3, 700, 1536, dtype=torch.bfloat16)
x2 = torch.randn(3, 700, 1536, dtype=torch.bfloat16)
g = torch.randn(1536, dtype=torch.bfloat16)
outs = []
for _ in range(2):   # the second round runs on reused blocks (streaming stores)
    outs += list(npu.npu_add_rms_norm(x1, x2, g))
    outs += list(npu.npu_add_rms_norm_dynamic_quant(x1, x2, g, output_mask=[True, True]))
    outs += list(npu.npu_add_rms_norm_cast(x1, x2, g))
    outs += list(npu.npu_dynamic_quant(x1))
    w = torch.randint(-128, 128, (1536, 2048), dtype=torch.int8)
    q = torch.randint(-128, 128, (700, 1536), dtype=torch.int8)
    outs.append(npu.npu_quant_matmul(q, w, torch.rand(2048) / 100, output_dtype=torch.bfloat16))
torch.save([o for o in outs if o is not None], OUT)
print("ok", pool()["hits"] > 0)
"""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        on, off = os.path.join(d, "on.pt"), os.path.join(d, "off.pt")
        out_on = _run(f"OUT = {on!r}\n" + body)
        out_off = _run(f"OUT = {off!r}\n" + body, OP_SDK_CPU_POOL_MB="0")
        assert "ok True" in out_on and "ok False" in out_off
        a, b = torch.load(on), torch.load(off)
        assert len(a) == len(b) > 10
        for u, v in zip(a, b):
            assert u.dtype == v.dtype and u.shape == v.shape and u.stride() == v.stride()
            assert torch.equal(u, v)


def test_pooled_outputs_behave_as_cpu_tensors():
    _run(r"""
x = torch.randn(1024, 2048, dtype=torch.bfloat16)
g = torch.randn(2048, dtype=torch.bfloat16)
y, _ = npu.npu_rms_norm(x, g)
keep = y.clone()
y.resize_(2048, 2048)                       # grows through the pool's allocator
assert torch.equal(y[:1024], keep)
y.resize_(16)                               # shrinking keeps the storage
y.add_(1)
# a dense non-contiguous input: the output keeps its strides, as the fake's empty_like
xt = torch.randn(2048, 1024, dtype=torch.bfloat16).t()
yt, _ = npu.npu_rms_norm(xt, g)
assert yt.stride() == (1, 1024), yt.stride()
ref = (xt.float() * torch.rsqrt(xt.float().pow(2).mean(-1, keepdim=True) + 1e-6)
       * g.float()).to(torch.bfloat16)
torch.testing.assert_close(yt, ref, atol=0.02, rtol=0.02)
# shared memory, pickling
yt.share_memory_()
assert yt.is_shared()
print("ok")
""")


def test_threads_share_the_pool_safely():
    _run(r"""
import threading
x = torch.randn(1024, 2048, dtype=torch.bfloat16)
g = torch.randn(2048, dtype=torch.bfloat16)
want = npu.npu_rms_norm(x, g)[0]
bad = []
def work():
    for _ in range(30):
        y = npu.npu_rms_norm(x, g)[0]
        if not torch.equal(y, want):
            bad.append(1)
ts = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
assert not bad
del want
s = pool()
assert s["in_use_bytes"] == 0 and s["free_bytes"] <= s["budget_bytes"], s
print("ok")
""")


def test_bad_budget_setting_means_no_pool_or_its_value():
    _run(r"""
assert pool()["budget_bytes"] == 0
print("ok")
""", OP_SDK_CPU_POOL_MB="-5")


def test_in_process_api():
    stats = op_sdk.cpu_output_pool()
    assert set(stats) == {"budget_bytes", "free_bytes", "in_use_bytes", "hits", "misses",
                          "released_bytes"}
    assert stats["released_bytes"] == 0
    assert "cpu_output_pool" in op_sdk.__all__
    x = torch.randn(8, 8)
    assert torch.ops.npu.npu_rms_norm(x, torch.ones(8))[0].shape == x.shape
