"""npu_kv_rmsnorm_rope_cache and its v2 pair: the tables the registry-wide tests read
(samples, constraint cases, GE types, schemas, the Meta grid) and the slice's own tests: the
outputs against the document's formulas in float64 (RMSNorm dividing by the root, the
interleaved RoPE), every cache mode's placement checked slot by slot against an independent
per-token loop (Norm rows per batch, paged slots, FRACTAL_NZ addresses, page starts), the
int8 caches against round(v * scale), unwritten slots untouched, repeated slots, -1 indices,
the v2 pair against the first form bit for bit (in place, functional, compiled), dtypes,
cos / sin broadcast over S, non-contiguous and stride-0 inputs, empty batches, NaN / inf,
dynamic shapes, and the rules."""

import math

import pytest
import torch

from op_sdk.ops import kv_rmsnorm_rope_cache as slice_module

OP = torch.ops.npu.npu_kv_rmsnorm_rope_cache
OP_V2 = torch.ops.npu.npu_kv_rmsnorm_rope_cache_v2
OP_V2F = torch.ops.npu.npu_kv_rmsnorm_rope_cache_v2_functional
DTYPES = [torch.bfloat16, torch.float16]
MODES = list(slice_module.MODES)

_ARGS = ("Tensor kv, Tensor gamma, Tensor cos, Tensor sin, Tensor index, {k} k_cache, "
         "{v} ckv_cache, *, Tensor? k_rope_scale=None, Tensor? c_kv_scale=None, "
         "Tensor? k_rope_offset=None, Tensor? c_kv_offset=None, Tensor? v=None, "
         "float epsilon=1e-05, str cache_mode=\"Norm\", bool is_output_kv=False")
SCHEMAS = [
    f"npu_kv_rmsnorm_rope_cache({_ARGS.format(k='Tensor', v='Tensor')}) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
    f"npu_kv_rmsnorm_rope_cache_v2_functional({_ARGS.format(k='Tensor', v='Tensor')}, "
    "int? k_cache_dtype=None, int? ckv_cache_dtype=None) -> (Tensor, Tensor, Tensor, Tensor)",
    f"npu_kv_rmsnorm_rope_cache_v2({_ARGS.format(k='Tensor(a!)', v='Tensor(b!)')}, "
    "int? k_cache_dtype=None, int? ckv_cache_dtype=None) -> (Tensor, Tensor)",
]

# the Ascend IR operator each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_kv_rmsnorm_rope_cache": "KvRmsNormRopeCache",
            "npu::npu_kv_rmsnorm_rope_cache_v2_functional": "KvRmsNormRopeCache",
            "npu::npu_kv_rmsnorm_rope_cache_v2": "KvRmsNormRopeCache"}


