"""npu_kv_rmsnorm_rope_cache and its v2 pair (npu_kv_rmsnorm_rope_cache_v2, in place, with
its functional twin npu_kv_rmsnorm_rope_cache_v2_functional): DeepSeek's MLA key / value
preprocessing in one call, RMSNorm of the compressed kv part, interleaved RoPE of the rope
part, both scattered into their caches (torch_npu.npu_kv_rmsnorm_rope_cache; CANN's
KvRmsNormRopeCache, aclnnKvRmsNormRopeCache, ops-transformer posembedding/
kv_rms_norm_rope_cache).

Contract (docs/operators.md, "KV cache"), read from torch_npu's document, ops-transformer's
README, tiling checks and kernels (kv_rms_norm_rope_cache_b16_pa*.h) and op-plugin's
binding / Meta functions:

* ``kv`` float16 / bfloat16 (B, 1, S, Dv + Dk); ``gamma`` (Dv,); ``cos`` / ``sin`` (B, 1, S or
  1, Dk), Dk even; all of kv's dtype. ``index`` int64.
* ``c_kv = (x / sqrt(sum(x^2) * fl(1 / Dv) + epsilon)) * gamma`` over x = kv[..., :Dv] in
  float32 (the kernel divides by the root; op_sdk's other norms multiply by rstd), rounded
  once to kv's dtype.
* ``k_rope`` = npu_interleave_rope's arithmetic on kv[..., Dv:]: q = de-interleaved,
  ``q * cos + RotateHalf(q) * sin`` in float32, each product rounded, rounded once.
* each cache receives its values: of kv's dtype, or int8 when its scale is given
  (``round_half_even(v32 * scale)`` saturated, the float32 value before rounding to kv's
  dtype; a NaN stores 0, the contract's float -> integer rule).
* ``cache_mode`` says where token t = (b, s) goes: "Norm": caches (B, 1, L, D*), ``index``
  (B, S), row index[b, s] of batch b; "PA" / "PA_BNSD": caches (blocks, block_size, 1, D*),
  ``index`` (B * S,), the global slot index[t]; "PA_NZ": the same slots in FRACTAL_NZ
  storage (the cache's elements in row-major order hold (blocks, D* / c0, block_size, c0),
  c0 = 16, or 32 for an int8 cache); "PA_BLK_BNSD" / "PA_BLK_NZ": ``index`` (B *
  ceil(S / block_size),) holds the first slot of each of a sequence's pages, token s going
  to block index[b, s // block_size] // block_size, row s % block_size. A negative index
  writes nothing; index values must lie in [-1, slots); among repeated slots the last token
  in (b, s) order is written (undefined on the NPU).
* The returned caches are updated copies: the schema of npu_kv_rmsnorm_rope_cache declares
  no mutation (torch_npu's NPU kernel also writes its inputs in place, which its schema does
  not say); npu_kv_rmsnorm_rope_cache_v2 declares it and writes them in place. k_rope and
  c_kv are always computed (the NPU writes them only with is_output_kv in a paged mode).
* Native CPU kernel: csrc/kv_rmsnorm_rope_cache.cpp (contiguous calls; the rest here). CUDA
  kernel: Triton, op_sdk/triton_kernels/kv_cache.py (every form; the cache rows each token
  writes decided here, ``written_rows``, so that the kernel's stores never race).
* Not taken (errors naming the argument): ``v`` (aclnnKvRmsNormRopeCacheV2's form),
  ``k_rope_offset`` / ``c_kv_offset`` (torch_npu: "not supported yet"), cache dtype codes
  other than the cache's own (``k_cache_dtype`` / ``ckv_cache_dtype`` of the v2 pair).
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.ops._common import CODE_OF, bench_randn, check, dtype_value_str, quantize_round
from op_sdk.ops.rotary_mul import rotated
from op_sdk.triton_kernels import TritonKernel

OP = "npu_kv_rmsnorm_rope_cache"
DTYPES = (torch.float16, torch.bfloat16)
MODES = ("Norm", "PA", "PA_BNSD", "PA_NZ", "PA_BLK_BNSD", "PA_BLK_NZ")
ROPE_MODE = "interleave-half"  # npu_rotary_mul's mode: npu_interleave_rope's arithmetic


def c0_of(cache: torch.Tensor) -> int:
    """FRACTAL_NZ's inner block of a cache: 32 bytes (16 half-width values, 32 int8)."""
    return 32 if cache.dtype == torch.int8 else 16


