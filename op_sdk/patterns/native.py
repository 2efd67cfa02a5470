"""Torch-native spellings become torch_npu operators (the ``native_ops`` stage).

The default fusions start from graphs that already call torch_npu's unfused operators. A
model written in plain PyTorch (a Hugging Face Llama / Qwen2 / DeepSeek-V3, a
``torch.nn.RMSNorm``) holds none of them, so this stage, run before the fusions, rewrites
the torch-native spellings into the npu operators; the default fusions then see
``npu_add_rms_norm`` -> ``npu_dynamic_quant`` and fuse as usual.

Rules, in the order they run (each a ``Fusion`` of its own, reported like the fusions):

* ``native_gemma_rms_norm`` -> ``npu_gemma_rms_norm``: Gemma's RMSNorm as transformers writes
  it (GemmaRMSNorm, Gemma2 / Gemma3 alike: ``out = x32 * rsqrt(x32.pow(2).mean(-1,
  keepdim=True) + eps)``, ``out * (1.0 + weight.float())``, ``.type_as(x)``) and its fp32 form
  (no casts). Checks: the exponent is 2, the mean over the last dim with keepdim, the offset
  1, the casts to float32 and back to x's dtype, the weight 1-D of x's last size and of x's
  dtype. It runs before ``native_rms_norm``, whose float32-weight form would otherwise take
  the ``1 + weight`` sum for its weight.
* ``native_rms_norm`` -> ``npu_rms_norm``: RMSNorm as Hugging Face writes it
  (``x32 = x.to(float32); x32 * rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)``, then
  ``weight * x32.to(x.dtype)``, either operand order), as ``F.rms_norm`` /
  ``torch.nn.RMSNorm`` decompose (``... * weight`` before the cast back), and the float32
  forms (no casts). Checks: the exponent is 2, the mean is over the last dim only with
  keepdim, the casts go to float32 and back to x's dtype, the weight is 1-D of x's last
  size, and the result keeps x's dtype (an fp32 weight times a bf16 HF norm promotes the
  result to fp32, which npu_rms_norm does not return: refused).
* ``native_dynamic_quant`` -> ``npu_dynamic_quant``: per-token symmetric int8 written in
  plain torch (``amax = x.float().abs().amax(-1, keepdim=True); scale = amax / 127;
  q = (x / scale).round().clamp(-128, 127).to(int8)``), the scale returned with keepdim or
  squeezed. Checks: the reduction over the last dim with keepdim, 127 and the clamp
  bounds [-128 or -127, 127], the cast to int8, the maths in float32. An all-zero row
  gives NaN -> an undefined int8 in the plain code and 0 in npu_dynamic_quant.
* ``native_add_rms_norm`` -> ``npu_add_rms_norm``: residual ``x1 + x2`` whose sum feeds
  an ``npu_rms_norm`` (the sum used afterwards or not). Checks: x1 and x2 of one shape and
  dtype (no broadcasting), gamma of their dtype.
* ``native_rotary_mul`` -> ``npu_rotary_mul`` (rotary_mode "half"): RoPE as Hugging Face
  writes it, ``x * cos + rotate_half(x) * sin`` with ``rotate_half(x) = cat((-x2, x1), -1)``
  (either order of the sum); after DeepSeek-V3's de-interleave (``x.view(b, h, s, d // 2,
  2).transpose(4, 3).reshape(b, h, s, d)``, apply_rotary_pos_emb_interleave) ->
  rotary_mode "interleave-half" on x itself (the de-interleaving copy gone), or
  ``npu_interleave_rope`` where its contract admits the call (x (B, N, S, 64), cos / sin of
  x's dtype and shape (B or 1, 1, S or 1, 64), sizes static). Checks for that
  form: the view splits the last dim into pairs, the permutation swaps the last two dims
  only, the result has x's shape. The same rotation on the even / odd lanes, as
  transformers 5 writes it (``cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)``, ``x1 =
  x[..., 0::2]``, ``x2 = x[..., 1::2]``, c / s the first halves of cos / sin) ->
  "interleave-half" with ``cat((c, c), -1)`` / ``cat((s, s), -1)``. Checks: x1 / x2 the even
  / odd lanes in that order, the cat along the last dim, c / s half of x's last dim.
  Checks of every form: the slices are the two halves of the last dim (known even: a
  symbolic head dim is refused rather than guarded), the cat is along it, and the
  result keeps x's dtype (float32 cos / sin with a bf16 x promote it: refused). cos / sin
  must broadcast to x as npu_rotary_mul's contract says (the replacement's own checks).
* ``native_swiglu`` -> ``npu_swiglu(x, -1)``: ``F.silu(gate) * up`` where gate / up are
  the halves of one tensor's last dim (``x.chunk(2, -1)`` or two slices; the product in
  either order). Checks: two equal halves of the last dim, silu of the first, the result
  in x's dtype. Separate gate / up projections (Llama's MLP) hold no single tensor to
  pass: they stay as they are.

* ``native_clipped_swiglu`` -> ``npu_clipped_swiglu(x, alpha=, limit=, bias=)``: GPT-OSS's
  activation as transformers writes it (GptOssExperts: ``gate, up = x[..., ::2], x[...,
  1::2]``, ``gate.clamp(max=limit)``, ``up.clamp(-limit, limit)``, ``(up + bias) * (gate *
  sigmoid(gate * alpha))``), the scalars taken from the graph. Checks: gate / up the even /
  odd lanes of the last dim, up's lower bound -limit, limit > 0, the result in x's dtype.

The results differ from the plain code only where the operators' contract says
(ops.md): one rounding instead of two or three in the norms, RoPE and SwiGLU (HF rounds the normalised value to
bf16 before the weight product; npu_add_rms_norm normalises the unrounded fp32 sum) and
one int8 step where the plain code divides by the scale and the operator multiplies by
its reciprocal. ``verify_replacement`` checks every variant against the plain code on
random inputs (three dtypes, two sizes) when the stage first builds its patterns; a
variant that disagrees is not registered and ``registration_failures()`` says why.

SwiGLU + dynamic quantisation has no torch_npu operator of its own here: once this stage
has turned the quantisation into ``npu_dynamic_quant``, a plugin operator declaring that
composite (examples/silu_mul_quant, silu_mul_quant) fuses it.
"""

