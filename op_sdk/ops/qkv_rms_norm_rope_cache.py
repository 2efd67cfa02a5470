"""npu_qkv_rms_norm_rope_cache (in place) and its functional twin
npu_qkv_rms_norm_rope_cache_functional: a packed qkv projection's per-head RMSNorm of q and
k, RoPE of q and k, q written into q_out, k and v (quantised to int8 by a scale where given)
scattered into FRACTAL_NZ paged caches (torch_npu.npu_qkv_rms_norm_rope_cache; CANN's
QkvRmsNormRopeCache, aclnnQkvRmsNormRopeCache).

CANN publishes no document or kernel source of this operator in the sources read here
(ops-transformer @bfbbec83 has none); the contract is read from torch_npu 2.13.0's schema
and Meta function, TorchAir's IR prototype (auto_generated_ge_raw_ops.py), op-plugin's
binding and its unit test's golden (test_npu_qkv_rms_norm_rope_cache.py @517f2e7d, a case
upstream skips), which is the only statement of the arithmetic (docs/operators.md, "KV
cache"):

* ``qkv`` float16 / bfloat16 (B * S, (Nq + Nk + Nv) * D) with ``qkv_size`` [B, S, Nq + Nk +
  Nv, D] and ``head_nums`` [Nq, Nk, Nv]; ``q_gamma`` / ``k_gamma`` (D,), ``cos`` / ``sin``
  (B * S or B, D) with D even, of qkv's dtype; ``index`` int64 (B * S,).
* per head of q and of k: ``x / sqrt(mean(x^2) + epsilon) * gamma`` in float32 (the golden
  divides by the root), then RoPE over the whole head, ``x * cos + cat(-x2, x1) * sin`` of
  its halves (npu_rotary_mul's "half" arithmetic, each product rounded); v unchanged.
* ``q_out`` (B * S, Nq * D) of qkv's dtype receives q rounded once; ``k_cache`` / ``v_cache``
  (blocks, N * D / c0, block_size, c0), FRACTAL_NZ (c0 = 16, or 32 for int8), token t's row
  of N * D values at slot index[t] (block index[t] // block_size, row index[t] %
  block_size), a negative index writing nothing; k / v in qkv's dtype, or int8 with
  ``k_scale`` / ``v_scale`` (N, D) float32: ``round_half_even(v / scale (+ offset))``
  saturated (the golden divides), a NaN storing 0; ``k_offset`` / ``v_offset`` (N, D)
  only with their scale.
* returns (q, k, v) before quantisation, (B * S, N * D) in qkv's dtype, with
  ``is_output_qkv``; else three empty 0-dim tensors (torch_npu's Meta).
* ``cache_mode`` "PA_NZ" only (the schema's default and the golden's only mode); index
  values in [-1, slots); a repeated slot holds the last token.

Native CPU kernel: csrc/qkv_rms_norm_rope_cache.cpp (contiguous calls; the rest here).
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.ops._common import bench_randn, check, quantize_round
from op_sdk.ops.kv_rmsnorm_rope_cache import c0_of, last_writes
from op_sdk.ops.rotary_mul import rotated
from op_sdk.triton_kernels import TritonKernel

OP = "npu_qkv_rms_norm_rope_cache"
OP_F = "npu_qkv_rms_norm_rope_cache_functional"
DTYPES = (torch.float16, torch.bfloat16)
MODES = ("PA_NZ",)


def _check_cache(op, name, cache, scale, offset, sname, oname, qkv, heads, d, lead):
    if scale is not None:
        check(cache.dtype == torch.int8, op, name,
              f"must be int8 when '{sname}' is given (a quantised cache), got {cache.dtype}")
        check(scale.dtype == torch.float32 and list(scale.shape) == [heads, d], op, sname,
              f"must be float32 of shape [{heads}, {d}], got {scale.dtype} {list(scale.shape)}")
    else:
        check(cache.dtype == qkv.dtype, op, name,
              f"must have qkv's dtype {qkv.dtype} (or be int8 with '{sname}'), got {cache.dtype}")
        check(offset is None, op, oname, f"must be None without '{sname}'")
    if offset is not None:
        check(offset.dtype == torch.float32 and list(offset.shape) == [heads, d], op, oname,
              f"must be float32 of shape [{heads}, {d}], got {offset.dtype} "
              f"{list(offset.shape)}")
    c0 = c0_of(cache)
    check(d % c0 == 0, op, name,
          f"needs the head dim D = {d} a multiple of {c0} (FRACTAL_NZ groups of {cache.dtype})")
    want = [lead[0] if lead else "blocks", heads * d // c0, lead[1] if lead else "block_size", c0]
    ok = cache.dim() == 4 and cache.shape[1] == heads * d // c0 and cache.shape[3] == c0 \
        and cache.shape[2] % c0 == 0 and (not lead or tuple(cache.shape[::2]) == lead)
    check(ok, op, name, f"must have shape {want} (FRACTAL_NZ, block_size a multiple of {c0}), "
          f"got {list(cache.shape)}")
    return (cache.shape[0], cache.shape[2])


def check_qkv_rms_norm_rope_cache(op, qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache,
                                  v_cache, qkv_size, head_nums, k_scale=None, v_scale=None,
                                  k_offset=None, v_offset=None, epsilon=1e-6,
                                  cache_mode="PA_NZ", is_output_qkv=False):
    """The contract's rules (shape-only), shared by the reference and the fake; returns
    (B, S, Nq, Nk, Nv, D, blocks, block_size)."""
    check(qkv.dtype in DTYPES, op, "qkv", f"must have dtype float16 or bfloat16, got {qkv.dtype}")
    check(len(qkv_size) == 4 and all(v >= 0 for v in qkv_size), op, "qkv_size",
          f"must be [B, S, N, D] (4 non-negative sizes), got {list(qkv_size)}")
    check(len(head_nums) == 3 and all(v >= 1 for v in head_nums), op, "head_nums",
          f"must be [Nq, Nk, Nv] (3 positive head counts), got {list(head_nums)}")
    b, s, n, d = qkv_size
    nq, nk, nv = head_nums
    check(n == nq + nk + nv and d >= 2 and d % 2 == 0, op, "qkv_size",
          f"must have N = Nq + Nk + Nv = {nq + nk + nv} and an even D, got {list(qkv_size)}")
    check(qkv.dim() == 2 and list(qkv.shape) == [b * s, n * d], op, "qkv",
          f"must have shape (B * S, N * D) = {[b * s, n * d]}, got {list(qkv.shape)}")
    for name, g in (("q_gamma", q_gamma), ("k_gamma", k_gamma)):
        check(g.dtype == qkv.dtype and list(g.shape) == [d], op, name,
              f"must be ({d},) of qkv's dtype {qkv.dtype}, got {g.dtype} {list(g.shape)}")
    check(cos.dtype == qkv.dtype and cos.dim() == 2 and cos.shape[0] in (b * s, b)
          and cos.shape[1] == d, op, "cos",
          f"must have qkv's dtype {qkv.dtype} and shape (B * S = {b * s} or B = {b}, D = {d}), "
          f"got {cos.dtype} {list(cos.shape)}")
    check(sin.dtype == cos.dtype and sin.shape == cos.shape, op, "sin",
          f"must have cos's shape {list(cos.shape)} and dtype {cos.dtype}, got {sin.dtype} "
          f"{list(sin.shape)}")
    check(cache_mode in MODES, op, "cache_mode", f"must be 'PA_NZ', got {cache_mode!r}")
    check(index.dtype == torch.int64 and index.dim() == 1 and index.shape[0] == b * s, op,
          "index", f"must be int64 of shape ({b * s},), got {index.dtype} {list(index.shape)}")
    check(q_out.dtype == qkv.dtype and list(q_out.shape) == [b * s, nq * d], op, "q_out",
          f"must be {[b * s, nq * d]} of qkv's dtype, got {q_out.dtype} {list(q_out.shape)}")
    lead = _check_cache(op, "k_cache", k_cache, k_scale, k_offset, "k_scale", "k_offset", qkv,
                        nk, d, None)
    _check_cache(op, "v_cache", v_cache, v_scale, v_offset, "v_scale", "v_offset", qkv, nv, d,
                 lead)
    return b, s, nq, nk, nv, d, lead[0], lead[1]


def _norm(x, gamma, epsilon):
    """The golden's RMSNorm in float32: x / sqrt(mean(x^2) + eps) * gamma."""
    return x / torch.sqrt(x.square().mean(-1, keepdim=True) + epsilon) * gamma.float()


