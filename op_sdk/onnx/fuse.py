"""Automatic fusion of ONNX graphs: find fusible operator groups, price each with
``op_sdk.benefit``, replace the ones that pay by one node (see docs/onnx.md).

Groups (``kind``):

* ``rms_norm``: Pow(x, 2) | Mul(x, x) -> ReduceMean(last axis, keepdims=1) -> Add(eps)
  -> Sqrt -> Reciprocal | Div(1, .) -> Mul(x, .)  (or Sqrt -> Div(x, .), or an Rsqrt)
  -> optional Cast(s) -> optional Mul(weight, .); an input Cast(x -> float) whose only
  users are the group is taken in. Replaced by ``RMSNormalization`` (opset >= 23) or
  onnxruntime's ``SimplifiedLayerNormalization`` (below 23).
* ``add_rms_norm``: the same with x = Add(a, b) (a residual add): replaced by
  ``com.microsoft.SkipSimplifiedLayerNormalization``, whose ``input_skip_bias_sum``
  output takes over the sum's other users.
* ``swiglu``: Mul(Mul(g, Sigmoid(g)), up) -> ``op_sdk.npu.SiluMul``.
* ``dynamic_quant``: Abs -> ReduceMax(last axis, keepdims) -> Div(127) = scale;
  Div(x, scale) -> Round -> Clip(-128, 127) -> Cast(int8) -> ``op_sdk.npu.DynamicQuant``.
* ``silu_mul_quant``: a swiglu whose output only feeds a dynamic_quant ->
  ``op_sdk.npu.SiluMulQuant``.

The ``op_sdk.npu`` nodes come with a model-local function (op_sdk/onnx/functions.py).
onnx / onnxruntime are imported inside the functions: ``import op_sdk`` does not load them.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os

from op_sdk.onnx.functions import DOMAIN, FUSED, MIN_OPSET, fused_call

__all__ = ["fuse_model", "FuseReport", "Group", "DEFAULT_DIM", "KINDS", "run_cli"]

DEFAULT_DIM = 128   # the value of a symbolic dimension that dim_hints do not name
KINDS = ("rms_norm", "add_rms_norm", "swiglu", "dynamic_quant", "silu_mul_quant")
VIEW_OPS = frozenset({"Reshape", "Unsqueeze", "Squeeze", "Identity", "Constant", "Flatten",
                      "Shape", "Size"})
MS_DOMAIN = "com.microsoft"

# element types onnxruntime's CPU kernels take (checked on onnxruntime 1.32: bfloat16 loads
# but has no CPU kernel, SkipSimplifiedLayerNormalization has no double)
_FLOAT, _FLOAT16, _DOUBLE, _BFLOAT16, _INT8 = 1, 10, 11, 16, 3
ORT_CPU_TYPES = {
    "RMSNormalization": (_FLOAT, _FLOAT16, _DOUBLE),
    "SimplifiedLayerNormalization": (_FLOAT, _FLOAT16, _DOUBLE),
    "SkipSimplifiedLayerNormalization": (_FLOAT, _FLOAT16),
}
_ALREADY_FUSED = {("", "RMSNormalization"): "rms_norm",
                  ("", "SimplifiedLayerNormalization"): "rms_norm",
                  (MS_DOMAIN, "SimplifiedLayerNormalization"): "rms_norm",
                  (MS_DOMAIN, "SkipSimplifiedLayerNormalization"): "add_rms_norm",
                  (DOMAIN, "SiluMul"): "swiglu",
                  (DOMAIN, "DynamicQuant"): "dynamic_quant",
                  (DOMAIN, "SiluMulQuant"): "silu_mul_quant"}


@dataclasses.dataclass
class Group:
    """One found group: ``status`` is ``fused``, ``rejected`` (the benefit model says no:
    ``reason`` is ``Prediction.reason``), ``refused`` (a rule of the pattern fails:
    ``reason`` names the operator and the rule) or ``already fused`` (the graph has the
    fused operator already)."""

    kind: str
    nodes: list[str]
    ops: list[str]
    status: str
    reason: str = ""
    replacement: str = ""
    prediction: dict | None = None

    @property
    def benefit_us(self) -> float | None:
        return None if self.prediction is None else self.prediction["benefit"] * 1e6

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        if self.prediction is not None:
            d["before_us"] = self.prediction["seconds_before"] * 1e6
            d["after_us"] = self.prediction["seconds_after"] * 1e6
            d["benefit_us"] = self.benefit_us
        return d


@dataclasses.dataclass
class FuseReport:
    source: str
    device: str
    threshold_us: float
    opset: int
    nodes_before: int
    nodes_after: int
    dims: dict
    groups: list[Group] = dataclasses.field(default_factory=list)

    def found(self, kind: str | None = None) -> list[Group]:
        return [g for g in self.groups if kind is None or g.kind == kind]

    def fused(self, kind: str | None = None) -> list[Group]:
        return [g for g in self.found(kind) if g.status == "fused"]

    def as_dict(self) -> dict:
        counts = collections.Counter((g.kind, g.status) for g in self.groups)
        return {"source": self.source, "device": self.device,
                "threshold_us": self.threshold_us, "opset": self.opset,
                "nodes_before": self.nodes_before, "nodes_after": self.nodes_after,
                "dims": self.dims,
                "summary": {k: {s: n for (k2, s), n in counts.items() if k2 == k}
                            for k in dict.fromkeys(g.kind for g in self.groups)},
                "groups": [g.as_dict() for g in self.groups]}

    def format(self) -> str:
        def us(g, key):
            return "" if g.prediction is None else f"{g.prediction[key] * 1e6:.2f}"

        head = ("kind", "nodes", "before us", "after us", "benefit us", "result")
        rows = []
        for g in self.groups:
            result = g.status + (f" -> {g.replacement}" if g.status == "fused" else "")
            if g.reason:
                result += f" ({g.reason})"
            rows.append((g.kind, f"{len(g.nodes)} {'/'.join(dict.fromkeys(g.ops))}",
                         us(g, "seconds_before"), us(g, "seconds_after"),
                         "" if g.prediction is None else f"{g.benefit_us:.2f}", result))
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(5)]
        lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                           for i, (c, w) in enumerate(zip(r[:5], widths))) + "  " + r[5]
                 for r in [head, *rows]]
        nf = len(self.fused())
        lines.append(f"{len(self.groups)} groups found, {nf} fused; nodes "
                     f"{self.nodes_before} -> {self.nodes_after} (opset {self.opset}, device "
                     f"{self.device}, threshold {self.threshold_us:g} us)")
        return "\n".join(lines)


class _Refused(Exception):
    """A rule of the pattern fails; the message names the operator and the rule."""


@dataclasses.dataclass
class _Candidate:
    kind: str
    nodes: list            # NodeProto, graph order
    activation: str        # the tensor whose rows the fused kernel splits
    inputs: list[str]      # the fused node's inputs ("" for a new initializer)
    outputs: list[str]     # the fused node's outputs ("" for an absent optional one)
    op: str
    domain: str = ""
    attrs: dict = dataclasses.field(default_factory=dict)
    new_initializers: list = dataclasses.field(default_factory=list)
    reason: str = ""


def _np(tensor):
    from onnx import numpy_helper

    return numpy_helper.to_array(tensor)


class _Graph:
    def __init__(self, model, dim_hints: dict):
        from onnx import shape_inference

        g = model.graph
        self.model = model
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          0)
        self.nodes = list(g.node)
        self.order = {id(n): i for i, n in enumerate(self.nodes)}
        self.producer = {o: n for n in self.nodes for o in n.output if o}
        self.consumers = collections.defaultdict(list)
        for n in self.nodes:
            for name in dict.fromkeys(list(n.input) + _subgraph_names(n)):
                if name:
                    self.consumers[name].append(n)
        self.graph_outputs = {o.name for o in g.output}
        self.inits = {t.name: t for t in g.initializer}
        try:
            inferred = shape_inference.infer_shapes(model)
        except Exception:  # a model shape inference cannot go through: use what it declares
            inferred = model
        self.types = {}
        self.raw = {}   # dims as declared: int, or the symbol (str), or None (unnamed)
        for vi in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]:
            tt = vi.type.tensor_type
            if not vi.type.HasField("tensor_type"):
                continue
            shape = None
            if tt.HasField("shape"):
                shape = [d.dim_value if d.HasField("dim_value") else
                         int(dim_hints.get(d.dim_param, DEFAULT_DIM)) for d in tt.shape.dim]
                self.raw[vi.name] = [d.dim_value if d.HasField("dim_value") else
                                     (d.dim_param or None) for d in tt.shape.dim]
            self.types[vi.name] = (tt.elem_type, shape)
        for t in g.initializer:
            self.types[t.name] = (t.data_type, list(t.dims))
            self.raw[t.name] = list(t.dims)

    # --- facts -----------------------------------------------------------------------------
    def const(self, name: str):
        """The value of an initializer or Constant output, as numpy; None otherwise."""
        if name in self.inits:
            return _np(self.inits[name])
        node = self.producer.get(name)
        if node is None or node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
            return None
        import numpy as np
        from onnx import helper

        for a in node.attribute:
            v = helper.get_attribute_value(a)
            if a.name == "value":
                return _np(v)
            if a.name in ("value_float", "value_int"):
                return np.array(v)
            if a.name in ("value_floats", "value_ints"):
                return np.array(v)
        return None

    def dtype(self, name):
        return self.types.get(name, (0, None))[0]

    def shape(self, name):
        return self.types.get(name, (0, None))[1]

    def rank(self, name):
        s = self.shape(name)
        return None if s is None else len(s)

    def same_shape(self, *names: str) -> bool:
        """One shape, no broadcasting: same rank, the last dimension known and equal, every
        other dimension equal or symbolic on one side (taken to match)."""
        shapes = [self.raw.get(n) for n in names]
        if any(s is None or not s for s in shapes) or len({len(s) for s in shapes}) != 1:
            return False
        for dims in zip(*shapes):
            known = {d for d in dims if isinstance(d, int)}
            if len(known) > 1:
                return False
        return isinstance(shapes[0][-1], int) and shapes[0][-1] > 0

    def users(self, name):
        return self.consumers.get(name, [])

    def next_op(self, name: str, *ops: str):
        """The first user of ``name`` whose op_type is in ``ops`` (default domain)."""
        for n in self.users(name):
            if n.op_type in ops and n.domain in ("", "ai.onnx"):
                return n
        return None

    def nbytes(self, name: str, fallback: int) -> int:
        from onnx import helper

        dtype, shape = self.types.get(name, (0, None))
        if not dtype:
            return fallback
        try:
            item = helper.tensor_dtype_to_np_dtype(dtype).itemsize
        except Exception:
            item = 4
        if shape is None:
            return fallback
        n = 1
        for d in shape:
            n *= d
        return n * item


def _subgraph_names(node) -> list[str]:
    """Names a node's subgraphs (If / Loop / Scan bodies) read from the outer graph."""
    from onnx import AttributeProto

    names = []
    for a in node.attribute:
        graphs = [a.g] if a.type == AttributeProto.GRAPH else (
            list(a.graphs) if a.type == AttributeProto.GRAPHS else [])
        for sub in graphs:
            for n in sub.node:
                names.extend(n.input)
                names.extend(_subgraph_names(n))
    return names