from __future__ import annotations

import threading

import torch

from op_sdk.patterns.checks import fmt, known_multiple, node_of, nodes_of, same, val
from op_sdk.patterns.diagnostics import Check
from op_sdk.patterns.fusion import Fusion, Variant, generated_variant

__all__ = ["NATIVE_RULES", "native_registries", "registration_failures"]

npu, aten, prims = torch.ops.npu, torch.ops.aten, torch.ops.prims
FLOATS = (torch.float16, torch.bfloat16, torch.float32)


# ---- checks shared by the rules ----------------------------------------------------------

def _last_dim_keepdim(node, what: str) -> str | None:
    """A reduction node (mean.dim / amax) over the last dim only, with keepdim."""
    if node is None:
        return None
    rank = val(node.args[0]).dim()
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    if [d % rank for d in dims] != [rank - 1]:
        return f"{what} reduces dims {dims}; the operator reduces over the last dim only"
    if not keep:
        return f"{what} drops the reduced dim (keepdim=False); the spelling keeps it"
    return None


def _casts(match, to_fp32_source, back_dtype) -> str | None:
    """Every convert in the match goes to float32, except the one back to ``back_dtype``."""
    for n in nodes_of(match, prims.convert_element_type.default):
        dst = n.args[1]
        if n.args[0] is to_fp32_source:
            if dst != torch.float32:
                return f"the input is cast to {dst}; the spelling upcasts to torch.float32"
        elif dst != back_dtype:
            return f"the result is cast to {dst}, not back to the input's {back_dtype}"
    return None


def _rule(**fields) -> Fusion:
    """A native_ops rule: a ``Fusion`` over fp16 / bf16 / fp32 that TorchAir does not have
    (so no TorchAir max-autotune flag) and that rewrites aten ops Inductor could handle."""
    return Fusion(dtypes=FLOATS, torchair_max_autotune=False, opaque_to_inductor=False, **fields)


# ---- RMSNorm ----------------------------------------------------------------------------

# (weight position, cast placement): how the spellings multiply the weight and where the
# result goes back to x's dtype. "hf": cast, then weight * (Llama, Qwen2, DeepSeek-V3);
# "functional": weight product in fp32, then the cast (F.rms_norm, nn.RMSNorm).
_NORM_FORMS = ("hf", "hf_rhs", "functional", "fp32", "fp32_rhs")


def _rms_norm_variant(form: str) -> Variant:
    def search(x, weight, eps_args):
        (eps,) = eps_args
        x32 = x if form.startswith("fp32") else x.to(torch.float32)
        h = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
        if form == "functional":
            return (h * weight).to(x.dtype)
        if form.startswith("hf"):
            h = h.to(x.dtype)
        return h * weight if form.endswith("rhs") else weight * h

    def replace(x, weight, eps_args):
        return npu.npu_rms_norm.default(x, weight, eps_args[0])[0]

    return generated_variant(form, search, replace, ("x", "weight"), epsilon=True)


def _norm_input(match):
    pow_node = node_of(match, aten.pow.Tensor_Scalar)
    src = pow_node.args[0]
    if src.target == prims.convert_element_type.default and src in match.nodes:
        return pow_node, src, src.args[0]
    return pow_node, None, src


def _mean_square(match) -> str | None:
    """The rms-norms' mean of squares: x squared, the mean over the last dim with keepdim."""
    pow_node, _, _ = _norm_input(match)
    if pow_node.args[1] != 2:
        return f"x is raised to the power {pow_node.args[1]}; RMSNorm squares it"
    return _last_dim_keepdim(node_of(match, aten.mean.dim), "the mean")


def _norm_form(match) -> str | None:
    _, upcast, x = _norm_input(match)
    problem = _mean_square(match)
    if problem:
        return problem
    return _casts(match, x, val(x).dtype) if upcast is not None else None


def _norm_weight(match):
    _, _, x = _norm_input(match)
    xv = val(x)
    muls = nodes_of(match, aten.mul.Tensor)
    weight = next((a for m in muls for a in m.args
                   if isinstance(a, torch.fx.Node) and a not in match.nodes
                   and a is not x), None)
    if weight is None:
        return None
    wv = val(weight)
    if wv.dim() != 1 or not same(wv.shape[0], xv.shape[-1]):
        return (f"the weight has shape {fmt(wv.shape)}; npu_rms_norm takes a 1-D weight of the "
                f"last size {fmt(xv.shape[-1])}")
    out = val(match.output_nodes()[0])
    if out.dtype != xv.dtype:
        return (f"the result is {out.dtype} (the {wv.dtype} weight promotes the {xv.dtype} "
                f"norm); npu_rms_norm returns the input's dtype")
    return None


def _norm_inputs(dtype=torch.float16, variant=None, *, tokens=7, hidden=32, lead=(2,)):
    if variant is not None and variant.name.startswith("fp32"):
        dtype = torch.float32
    shape = (*lead, tokens, hidden)
    return {"x": torch.randn(shape, dtype=dtype), "weight": torch.randn(hidden, dtype=dtype),
            "epsilon": 1e-6}


