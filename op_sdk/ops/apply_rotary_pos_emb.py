"""npu_apply_rotary_pos_emb: rotary position embedding of query and key with one cos / sin
(torch_npu.npu_apply_rotary_pos_emb; CANN's ApplyRotaryPosEmb, aclnnApplyRotaryPosEmbV2,
ops-transformer posembedding/apply_rotary_pos_emb).

Contract (docs/operators.md, "The LLM operator families"), from the aclnnApplyRotaryPosEmbV2
document: ``query`` / ``key`` float16, bfloat16 or float32, of one dtype with cos / sin;
``layout`` "BSND" (also "BSH", TorchAir's name for the same layout 1), "SBND", "BNSD"
(4 dims) or "TND" (3 dims); ``key`` of query's shape but for its head count N; ``cos`` /
``sin`` of one shape, query's with N = 1; the last dim D 64 or 128; ``rotary_mode`` "half",
"quarter" or "interleave" (npu_rotary_mul's modes of those names). Each of
``q_embed = query * cos + rotate(query) * sin`` and ``k_embed`` likewise is npu_rotary_mul
of that tensor: float32 inside, each product rounded, one rounding to the dtype (the NPU
computes float16 in float16). The results are new tensors in query's / key's layout
(torch_npu's Meta: ``empty_like``); torch_npu's eager kernel also writes them into query
and key (aclnn's queryRef / keyRef, returned), which the functional schema does not
declare: op_sdk never writes its inputs (its aclnn binding runs the API on copies, as
TorchAir's converter does with TensorMove). Empty tensors give empty results (the NPU
refuses them).

Kernels: npu_rotary_mul's, for each of query and key: CPU csrc/rotary_mul.cpp, CUDA
triton_kernels/rotary.py.
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.ops import check
from op_sdk.ops._common import bench_randn
from op_sdk.ops.rotary_mul import DTYPES, MODES, rotated
from op_sdk.triton_kernels import TritonKernel

OP = "npu_apply_rotary_pos_emb"
# layout -> (aclnn's layout code, rank, the head dim N's position)
LAYOUTS = {"BSND": (1, 4, 2), "BSH": (1, 4, 2), "SBND": (2, 4, 2), "BNSD": (3, 4, 1),
           "TND": (4, 3, 1)}
ROTARY_MODES = ("half", "quarter", "interleave")
HEAD_DIMS = (64, 128)


def check_apply_rotary_pos_emb(query, key, cos, sin, layout, rotary_mode):
    """The contract's rules, shared by the reference, the fake and the CUDA kernel (the CPU
    kernel's fast form admits a subset)."""
    check(layout in LAYOUTS, OP, "layout",
          f"must be one of {', '.join(repr(v) for v in LAYOUTS)}, got {layout!r}")
    check(rotary_mode in ROTARY_MODES, OP, "rotary_mode",
          f"must be one of {', '.join(repr(v) for v in ROTARY_MODES)}, got {rotary_mode!r}")
    _, rank, n = LAYOUTS[layout]
    check(query.dtype in DTYPES, OP, "query",
          f"must have dtype float16, bfloat16 or float32, got {query.dtype}")
    check(query.dim() == rank and query.shape[-1] in HEAD_DIMS, OP, "query",
          f"must have {rank} dims in layout {layout!r} and a last dim (D) of 64 or 128, got "
          f"{list(query.shape)}")
    check(key.dtype == query.dtype, OP, "key", f"must have query's dtype {query.dtype}, got {key.dtype}")
    want = [s if i != n else key.shape[n] if key.dim() == rank else "N" for i, s in enumerate(query.shape)]
    check(key.dim() == rank and list(key.shape) == want, OP, "key",
          f"must have query's shape {list(query.shape)} but for its head count (dim {n}), got "
          f"{list(key.shape)}")
    rshape = [1 if i == n else s for i, s in enumerate(query.shape)]
    for name, t in (("cos", cos), ("sin", sin)):
        check(t.dtype == query.dtype and list(t.shape) == rshape, OP, name,
              f"must have query's dtype {query.dtype} and its shape with one head (dim {n}): "
              f"{rshape}, got {list(t.shape)} {t.dtype}")