def make(mode="PA_BNSD", b=2, s=3, dv=512, dk=64, dtype=torch.bfloat16, quant=False,
         blocks=4, block_size=32, cache_len=8, cos_s=None, seed=0):
    """A call's (args, kwargs): random kv / gamma / cos / sin, caches filled with random
    values (so untouched slots are seen), distinct random slots (one -1)."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    kv, gamma = rnd(b, 1, s, dv + dk), rnd(dv)
    cos, sin = rnd(b, 1, cos_s or s, dk), rnd(b, 1, cos_s or s, dk)
    cdt = torch.int8 if quant else dtype
    if mode == "Norm":
        shape = (b, 1, cache_len)
        index = torch.stack([torch.randperm(cache_len, generator=g)[:s] for _ in range(b)])
    else:
        shape = (blocks, block_size, 1)
        if mode.startswith("PA_BLK"):
            pages = -(-s // block_size)
            index = torch.randperm(blocks, generator=g)[:b * pages] * block_size
        else:
            index = torch.randperm(blocks * block_size, generator=g)[:b * s]
    if index.numel():
        index.view(-1)[index.numel() // 2] = -1

    def cache(d):
        if quant:
            return torch.randint(-128, 128, (*shape, d), generator=g, dtype=torch.int8)
        return rnd(*shape, d).to(cdt)

    kw = {"cache_mode": mode}
    if quant:
        kw["k_rope_scale"] = torch.rand(dk, generator=g) * 20
        kw["c_kv_scale"] = torch.rand(dv, generator=g) * 20
    return (kv, gamma, cos, sin, index, cache(dk), cache(dv)), kw


def samples():
    out = []
    for mode, quant in (("Norm", False), ("PA_BNSD", False), ("PA_NZ", True),
                        ("PA_BLK_BNSD", False)):
        args, kw = make(mode, dv=64, dk=32, quant=quant, s=2)
        out.append(("npu_kv_rmsnorm_rope_cache", args, kw))
    args, kw = make("PA_NZ", dv=32, dk=16, s=2, dtype=torch.float16)
    out.append(("npu_kv_rmsnorm_rope_cache_v2_functional", args, kw))
    args, kw = make("Norm", dv=64, dk=32, s=2)
    out.append(("npu_kv_rmsnorm_rope_cache_v2", args, kw))
    return out


def meta_grid():
    """Calls on which the CPU kernel, the fake and torch_npu's Meta function must agree on
    output shapes and dtypes (tests/npu/real)."""
    out = []
    for dt in DTYPES:
        for mode in MODES:
            for quant in (False, True):
                args, kw = make(mode, dtype=dt, quant=quant, s=3)
                out.append(("npu_kv_rmsnorm_rope_cache", args, kw))
        args, kw = make("PA_NZ", dtype=dt, s=1, b=4)
        out.append(("npu_kv_rmsnorm_rope_cache_v2_functional", args, kw))
        args, kw = make("PA_BNSD", dtype=dt, s=2, b=2)
        out.append(("npu_kv_rmsnorm_rope_cache_v2", args, kw))
    return out


def _case(mode="PA_BNSD", **over):
    args, kw = make(mode, dv=32, dk=16, s=2)
    names = ("kv", "gamma", "cos", "sin", "index", "k_cache", "ckv_cache")
    full = dict(zip(names, args), **kw)
    full.update(over)
    return tuple(full.pop(n) for n in names), full


def _cases():
    z = torch.zeros
    rows = [
        ("dtype", {"kv": z(2, 1, 2, 48)}, "kv"),
        ("heads", {"kv": z(2, 2, 2, 48, dtype=torch.bfloat16)}, "kv"),
        ("gamma-len", {"gamma": z(48, dtype=torch.bfloat16)}, "gamma"),
        ("gamma-dtype", {"gamma": z(32, dtype=torch.float16)}, "gamma"),
        ("odd-rope", {"gamma": z(33, dtype=torch.bfloat16)}, "gamma"),
        ("cos-shape", {"cos": z(2, 1, 3, 16, dtype=torch.bfloat16)}, "cos"),
        ("sin-shape", {"sin": z(2, 1, 1, 16, dtype=torch.bfloat16)}, "sin"),
        ("index-dtype", {"index": z(4, dtype=torch.int32)}, "index"),
        ("index-len", {"index": z(5, dtype=torch.int64)}, "index"),
        ("index-range", {"index": torch.tensor([0, 1, 2, 4 * 32])}, "index"),
        ("index-below", {"index": torch.tensor([0, 1, -2, 3])}, "index"),
        ("mode", {"cache_mode": "BNSD"}, "cache_mode"),
        ("v", {"v": z(2, 1, 2, 16, dtype=torch.bfloat16)}, "v"),
        ("offset", {"k_rope_offset": z(16)}, "k_rope_offset"),
        ("c-offset", {"c_kv_offset": z(32)}, "c_kv_offset"),
        ("k-cache-dtype", {"k_cache": z(4, 32, 1, 16, dtype=torch.float16)}, "k_cache"),
        ("k-cache-width", {"k_cache": z(4, 32, 1, 8, dtype=torch.bfloat16)}, "k_cache"),
        ("block-size", {"k_cache": z(4, 24, 1, 16, dtype=torch.bfloat16),
                        "ckv_cache": z(4, 24, 1, 32, dtype=torch.bfloat16)}, "k_cache"),
        ("ckv-lead", {"ckv_cache": z(3, 32, 1, 32, dtype=torch.bfloat16)}, "ckv_cache"),
        ("int8-no-scale", {"k_cache": z(4, 32, 1, 16, dtype=torch.int8)}, "k_cache"),
        ("scale-float-cache", {"c_kv_scale": torch.ones(32)}, "ckv_cache"),
        ("scale-shape", {"ckv_cache": z(4, 32, 1, 32, dtype=torch.int8),
                         "c_kv_scale": torch.ones(16)}, "c_kv_scale"),
    ]
    out = [(f"kv_rmsnorm_rope_cache/{cid}", "npu_kv_rmsnorm_rope_cache", *_case(**over), arg,
            RuntimeError) for cid, over, arg in rows]
    args, kw = make("PA_NZ", dv=40, dk=8, s=2)
    out.append(("kv_rmsnorm_rope_cache/nz-width", "npu_kv_rmsnorm_rope_cache", args, kw,
                "k_cache", RuntimeError))
    norm_args, norm_kw = _case("Norm", index=torch.zeros(4, dtype=torch.int64))
    out.append(("kv_rmsnorm_rope_cache/norm-index", "npu_kv_rmsnorm_rope_cache", norm_args,
                norm_kw, "index", RuntimeError))
    v2_args, v2_kw = _case(k_cache_dtype=1)
    out.append(("kv_rmsnorm_rope_cache/v2-dtype", "npu_kv_rmsnorm_rope_cache_v2_functional",
                v2_args, v2_kw, "k_cache_dtype", RuntimeError))
    v2_args, v2_kw = _case(index=torch.tensor([0, 1, 2, 4 * 32]))
    out.append(("kv_rmsnorm_rope_cache/v2-index-range", "npu_kv_rmsnorm_rope_cache_v2_functional",
                v2_args, v2_kw, "index", RuntimeError))
    v2_args, v2_kw = _case(cache_mode="PA_BSND")
    out.append(("kv_rmsnorm_rope_cache/v2-mode", "npu_kv_rmsnorm_rope_cache_v2", v2_args, v2_kw,
                "cache_mode", RuntimeError))
    return out


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = _cases()


# ---- the independent formula -----------------------------------------------------------------

def _formula(kv, gamma, cos, sin, eps):
    """The document's formulas in float64: c_kv = x / sqrt(mean(x^2) + eps) * gamma, k_rope =
    cat(x1, x2) * cos + cat(-x2, x1) * sin with x1 / x2 the even / odd elements."""
    dv = gamma.shape[0]
    x = kv[..., :dv].double()
    c_kv = x / torch.sqrt(x.square().mean(-1, keepdim=True) + eps) * gamma.double()
    r = kv[..., dv:].double()
    x1, x2 = r[..., 0::2], r[..., 1::2]
    k_rope = torch.cat((x1, x2), -1) * cos.double() + torch.cat((-x2, x1), -1) * sin.double()
    return k_rope, c_kv


def _expected_slots(index, mode, b, s, block_size):
    """{token (b, s): cache address} by a per-token loop: Norm (batch, row), paged (block,
    row)."""
    out = {}
    for bi in range(b):
        for si in range(s):
            if mode == "Norm":
                v = int(index[bi, si])
                if v >= 0:
                    out[(bi, si)] = (bi, v)
            elif mode.startswith("PA_BLK"):
                pages = math.ceil(s / block_size)
                v = int(index[bi * pages + si // block_size])
                if v >= 0:
                    out[(bi, si)] = (v // block_size, si % block_size)
            else:
                v = int(index[bi * s + si])
                if v >= 0:
                    out[(bi, si)] = (v // block_size, v % block_size)
    return out


def _row(cache, addr, mode):
    """The cache's values at an address, read by hand from the layout."""
    a, r = addr
    if mode == "Norm":
        return cache[a, 0, r]
    if mode.endswith("_NZ"):
        d = cache.shape[-1]
        c0 = 32 if cache.dtype == torch.int8 else 16
        flat = cache.reshape(-1)
        bs = cache.shape[1]
        base = a * d * bs
        return torch.cat([flat[base + (j * bs + r) * c0: base + (j * bs + r) * c0 + c0]
                          for j in range(d // c0)])
    return cache[a, r, 0]


def _check_call(args, kw):
    kv, gamma, cos, sin, index, k_cache, ckv_cache = args
    before = [t.clone() for t in (k_cache, ckv_cache)]
    k_out, v_out, k_rope, c_kv = OP(*args, **kw)
    # inputs untouched (the schema declares no mutation)
    assert torch.equal(k_cache, before[0]) and torch.equal(ckv_cache, before[1])
    eps = kw.get("epsilon", 1e-5)
    fk, fv = _formula(kv, gamma, cos, sin, eps)
    tol = {"atol": 1e-2, "rtol": 1e-2}
    torch.testing.assert_close(k_rope.double(), fk.to(kv.dtype).double(), **tol)
    torch.testing.assert_close(c_kv.double(), fv.to(kv.dtype).double(), **tol)
    mode = kw["cache_mode"]
    b, _, s, _ = kv.shape
    bs = k_cache.shape[1]
    slots = _expected_slots(index, mode, b, s, bs)
    for (bi, si), addr in slots.items():
        for out, ref, val, scale in ((k_out, k_rope, fk, kw.get("k_rope_scale")),
                                     (v_out, c_kv, fv, kw.get("c_kv_scale"))):
            got = _row(out, addr, mode)
            if scale is None:
                assert torch.equal(got, ref[bi, 0, si])
            else:
                want = torch.round(val[bi, 0, si] * scale.double()).clamp(-128, 127)
                assert (got.double() - want).abs().max() <= 1
    # every slot no token addresses keeps its value: compare with a copy of the input where
    # the addressed rows are taken from the output
    for out, orig in ((k_out, k_cache), (v_out, ckv_cache)):
        exp = orig.clone()
        for (bi, si), addr in slots.items():
            _assign(exp, addr, mode, _row(out, addr, mode))
        assert torch.equal(out, exp)
    return k_out, v_out, k_rope, c_kv


def _assign(cache, addr, mode, vals):
    a, r = addr
    if mode == "Norm":
        cache[a, 0, r] = vals
    elif mode.endswith("_NZ"):
        d = cache.shape[-1]
        c0 = 32 if cache.dtype == torch.int8 else 16
        flat = cache.view(-1)
        bs = cache.shape[1]
        base = a * d * bs
        for j in range(d // c0):
            flat[base + (j * bs + r) * c0: base + (j * bs + r) * c0 + c0] = vals[j * c0:(j + 1) * c0]
    else:
        cache[a, r, 0] = vals


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("quant", [False, True], ids=["float", "int8"])
@pytest.mark.parametrize("mode", MODES)
def test_matches_the_formula_in_every_cache_mode(mode, quant, dtype):
    args, kw = make(mode, dtype=dtype, quant=quant, s=3, b=2)
    _check_call(args, kw)


@pytest.mark.parametrize("mode", ["PA_BLK_BNSD", "PA_BLK_NZ"])
def test_blocked_modes_span_pages(mode):
    """Sequences longer than a block: a page start per block_size tokens."""
    args, kw = make(mode, s=40, b=2, blocks=6, block_size=16, dv=32, dk=16)
    _check_call(args, kw)


@pytest.mark.parametrize("sizes", [(32, 16), (48, 16), (512, 64), (96, 32)], ids=str)
def test_other_widths(sizes):
    dv, dk = sizes
    for mode in ("PA_BNSD", "PA_NZ", "Norm"):
        _check_call(*make(mode, dv=dv, dk=dk, s=2, b=3))


def test_cos_broadcasts_over_the_sequence():
    args, kw = make("PA_BNSD", s=4, cos_s=1)
    kv, gamma, cos, sin, *_ = args
    _, _, k_rope, _ = _check_call(args, kw)
    full = OP(kv, gamma, cos.expand(-1, -1, 4, -1).contiguous(), sin.expand(-1, -1, 4, -1)
              .contiguous(), *args[4:], **kw)
    assert torch.equal(k_rope, full[2])


def test_layouts_non_contiguous_and_stride_zero():
    args, kw = make("PA_BNSD", s=3, dv=32, dk=16)
    kv, gamma, cos, sin, index, kc, vc = args
    want = OP(*args, **kw)
    wide = torch.zeros(kv.shape[:-1] + (kv.shape[-1] * 2,), dtype=kv.dtype)
    wide[..., ::2] = kv
    g0 = gamma[:1].expand(32)
    got = OP(wide[..., ::2], gamma, cos, sin, index, kc, vc, **kw)
    for a, b in zip(got, want):
        assert torch.equal(a, b)
    got0 = OP(kv, g0, cos, sin, index, kc, vc, **kw)
    ref0 = OP(kv, g0.contiguous(), cos, sin, index, kc, vc, **kw)
    for a, b in zip(got0, ref0):
        assert torch.equal(a, b)
    # a cache that is a view of a larger tensor (vLLM's kv_cache[0] / [1])
    both = torch.stack([vc, vc.clone()])
    out = OP(kv, gamma, cos, sin, index, kc, both[1], **kw)
    assert torch.equal(out[1], want[1])


def test_repeated_slots_write_the_last_token():
    args, kw = make("PA_BNSD", s=3, dv=32, dk=16)
    index = args[4].clone()
    index[:] = 5
    k_out, _, k_rope, _ = OP(*args[:4], index, *args[5:], **kw)
    assert torch.equal(k_out[0, 5, 0], k_rope[-1, 0, -1])


def test_empty_batch():
    args, kw = make("PA_BNSD", b=0, s=3, dv=32, dk=16)
    k_out, v_out, k_rope, c_kv = OP(*args, **kw)
    assert torch.equal(k_out, args[5]) and torch.equal(v_out, args[6])
    assert k_rope.shape == (0, 1, 3, 16) and c_kv.shape == (0, 1, 3, 32)


def test_nan_and_inf():
    args, kw = make("PA_BNSD", s=3, dv=32, dk=16, quant=True)
    kv = args[0].clone()
    kv[0, 0, 0, 3] = float("nan")
    kv[1, 0, 1, 40] = float("inf")
    k_out, v_out, k_rope, c_kv = OP(kv, *args[1:], **kw)
    assert c_kv[0, 0, 0].isnan().all()  # the row's sum is NaN
    slot = int(args[4][0])
    assert (v_out[slot // 32, slot % 32, 0] == 0).all()  # NaN stores 0
    assert not k_rope[1, 0, 1].isfinite().all()


def test_v2_pair_agrees_and_writes_in_place():
    for mode in ("PA_NZ", "Norm"):
        args, kw = make(mode, s=3, dv=32, dk=16)
        k_out, v_out, k_rope, c_kv = OP(*args, **kw)
        f = OP_V2F(*args, **kw)
        for a, b in zip(f, (k_rope, c_kv, k_out, v_out)):
            assert torch.equal(a, b)
        kc, vc = args[5].clone(), args[6].clone()
        r = OP_V2(*args[:5], kc, vc, **kw)
        assert torch.equal(kc, k_out) and torch.equal(vc, v_out)
        assert torch.equal(r[0], k_rope) and torch.equal(r[1], c_kv)


def test_v2_in_place_under_compile():
    args, kw = make("PA_BNSD", s=3, dv=32, dk=16)
    k_out, v_out, k_rope, _ = OP(*args, **kw)

    def fn(kv, gamma, cos, sin, index, kc, vc):
        a, _ = OP_V2(kv, gamma, cos, sin, index, kc, vc, cache_mode="PA_BNSD")
        return a * 2, kc.float().sum()

    kc, vc = args[5].clone(), args[6].clone()
    a, total = torch.compile(fn, fullgraph=True)(*args[:5], kc, vc)
    assert torch.equal(kc, k_out) and torch.equal(vc, v_out)
    assert torch.equal(a, k_rope * 2) and total == k_out.float().sum()


def test_dynamic_shapes():
    fn = torch.compile(lambda *a: OP(*a, cache_mode="PA_BNSD"), dynamic=True, fullgraph=True)
    for s in (2, 5):
        args, kw = make("PA_BNSD", s=s, dv=32, dk=16, seed=s)
        for a, b in zip(fn(*args), OP(*args, **kw)):
            assert torch.equal(a, b)


def test_converters():
    from op_sdk.converters import convert_fx
    from tests.test_converters import fx_of_call

    for name, args, kw in samples():
        ops = [o.type for o in convert_fx(fx_of_call(getattr(torch.ops.npu, name).default, args,
                                                      kw)).ops]
        assert "KvRmsNormRopeCache" in ops
        assert ops.count("TensorMove") == (2 if name.endswith("functional") else 0)


def _one_step(got, want):
    """Equal, or one step apart (float: adjacent values of the dtype; int8: 1): the norm's sum
    of squares runs in the kernel's order, within float32 rounding of torch's."""
    if got.dtype == torch.int8:
        return (got.int() - want.int()).abs().max() <= 1 if got.numel() else True
    a, b = got.view(torch.int16).int(), want.view(torch.int16).int()
    return (a - b).abs().max() <= 1 if got.numel() else True


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("quant", [False, True], ids=["float", "int8"])
@pytest.mark.parametrize("mode", MODES)
def test_native_kernel_against_the_reference(mode, quant, dtype):
    """The CPU kernel (csrc/kv_rmsnorm_rope_cache.cpp) against the reference: k_rope and the
    rope cache bit for bit, c_kv and its cache within one step."""
    reference = torch.ops.op_sdk_reference.npu_kv_rmsnorm_rope_cache
    for s, cos_s in ((3, None), (5, 1), (40, None)):
        args, kw = make(mode, dtype=dtype, quant=quant, s=s, b=2, blocks=8, cos_s=cos_s,
                        cache_len=64, seed=s)
        got, want = OP(*args, **kw), reference(*args, **kw)
        assert torch.equal(got[0], want[0]) and torch.equal(got[2], want[2])
        assert _one_step(got[1], want[1]) and _one_step(got[3], want[3])
        assert (got[3] != want[3]).float().mean() < 0.01  # rare flips only
        f = OP_V2F(*args, **kw)
        for a, b in zip(f, (got[2], got[3], got[0], got[1])):
            assert torch.equal(a, b)


def test_the_benchmarks_compiled_composite_computes_the_operator():
    """benchmarks time torch.compile of bench_composite: it must compute what the reference
    computes on the benchmark's inputs."""
    args, kw = slice_module.bench_inputs(33, 576, torch.bfloat16)
    want = torch.ops.op_sdk_reference.npu_kv_rmsnorm_rope_cache(*args, **kw)
    for got, w in zip(slice_module.bench_composite(*args, **kw), want):
        assert torch.equal(got, w)  # eager: the reference's steps
    # compiled: Inductor's own reduction order, within one step
    for got, w in zip(torch.compile(slice_module.bench_composite)(*args, **kw), want):
        assert _one_step(got, w) and (got != w).float().mean() < 0.02


def test_written_rows_keep_one_writer_per_row():
    """The rows the reference and the CUDA kernel write: -1 indices and all but the last
    token of a repeated slot write nothing (so no two of the kernel's stores meet), Norm's
    rows offset by batch."""
    form = slice_module.Form(2, 4, 32, 16, "PA_BNSD", 16, 32, False, False)
    slots = torch.tensor([[3, 7, 3, -1], [7, 9, 3, 0]])
    assert slice_module.written_rows(slots, form).tolist() == [-1, -1, -1, -1, 7, 9, 3, 0]
    form = slice_module.Form(2, 3, 32, 16, "Norm", 0, 8, False, False)
    slots = torch.tensor([[5, 5, -1], [5, 0, 0]])
    assert slice_module.written_rows(slots, form).tolist() == [-1, 5, -1, 13, -1, 8]