RMS_NORM = _rule(
    name="native_rms_norm",
    number=101,
    fused_op="npu_rms_norm",
    unfused_ops=("aten.pow", "aten.mean", "aten.rsqrt"),
    variants=lambda: tuple(_rms_norm_variant(f) for f in _NORM_FORMS),
    example_inputs=_norm_inputs,
    checks=(Check("spelling", "args", _norm_form), Check("weight", "shape", _norm_weight)),
    doc="RMSNorm as Hugging Face / F.rms_norm write it -> npu_rms_norm",
)


# ---- Gemma's RMSNorm ---------------------------------------------------------------------

# Gemma's spelling (transformers' GemmaRMSNorm, Gemma2 / Gemma3 alike): the norm in fp32, then
# ``output * (1.0 + weight.float())`` and the cast back; "fp32": an fp32 model (no casts).
_GEMMA_FORMS = ("hf", "fp32")


def _gemma_norm_variant(form: str) -> Variant:
    def search(x, weight, eps_args):
        (eps,) = eps_args
        x32 = x if form == "fp32" else x.float()
        h = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
        w32 = weight if form == "fp32" else weight.float()
        h = h * (1.0 + w32)
        return h if form == "fp32" else h.type_as(x)

    def replace(x, weight, eps_args):
        return npu.npu_gemma_rms_norm.default(x, weight, eps_args[0])[0]

    return generated_variant(form, search, replace, ("x", "weight"), epsilon=True)


def _gemma_weight_node(match):
    """The weight the match reads: the source of the ``1.0 + weight`` add (through its upcast)."""
    (add,) = [n for n in nodes_of(match, aten.add.Tensor)  # (not the "+ eps" before rsqrt)
              if any(not isinstance(a, torch.fx.Node) for a in n.args)
              and not any(u.target == aten.rsqrt.default for u in n.users)]
    w = next(a for a in add.args if isinstance(a, torch.fx.Node))
    if w.target == prims.convert_element_type.default and w in match.nodes:
        return add, w, w.args[0]
    return add, None, w


def _gemma_form(match) -> str | None:
    _, _, x = _norm_input(match)
    problem = _mean_square(match)
    if problem:
        return problem
    add, w_upcast, _ = _gemma_weight_node(match)
    one = next(a for a in add.args if not isinstance(a, torch.fx.Node))
    if one != 1:
        return f"the weight is offset by {one}; Gemma's norm multiplies by 1 + weight"
    for n in nodes_of(match, prims.convert_element_type.default):
        back = n.args[0] is not x and n is not w_upcast
        want = val(x).dtype if back else torch.float32
        if n.args[1] != want:
            return (f"a cast goes to {n.args[1]}; the spelling upcasts x and the weight to "
                    f"torch.float32 and casts the result back to x's {val(x).dtype}")
    return None


def _gemma_weight(match):
    _, _, x = _norm_input(match)
    _, _, weight = _gemma_weight_node(match)
    xv, wv = val(x), val(weight)
    if wv.dim() != 1 or not same(wv.shape[0], xv.shape[-1]):
        return (f"the weight has shape {fmt(wv.shape)}; npu_gemma_rms_norm takes a 1-D weight "
                f"of the last size {fmt(xv.shape[-1])}")
    if wv.dtype != xv.dtype:
        return (f"the weight is {wv.dtype} and x {xv.dtype}; npu_gemma_rms_norm takes a weight "
                "of x's dtype")
    out = val(match.output_nodes()[0])
    if out.dtype != xv.dtype:
        return f"the result is {out.dtype}; npu_gemma_rms_norm returns the input's {xv.dtype}"
    return None


def _gemma_inputs(dtype=torch.float16, variant=None, *, tokens=7, hidden=32, lead=(2,)):
    if variant is not None and variant.name == "fp32":
        dtype = torch.float32
    shape = (*lead, tokens, hidden)
    return {"x": torch.randn(shape, dtype=dtype),
            "weight": (torch.randn(hidden) * 0.5).to(dtype), "epsilon": 1e-6}


GEMMA_RMS_NORM = _rule(
    name="native_gemma_rms_norm",
    number=106,
    fused_op="npu_gemma_rms_norm",
    unfused_ops=("aten.pow", "aten.mean", "aten.rsqrt"),
    variants=lambda: tuple(_gemma_norm_variant(f) for f in _GEMMA_FORMS),
    example_inputs=_gemma_inputs,
    checks=(Check("spelling", "args", _gemma_form), Check("weight", "shape", _gemma_weight)),
    doc="Gemma's RMSNorm (x * rsqrt(mean(x^2) + eps) * (1 + weight), in fp32) -> "
        "npu_gemma_rms_norm",
)


# ---- dynamic int8 quantisation ------------------------------------------------------------

_QUANT_FORMS = ("upcast", "upcast+squeeze", "fp32", "fp32+squeeze")


def _quant_variant(form: str) -> Variant:
    squeeze = form.endswith("squeeze")

    def search(x):
        x32 = x if form.startswith("fp32") else x.to(torch.float32)
        scale = x32.abs().amax(-1, keepdim=True) / 127.0
        q = torch.round(x32 / scale).clamp(-128, 127).to(torch.int8)
        return q, (scale.squeeze(-1) if squeeze else scale)

    def replace(x):
        q, scale = npu.npu_dynamic_quant.default(x)
        return q, (scale if squeeze else scale.unsqueeze(-1))

    return Variant(form, search, replace)


