"""Weight prepacking: the ``weight_prepack`` stage (``experimental_config.frozen_parameter``).

TorchAir's ``frozen_parameter`` tells the compiler that parameters and buffers will not
change after the compile, and on the NPU lets the graph engine store matmul weights in
the layout its cube unit reads fastest (FRACTAL_NZ). op_sdk does the CPU equivalent: with
the option on, this max-autotune stage rewrites every

    npu_quant_matmul(x1, W, scale, ...)      W: a 2-D int8 module parameter / buffer
                                                (or a view of one)

into ``op_sdk.quant_matmul_packed(x1, W, P, scale, ...)`` with
``P = op_sdk.pack_quant_weight(W)`` computed here, once, and kept as a graph constant.
Module parameters and buffers reach the graph as inputs that Dynamo marks static; the
backend hands the stage the real tensors of the compile (``frozen_inputs``), and a
placeholder is resolved to one when its fake value has the same shape, strides and dtype.
Anything else (a graph constant, or a view of one) is resolved too.
The packed kernel reads each 16-column block of the weight front to back in the operand
order of AMX / AVX-512 VNNI (see op_sdk/ops/quant_matmul_packed.py), where the unpacked kernels
transpose the weight in registers; it computes the same int32 product and epilogue,
bit for bit. W stays in the graph: the packed operator falls back to it for shapes its
kernels do not take.

fp32 ``aten.mm`` on a frozen weight likewise goes to MKL's packed GEMM (what Inductor's
own freezing does for linear layers).

Runs on CPU graphs only (the packed kernels are CPU kernels), after the fusion passes.
Each rewrite is recorded in the report as fusion ``weight_prepack``, variant
``npu_quant_matmul`` or ``mm``; a weight that is not frozen is a near miss.
"""

from __future__ import annotations

import torch

from op_sdk.compiler.report import GraphReport, NearMiss

__all__ = ["prepack_weights", "PREPACK"]

PREPACK = "weight_prepack"
_VARIANT = "npu_quant_matmul"
_aten = torch.ops.aten
# view ops a frozen weight may pass through before the matmul takes it
_VIEWS = frozenset({_aten.t.default, _aten.permute.default, _aten.transpose.int,
                    _aten.view.default, _aten._unsafe_view.default, _aten.reshape.default})
_OUTSIDE_SUBSET = ("x1_dtype", "x2_dtype", "pertoken_scale_dtype", "scale_dtype",
                   "group_sizes", "y_scale")
_META_KEPT = ("val", "stack_trace", "nn_module_stack", "source_fn_stack")


def _static_inputs(gm: torch.fx.GraphModule, inputs) -> dict:
    """Placeholder -> the real tensor behind it: a static (parameter / buffer) input of
    the compile at the same position, with the placeholder's shape, strides and dtype."""
    placeholders = gm.graph.find_nodes(op="placeholder")
    if not inputs or len(placeholders) != len(inputs):
        return {}  # not a one-to-one graph (input mutations, subclasses): do not guess
    found = {}
    for node, value in zip(placeholders, inputs):
        fake = node.meta.get("val")
        if (isinstance(value, torch.Tensor) and isinstance(fake, torch.Tensor)
                and getattr(value, "_dynamo_static_input_type", None) is not None
                and value.dtype == fake.dtype and tuple(value.shape) == tuple(fake.shape)
                and tuple(value.stride()) == tuple(fake.stride())):
            found[node] = value
    return found


def _constant(gm: torch.fx.GraphModule, node, static: dict) -> torch.Tensor | None:
    """The value of ``node`` when it is a frozen weight (a static input of the compile,
    ``static``, or a graph constant) or a view of one."""
    if not isinstance(node, torch.fx.Node):
        return None
    if node.op == "placeholder":
        return static.get(node)
    if node.op == "get_attr":
        value = gm
        for part in node.target.split("."):
            value = getattr(value, part, None)
        return value if isinstance(value, torch.Tensor) else None
    if node.op == "call_function" and node.target in _VIEWS:
        base = _constant(gm, node.args[0], static)
        if base is None:
            return None
        return node.target(base, *node.args[1:], **node.kwargs)
    return None


def _add_constant(gm, name, value, fake_mode) -> torch.fx.Node:
    """A get_attr node of a new (non-persistent) buffer of gm, with its fake value."""
    name = f"_op_sdk_{name}"
    while hasattr(gm, name):
        name += "_"
    gm.register_buffer(name, value, persistent=False)
    node = gm.graph.get_attr(name)
    node.meta["val"] = fake_mode.from_tensor(value, static_shapes=True)
    return node


def _replace(node: torch.fx.Node, new: torch.fx.Node) -> None:
    """``new`` takes ``node``'s place. Not all of node.meta moves: eager_input_vals
    follows the old operator's schema."""
    for key in _META_KEPT:
        if key in node.meta:
            new.meta[key] = node.meta[key]
    node.replace_all_uses_with(new)
    node.graph.erase_node(node)