def _cache_values(v32, rounded, scale, offset):
    if scale is None:
        return rounded
    q = v32 / scale
    if offset is not None:
        q = q + offset
    return quantize_round(q, -128.0, 127.0, torch.int8)


def _scattered(cache, rows, index, blocks, block_size):
    """A copy of the FRACTAL_NZ cache with token t's row (N * D values) at slot index[t]; a
    negative index writes nothing, a repeated slot keeps the last token (``last_writes``)."""
    c0 = cache.shape[-1]
    out = cache.contiguous().clone()
    written = last_writes(index, blocks * block_size)
    keep = written >= 0
    dst, src = written[keep], rows[keep]
    out[dst // block_size, :, dst % block_size] = src.reshape(src.shape[0], out.shape[1], c0)
    return torch.empty_like(cache).copy_(out)


def _outputs_fake(qkv, q_out, k_cache, v_cache, t, heads, d, is_output_qkv):
    """The functional form's allocations: (q, k, v before quantisation, q_out, k_cache,
    v_cache); the first three 0-dim without is_output_qkv (torch_npu's Meta)."""
    if is_output_qkv:
        before = tuple(qkv.new_empty((t, n * d)) for n in heads)
    else:
        before = tuple(qkv.new_empty(()) for _ in range(3))
    return (*before, torch.empty_like(q_out), torch.empty_like(k_cache),
            torch.empty_like(v_cache))


def _per_sequence(cos, b, s):
    """Whether cos / sin hold a row per sequence (B rows, S > 1; else a row per token)."""
    return cos.shape[0] == b and s != 1


def _functional(op, qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size,
                head_nums, k_scale, v_scale, k_offset, v_offset, epsilon, cache_mode,
                is_output_qkv, run):
    """The functional form's results from ``run``: "reference" (the ground truth), "cuda"
    (the Triton kernel) or "fake" (the allocations), after the contract's checks."""
    b, s, nq, nk, nv, d, blocks, block_size = check_qkv_rms_norm_rope_cache(
        op, qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size,
        head_nums, k_scale, v_scale, k_offset, v_offset, epsilon, cache_mode, is_output_qkv)
    t = b * s
    if run == "fake":
        return _outputs_fake(qkv, q_out, k_cache, v_cache, t, (nq, nk, nv), d, is_output_qkv)
    check(bool(((index >= -1) & (index < blocks * block_size)).all()), op, "index",
          f"values must lie in [-1, {blocks * block_size}) (-1: not written)")
    if run == "cuda":
        from op_sdk.triton_kernels import kv_cache

        if kv_cache.covers_qkv(d):
            outs = _outputs_fake(qkv, q_out, k_cache, v_cache, t, (nq, nk, nv), d,
                                 is_output_qkv)
            done = kv_cache.run_qkv(
                qkv, q_gamma, k_gamma, cos, sin, epsilon,
                last_writes(index, blocks * block_size), (k_scale, v_scale),
                (k_offset, v_offset), outs, k_cache, v_cache, heads=(nq, nk, nv), d=d,
                per=s if _per_sequence(cos, b, s) else 1, block_size=block_size,
                k_c0=c0_of(k_cache), v_c0=c0_of(v_cache), out_qkv=is_output_qkv)
            if not is_output_qkv:  # (the reference's zeros)
                done = (*(qkv.new_zeros(()) for _ in range(3)), *done[3:])
            return done
    x = qkv.float().view(b, s, nq + nk + nv, d)
    q, k, v = x.split([nq, nk, nv], dim=2)
    per = 1 if _per_sequence(cos, b, s) else s  # cos rows per sequence
    c = cos.reshape(b, per, 1, d)
    sn = sin.reshape(b, per, 1, d)
    q32 = rotated(_norm(q, q_gamma, epsilon), c, sn, "half").reshape(t, nq * d)
    k32 = rotated(_norm(k, k_gamma, epsilon), c, sn, "half").reshape(t, nk * d)
    q_r = qkv.new_empty((t, nq * d)).copy_(q32)
    k_r = qkv.new_empty((t, nk * d)).copy_(k32)
    v_r = qkv[:, (nq + nk) * d:].contiguous()
    k_rows = _cache_values(k32.view(t, nk, d), k_r.view(t, nk, d), k_scale, k_offset)
    v_rows = _cache_values(v_r.float().view(t, nv, d), v_r.view(t, nv, d), v_scale, v_offset)
    q_new = torch.empty_like(q_out).copy_(q_r)
    k_new = _scattered(k_cache, k_rows.reshape(t, nk * d), index, blocks, block_size)
    v_new = _scattered(v_cache, v_rows.reshape(t, nv * d), index, blocks, block_size)
    before = (q_r, k_r, v_r) if is_output_qkv else tuple(qkv.new_zeros(()) for _ in range(3))
    return (*before, q_new, k_new, v_new)


def qkv_rms_norm_rope_cache_functional_reference(
        qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size, head_nums, *,
        k_scale=None, v_scale=None, k_offset=None, v_offset=None, epsilon=1e-6,
        cache_mode="PA_NZ", is_output_qkv=False):
    """The ground truth: (q, k, v before quantisation, q_out, k_cache, v_cache updated)."""
    return _functional(OP_F, qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache,
                       qkv_size, head_nums, k_scale, v_scale, k_offset, v_offset, epsilon,
                       cache_mode, is_output_qkv, "reference")


def qkv_rms_norm_rope_cache_functional_fake(
        qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size, head_nums, *,
        k_scale=None, v_scale=None, k_offset=None, v_offset=None, epsilon=1e-6,
        cache_mode="PA_NZ", is_output_qkv=False):
    return _functional(OP_F, qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache,
                       qkv_size, head_nums, k_scale, v_scale, k_offset, v_offset, epsilon,
                       cache_mode, is_output_qkv, "fake")


def qkv_rms_norm_rope_cache_functional_cuda(
        qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size, head_nums, *,
        k_scale=None, v_scale=None, k_offset=None, v_offset=None, epsilon=1e-6,
        cache_mode="PA_NZ", is_output_qkv=False):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/kv_cache.py: the norms, the rotations
    and both caches' stores in one launch)."""
    return _functional(OP_F, qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache,
                       qkv_size, head_nums, k_scale, v_scale, k_offset, v_offset, epsilon,
                       cache_mode, is_output_qkv, "cuda")


def bench_inputs(t, h, dt):
    """Qwen3-style decode: t tokens of 16 q heads, 2 k / v heads of 128, int8 caches of 2t
    slots in blocks of 128 (h unused: the head layout is the model's)."""
    nq, nk, nv, d = 16, 2, 2, 128
    blocks = max(1, -(-2 * t // 128))
    qkv = bench_randn(t, (nq + nk + nv) * d, dtype=dt)
    args = (qkv, bench_randn(d, dtype=dt), bench_randn(d, dtype=dt), bench_randn(t, d, dtype=dt),
            bench_randn(t, d, dtype=dt), torch.randperm(blocks * 128)[:t],
            torch.zeros(t, nq * d, dtype=dt),
            torch.zeros(blocks, nk * d // 32, 128, 32, dtype=torch.int8),
            torch.zeros(blocks, nv * d // 32, 128, 32, dtype=torch.int8), [t, 1, nq + nk + nv, d],
            [nq, nk, nv])
    return args, {"k_scale": torch.rand(nk, d) + 0.5, "v_scale": torch.rand(nv, d) + 0.5}


def bench_composite(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size,
                    head_nums, *, k_scale=None, v_scale=None, epsilon=1e-6):
    """What torch.compile is timed on: the operator's arithmetic as a hand-written chain
    would spell it, without the rules' data-dependent checks (which break the graph) and the
    repeated-slot rule (the benchmark's slots are distinct and valid)."""
    b, s, n, d = qkv_size
    nq, nk, nv = head_nums
    t = b * s
    x = qkv.float().view(b, s, n, d)
    q, k, v = x.split([nq, nk, nv], dim=2)
    c, sn = cos.reshape(b, s, 1, d), sin.reshape(b, s, 1, d)
    q32 = rotated(_norm(q, q_gamma, epsilon), c, sn, "half").reshape(t, nq * d)
    k32 = rotated(_norm(k, k_gamma, epsilon), c, sn, "half").reshape(t, nk * d)
    q_new = q32.to(qkv.dtype)
    k_rows = _cache_values(k32.view(t, nk, d), None, k_scale, None).reshape(t, -1, 32)
    v_rows = _cache_values(v.reshape(t, nv, d), None, v_scale, None).reshape(t, -1, 32)
    k_new, v_new = k_cache.clone(), v_cache.clone()
    bs = k_cache.shape[2]
    k_new[index // bs, :, index % bs] = k_rows
    v_new[index // bs, :, index % bs] = v_rows
    return q_new, k_new, v_new


_ARGS = ("Tensor qkv, Tensor q_gamma, Tensor k_gamma, Tensor cos, Tensor sin, Tensor index, "
         "{q} q_out, {k} k_cache, {v} v_cache, int[4] qkv_size, int[3] head_nums, *, "
         "Tensor? k_scale=None, Tensor? v_scale=None, Tensor? k_offset=None, "
         "Tensor? v_offset=None, float epsilon=1e-06, str cache_mode=\"PA_NZ\", "
         "bool is_output_qkv=False")

npu_qkv_rms_norm_rope_cache_functional = define_op(
    f"npu_qkv_rms_norm_rope_cache_functional({_ARGS.format(q='Tensor', k='Tensor', v='Tensor')})"
    " -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    reference=qkv_rms_norm_rope_cache_functional_reference,
    fake=qkv_rms_norm_rope_cache_functional_fake,
    native=("cpu",), reference_op=True,  # the launcher routes other forms here
    kernels={"cuda": TritonKernel(qkv_rms_norm_rope_cache_functional_cuda)},
    # one call under torch.compile on CUDA too: the launcher checks index's values (a read
    # back to the host, which a traced graph cannot hold)
    inline=False,
    benchmarks=(Benchmark(bench_inputs, composite=bench_composite,
                          shapes=tuple((t, 2560) for t in (1, 16, 257, 4096))),),
    doc="Packed qkv: per-head RMSNorm + RoPE of q and k, q into a copy of q_out, k / v "
        "(int8 by scale) into copies of FRACTAL_NZ paged caches; returns (q, k, v before "
        "quantisation, q_out, k_cache, v_cache).",
)

npu_qkv_rms_norm_rope_cache = define_op(
    f"npu_qkv_rms_norm_rope_cache("
    f"{_ARGS.format(q='Tensor(a!)', k='Tensor(b!)', v='Tensor(c!)')}) -> (Tensor, Tensor, Tensor)",
    reference=qkv_rms_norm_rope_cache_functional_reference,
    functional="npu_qkv_rms_norm_rope_cache_functional",
    doc="In-place npu_qkv_rms_norm_rope_cache_functional: q_out and the caches written where "
        "they are; returns (q, k, v) before quantisation (with is_output_qkv).",
)