def _quant_spelling(match) -> str | None:
    problem = _last_dim_keepdim(node_of(match, aten.amax.default), "the amax")
    if problem:
        return problem
    divs = nodes_of(match, aten.div.Tensor)
    const = [d.args[1] for d in divs if not isinstance(d.args[1], torch.fx.Node)]
    if const != [127.0]:
        return f"the scale divides the amax by {const}; int8 symmetric quantisation uses 127"
    clamp = node_of(match, aten.clamp.default)
    lo, hi = clamp.args[1], clamp.args[2]
    if lo not in (-128, -127) or hi != 127:
        return f"the values are clamped to [{lo}, {hi}]; int8 needs [-128 or -127, 127]"
    converts = nodes_of(match, prims.convert_element_type.default)
    last = [c for c in converts if c.args[1] != torch.float32]
    if len(last) != 1 or last[0].args[1] != torch.int8:
        return f"the result is cast to {[c.args[1] for c in last]}; the operator writes int8"
    amax = node_of(match, aten.amax.default)
    if val(amax).dtype != torch.float32:
        return f"the amax is computed in {val(amax).dtype}; the spelling computes in float32"
    return None


def _quant_inputs(dtype=torch.float16, variant=None, *, tokens=7, hidden=32, lead=(2,)):
    if variant is not None and variant.name.startswith("fp32"):
        dtype = torch.float32
    return {"x": torch.randn((*lead, tokens, hidden), dtype=dtype)}


DYNAMIC_QUANT = _rule(
    name="native_dynamic_quant",
    number=102,
    fused_op="npu_dynamic_quant",
    unfused_ops=("aten.amax", "aten.round", "aten.clamp"),
    variants=lambda: tuple(_quant_variant(f) for f in _QUANT_FORMS),
    example_inputs=_quant_inputs,
    checks=(Check("spelling", "args", _quant_spelling),),
    doc="per-token symmetric int8 quantisation in plain torch -> npu_dynamic_quant",
)


# ---- residual add + npu_rms_norm ------------------------------------------------------------

def _add_norm_variant(x_out: bool, eps: bool) -> Variant:
    # eps: npu_rms_norm called with an explicit epsilon (a trace drops the default 1e-6)
    def search(x1, x2, gamma, eps_args):
        s = x1 + x2
        y = npu.npu_rms_norm.default(s, gamma, *eps_args)[0]
        return (y, s) if x_out else y

    def replace(x1, x2, gamma, eps_args):
        y, _, s = npu.npu_add_rms_norm.default(x1, x2, gamma, *eps_args)
        return (y, s) if x_out else y

    name = ("eps+" if eps else "") + ("x_out" if x_out else "no_x_out")
    return generated_variant(name, search, replace, ("x1", "x2", "gamma"), epsilon=eps)


def _add_operands(match) -> str | None:
    add = node_of(match, aten.add.Tensor)
    a, b = add.args[0], add.args[1]
    if not (isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node)):
        return "the residual add has a scalar operand"
    if add.kwargs.get("alpha", 1) != 1:
        return f"the residual add scales by alpha={add.kwargs['alpha']}"
    av, bv = val(a), val(b)
    if not same(av.shape, bv.shape):
        return (f"the residual add broadcasts {fmt(av.shape)} with {fmt(bv.shape)}; "
                "npu_add_rms_norm takes x1 and x2 of one shape")
    if av.dtype != bv.dtype:
        return f"x1 / x2 are {av.dtype} / {bv.dtype}; npu_add_rms_norm takes one dtype"
    norm = node_of(match, npu.npu_rms_norm.default)
    gv = val(norm.args[1])
    if gv.dtype != av.dtype:
        return f"gamma is {gv.dtype} but x1 is {av.dtype}; npu_add_rms_norm takes x1's dtype"
    return None


def _add_norm_inputs(dtype=torch.float16, variant=None, *, tokens=7, hidden=32, lead=(2,)):
    shape = (*lead, tokens, hidden)
    return {"x1": torch.randn(shape, dtype=dtype), "x2": torch.randn(shape, dtype=dtype),
            "gamma": torch.randn(hidden, dtype=dtype), "epsilon": 1e-6}


ADD_RMS_NORM = _rule(
    name="native_add_rms_norm",
    number=103,
    fused_op="npu_add_rms_norm",
    unfused_ops=("aten.add", "npu.npu_rms_norm"),
    variants=lambda: tuple(_add_norm_variant(x_out, eps) for x_out in (True, False)
                           for eps in (False, True)),
    example_inputs=_add_norm_inputs,
    checks=(Check("operands", "shape", _add_operands),),
    doc="residual add + npu_rms_norm -> npu_add_rms_norm",
)

# ---- halves of the last dim: RoPE's rotate_half and SwiGLU's gate / up ----------------------

_END = 2 ** 62  # a slice "to the end" ends at sys.maxsize (or the size itself)


def _last_dim_slice(node, x):
    """(start, end, step) of ``aten.slice.Tensor(x, dim, start, end, step)`` on x's last
    dim, ``end`` clipped to the size; else None."""
    xv = val(x)
    args = list(node.args) + [None] * (5 - len(node.args))
    _, dim, start, end, step = args[:5]
    dim = node.kwargs.get("dim", 0 if dim is None else dim)
    start = node.kwargs.get("start", start) or 0
    end = node.kwargs.get("end", end)
    step = node.kwargs.get("step", step) or 1
    if node.args[0] is not x or dim % xv.dim() != xv.dim() - 1:
        return None
    if end is None or (isinstance(end, int) and end >= _END):
        end = xv.shape[-1]
    return start, end, step


