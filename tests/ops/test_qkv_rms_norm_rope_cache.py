"""npu_qkv_rms_norm_rope_cache and its functional twin: the tables the registry-wide tests read
(samples, constraint cases, GE types, schemas, the Meta grid, why there is no OpPlugin
binding) and the slice's own tests: every output against a float64 per-token, per-head loop
(RMSNorm dividing by the root, rotate-half RoPE, the quantisation dividing by the scale, the
FRACTAL_NZ address of each group of c0 values), unwritten slots untouched, -1 and repeated
slots, the in-place form against the functional one (eager and compiled), cos per token or
per sequence, dtypes, non-contiguous / stride-0 inputs, empty batches, NaN, dynamic shapes,
the rules."""

import pytest
import torch

from op_sdk.ops import qkv_rms_norm_rope_cache as slice_module
from tests.ops.test_kv_rmsnorm_rope_cache import _one_step

OP = torch.ops.npu.npu_qkv_rms_norm_rope_cache
OP_F = torch.ops.npu.npu_qkv_rms_norm_rope_cache_functional
DTYPES = [torch.float16, torch.bfloat16]

_ARGS = ("Tensor qkv, Tensor q_gamma, Tensor k_gamma, Tensor cos, Tensor sin, Tensor index, "
         "{q} q_out, {k} k_cache, {v} v_cache, int[4] qkv_size, int[3] head_nums, *, "
         "Tensor? k_scale=None, Tensor? v_scale=None, Tensor? k_offset=None, "
         "Tensor? v_offset=None, float epsilon=1e-06, str cache_mode=\"PA_NZ\", "
         "bool is_output_qkv=False")
SCHEMAS = [
    f"npu_qkv_rms_norm_rope_cache({_ARGS.format(q='Tensor(a!)', k='Tensor(b!)', v='Tensor(c!)')})"
    " -> (Tensor, Tensor, Tensor)",
    f"npu_qkv_rms_norm_rope_cache_functional({_ARGS.format(q='Tensor', k='Tensor', v='Tensor')})"
    " -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
]

GE_TYPES = {"npu::npu_qkv_rms_norm_rope_cache": "QkvRmsNormRopeCache",
            "npu::npu_qkv_rms_norm_rope_cache_functional": "QkvRmsNormRopeCache"}

_WHY = ("CANN publishes no aclnnQkvRmsNormRopeCache prototype in the sources read here "
        "(no header or document; op-plugin's call gives the order, not the parameters' names "
        "and types)")
NO_ACLNN_BINDING = {"npu::npu_qkv_rms_norm_rope_cache": _WHY,
                    "npu::npu_qkv_rms_norm_rope_cache_functional": _WHY}