def _attr(node, name, default=None):
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _scalar(value) -> float | None:
    return None if value is None or value.size != 1 else float(value.reshape(-1)[0])


def _desc(value) -> str:
    if value is None:
        return "not a constant"
    if value.size == 1:
        return f"{float(value.reshape(-1)[0]):g}"
    return f"shape {list(value.shape)}"


def _check_last_axis(G: _Graph, node, x: str) -> None:
    """A reduction over the last axis only, keepdims=1 (``axes`` an attribute below opset 18,
    an input from 18 on)."""
    axes = _attr(node, "axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        value = G.const(node.input[1])
        axes = None if value is None else [int(a) for a in value.reshape(-1)]
        if value is None:
            raise _Refused(f"{node.op_type} '{node.name}' axes are not a constant: the rule "
                           "needs the last axis")
    rank = G.rank(x)
    if axes is None or len(axes) != 1 or not (
            axes[0] == -1 or (rank is not None and axes[0] == rank - 1)):
        raise _Refused(f"{node.op_type} '{node.name}' axes {axes}"
                       f"{'' if rank is None else f' (rank {rank})'}: the rule needs the "
                       "last axis only")
    if _attr(node, "keepdims", 1) != 1:
        raise _Refused(f"{node.op_type} '{node.name}' keepdims=0: the rule needs keepdims=1")


def _other(node, name: str) -> str:
    """The other operand of a binary node."""
    return node.input[1] if node.input[0] == name else node.input[0]


def _check_private(G: _Graph, nodes: list, outputs: set[str]) -> None:
    """Every tensor the group makes, except ``outputs``, must be used only inside it."""
    inside = {id(n) for n in nodes}
    for n in nodes:
        for o in n.output:
            if not o or o in outputs:
                continue
            if o in G.graph_outputs:
                raise _Refused(f"intermediate '{o}' ({n.op_type} '{n.name}') is a graph "
                               "output: the rule needs intermediates used only in the group")
            for u in G.users(o):
                if id(u) not in inside:
                    raise _Refused(f"intermediate '{o}' ({n.op_type} '{n.name}') has another "
                                   f"user ({u.op_type} '{u.name}'): the rule needs "
                                   "intermediates used only in the group")


def _dtype_name(code: int) -> str:
    from onnx import TensorProto

    return TensorProto.DataType.Name(code).lower() if code else "unknown"


# --- matchers: each returns None (no candidate) or a _Candidate (reason set when refused) ---

def _match_rms_norm(G: _Graph, mean):
    p = G.producer.get(mean.input[0])
    if p is None or p.op_type not in ("Pow", "Mul") or p.domain not in ("", "ai.onnx"):
        return None
    if p.op_type == "Mul" and p.input[0] != p.input[1]:
        return None
    x = p.input[0]
    nodes = [p, mean]
    reasons = []
    if p.op_type == "Pow":
        e = G.const(p.input[1])
        if _scalar(e) != 2.0:
            reasons.append(f"Pow '{p.name}' exponent {_desc(e)}: the rule needs the scalar "
                           "constant 2")
    try:
        _check_last_axis(G, mean, x)
    except _Refused as exc:
        reasons.append(str(exc))
    add = G.next_op(mean.output[0], "Add")
    if add is None:
        return None
    eps_name = _other(add, mean.output[0])
    eps = G.const(eps_name)
    if eps is None or eps.size != 1:
        reasons.append(f"Add '{add.name}' epsilon '{eps_name}' {_desc(eps)}: the rule needs a "
                       "scalar constant")
    nodes.append(add)
    cur = add.output[0]
    inv = None
    rsqrt = next((n for n in G.users(cur) if n.op_type == "Rsqrt"), None)
    if rsqrt is not None:
        nodes.append(rsqrt)
        inv = rsqrt.output[0]
    else:
        sqrt = G.next_op(cur, "Sqrt")
        if sqrt is None:
            return None
        nodes.append(sqrt)
        cur = sqrt.output[0]
        rec = G.next_op(cur, "Reciprocal")
        div = G.next_op(cur, "Div")
        if rec is not None:
            nodes.append(rec)
            inv = rec.output[0]
        elif div is not None and div.input[1] == cur:
            one = _scalar(G.const(div.input[0]))
            if one == 1.0:
                nodes.append(div)
                inv = div.output[0]
            elif div.input[0] == x:
                nodes.append(div)
                normed = div.output[0]
            else:
                return None
        else:
            return None
    if inv is not None:
        mul = next((n for n in G.users(inv) if n.op_type == "Mul" and x in n.input), None)
        if mul is None:
            return None
        nodes.append(mul)
        normed = mul.output[0]
    # optional Casts, then an optional Mul by a weight of shape [D]
    out = normed
    while len(G.users(out)) == 1 and G.users(out)[0].op_type == "Cast":
        nodes.append(G.users(out)[0])
        out = nodes[-1].output[0]
    shape = G.shape(x)
    d = shape[-1] if shape else None
    weight = None
    if len(G.users(out)) == 1 and G.users(out)[0].op_type == "Mul":
        wm = G.users(out)[0]
        w = _other(wm, out)
        ws = G.shape(w)
        if ws is not None and len(ws) >= 1 and d is not None and ws[-1] == d and all(
                v == 1 for v in ws[:-1]):
            weight = w
            nodes.append(wm)
            out = wm.output[0]
    # an input Cast(to float) used only by the group is taken in
    xin = x
    cast = G.producer.get(x)
    if (cast is not None and cast.op_type == "Cast" and x not in G.graph_outputs
            and all(u in nodes for u in G.users(x))):
        nodes.insert(0, cast)
        xin = cast.input[0]
    kind = "rms_norm"
    add_res = G.producer.get(xin)
    skip = None
    if (add_res is not None and add_res.op_type == "Add" and add_res.domain in ("", "ai.onnx")
            and G.const(add_res.input[0]) is None and G.const(add_res.input[1]) is None
            and G.same_shape(add_res.input[0], add_res.input[1], xin)
            and G.rank(xin) in (2, 3)
            and G.dtype(add_res.input[0]) == G.dtype(add_res.input[1]) == G.dtype(xin)):
        kind = "add_rms_norm"
        nodes.insert(0, add_res)
        skip = add_res
    if skip is None and add_res is not None and add_res.op_type == "Add":
        pass  # a broadcasting / constant add: the norm alone is the group
    nodes.sort(key=lambda n: G.order[id(n)])
    cand = _Candidate(kind, nodes, xin, [], [], "")
    if reasons:
        cand.reason = "; ".join(reasons)
        return cand
    eps_value = float(_scalar(eps))
    outputs = {out} | ({skip.output[0]} if skip is not None else set())
    try:
        _check_private(G, nodes, outputs)
        dx, dy = G.dtype(xin), G.dtype(out)
        if weight is None:
            import numpy as np
            from onnx import helper, numpy_helper

            if d is None:
                raise _Refused(f"'{x}' has no known last dimension: a norm without weight needs "
                               "it for its scale of ones")
            wname = f"{out}__op_sdk_ones"
            cand.new_initializers.append(numpy_helper.from_array(
                np.ones([d], dtype=helper.tensor_dtype_to_np_dtype(dy or dx)), wname))
            weight = wname
        dw = G.dtype(weight) or dy
        if kind == "add_rms_norm":
            op = "SkipSimplifiedLayerNormalization"
            if not (dx == dw == dy):
                raise _Refused(f"{op} needs one element type for input, gamma and output, the "
                               f"group has {_dtype_name(dx)}, {_dtype_name(dw)}, "
                               f"{_dtype_name(dy)}")
            cand.domain, cand.op = MS_DOMAIN, op
            cand.inputs = [skip.input[0], skip.input[1], weight]
            sum_used = skip.output[0] in G.graph_outputs or any(
                u not in nodes for u in G.users(skip.output[0]))
            cand.outputs = [out, "", "", skip.output[0]] if sum_used else [out]
            cand.attrs = {"epsilon": eps_value}
        else:
            op = "RMSNormalization" if G.opset >= 23 else "SimplifiedLayerNormalization"
            if dw != dy:
                raise _Refused(f"{op}: the weight is {_dtype_name(dw)}, the output "
                               f"{_dtype_name(dy)}: the rule needs them alike")
            cand.op = op
            cand.inputs = [xin, weight]
            cand.outputs = [out]
            cand.attrs = {"axis": -1, "epsilon": eps_value, "stash_type": 1}
        for t in {dx, dy}:
            if t not in ORT_CPU_TYPES[op]:
                raise _Refused(f"{op}: element type {_dtype_name(t)} has no onnxruntime CPU "
                               f"kernel (it takes "
                               f"{', '.join(_dtype_name(c) for c in ORT_CPU_TYPES[op])})")
    except _Refused as exc:
        cand.reason = str(exc)
    return cand


def _match_swiglu(G: _Graph, sig):
    g = sig.input[0]
    m1 = next((n for n in G.users(sig.output[0]) if n.op_type == "Mul" and g in n.input), None)
    if m1 is None:
        return None
    m2 = G.next_op(m1.output[0], "Mul")
    if m2 is None:
        return None
    up = _other(m2, m1.output[0])
    cand = _Candidate("swiglu", [sig, m1, m2], g, [g, up], [m2.output[0]], "SiluMul", DOMAIN)
    try:
        if not G.same_shape(g, up):
            raise _Refused(f"Mul '{m2.name}': gate {G.raw.get(g)} and up {G.raw.get(up)} must "
                           "have one shape (no broadcasting)")
        if G.dtype(g) != G.dtype(up):
            raise _Refused(f"Mul '{m2.name}': gate {_dtype_name(G.dtype(g))} and up "
                           f"{_dtype_name(G.dtype(up))} must have one element type")
        _check_private(G, cand.nodes, {m2.output[0]})
    except _Refused as exc:
        cand.reason = str(exc)
    return cand


def _match_dynamic_quant(G: _Graph, amax):
    from onnx import TensorProto

    ab = G.producer.get(amax.input[0])
    if ab is None or ab.op_type != "Abs":
        return None
    x = ab.input[0]
    d1 = G.next_op(amax.output[0], "Div")
    if d1 is None or d1.input[0] != amax.output[0]:
        return None
    scale = d1.output[0]
    d2 = next((n for n in G.users(scale) if n.op_type == "Div" and n.input == [x, scale]), None)
    if d2 is None:
        return None
    rnd = G.next_op(d2.output[0], "Round")
    clip = rnd and G.next_op(rnd.output[0], "Clip")
    cast = clip and G.next_op(clip.output[0], "Cast")
    if cast is None:
        return None
    nodes = [ab, amax, d1, d2, rnd, clip, cast]
    cand = _Candidate("dynamic_quant", nodes, x, [x], [cast.output[0], scale], "DynamicQuant",
                      DOMAIN)
    try:
        _check_last_axis(G, amax, x)
        c = G.const(d1.input[1])
        if _scalar(c) != 127.0:
            raise _Refused(f"Div '{d1.name}' divisor {_desc(c)}: the rule needs the scalar "
                           "constant 127")
        lo = G.const(clip.input[1]) if len(clip.input) > 1 and clip.input[1] else None
        hi = G.const(clip.input[2]) if len(clip.input) > 2 and clip.input[2] else None
        if _scalar(lo) != -128.0 or _scalar(hi) != 127.0:
            raise _Refused(f"Clip '{clip.name}' bounds {_desc(lo)}, {_desc(hi)}: the rule "
                           "needs the scalar constants -128 and 127")
        if _attr(cast, "to") != TensorProto.INT8:
            raise _Refused(f"Cast '{cast.name}' to {_dtype_name(_attr(cast, 'to'))}: the rule "
                           "needs int8")
        if G.opset < MIN_OPSET:
            raise _Refused(f"opset {G.opset}: the {DOMAIN} function fallback needs opset >= "
                           f"{MIN_OPSET}")
        _check_private(G, nodes, {cast.output[0], scale})
    except _Refused as exc:
        cand.reason = str(exc)
    return cand


def _merge_silu_mul_quant(G: _Graph, swiglu: _Candidate, quant: _Candidate):
    """A swiglu whose output only the dynamic_quant reads: one SiluMulQuant."""
    h = swiglu.outputs[0]
    if h in G.graph_outputs or any(u not in quant.nodes for u in G.users(h)):
        return None
    nodes = sorted(swiglu.nodes + quant.nodes, key=lambda n: G.order[id(n)])
    return _Candidate("silu_mul_quant", nodes, swiglu.activation, list(swiglu.inputs),
                      list(quant.outputs), "SiluMulQuant", DOMAIN)


def _candidates(G: _Graph) -> list[_Candidate]:
    found = []
    for n in G.nodes:
        if n.op_type == "ReduceMax" and n.domain in ("", "ai.onnx"):
            q = _match_dynamic_quant(G, n)
            if q is None:
                continue
            ab = q.nodes[0]
            sig_mul = G.producer.get(ab.input[0])
            sw = None
            if sig_mul is not None and sig_mul.op_type == "Mul":
                for m in sig_mul.input:
                    m1 = G.producer.get(m)
                    if m1 is None or m1.op_type != "Mul":
                        continue
                    sig = next((G.producer[i] for i in m1.input if i in G.producer
                                and G.producer[i].op_type == "Sigmoid"), None)
                    if sig is not None:
                        sw = _match_swiglu(G, sig)
                        break
            if not q.reason and sw is not None and not sw.reason:
                merged = _merge_silu_mul_quant(G, sw, q)
                if merged is not None:
                    found.append(merged)
                    continue
            found.append(q)
    claimed = {id(n) for c in found if not c.reason for n in c.nodes}
    for n in G.nodes:
        if n.op_type == "Sigmoid" and id(n) not in claimed:
            c = _match_swiglu(G, n)
            if c is not None and not any(id(m) in claimed for m in c.nodes):
                found.append(c)
    claimed = {id(n) for c in found if not c.reason for n in c.nodes}
    for n in G.nodes:
        if n.op_type == "ReduceMean" and n.domain in ("", "ai.onnx") and id(n) not in claimed:
            c = _match_rms_norm(G, n)
            if c is not None and not any(id(m) in claimed for m in c.nodes):
                found.append(c)
                if not c.reason:
                    claimed |= {id(m) for m in c.nodes}
    found.sort(key=lambda c: G.order[id(c.nodes[0])])
    return found


def _price(G: _Graph, c: _Candidate, device, threshold_s: float):
    from onnx import helper

    from op_sdk.benefit import Side, Tiling, predict

    shape = G.shape(c.activation) or []
    dtype = G.dtype(c.activation)
    try:
        item = helper.tensor_dtype_to_np_dtype(dtype).itemsize
    except Exception:
        item = 4
    cols = shape[-1] if shape else DEFAULT_DIM
    numel = 1
    for d in shape:
        numel *= d
    rows = max(1, numel // cols) if shape else DEFAULT_DIM
    fallback = rows * cols * item  # a tensor of unknown shape: the activation's size

    def nbytes(name):
        if not name:
            return 0
        for t in c.new_initializers:
            if t.name == name:
                return int(_np(t).nbytes)
        return G.nbytes(name, fallback)

    before = Side(sum(nbytes(t) for n in c.nodes for t in [*n.input, *n.output]),
                  sum(1 for n in c.nodes if n.op_type not in VIEW_OPS))
    after = Side(sum(nbytes(t) for t in [*c.inputs, *c.outputs]), 1)
    return predict(before, after, device, Tiling(rows, cols, item), threshold_s)


def _topo_sort(nodes: list) -> list:
    """Stable topological order (a node keeps its place unless an input comes later)."""
    produced = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    deps = [set() for _ in nodes]
    users = collections.defaultdict(list)
    for i, n in enumerate(nodes):
        for name in [*n.input, *_subgraph_names(n)]:
            j = produced.get(name)
            if j is not None and j != i and j not in deps[i]:
                deps[i].add(j)
                users[j].append(i)
    import heapq

    ready = [i for i, d in enumerate(deps) if not d]
    heapq.heapify(ready)
    out = []
    while ready:
        i = heapq.heappop(ready)
        out.append(nodes[i])
        for u in users[i]:
            deps[u].discard(i)
            if not deps[u]:
                heapq.heappush(ready, u)
    if len(out) != len(nodes):
        raise ValueError("op_sdk.onnx: the rewritten graph has a cycle")
    return out


def _rewrite(model, G: _Graph, fused: list[_Candidate]) -> None:
    from onnx import helper

    g = model.graph
    remove = {id(n) for c in fused for n in c.nodes}
    first = {id(c.nodes[0]): c for c in fused}
    functions: dict = {}
    new_nodes = []
    for n in G.nodes:
        c = first.get(id(n))
        if c is not None:
            name = f"op_sdk_{c.kind}_{len(new_nodes)}"
            if c.domain == DOMAIN:
                nodes, inits, fn = _custom_node(G, c, name)
                new_nodes.extend(nodes)
                g.initializer.extend(inits)
                functions.setdefault((fn.domain, fn.name, fn.overload), fn)
            else:
                new_nodes.append(helper.make_node(c.op, c.inputs, c.outputs, name=name,
                                                  domain=c.domain, **c.attrs))
            g.initializer.extend(c.new_initializers)
        if id(n) not in remove:
            new_nodes.append(n)
    new_nodes = _topo_sort(new_nodes)
    # drop what only the removed nodes read: constants and initializers
    used = set(o.name for o in g.output)
    for n in new_nodes:
        used.update(n.input)
        used.update(_subgraph_names(n))
    while True:
        dead = [n for n in new_nodes if n.op_type == "Constant"
                and not any(o in used for o in n.output)]
        if not dead:
            break
        new_nodes = [n for n in new_nodes if n not in dead]
    del g.node[:]
    g.node.extend(new_nodes)
    inits = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(inits)
    produced = {o for n in new_nodes for o in n.output} | {i.name for i in g.input}
    vis = [vi for vi in g.value_info if vi.name in produced]
    del g.value_info[:]
    g.value_info.extend(vis)
    domains = {o.domain for o in model.opset_import}
    for c in fused:
        if c.domain and c.domain not in domains:
            model.opset_import.append(helper.make_opsetid(c.domain, 1))
            domains.add(c.domain)
    have = {(f.domain, f.name, f.overload) for f in model.functions}
    model.functions.extend(fn for key, fn in functions.items() if key not in have)


def _typed(G: _Graph, name: str):
    """An onnx_ir Value standing for graph value ``name``: its element type and rank."""
    import onnx_ir as ir

    v = ir.Value(name=name)
    v.dtype = ir.DataType(G.dtype(name))
    rank = G.rank(name)
    if rank is not None:
        v.shape = ir.Shape([None] * rank)
    return v


def _custom_node(G: _Graph, c: _Candidate, name: str):
    """The op_sdk.npu node of a group (its one definition: op_sdk.onnx.functions.fused_call),
    the nodes that give its outputs the replaced values' shape and type, their initializers,
    and the node's function."""
    import numpy as np
    from onnx import helper, numpy_helper

    from op_sdk.onnx.translation import function_proto

    call = fused_call(c.op, *[_typed(G, n) for n in c.inputs])
    outs, nodes, inits = list(c.outputs), [], []
    if len(outs) == 2:  # a quant's scale: float32 of the rows' shape in the node, the
        scale = outs[1]  # input's type with the last axis kept in the graph it replaces
        outs[1] = f"{name}_scale"
        axes = f"{name}_axes"
        inits.append(numpy_helper.from_array(np.array([-1], np.int64), axes))
        want = G.dtype(scale) or G.dtype(c.inputs[0])
        kept = scale if want == _FLOAT else f"{name}_scale_kept"
        nodes.append(helper.make_node("Unsqueeze", [outs[1], axes], [kept], name=f"{name}_unsqueeze"))
        if kept != scale:
            nodes.append(helper.make_node("Cast", [kept], [scale], name=f"{name}_cast", to=want))
    node = helper.make_node(c.op, c.inputs, outs, name=name, domain=DOMAIN, **call.attrs)
    node.overload = call.key
    formals, results = FUSED.get(c.op, (None, None))  # None: the IR prototype's names
    return [node, *nodes], inits, function_proto(call, G.opset, formals, results)


def fuse_model(model_or_path, *, device: str = "cpu", threshold_us: float = 0.0,
               dim_hints: dict | None = None):
    """Find the fusible groups of an ONNX model (a ModelProto, left untouched, or a path),
    price each on ``device`` (``op_sdk.benefit.device_model``: cpu, npu or cuda), replace
    those whose predicted benefit exceeds ``threshold_us``. Symbolic dimensions take their
    value from ``dim_hints`` ({"batch": 1, "sequence": 128}), else ``DEFAULT_DIM``.
    Returns ``(fused ModelProto, FuseReport)``."""
    import onnx

    from op_sdk.benefit import device_model

    if isinstance(model_or_path, (str, os.PathLike)):
        source = os.fspath(model_or_path)
        model = onnx.load(source)
    elif isinstance(model_or_path, onnx.ModelProto):
        source = model_or_path.graph.name or "<ModelProto>"
        model = onnx.ModelProto()
        model.CopyFrom(model_or_path)
    else:
        raise TypeError(f"op_sdk.onnx.fuse_model: model_or_path must be an onnx.ModelProto or "
                        f"a path, got {type(model_or_path).__name__}")
    if threshold_us < 0:
        raise ValueError(f"op_sdk.onnx.fuse_model: threshold_us must be >= 0, got {threshold_us}")
    dims = {str(k): int(v) for k, v in (dim_hints or {}).items()}
    if any(v < 1 for v in dims.values()):
        raise ValueError(f"op_sdk.onnx.fuse_model: dim_hints values must be >= 1, got {dims}")
    dm = device_model(device)
    for i, n in enumerate(model.graph.node):  # every node named: the report names them
        if not n.name:
            n.name = f"{n.op_type}_{i}"
    G = _Graph(model, dims)
    report = FuseReport(source, device, float(threshold_us), G.opset, len(G.nodes), 0, dims)
    groups = []
    for n in G.nodes:
        kind = _ALREADY_FUSED.get((n.domain if n.domain != "ai.onnx" else "", n.op_type))
        if kind is not None:
            groups.append((G.order[id(n)], Group(kind, [n.name], [n.op_type], "already fused",
                                                 replacement=n.op_type)))
    fused = []
    for c in _candidates(G):
        g = Group(c.kind, [n.name for n in c.nodes], [n.op_type for n in c.nodes], "refused",
                  c.reason, replacement=(f"{c.domain}." if c.domain else "") + c.op)
        if not c.reason:
            p = _price(G, c, dm, threshold_us * 1e-6)
            g.prediction = p.as_dict()
            g.status = "fused" if p.accepted else "rejected"
            g.reason = p.reason
            if p.accepted:
                fused.append(c)
        groups.append((G.order[id(c.nodes[0])], g))
    report.groups = [g for _, g in sorted(groups, key=lambda t: t[0])]
    if fused:
        _rewrite(model, G, fused)
    report.nodes_after = len(model.graph.node)
    return model, report


def check(model) -> None:
    """onnx.checker.check_model, with shape inference (full_check) where the model has only
    operators onnx knows. onnxruntime's SimplifiedLayerNormalization lives in the default
    domain, which onnx's checker does not know: that model is checked with those nodes
    relabelled com.microsoft (a copy; every other node checked as usual)."""
    import onnx

    probe = model
    if any(n.op_type == "SimplifiedLayerNormalization" and n.domain in ("", "ai.onnx")
           for n in model.graph.node):
        probe = onnx.ModelProto()
        probe.CopyFrom(model)
        for n in probe.graph.node:
            if n.op_type == "SimplifiedLayerNormalization" and n.domain in ("", "ai.onnx"):
                n.domain = MS_DOMAIN
        if MS_DOMAIN not in {o.domain for o in probe.opset_import}:
            probe.opset_import.append(onnx.helper.make_opsetid(MS_DOMAIN, 1))
    onnx.checker.check_model(probe, full_check=True)


def _parse_dims(items: list[str] | None) -> dict:
    dims = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"--dim takes NAME=VALUE with VALUE an integer >= 1, got {item!r}")
        dims[name.strip()] = int(value)
    return dims


def run_cli(args) -> int:
    """``op-sdk fuse IN.onnx -o OUT.onnx [--report R.json] [--device D] [--threshold-us T]
    [--dim NAME=VALUE ...]``."""
    import onnx

    if not os.path.isfile(args.input):
        raise FileNotFoundError(2, "no such ONNX model", args.input)
    dims = _parse_dims(args.dim)
    if args.device not in ("cpu", "npu", "cuda"):
        raise ValueError(f"--device must be cpu, npu or cuda, got {args.device!r}")
    model, report = fuse_model(args.input, device=args.device, threshold_us=args.threshold_us,
                               dim_hints=dims)
    try:
        check(model)
    except onnx.checker.ValidationError as exc:
        raise ValueError(f"the fused model of {args.input} fails onnx.checker "
                         f"(nothing written): {' '.join(str(exc).split())[:400]}") from None
    onnx.save(model, args.output)
    print(report.format())
    print(f"wrote {args.output}")
    if args.report:
        with open(args.report, "w") as f:
            json.dump({**report.as_dict(), "output": args.output}, f, indent=2)
        print(f"wrote {args.report}")
    return 0