def _slice_span(node, x):
    """(start, end) of a step-1 slice of x's last dim (``_last_dim_slice``); else None."""
    s = _last_dim_slice(node, x)
    return None if s is None or s[2] != 1 else s[:2]


def _halves(match, x, lo_node, hi_node, what: str) -> str | None:
    """lo_node = x[..., :D/2] and hi_node = x[..., D/2:] over x's last dim D (even)."""
    d = val(x).shape[-1]
    if not known_multiple(d, 2):
        return f"{what}: the last dim {fmt(d)} is not known to be even"
    lo, hi = _slice_span(lo_node, x), _slice_span(hi_node, x)
    if lo is None or hi is None:
        return f"{what}: the slices are not of x's last dim with step 1"
    if not (same(lo[0], 0) and same(lo[1], d // 2) and same(hi[0], d // 2) and same(hi[1], d)):
        return (f"{what}: the slices take [{fmt(lo[0])}, {fmt(lo[1])}) and [{fmt(hi[0])}, "
                f"{fmt(hi[1])}) of the last dim {fmt(d)}; the operator splits it into halves")
    return None


def _keeps_dtype(match, x, op: str) -> str | None:
    out, xv = val(match.output_nodes()[0]), val(x)
    if out.dtype != xv.dtype:
        return f"the result is {out.dtype}, not x's {xv.dtype}; {op} returns x's dtype"
    return None


# ---- RoPE: Hugging Face's rotate_half ---------------------------------------------------------

# (x * cos first or second in the sum); "interleave": DeepSeek-V3's
# apply_rotary_pos_emb_interleave as transformers 4.x and DeepSeek's own code write it,
# de-interleaving the last dim first (x.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b,
# h, s, d)): npu_rotary_mul's "interleave-half" mode on x itself. The interleaved forms are
# tried first (the plain forms match their inner part). "pairs": the same rotation as
# transformers 5 writes it, on the even / odd lanes with the first halves of cos / sin
# (``cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)``, x1 = x[..., 0::2], x2 = x[..., 1::2]):
# "interleave-half" with cos / sin of those halves repeated (c[j] = c[j + D / 2]).
_ROPE_FORMS = ("interleave", "interleave+sin_first", "pairs", "hf", "sin_first")


def _deinterleave(x):
    b, h, s, d = x.shape
    return x.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)


def _interleave_rope_fits(x, cos, sin) -> bool:
    """Whether npu_interleave_rope's contract (ops/interleave_rope.py check_interleave_rope)
    admits the call: x (B, N, S, 64), cos / sin of its dtype and shape (B or 1, 1, S or 1,
    64); judged on static sizes only (a symbolic size would be guarded on)."""
    from op_sdk.ops._common import OpArgumentError
    from op_sdk.ops.interleave_rope import check_interleave_rope

    sizes = (*x.shape, *cos.shape, *sin.shape)
    if not all(isinstance(d, int) for d in sizes):
        return False
    try:
        check_interleave_rope(x, cos, sin)
    except OpArgumentError:
        return False
    return True


def _interleave_half(x, cos, sin):
    """The de-interleaving RoPE: npu_interleave_rope where its contract admits the call
    (DeepSeek's 64-dim rope heads: CANN's InterleaveRope kernel, the same bits as the other
    form), else npu_rotary_mul's "interleave-half" mode."""
    if _interleave_rope_fits(x, cos, sin):
        return npu.npu_interleave_rope.default(x, cos, sin)
    return npu.npu_rotary_mul.default(x, cos, sin, "interleave-half")


def _rope_pairs_variant() -> Variant:
    def search(x, cos, sin):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def replace(x, cos, sin):
        return _interleave_half(x, torch.cat((cos, cos), -1), torch.cat((sin, sin), -1))

    return Variant("pairs", search, replace)


def _rope_variant(form: str) -> Variant:
    if form == "pairs":
        return _rope_pairs_variant()
    interleaved = form.startswith("interleave")

    def search(x, cos, sin):
        q = _deinterleave(x) if interleaved else x
        h = q.shape[-1] // 2
        rotated = torch.cat((-q[..., h:], q[..., :h]), dim=-1)
        if form in ("hf", "interleave"):
            return q * cos + rotated * sin
        return rotated * sin + q * cos

    def replace(x, cos, sin):
        if interleaved:
            return _interleave_half(x, cos, sin)
        return npu.npu_rotary_mul.default(x, cos, sin)

    return Variant(form, search, replace)


def _rope_rotate_half(match) -> str | None:
    cat = node_of(match, aten.cat.default)
    neg = node_of(match, aten.neg.default)
    if neg is None:
        return _rope_pairs(match, cat)
    parts = cat.args[0]
    x = neg.args[0].args[0]
    rank = val(x).dim()
    dim = cat.args[1] if len(cat.args) > 1 else cat.kwargs.get("dim", 0)
    if dim % rank != rank - 1:
        return f"rotate_half concatenates along dim {dim}; RoPE rotates the last dim"
    if len(parts) != 2 or parts[0] is not neg:
        return "rotate_half is not cat((-x2, x1))"
    return (_halves(match, x, parts[1], neg.args[0], "rotate_half")
            or _keeps_dtype(match, x, "npu_rotary_mul"))


def _lane_slice(node, x) -> tuple | None:
    """(start, step) of a slice of x's last dim that runs to its end (``_last_dim_slice``);
    else None."""
    s = _last_dim_slice(node, x)
    return None if s is None or not same(s[1], val(x).shape[-1]) else (s[0], s[2])


def _rope_pairs(match, cat) -> str | None:
    """The "pairs" form: x1 / x2 are x's even / odd lanes (x[..., 0::2], x[..., 1::2]), the
    cat along the last dim, cos / sin of half x's last dim (the replacement repeats them),
    x's dtype kept."""
    sub = node_of(match, aten.sub.Tensor)
    (x1, cos), (x2, _) = sub.args[0].args[:2], sub.args[1].args[:2]
    x = x1.args[0]
    xv = val(x)
    d = xv.shape[-1]
    if not known_multiple(d, 2):
        return f"pairs: the last dim {fmt(d)} is not known to be even"
    if x2.args[0] is not x or _lane_slice(x1, x) != (0, 2) or _lane_slice(x2, x) != (1, 2):
        return "pairs: x1 / x2 are not x's even / odd lanes (x[..., 0::2], x[..., 1::2])"
    dim = cat.args[1] if len(cat.args) > 1 else cat.kwargs.get("dim", 0)
    if dim % xv.dim() != xv.dim() - 1:
        return f"pairs: the halves are concatenated along dim {dim}, not the last"
    if not same(val(cos).shape[-1], d // 2):
        return (f"pairs: cos / sin have a last dim of {fmt(val(cos).shape[-1])}; the pairs "
                f"form reads half of x's ({fmt(d)})")
    return _keeps_dtype(match, x, "npu_rotary_mul")


def _rope_deinterleave(match) -> str | None:
    """The interleaved forms: the permute swaps the last two dims of x viewed as
    (..., D / 2, 2), and q comes back in x's shape (the view / reshape sizes are the
    pattern's wildcards)."""
    permute = node_of(match, aten.permute.default)
    if permute is None:
        return None  # a plain form
    split = permute.args[0]
    x, sv = split.args[0], val(split)
    xs = tuple(val(x).shape)
    d = xs[-1]
    if not known_multiple(d, 2):
        return f"de-interleave: the last dim {fmt(d)} is not known to be even"
    if not (len(sv.shape) == len(xs) + 1 and all(same(a, b) for a, b in zip(sv.shape[:-2], xs[:-1]))
            and same(sv.shape[-2], d // 2) and same(sv.shape[-1], 2)):
        return (f"de-interleave: x {list(xs)} is viewed as {list(sv.shape)}, not as its "
                f"last dim in pairs (..., {fmt(d)} / 2, 2)")
    r = len(sv.shape)
    perm = [p % r for p in permute.args[1]]
    if perm != list(range(r - 2)) + [r - 1, r - 2]:
        return f"de-interleave: the permutation {perm} does not swap the last two dims only"
    neg = node_of(match, aten.neg.default)
    q = neg.args[0].args[0]
    if tuple(val(q).shape) != xs:
        return f"de-interleave: the result has shape {list(val(q).shape)}, not x's {list(xs)}"
    return None


def _rope_inputs(dtype=torch.float16, variant=None, *, tokens=7, heads=3, head_dim=32,
                 batch=2):
    shape = (batch, heads, tokens, head_dim)
    # the pairs form reads one angle per pair: cos / sin of half the head dim
    pairs = getattr(variant, "name", variant) == "pairs"
    angles = torch.randn(batch, 1, tokens, head_dim // 2 if pairs else head_dim)
    return {"x": torch.randn(shape, dtype=dtype), "cos": angles.cos().to(dtype),
            "sin": angles.sin().to(dtype)}


ROTARY_MUL = _rule(
    name="native_rotary_mul",
    number=104,
    fused_op="npu_rotary_mul",
    unfused_ops=("aten.cat", "aten.neg"),
    variants=lambda: tuple(_rope_variant(f) for f in _ROPE_FORMS),
    example_inputs=_rope_inputs,
    checks=(Check("rotate_half", "args", _rope_rotate_half),
            Check("deinterleave", "shape", _rope_deinterleave)),
    doc="RoPE with Hugging Face's rotate_half -> npu_rotary_mul (rotary_mode 'half'); "
        "after DeepSeek-V3's de-interleave -> rotary_mode 'interleave-half'",
)


# ---- SwiGLU: silu of the first half times the second ---------------------------------------

# "chunk": x.chunk(2, -1) (a split); "slices": x[..., :h], x[..., h:]; "+up_first": the
# product written up * silu(gate) (Phi-3's MLP); each also as Inductor's decompositions leave
# it in max-autotune: silu(g) = g / (1 + exp(-g)), in float32 between two casts for float16 /
# bfloat16 ("+decomposed", traced in bfloat16; the casts' dtypes are not compared, so it
# matches float16 too) or without casts ("+decomposed_fp32")
_SWIGLU_FORMS = ("chunk", "slices", "chunk+up_first", "slices+up_first")
_SWIGLU_DECOMPOSED = (("", None), ("+decomposed", torch.bfloat16),
                      ("+decomposed_fp32", torch.float32))


def _swiglu_variant(form: str, suffix: str = "", trace_dtype=None) -> Variant:
    def search(x):
        if form.startswith("chunk"):
            gate, up = x.chunk(2, dim=-1)
        else:
            h = x.shape[-1] // 2
            gate, up = x[..., :h], x[..., h:]
        if form.endswith("up_first"):
            return up * torch.nn.functional.silu(gate)
        return torch.nn.functional.silu(gate) * up

    def replace(x):
        return npu.npu_swiglu.default(x, -1)

    return Variant(form + suffix, search, replace, decompose=trace_dtype is not None,
                   trace_dtype=trace_dtype)


def _activation(match, mul):
    """(gate, activation node) of ``silu(gate)`` among mul's operands: aten.silu, or its
    decomposition ``g / (1 + exp(-g))`` (g = gate or its float32 cast, the quotient cast
    back); (None, why not) when the decomposed spelling computes something else."""
    silu = node_of(match, aten.silu.default)
    if silu is not None:
        return silu.args[0], silu
    div = node_of(match, aten.div.Tensor)
    add = node_of(match, aten.add.Tensor)
    one = [a for a in add.args if not isinstance(a, torch.fx.Node)]
    if one != [1] or add.kwargs.get("alpha", 1) != 1:
        return None, f"the denominator adds {one} to exp(-g); silu's is 1 + exp(-g)"
    g = div.args[0]
    act = next(a for a in mul.args if isinstance(a, torch.fx.Node) and a in match.nodes
               and a.target in (aten.div.Tensor, prims.convert_element_type.default))
    if g.target == prims.convert_element_type.default and g in match.nodes:
        gate = g.args[0]
        if g.args[1] != torch.float32 or act.target != prims.convert_element_type.default \
                or act.args[1] != val(gate).dtype:
            return None, (f"silu's decomposition casts {val(gate).dtype} to {g.args[1]} and "
                          f"back to {act.args[1] if act is not div else 'nothing'}; Inductor's "
                          "runs it in float32 and casts back to the input's dtype")
        return gate, act
    return g, act


def _swiglu_halves(match) -> str | None:
    mul = match.output_nodes()[0]
    gate, act = _activation(match, mul)
    if gate is None:
        return act
    up = mul.args[1] if mul.args[0] is act else mul.args[0]
    split = node_of(match, aten.split.Tensor)
    if split is not None:
        x = split.args[0]
        xv = val(x)
        size = split.args[1]
        dim = split.args[2] if len(split.args) > 2 else split.kwargs.get("dim", 0)
        if dim % xv.dim() != xv.dim() - 1:
            return f"the split is along dim {dim}; npu_swiglu(x, -1) halves the last dim"
        if not (known_multiple(xv.shape[-1], 2) and same(size * 2, xv.shape[-1])):
            return (f"the split takes pieces of {fmt(size)} of the last dim "
                    f"{fmt(xv.shape[-1])}; the operator takes two halves")
        # (the getitem indices are part of the pattern: silu of the second half never matches)
        return _keeps_dtype(match, x, "npu_swiglu")
    x = gate.args[0]
    return _halves(match, x, gate, up, "the halves") or _keeps_dtype(match, x, "npu_swiglu")


def _swiglu_inputs(dtype=torch.float16, variant=None, *, tokens=7, hidden=32, lead=(2,)):
    return {"x": torch.randn((*lead, tokens, 2 * hidden), dtype=dtype)}


SWIGLU = _rule(
    name="native_swiglu",
    number=105,
    fused_op="npu_swiglu",
    unfused_ops=("aten.silu",),
    variants=lambda: tuple(_swiglu_variant(f, suffix, dtype) for suffix, dtype in
                           _SWIGLU_DECOMPOSED for f in _SWIGLU_FORMS),
    example_inputs=_swiglu_inputs,
    checks=(Check("halves", "args", _swiglu_halves),),
    doc="F.silu(gate) * up of the two halves of one tensor -> npu_swiglu",
)

# ---- GPT-OSS's clipped SwiGLU ---------------------------------------------------------------

# transformers' GptOssExperts._apply_gate: gate / up the even / odd lanes of the last dim,
# gate clamped above, up clamped both ways, ``(up + bias) * (gate * sigmoid(gate * alpha))``
# (bias the literal 1); as Inductor's decompositions leave it too ("+decomposed", traced in
# bfloat16, "+decomposed_fp32"). The scalars are pattern arguments (distinct markers) so
# the replacement takes the graph's values; the lower clamp bound is its own argument,
# checked to be -limit.
CLIPPED_MARKERS = {"limit": 7.25, "lo": -7.5, "alpha": 1.625, "bias": 1.125}


def _clipped_swiglu_variant(suffix: str = "", trace_dtype=None) -> Variant:
    def search(x, limit, lo, alpha, bias):
        gate, up = x[..., ::2], x[..., 1::2]
        gate = gate.clamp(min=None, max=limit)
        up = up.clamp(min=lo, max=limit)
        return (up + bias) * (gate * torch.sigmoid(gate * alpha))

    def replace(x, limit, lo, alpha, bias):
        return npu.npu_clipped_swiglu.default(x, dim=-1, alpha=alpha, limit=limit, bias=bias,
                                              interleaved=True)

    return Variant("lanes" + suffix, search, replace, dict(CLIPPED_MARKERS),
                   decompose=trace_dtype is not None, trace_dtype=trace_dtype)


def _reaches(node, targets, within) -> bool:
    """Whether a node of ``targets`` uses ``node``'s value, through nodes of ``within``."""
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n in targets:
            return True
        if n in seen:
            continue
        seen.add(n)
        todo.extend(u for u in n.users if u in within)
    return False


def _clipped_lanes(match) -> str | None:
    """gate / up are x's even / odd lanes, the lower bound of up's clamp is -limit, limit >
    0 (the operator's rule), x's dtype kept."""
    slices = nodes_of(match, aten.slice.Tensor)
    x = slices[0].args[0]
    xv = val(x)
    if not known_multiple(xv.shape[-1], 2):
        return f"the last dim {fmt(xv.shape[-1])} is not known to be even"
    # the gate is the slice the sigmoid (or, decomposed, its exp) reads from
    act = set(nodes_of(match, aten.sigmoid.default)) | set(nodes_of(match, aten.exp.default))
    gate = [n for n in slices if _reaches(n, act, match.nodes)]
    up = [n for n in slices if n not in gate]
    if len(slices) != 2 or len(gate) != 1 or any(n.args[0] is not x for n in slices) \
            or _lane_slice(gate[0], x) != (0, 2) or _lane_slice(up[0], x) != (1, 2):
        return "gate / up are not x's even / odd lanes (x[..., ::2], x[..., 1::2])"
    limit, lo = match.kwargs["limit"], match.kwargs["lo"]
    if not (isinstance(limit, (int, float)) and limit > 0):
        return f"the clamp's limit is {limit}; npu_clipped_swiglu takes a limit > 0"
    if lo != -limit:
        return f"up is clamped to [{lo}, {limit}]; the operator clamps it to [-limit, limit]"
    return _keeps_dtype(match, x, "npu_clipped_swiglu")


def _clipped_inputs(dtype=torch.float16, variant=None, *, tokens=7, hidden=32, lead=(2,)):
    return {"x": torch.randn((*lead, tokens, 2 * hidden), dtype=dtype) * 8, "limit": 7.0,
            "lo": -7.0, "alpha": 1.702, "bias": 1.0}


CLIPPED_SWIGLU = _rule(
    name="native_clipped_swiglu",
    number=106,
    fused_op="npu_clipped_swiglu",
    unfused_ops=("aten.sigmoid",),
    variants=lambda: tuple(_clipped_swiglu_variant(suffix, dtype)
                           for suffix, dtype in _SWIGLU_DECOMPOSED),
    example_inputs=_clipped_inputs,
    checks=(Check("lanes", "args", _clipped_lanes),),
    doc="GPT-OSS's clipped SwiGLU of the even / odd lanes -> npu_clipped_swiglu",
)

# in the order the stage runs them: the add + norm rule needs the norms first
NATIVE_RULES: tuple[Fusion, ...] = (GEMMA_RMS_NORM, RMS_NORM, DYNAMIC_QUANT, ADD_RMS_NORM,
                                     ROTARY_MUL, SWIGLU, CLIPPED_SWIGLU)


# ---- registration, verified ----------------------------------------------------------------

_FAILURES: dict[str, str] = {}
_VERIFIED: set[str] = set()
_LOCK = threading.Lock()


def _verify(rule: Fusion) -> None:
    """Check every variant against the plain code on random inputs; drop disagreeing ones
    from the rule before its patterns are built (once per process)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from op_sdk.patterns.verify import verify_replacement

    with _LOCK, unset_fake_temporarily():  # real tensors, also inside a compile's fake mode
        if rule.name in _VERIFIED:
            return
        keep = []
        for variant in rule.variants():
            # the float32 forms only where their checks admit them: float32 inputs
            fp32 = variant.name.startswith("fp32")
            report = verify_replacement(variant.search_fn, variant.replace_fn,
                                        rule.inputs(variant, rule.dtypes[0]),
                                        dtypes=[torch.float32] if fp32 else None,
                                        size_scales=(1, 3), seeds=(0,),
                                        raise_on_failure=False)
            if report.ok:
                keep.append(variant)
            else:
                _FAILURES[f"{rule.name}/{variant.name}"] = str(report)
        kept = tuple(keep)
        object.__setattr__(rule, "variants", lambda: kept)
        _VERIFIED.add(rule.name)


def native_registries():
    """The rules' pattern registries, in order (built and verified on first use)."""
    out = []
    for rule in NATIVE_RULES:
        _verify(rule)
        out.append(rule.registry())
    return out


def registration_failures() -> dict[str, str]:
    """``{"rule/variant": why}`` for variants verify_replacement refused at registration."""
    return dict(_FAILURES)


# ---- common subexpressions ------------------------------------------------------------------

def _mergeable(node: torch.fx.Node) -> bool:
    """A side-effect-free npu operator call or a dtype cast."""
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    if target is prims.convert_element_type.default:  # x.float() written twice
        return True
    if target.namespace != "npu":
        return False
    schema = target._schema
    if schema.is_mutable or any(a.alias_info is not None for a in schema.returns):
        return False
    return torch.Tag.nondeterministic_seeded not in target.tags


def _key(value):
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _key(v)) for k, v in value.items())))
    if isinstance(value, torch.fx.Node):
        return ("node", value)
    return ("const", type(value).__name__, repr(value))


def merge_common_calls(graph: torch.fx.Graph) -> int:
    """Merge identical calls (same operator, inputs and arguments) of a side-effect-free
    npu operator, and identical dtype casts, into the first. Plain-PyTorch code that
    upcasts one tensor twice then has the single upcast the patterns spell; a W8A8 model
    that quantises one activation in each of its projections (q / k / v, gate / up)
    quantises it once, so the norm feeding them has one user and fuses with it.
    Returns the number of calls removed."""
    seen: dict = {}
    removed = 0
    for node in list(graph.nodes):
        if not _mergeable(node):
            continue
        # calls on different air streams stay apart (a stream is where a call runs)
        key = (node.target, _key(node.args), _key(node.kwargs), node.meta.get("stream_label"))
        first = seen.get(key)
        if first is None:
            seen[key] = node
            continue
        node.replace_all_uses_with(first)
        graph.erase_node(node)
        removed += 1
    if removed:
        _merge_getitems(graph)
    return removed


def _merge_getitems(graph: torch.fx.Graph) -> None:
    import operator

    seen: dict = {}
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is operator.getitem:
            key = (node.args[0], node.args[1])
            if key in seen:
                node.replace_all_uses_with(seen[key])
                graph.erase_node(node)
            else:
                seen[key] = node