def make(b=2, s=3, heads=(4, 1, 1), d=32, dtype=torch.float16, quant=False, blocks=3,
         block_size=32, cos_per_seq=False, offset=False, seed=0):
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    nq, nk, nv = heads
    t = b * s
    qkv = rnd(t, (nq + nk + nv) * d) * 4
    cos, sin = rnd(b if cos_per_seq else t, d), rnd(b if cos_per_seq else t, d)
    index = torch.randperm(blocks * block_size, generator=g)[:t]
    if t:
        index[t // 2] = -1
    c0 = 32 if quant else 16

    def cache(n):
        if quant:
            return torch.randint(-128, 128, (blocks, n * d // c0, block_size, c0), generator=g,
                                 dtype=torch.int8)
        return rnd(blocks, n * d // c0, block_size, c0)

    kw = {}
    if quant:
        kw = {"k_scale": torch.rand(nk, d, generator=g) + 0.05,
              "v_scale": torch.rand(nv, d, generator=g) + 0.05}
        if offset:
            kw["k_offset"] = torch.randn(nk, d, generator=g)
            kw["v_offset"] = torch.randn(nv, d, generator=g)
    args = (qkv, rnd(d), rnd(d), cos, sin, index, rnd(t, nq * d), cache(nk), cache(nv),
            [b, s, nq + nk + nv, d], list(heads))
    return args, kw


def samples():
    a, kw = make(quant=True)
    b, kwb = make(dtype=torch.bfloat16, seed=1)
    return [("npu_qkv_rms_norm_rope_cache_functional", a, dict(kw, is_output_qkv=True)),
            ("npu_qkv_rms_norm_rope_cache_functional", b, kwb),
            ("npu_qkv_rms_norm_rope_cache", *make(quant=True, seed=2)),
            # (without scales: TorchAir's generated wrapper raises here on the in-place
            # converter's scales given by keyword, so this call is the one compared)
            ("npu_qkv_rms_norm_rope_cache", *make(seed=3))]


def meta_grid():
    out = []
    for dt in DTYPES:
        for quant in (False, True):
            for output in (False, True):
                a, kw = make(dtype=dt, quant=quant, heads=(8, 2, 2), d=64)
                out.append(("npu_qkv_rms_norm_rope_cache_functional", a,
                            dict(kw, is_output_qkv=output)))
        out.append(("npu_qkv_rms_norm_rope_cache", *make(dtype=dt, quant=True)))
    return out


def _case(**over):
    a, kw = make(quant=True)
    names = ("qkv", "q_gamma", "k_gamma", "cos", "sin", "index", "q_out", "k_cache", "v_cache",
             "qkv_size", "head_nums")
    full = dict(zip(names, a), **kw)
    full.update(over)
    return tuple(full.pop(n) for n in names), full


def _cases():
    z = torch.zeros
    rows = [
        ("dtype", {"qkv": z(6, 192)}, "qkv"),
        ("qkv-shape", {"qkv": z(6, 160, dtype=torch.float16)}, "qkv"),
        ("qkv-size", {"qkv_size": [2, 3, 6]}, "qkv_size"),
        ("heads", {"head_nums": [4, 1, 2]}, "qkv_size"),
        ("head-count", {"head_nums": [4, 1]}, "head_nums"),
        ("gamma", {"q_gamma": z(16, dtype=torch.float16)}, "q_gamma"),
        ("k-gamma", {"k_gamma": z(32)}, "k_gamma"),
        ("cos", {"cos": z(4, 32, dtype=torch.float16)}, "cos"),
        ("sin", {"sin": z(2, 32, dtype=torch.float16)}, "sin"),
        ("index-dtype", {"index": z(6, dtype=torch.int32)}, "index"),
        ("index-range", {"index": torch.tensor([0, 1, 2, 3, 4, 96])}, "index"),
        ("index-below", {"index": torch.tensor([0, 1, -2, 3, 4, 5])}, "index"),
        ("q-out", {"q_out": z(6, 96, dtype=torch.float16)}, "q_out"),
        ("mode", {"cache_mode": "PA_BNSD"}, "cache_mode"),
        ("k-cache-dtype", {"k_cache": z(3, 1, 32, 32, dtype=torch.float16)}, "k_cache"),
        ("k-cache-shape", {"k_cache": z(3, 2, 32, 32, dtype=torch.int8)}, "k_cache"),
        ("v-blocks", {"v_cache": z(4, 1, 32, 32, dtype=torch.int8)}, "v_cache"),
        ("scale-shape", {"k_scale": z(32)}, "k_scale"),
        ("offset-alone", {"v_scale": None, "v_offset": z(1, 32),
                          "v_cache": z(3, 2, 32, 16, dtype=torch.float16)}, "v_offset"),
    ]
    return [(f"qkv_rms_norm_rope_cache/{cid}", "npu_qkv_rms_norm_rope_cache_functional",
             *_case(**over), arg, RuntimeError) for cid, over, arg in rows] + [
        ("qkv_rms_norm_rope_cache/inplace-mode", "npu_qkv_rms_norm_rope_cache",
         *_case(cache_mode="Norm"), "cache_mode", RuntimeError)]


CASES = _cases()


# ---- the golden, per token and head in float64 ---------------------------------------------

def _loop(args, kw):
    qkv, qg, kg, cos, sin, index, q_out, k_cache, v_cache, size, heads = args
    b, s, _, d = size
    nq, nk, nv = heads
    eps = kw.get("epsilon", 1e-6)
    h = d // 2
    q_rows, k_rows, v_rows = [], [], []
    for t in range(b * s):
        crow = t if cos.shape[0] == b * s else t // s
        c, sn = cos[crow].double(), sin[crow].double()

        def norm_rope(x, g):
            y = x / torch.sqrt(x.square().mean() + eps) * g.double()
            rot = torch.cat((-y[h:], y[:h]))
            return y * c + rot * sn

        row = qkv[t].double().view(nq + nk + nv, d)
        q_rows.append(torch.stack([norm_rope(row[i], qg) for i in range(nq)]))
        k_rows.append(torch.stack([norm_rope(row[nq + i], kg) for i in range(nk)]))
        v_rows.append(row[nq + nk:])
    return torch.stack(q_rows), torch.stack(k_rows), torch.stack(v_rows)


def _nz_row(cache, slot, n, d):
    """Token row (n heads x d) read from a FRACTAL_NZ cache by hand."""
    c0, bs = cache.shape[-1], cache.shape[2]
    blk, r = slot // bs, slot % bs
    return torch.cat([cache[blk, grp, r] for grp in range(n * d // c0)]).view(n, d)


def _check(args, kw):
    qkv, *_, index, q_out, k_cache, v_cache, size, heads = args
    nq, nk, nv = heads
    d = size[3]
    t = qkv.shape[0]
    before = [x.clone() for x in (q_out, k_cache, v_cache)]
    out = OP_F(*args, **dict(kw, is_output_qkv=True))
    assert all(torch.equal(x, y) for x, y in zip(before, (q_out, k_cache, v_cache)))
    gq, gk, gv = _loop(args, kw)
    tol = {"atol": 2e-2, "rtol": 1e-2}
    torch.testing.assert_close(out[3].double(), gq.reshape(t, -1).to(qkv.dtype).double(), **tol)
    torch.testing.assert_close(out[0], out[3])
    torch.testing.assert_close(out[1].double(), gk.reshape(t, -1).to(qkv.dtype).double(), **tol)
    assert torch.equal(out[2], qkv[:, (nq + nk) * d:])
    written = {}
    for tok in range(t):
        if int(index[tok]) >= 0:
            written[int(index[tok])] = tok
    for cache, new, gold, before_q, n, sc, off in (
            (k_cache, out[4], gk, out[1], nk, kw.get("k_scale"), kw.get("k_offset")),
            (v_cache, out[5], gv, out[2], nv, kw.get("v_scale"), kw.get("v_offset"))):
        exp = cache.clone()
        for slot, tok in written.items():
            got = _nz_row(new, slot, n, d)
            if sc is None:
                assert torch.equal(got, before_q[tok].view(n, d))
            else:
                want = gold[tok] / sc.double() + (0 if off is None else off.double())
                want = torch.round(want).clamp(-128, 127)
                assert (got.double() - want).abs().max() <= 1
            c0, bs = cache.shape[-1], cache.shape[2]
            exp[slot // bs, :, slot % bs] = got.reshape(-1, c0)
        assert torch.equal(new, exp)  # every other slot untouched
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("quant", [False, True], ids=["float", "int8"])
@pytest.mark.parametrize("heads,d", [((4, 1, 1), 32), ((8, 2, 2), 64), ((2, 2, 1), 128)],
                         ids=str)
def test_matches_the_golden_loop(heads, d, quant, dtype):
    _check(*make(heads=heads, d=d, quant=quant, dtype=dtype))


def test_offsets_and_cos_per_sequence():
    _check(*make(quant=True, offset=True, cos_per_seq=True, s=4))


def test_in_place_matches_the_functional_form_eager_and_compiled():
    args, kw = make(quant=True, s=4)
    want = OP_F(*args, **dict(kw, is_output_qkv=True))
    for fn in (OP, torch.compile(lambda *a, **k: OP(*a, **k), fullgraph=True)):
        q, k, v = (x.clone() for x in args[6:9])
        got = fn(*args[:6], q, k, v, *args[9:], **dict(kw, is_output_qkv=True))
        assert torch.equal(q, want[3]) and torch.equal(k, want[4]) and torch.equal(v, want[5])
        assert all(torch.equal(a, b) for a, b in zip(got, want[:3]))


def test_outputs_without_is_output_qkv_are_empty_scalars():
    out = OP_F(*make()[0])
    assert [list(o.shape) for o in out[:3]] == [[], [], []]


def test_repeated_slots_and_layouts():
    args, kw = make(s=3)
    index = args[5].clone()
    index[:] = 7
    out = OP_F(*args[:5], index, *args[6:], **dict(kw, is_output_qkv=True))
    assert torch.equal(_nz_row(out[4], 7, 1, 32), out[1][-1].view(1, 32))
    qkv = args[0]
    wide = torch.zeros(qkv.shape[0], qkv.shape[1] * 2, dtype=qkv.dtype)
    wide[:, ::2] = qkv
    g0 = args[1][:1].expand(32)
    got = OP_F(wide[:, ::2], g0, *args[2:], **kw)
    want = OP_F(qkv, g0.contiguous(), *args[2:], **kw)
    assert all(torch.equal(a, b) for a, b in zip(got, want))


def test_empty_batch_and_nan():
    args, kw = make(b=0, quant=True)
    out = OP_F(*args, **kw)
    assert torch.equal(out[4], args[7]) and out[3].shape == (0, 128)
    args, kw = make(quant=True)
    qkv = args[0].clone()
    qkv[0, 4 * 32 + 3] = float("nan")  # token 0's k head
    out = OP_F(qkv, *args[1:], **dict(kw, is_output_qkv=True))
    assert out[1][0].isnan().all()
    slot = int(args[5][0])
    assert (_nz_row(out[4], slot, 1, 32) == 0).all()  # NaN stores 0


def test_dynamic_shapes():
    fn = torch.compile(OP_F, dynamic=True, fullgraph=True)
    for s in (2, 5):
        args, kw = make(s=s, quant=True, seed=s)
        assert all(torch.equal(a, b) for a, b in zip(fn(*args, **kw), OP_F(*args, **kw)))


def test_converters():
    from op_sdk.converters import convert_fx
    from tests.test_converters import fx_of_call

    for name, args, kw in samples():
        ops = [o.type for o in convert_fx(fx_of_call(getattr(torch.ops.npu, name).default, args,
                                                      kw)).ops]
        assert "QkvRmsNormRopeCache" in ops
        assert ops.count("TensorMove") == (3 if name.endswith("functional") else 0)


def test_benchmark_inputs_are_a_valid_call():
    args, kw = slice_module.bench_inputs(5, 0, torch.bfloat16)
    _check(args, kw)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("quant,offset", [(False, False), (True, False), (True, True)],
                         ids=["float", "int8", "int8-offset"])
def test_native_kernel_against_the_reference(quant, offset, dtype):
    """The CPU kernel (csrc/qkv_rms_norm_rope_cache.cpp) against the reference: v's rows and
    cache bit for bit, q / k and k's cache within one step, rare flips only."""
    reference = torch.ops.op_sdk_reference.npu_qkv_rms_norm_rope_cache_functional
    for s, per_seq, heads, d in ((3, False, (4, 1, 1), 32), (5, True, (8, 2, 2), 128),
                                 (1, False, (2, 1, 1), 64)):
        args, kw = make(s=s, heads=heads, d=d, quant=quant, offset=offset, dtype=dtype,
                        cos_per_seq=per_seq, blocks=4, seed=s)
        kw["is_output_qkv"] = True
        got, want = OP_F(*args, **kw), reference(*args, **kw)
        assert torch.equal(got[2], want[2]) and torch.equal(got[5], want[5])
        for i in (0, 1, 3, 4):
            assert got[i].shape == want[i].shape and _one_step(got[i], want[i]), i
            assert (got[i] != want[i]).float().mean() < 0.02
        assert [list(t.shape) for t in OP_F(*args, **dict(kw, is_output_qkv=False))[:3]] == \
            [[], [], []]


def test_the_benchmarks_compiled_composite_computes_the_operator():
    """benchmarks time torch.compile of bench_composite: it must compute what the reference
    computes on the benchmark's inputs (q_out and the caches)."""
    args, kw = slice_module.bench_inputs(33, 0, torch.bfloat16)
    want = torch.ops.op_sdk_reference.npu_qkv_rms_norm_rope_cache_functional(*args, **kw)
    for g, w in zip(slice_module.bench_composite(*args, **kw), want[3:]):
        assert torch.equal(g, w)  # eager: the reference's steps
    # compiled: Inductor's own reduction order, within one step
    for g, w in zip(torch.compile(slice_module.bench_composite)(*args, **kw), want[3:]):
        assert _one_step(g, w) and (g != w).float().mean() < 0.02


def test_last_writes_keeps_the_last_token_of_a_repeated_slot():
    """The rule every KV-cache kernel stores by (ops.kv_rmsnorm_rope_cache.last_writes): a
    token's slot, or -1 where the index is -1 or a later token writes the same slot; one
    writer per slot, so no two CUDA programs store to one place."""
    from op_sdk.ops.kv_rmsnorm_rope_cache import last_writes

    got = last_writes(torch.tensor([3, 7, 3, -1, 7, 9, 3, 0]), 10)
    assert got.tolist() == [-1, -1, -1, -1, 7, 9, 3, 0]
    assert last_writes(torch.zeros(0, dtype=torch.int64), 4).tolist() == []