class Form:
    """What a valid call computes: the sizes, the mode and the quantisation of each cache."""

    def __init__(self, b, s, dv, dk, mode, block_size, slots, k_quant, v_quant):
        self.b, self.s, self.dv, self.dk = b, s, dv, dk
        self.mode, self.block_size, self.slots = mode, block_size, slots
        self.k_quant, self.v_quant = k_quant, v_quant

    @property
    def nz(self) -> bool:
        return self.mode.endswith("_NZ")

    @property
    def blocked(self) -> bool:
        return self.mode.startswith("PA_BLK")


def _check_cache(op, name, cache, scale, scale_name, width, kv, mode, lead):
    quant = scale is not None
    if quant:
        check(cache.dtype == torch.int8, op, name,
              f"must be int8 when '{scale_name}' is given (a quantised cache), got {cache.dtype}")
        check(scale.dtype == torch.float32 and scale.dim() == 1 and scale.shape[0] == width,
              op, scale_name, f"must be float32 of shape [{width}], got {scale.dtype} "
              f"{list(scale.shape)}")
    else:
        check(cache.dtype == kv.dtype, op, name,
              f"must have kv's dtype {kv.dtype} (or be int8 with '{scale_name}'), got "
              f"{cache.dtype}")
    if mode == "Norm":
        want = f"(B = {lead[0]}, 1, cache_length, {width})"
        ok = cache.dim() == 4 and cache.shape[0] == lead[0] and cache.shape[1] == 1 \
            and cache.shape[3] == width
    else:
        want = f"(block_num, block_size, 1, {width})"
        ok = cache.dim() == 4 and cache.shape[2] == 1 and cache.shape[3] == width
    check(ok, op, name, f"must have shape {want} in cache_mode '{mode}', got {list(cache.shape)}")
    if mode != "Norm":
        c0 = c0_of(cache)
        check(cache.shape[1] % c0 == 0, op, name,
              f"block_size (dim 1) must be a multiple of {c0} (32 bytes of {cache.dtype}), "
              f"got {cache.shape[1]}")
        if mode.endswith("_NZ"):
            check(width % c0 == 0, op, name,
                  f"last dim must be a multiple of {c0} in cache_mode '{mode}' (FRACTAL_NZ), "
                  f"got {width}")
    return quant