def prepack_weights(gm: torch.fx.GraphModule, report: GraphReport, inputs=None) -> int:
    """Rewrite npu_quant_matmul on frozen 2-D CPU weights to the packed operator, and fp32
    mm on frozen weights to MKL's packed GEMM; returns the number of rewrites.
    ``inputs``: the real example inputs of the compile."""
    static = _static_inputs(gm, inputs)
    count = _prepack_quant_matmul(gm, report, static) + _prepack_fp32_mm(gm, report, static)
    if count:
        gm.graph.lint()
        gm.recompile()
    return count


def _prepack_quant_matmul(gm: torch.fx.GraphModule, report: GraphReport, static) -> int:
    qmm = torch.ops.npu.npu_quant_matmul.default
    packed_op = torch.ops.op_sdk.quant_matmul_packed.default
    graph = gm.graph
    count = 0
    for node in list(graph.find_nodes(op="call_function", target=qmm)):
        x1, x2, scale = node.args[:3]
        kwargs = dict(node.kwargs)

        def miss(kind, check, reason):
            report.record_near_miss(NearMiss(PREPACK, _VARIANT, node.name, kind, check, reason))

        x1v = x1.meta.get("val") if isinstance(x1, torch.fx.Node) else None
        if not isinstance(x1v, torch.Tensor) or x1v.device.type != "cpu":
            continue  # the packed kernels are CPU kernels; not a near miss elsewhere
        if any(kwargs.get(name) is not None for name in _OUTSIDE_SUBSET):
            miss("args", "subset", "a dtype / group argument outside the packed operator's "
                 "subset is set")
            continue
        weight = _constant(gm, x2, static)
        if weight is None:
            miss("check", "frozen_weight",
                 "x2 is not a module parameter / buffer or a graph constant (or a view of "
                 "one)")
            continue
        if weight.dim() != 2 or weight.dtype != torch.int8 or weight.device.type != "cpu":
            miss("shape", "weight_2d",
                 f"x2 must be a 2-D int8 CPU weight, got {weight.dtype} "
                 f"{list(weight.shape)} on {weight.device}")
            continue
        packed = torch.ops.op_sdk.pack_quant_weight(weight)
        fake_mode = x1v.fake_mode
        with graph.inserting_before(node):
            # kept as an (n, 8) constant that the graph views as the 1-D operand: Inductor
            # passes a constant that is not a view to fake kernels as the real tensor, which
            # its FakeTensorMode rejects; a view of it is faked like any other buffer
            attr = _add_constant(gm, f"packed_{count}", packed.view(-1, 8), fake_mode)
            flat = graph.call_function(_aten.view.default, (attr, [-1]))
            flat.meta["val"] = fake_mode.from_tensor(packed, static_shapes=True)
            new_kwargs = {k: kwargs[k] for k in ("offset", "pertoken_scale", "bias",
                                                 "output_dtype") if k in kwargs}
            new = graph.call_function(packed_op, (x1, x2, flat, scale), new_kwargs)
        _replace(node, new)
        report.record_match(PREPACK, _VARIANT, nodes_before=1, nodes_after=2)
        count += 1
    return count


def _prepack_fp32_mm(gm: torch.fx.GraphModule, report: GraphReport, static) -> int:
    """fp32 ``aten.mm(x, W)`` on a frozen (k, n) weight and a static number of rows m:
    MKL's packed GEMM (``mkl._mkl_linear`` on ``mkl._mkl_reorder_linear_weight(W.t(), m)``,
    what Inductor's own freezing does for linear layers), packed here once."""
    if not torch.backends.mkl.is_available():
        return 0
    graph = gm.graph
    count = 0
    for node in list(graph.find_nodes(op="call_function", target=_aten.mm.default)):
        x, w = node.args
        xv = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if not (isinstance(xv, torch.Tensor) and xv.device.type == "cpu"
                and xv.dtype == torch.float32 and isinstance(xv.shape[0], int)):
            continue
        weight = _constant(gm, w, static)
        if weight is None:
            report.record_near_miss(NearMiss(
                PREPACK, "mm", node.name, "check", "frozen_weight",
                "the weight is not a module parameter / buffer or a graph constant"))
            continue
        if weight.dtype != torch.float32 or weight.dim() != 2 or weight.device.type != "cpu":
            continue
        m = int(xv.shape[0])
        weight_t = weight.t().contiguous()  # (n, k), as a Linear layer stores it
        packed = torch.ops.mkl._mkl_reorder_linear_weight(weight_t, m)
        with graph.inserting_before(node):
            packed_node = _add_constant(gm, f"mkl_packed_{count}", packed, xv.fake_mode)
            weight_node = _add_constant(gm, f"mkl_weight_t_{count}", weight_t, xv.fake_mode)
            new = graph.call_function(torch.ops.mkl._mkl_linear.default,
                                      (x, packed_node, weight_node, None, m))
        _replace(node, new)
        report.record_match(PREPACK, "mm", nodes_before=1, nodes_after=1)
        count += 1
    return count