def apply_rotary_pos_emb_reference(query, key, cos, sin, layout="BSND", rotary_mode="half"):
    """The ground truth: npu_rotary_mul's arithmetic on query and on key (float32 inside,
    one rounding), each result in its input's layout."""
    check_apply_rotary_pos_emb(query, key, cos, sin, layout, rotary_mode)
    return tuple(torch.empty_like(x).copy_(rotated(x, cos, sin, rotary_mode)) for x in (query, key))


def apply_rotary_pos_emb_fake(query, key, cos, sin, layout="BSND", rotary_mode="half"):
    check_apply_rotary_pos_emb(query, key, cos, sin, layout, rotary_mode)
    return torch.empty_like(query), torch.empty_like(key)


def apply_rotary_pos_emb_cuda(query, key, cos, sin, layout="BSND", rotary_mode="half"):
    """The CUDA kernel: npu_rotary_mul's Triton kernel (op_sdk/triton_kernels/rotary.py) on
    query and on key, each written in its layout."""
    from op_sdk.triton_kernels import rotary

    q_out, k_out = apply_rotary_pos_emb_fake(query, key, cos, sin, layout, rotary_mode)
    return (rotary.run(query, cos, sin, MODES[rotary_mode], q_out),
            rotary.run(key, cos, sin, MODES[rotary_mode], k_out))


def _bench_inputs(t, h, dt):
    """t tokens (TND), query of h // 128 heads of 128, key of a quarter of them (GQA), cos /
    sin per token."""
    heads = max(1, h // 128)
    return (bench_randn(t, heads, 128, dtype=dt), bench_randn(t, max(1, heads // 4), 128, dtype=dt),
            bench_randn(t, 1, 128, dtype=dt), bench_randn(t, 1, 128, dtype=dt)), {"layout": "TND"}


# the aclnn API torch_npu's own kernel calls (op-plugin ApplyRotaryPosEmbNpuOpApi.cpp), its
# prototype as ops-transformer documents it: query / key updated in place (...Ref)
prototypes.declare("aclnnApplyRotaryPosEmbV2",
                   "aclTensor* queryRef, aclTensor* keyRef, const aclTensor* cos, "
                   "const aclTensor* sin, int64_t layout, char* rotaryMode",
                   prototypes.CANN_HEADERS + "aclnn_apply_rotary_pos_emb_v2.h")


def _bindings():
    """One branch per (layout code, rotary_mode): aclnn takes the layout as an integer and
    the mode as a string; each runs on copies of query and key (copy_of), so the operator
    writes no input. The last branch refuses any other value, naming the argument."""
    combos = [(tuple(name for name, v in LAYOUTS.items() if v[0] == code), code, mode)
              for code in sorted({v[0] for v in LAYOUTS.values()}) for mode in ROTARY_MODES]
    binding = None
    for names, code, mode in reversed(combos):
        kw = dict(outputs=("query", "key"), copy_of={"query": "query", "key": "key"},
                  constants={"layout": str(code), "rotaryMode": f'"{mode}"'})
        select = {"layout": names if len(names) > 1 else names[0], "rotary_mode": mode}
        binding = (AclnnBinding("aclnnApplyRotaryPosEmbV2", requires=select, **kw) if binding is None
                   else AclnnBinding("aclnnApplyRotaryPosEmbV2", when=select, otherwise=binding, **kw))
    return binding


npu_apply_rotary_pos_emb = define_op(
    "npu_apply_rotary_pos_emb(Tensor query, Tensor key, Tensor cos, Tensor sin, "
    "str layout='BSND', str rotary_mode='half') -> (Tensor, Tensor)",
    reference=apply_rotary_pos_emb_reference, fake=apply_rotary_pos_emb_fake, native=("cpu",),
    # the CPU launcher routes the forms outside its fast path (and invalid calls) here
    reference_op=True,
    kernels={"cuda": TritonKernel(apply_rotary_pos_emb_cuda)},
    aclnn=_bindings(),
    benchmarks=(Benchmark(_bench_inputs),),
    doc="Rotary position embedding of query and key with one cos / sin (npu_rotary_mul's "
        "half / quarter / interleave modes, float32 inside); new tensors, inputs unwritten.",
)