def check_kv_rmsnorm_rope_cache(op, kv, gamma, cos, sin, index, k_cache, ckv_cache,
                                k_rope_scale=None, c_kv_scale=None, k_rope_offset=None,
                                c_kv_offset=None, v=None, epsilon=1e-5, cache_mode="Norm",
                                is_output_kv=False, k_cache_dtype=None,
                                ckv_cache_dtype=None) -> Form:
    """The contract's rules (shape-only: the reference checks index's values), shared by the
    reference, the fake and the kernels; returns the call's Form."""
    check(kv.dtype in DTYPES, op, "kv", f"must have dtype float16 or bfloat16, got {kv.dtype}")
    check(kv.dim() == 4 and kv.shape[1] == 1, op, "kv",
          f"must have 4 dims (B, 1, S, D) (one head), got {list(kv.shape)}")
    b, _, s, d = kv.shape
    check(v is None, op, "v", "must be None (aclnnKvRmsNormRopeCacheV2's form is not supported)")
    check(k_rope_offset is None, op, "k_rope_offset",
          "must be None (asymmetric quantisation is not supported, as on the NPU)")
    check(c_kv_offset is None, op, "c_kv_offset",
          "must be None (asymmetric quantisation is not supported, as on the NPU)")
    check(cache_mode in MODES, op, "cache_mode",
          f"must be one of {', '.join(MODES)}, got {cache_mode!r}")
    check(gamma.dtype == kv.dtype and gamma.dim() == 1 and 1 <= gamma.shape[0] < d, op, "gamma",
          f"must be 1-D (Dv,) of kv's dtype {kv.dtype} with Dv < D = {d}, got "
          f"{gamma.dtype} {list(gamma.shape)}")
    dv = gamma.shape[0]
    dk = d - dv
    check(dk % 2 == 0, op, "gamma",
          f"must leave an even rope part: D - Dv = {d} - {dv} = {dk} is odd")
    check(cos.dtype == kv.dtype and cos.dim() == 4 and cos.shape[0] == b and cos.shape[1] == 1
          and cos.shape[2] in (1, s) and cos.shape[3] == dk, op, "cos",
          f"must have kv's dtype {kv.dtype} and shape (B = {b}, 1, S = {s} or 1, Dk = {dk}), "
          f"got {cos.dtype} {list(cos.shape)}")
    check(sin.dtype == cos.dtype and sin.shape == cos.shape, op, "sin",
          f"must have cos's shape {list(cos.shape)} and dtype {cos.dtype}, got "
          f"{sin.dtype} {list(sin.shape)}")
    k_quant = _check_cache(op, "k_cache", k_cache, k_rope_scale, "k_rope_scale", dk, kv,
                           cache_mode, (b,))
    v_quant = _check_cache(op, "ckv_cache", ckv_cache, c_kv_scale, "c_kv_scale", dv, kv,
                           cache_mode, (b,))
    check(k_cache.shape[:3] == ckv_cache.shape[:3], op, "ckv_cache",
          f"must have k_cache's leading dims {list(k_cache.shape[:3])}, got "
          f"{list(ckv_cache.shape[:3])}")
    for arg, code, cache in (("k_cache_dtype", k_cache_dtype, k_cache),
                             ("ckv_cache_dtype", ckv_cache_dtype, ckv_cache)):
        check(code is None or code == CODE_OF.get(cache.dtype), op, arg,
              f"must be None or the cache's own dtype {dtype_value_str(cache.dtype)}, got "
              f"{dtype_value_str(code)}")
    check(index.dtype == torch.int64, op, "index", f"must have dtype int64, got {index.dtype}")
    if cache_mode == "Norm":
        block_size, slots = 0, k_cache.shape[2]
        check(index.dim() == 2 and list(index.shape) == [b, s], op, "index",
              f"must have shape (B, S) = {[b, s]} in cache_mode 'Norm', got {list(index.shape)}")
    else:
        block_size = k_cache.shape[1]
        slots = k_cache.shape[0] * block_size
        n = b * (-(-s // block_size)) if cache_mode.startswith("PA_BLK") else b * s
        what = "B * ceil(S / block_size)" if cache_mode.startswith("PA_BLK") else "B * S"
        check(index.dim() == 1 and index.shape[0] == n, op, "index",
              f"must be 1-D of {what} = {n} values in cache_mode '{cache_mode}', got "
              f"{list(index.shape)}")
    return Form(b, s, dv, dk, cache_mode, block_size, slots, k_quant, v_quant)


def values(kv, gamma, cos, sin, epsilon):
    """(k_rope, c_kv) in float32, before the rounding to kv's dtype: the arithmetic the
    outputs and the caches share."""
    dv = gamma.shape[0]
    x = kv[..., :dv].float()
    ms = x.square().sum(-1, keepdim=True) * (1.0 / dv)
    c_kv = x / torch.sqrt(ms + epsilon) * gamma.float()
    k_rope = rotated(kv[..., dv:], cos, sin, ROPE_MODE)
    return k_rope, c_kv


def slots_of(op, index, form):
    """The cache slot (Norm: row of its batch; paged: block * block_size + row) of each token
    in (b, s) order, -1 where nothing is written; index values outside [-1, slots) raise."""
    per = (-(-form.s // form.block_size)) if form.blocked else form.s
    idx = index.reshape(form.b, per)
    check(bool(((idx >= -1) & (idx < form.slots)).all()), op, "index",
          f"values must lie in [-1, {form.slots}) (-1: not written), got "
          f"[{int(idx.min())}, {int(idx.max())}]" if idx.numel() else "")
    if not form.blocked:
        return idx.reshape(form.b, form.s)
    s = torch.arange(form.s, device=index.device)
    page = idx[:, s // form.block_size]
    slot = (page // form.block_size) * form.block_size + s % form.block_size
    return torch.where(page >= 0, slot, torch.full_like(slot, -1))


def _cache_values(v32, rounded, scale):
    if scale is None:
        return rounded
    return quantize_round(v32 * scale.float(), -128.0, 127.0, torch.int8)


def written_rows(slots, form):
    """Each token's row in its cache's (rows, width) view, in (b, s) order (Norm: batch b's
    row ``b * cache_length + slot``; paged: the slot), -1 where nothing is written: a
    negative index, or a later token writing the same row (the last one is written). No
    value is read back to the host: the CUDA kernel's stores, one per row, take it as is."""
    flat = slots.reshape(-1)
    total = form.slots
    if form.mode == "Norm":
        batch = torch.arange(form.b, device=slots.device).repeat_interleave(form.s)
        flat = torch.where(flat >= 0, batch * form.slots + flat, flat)
        total = form.b * form.slots
    return last_writes(flat, total)


def last_writes(flat, total):
    """Each token's row in [0, total) (``flat``, -1: written nowhere), or -1 where a later
    token writes the same row: the one rule of a repeated slot (the last token is written),
    for every KV-cache operator's reference and CUDA kernel. Computed on the device, no read
    back."""
    order = torch.arange(flat.numel(), device=flat.device)
    at = torch.where(flat >= 0, flat, total)  # (row `total`: the tokens written nowhere)
    last = torch.full((total + 1,), -1, dtype=torch.int64, device=flat.device)
    last.scatter_reduce_(0, at, order, "amax")
    return torch.where((flat >= 0) & (last[at] == order), flat, -1)


def scattered(cache, vals, rows, form):
    """A copy of ``cache`` with each token's values (rows of B * S) at its row ``rows``
    (``written_rows``), in the cache's layout."""
    buf = cache.contiguous().clone()
    width = cache.shape[-1]
    keep = rows >= 0
    dst, src = rows[keep], vals.reshape(-1, width)[keep]
    if form.nz:
        c0 = c0_of(cache)
        nz = buf.view(-1, width // c0, form.block_size, c0)
        nz[dst // form.block_size, :, dst % form.block_size] = src.view(-1, width // c0, c0)
    else:
        buf.view(-1, width)[dst] = src
    return torch.empty_like(cache).copy_(buf)


def _compute(op, kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale,
             epsilon, form):
    k32, v32 = values(kv, gamma, cos, sin, epsilon)
    b, _, s, _ = kv.shape
    k_rope = kv.new_empty((b, 1, s, form.dk)).copy_(k32)
    c_kv = kv.new_empty((b, 1, s, form.dv)).copy_(v32)
    rows = written_rows(slots_of(op, index, form), form)
    k_out = scattered(k_cache, _cache_values(k32, k_rope, k_rope_scale), rows, form)
    v_out = scattered(ckv_cache, _cache_values(v32, c_kv, c_kv_scale), rows, form)
    return k_out, v_out, k_rope, c_kv


def _cuda(op, kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale,
          epsilon, form):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/kv_cache.py: the norm, the rotation and
    both caches' stores in one pass); rows too long for it run the reference's arithmetic."""
    from op_sdk.triton_kernels import kv_cache

    if not kv_cache.covers(form.dv, form.dk):
        return _compute(op, kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale,
                        c_kv_scale, epsilon, form)
    rows = written_rows(slots_of(op, index, form), form)
    return kv_cache.run(kv, gamma, cos, sin, epsilon, rows,
                        k_rope_scale, c_kv_scale, _outputs_fake(kv, k_cache, ckv_cache, form),
                        k_cache, ckv_cache, nz=form.nz, block_size=form.block_size,
                        k_c0=c0_of(k_cache), v_c0=c0_of(ckv_cache))


def _outputs_fake(kv, k_cache, ckv_cache, form):
    b, _, s, _ = kv.shape
    return (torch.empty_like(k_cache), torch.empty_like(ckv_cache),
            kv.new_empty((b, 1, s, form.dk)), kv.new_empty((b, 1, s, form.dv)))


def _results(op, run, kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale,
             c_kv_scale, k_rope_offset, c_kv_offset, v, epsilon, cache_mode, is_output_kv,
             k_cache_dtype=None, ckv_cache_dtype=None):
    """(k_cache updated, ckv_cache updated, k_rope, c_kv) of a call of ``op`` (either form),
    from ``run``: "reference" (the ground truth), "cuda" (the Triton kernel) or "fake" (the
    shapes), after the contract's checks."""
    form = check_kv_rmsnorm_rope_cache(op, kv, gamma, cos, sin, index, k_cache, ckv_cache,
                                       k_rope_scale, c_kv_scale, k_rope_offset, c_kv_offset, v,
                                       epsilon, cache_mode, is_output_kv, k_cache_dtype,
                                       ckv_cache_dtype)
    if run == "fake":
        return _outputs_fake(kv, k_cache, ckv_cache, form)
    return (_cuda if run == "cuda" else _compute)(op, kv, gamma, cos, sin, index, k_cache,
                                                  ckv_cache, k_rope_scale, c_kv_scale,
                                                  epsilon, form)


def _first(run):
    """npu_kv_rmsnorm_rope_cache's entry point for ``run`` (its schema's arguments)."""
    def entry(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None,
              c_kv_scale=None, k_rope_offset=None, c_kv_offset=None, v=None, epsilon=1e-5,
              cache_mode="Norm", is_output_kv=False):
        return _results(OP, run, kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale,
                        c_kv_scale, k_rope_offset, c_kv_offset, v, epsilon, cache_mode,
                        is_output_kv)
    entry.__name__ = f"kv_rmsnorm_rope_cache_{run}"
    return entry


# the ground truth: (k_cache updated, ckv_cache updated, k_rope, c_kv)
kv_rmsnorm_rope_cache_reference = _first("reference")
kv_rmsnorm_rope_cache_fake = _first("fake")
kv_rmsnorm_rope_cache_cuda = _first("cuda")


OP_V2 = "npu_kv_rmsnorm_rope_cache_v2_functional"


def _second(run):
    """The v2 pair's entry point for ``run``: its results ordered (k_rope, c_kv, k_cache
    updated, ckv_cache updated), its errors under the v2 name."""
    def entry(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None,
              c_kv_scale=None, k_rope_offset=None, c_kv_offset=None, v=None, epsilon=1e-5,
              cache_mode="Norm", is_output_kv=False, k_cache_dtype=None, ckv_cache_dtype=None):
        k_out, v_out, k_rope, c_kv = _results(
            OP_V2, run, kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale,
            c_kv_scale, k_rope_offset, c_kv_offset, v, epsilon, cache_mode, is_output_kv,
            k_cache_dtype, ckv_cache_dtype)
        return k_rope, c_kv, k_out, v_out
    entry.__name__ = f"kv_rmsnorm_rope_cache_v2_functional_{run}"
    return entry


kv_rmsnorm_rope_cache_v2_functional_reference = _second("reference")
kv_rmsnorm_rope_cache_v2_functional_fake = _second("fake")
kv_rmsnorm_rope_cache_v2_functional_cuda = _second("cuda")


def bench_inputs(t, h, dt):
    """Decode of DeepSeek's MLA: t sequences of one token, kv of 512 + 64 (h), a PA_BNSD cache
    of t * 2 slots in blocks of 128."""
    blocks = max(1, -(-2 * t // 128))
    kv = bench_randn(t, 1, 1, 576, dtype=dt)
    gamma = bench_randn(512, dtype=dt)
    cos, sin = bench_randn(t, 1, 1, 64, dtype=dt), bench_randn(t, 1, 1, 64, dtype=dt)
    index = torch.randperm(blocks * 128)[:t]
    k_cache = torch.zeros(blocks, 128, 1, 64, dtype=dt)
    ckv_cache = torch.zeros(blocks, 128, 1, 512, dtype=dt)
    return (kv, gamma, cos, sin, index, k_cache, ckv_cache), {"cache_mode": "PA_BNSD"}


def bench_composite(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, cache_mode="PA_BNSD"):
    """What torch.compile is timed on: the operator's arithmetic in PA_BNSD as a hand-written
    chain would spell it, without the rules' data-dependent checks (which break the graph)
    and the repeated-slot rule (the benchmark's slots are distinct and valid)."""
    k32, v32 = values(kv, gamma, cos, sin, 1e-5)
    k_rope, c_kv = k32.to(kv.dtype), v32.to(kv.dtype)
    k_out, v_out = k_cache.clone(), ckv_cache.clone()
    k_out.view(-1, k_rope.shape[-1]).index_copy_(0, index, k_rope.reshape(-1, k_rope.shape[-1]))
    v_out.view(-1, c_kv.shape[-1]).index_copy_(0, index, c_kv.reshape(-1, c_kv.shape[-1]))
    return k_out, v_out, k_rope, c_kv


# the aclnn API torch_npu's own kernel calls (op-plugin KvRmsNormRopeCacheNpuOpApi.cpp:
# aclnnKvRmsNormRopeCache): its parameters in op-plugin's order, named as ops-transformer's
# README names them (its aclnn document is not published in the repository)
prototypes.declare(
    "aclnnKvRmsNormRopeCache",
    "const aclTensor* kv, const aclTensor* gamma, const aclTensor* cos, const aclTensor* sin, "
    "const aclTensor* index, aclTensor* kCacheRef, aclTensor* ckvCacheRef, "
    "const aclTensor* kRopeScaleOptional, const aclTensor* ckvScaleOptional, "
    "const aclTensor* kRopeOffsetOptional, const aclTensor* cKvOffsetOptional, double epsilon, "
    "char* cacheModeOptional, bool isOutputKv, aclTensor* kRopeOut, aclTensor* cKvOut",
    "ops-transformer @bfbbec83 posembedding/kv_rms_norm_rope_cache/README.md, op-plugin "
    "KvRmsNormRopeCacheNpuOpApi.cpp",
    nullable=("kRopeScaleOptional", "ckvScaleOptional", "kRopeOffsetOptional",
              "cKvOffsetOptional"))

_RENAME = {"kCacheRef": "k_cache", "ckvCacheRef": "ckv_cache",
           "kRopeScaleOptional": "k_rope_scale", "ckvScaleOptional": "c_kv_scale",
           "kRopeOffsetOptional": "k_rope_offset", "cKvOffsetOptional": "c_kv_offset",
           "cacheModeOptional": "cache_mode"}

npu_kv_rmsnorm_rope_cache = define_op(
    "npu_kv_rmsnorm_rope_cache(Tensor kv, Tensor gamma, Tensor cos, Tensor sin, Tensor index, "
    "Tensor k_cache, Tensor ckv_cache, *, Tensor? k_rope_scale=None, Tensor? c_kv_scale=None, "
    "Tensor? k_rope_offset=None, Tensor? c_kv_offset=None, Tensor? v=None, "
    "float epsilon=1e-05, str cache_mode=\"Norm\", bool is_output_kv=False) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
    reference=kv_rmsnorm_rope_cache_reference, fake=kv_rmsnorm_rope_cache_fake,
    native=("cpu",), reference_op=True,  # the launcher routes other forms here
    kernels={"cuda": TritonKernel(kv_rmsnorm_rope_cache_cuda)},
    # one call under torch.compile on CUDA too: the launcher checks index's values (a read
    # back to the host, which a traced graph cannot hold)
    inline=False,
    # the API on copies of the caches, returned (the schema declares no mutation)
    aclnn=AclnnBinding("aclnnKvRmsNormRopeCache",
                       outputs=("k_cache", "ckv_cache", "k_rope", "c_kv"),
                       rename=_RENAME, copy_of={"k_cache": "k_cache", "ckv_cache": "ckv_cache"},
                       requires={"v": None}),
    benchmarks=(Benchmark(bench_inputs, composite=bench_composite,
                          shapes=tuple((t, 576) for t in (1, 16, 257, 4096))),),
    doc="MLA kv preprocessing: RMSNorm of kv[..., :Dv] and interleaved RoPE of kv[..., Dv:], "
        "scattered into copies of the caches by cache_mode; returns (k_cache, ckv_cache, "
        "k_rope, c_kv).",
)

_V2_ARGS = (
    "Tensor kv, Tensor gamma, Tensor cos, Tensor sin, Tensor index, {k} k_cache, {v} ckv_cache, "
    "*, Tensor? k_rope_scale=None, Tensor? c_kv_scale=None, Tensor? k_rope_offset=None, "
    "Tensor? c_kv_offset=None, Tensor? v=None, float epsilon=1e-05, str cache_mode=\"Norm\", "
    "bool is_output_kv=False, int? k_cache_dtype=None, int? ckv_cache_dtype=None")

# v: aclnnKvRmsNormRopeCacheV2's form; the cache dtype codes: the caches' own dtypes only (the
# operator's rule), which the API reads from the tensors
_V2_REQUIRES = {"v": None, "k_cache_dtype": None, "ckv_cache_dtype": None}

npu_kv_rmsnorm_rope_cache_v2_functional = define_op(
    f"npu_kv_rmsnorm_rope_cache_v2_functional({_V2_ARGS.format(k='Tensor', v='Tensor')}) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
    reference=kv_rmsnorm_rope_cache_v2_functional_reference,
    fake=kv_rmsnorm_rope_cache_v2_functional_fake,
    native=("cpu",), reference_op=True,
    kernels={"cuda": TritonKernel(kv_rmsnorm_rope_cache_v2_functional_cuda)}, inline=False,
    aclnn=AclnnBinding("aclnnKvRmsNormRopeCache",
                       outputs=("k_rope", "c_kv", "k_cache", "ckv_cache"),
                       rename=_RENAME, copy_of={"k_cache": "k_cache", "ckv_cache": "ckv_cache"},
                       requires=_V2_REQUIRES),
    doc="npu_kv_rmsnorm_rope_cache's results as (k_rope, c_kv, k_cache, ckv_cache): the "
        "functional form of npu_kv_rmsnorm_rope_cache_v2.",
)

npu_kv_rmsnorm_rope_cache_v2 = define_op(
    f"npu_kv_rmsnorm_rope_cache_v2({_V2_ARGS.format(k='Tensor(a!)', v='Tensor(b!)')}) "
    "-> (Tensor, Tensor)",
    reference=kv_rmsnorm_rope_cache_v2_functional_reference,
    functional="npu_kv_rmsnorm_rope_cache_v2_functional",
    aclnn=AclnnBinding("aclnnKvRmsNormRopeCache", outputs=("k_rope", "c_kv"),
                       rename=_RENAME, requires=_V2_REQUIRES),
    doc="In-place npu_kv_rmsnorm_rope_cache: the caches written where they are; returns "
        "(k_rope, c_kv).",
)
