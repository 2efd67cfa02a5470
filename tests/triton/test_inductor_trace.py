"""What torch.compile's AOTAutograd records for an op_sdk operator on CUDA tensors
(library.INLINE_DEVICES), checked with fake CUDA tensors, no GPU needed: each Triton
operator becomes its kernel launches (``triton_kernel_wrapper_functional`` of the expected
kernel) and the allocations of its fake, with no call of the operator left; a form its
kernel does not cover becomes the reference's ATen ops; a reference-only operator becomes
its reference's ATen ops; a symbolic row count traces the same; taken out of
INLINE_DEVICES, under torch.export or on CPU tensors, the operator stays one call. (test_cuda_dispatch.py
compiles and runs the same on a GPU.)

Triton's kernels must not be the interpreter's here, so the checks run in a child process
(``python tests/triton/test_inductor_trace.py``)."""

import logging
import sys

import pytest

from tests.triton.child import run_module

KERNEL = {"npu_rms_norm": "_rows", "npu_gemma_rms_norm": "_rows", "npu_add_rms_norm": "_rows",
          "npu_add_rms_norm_v2_functional": "_rows", "npu_add_rms_norm_cast": "_rows",
          "npu_rms_norm_quant": "_rows",
          "npu_add_rms_norm_quant": "_rows", "npu_add_rms_norm_dynamic_quant": "_rows",
          "npu_dynamic_quant": "_rows", "npu_swiglu": "_swiglu",
          "npu_swiglu_backward": "_swiglu_backward", "npu_quantize": "_quantize",
          "npu_rotary_mul": "_rotary", "npu_rotary_mul_backward": "_rotary_backward",
          "npu_swiglu_quant": "_swiglu_quant",
          "npu_interleave_rope": "_rotary", "npu_apply_rotary_pos_emb": ("_rotary", "_rotary"),
          "npu_quant_matmul": "_qmm", "npu_transpose_batchmatmul": "_requant",
          "npu_dtype_cast": "_cast", "npu_dynamic_mx_quant": "_mx_rows",
          "npu_rms_norm_dynamic_mx_quant": "_mx_rows",
          "npu_add_rms_norm_dynamic_mx_quant": "_mx_rows"}  # apply_rotary: query, then key
# operators whose launchers make real CUDA tensors: traced on a GPU only (none now: the
# rotary kernel computes its modes' permutations instead of reading tables)
NEEDS_CUDA: set[str] = set()


def _trace_fn(fn, args, device="cuda", dynamic_rows=False):
    """The graph AOTAutograd's functional tracing records for ``fn(*args)``, on fake tensors
    of the arguments' shapes and strides on ``device``; with ``dynamic_rows``, the leading
    (row) dim of the inputs that have the first one's is symbolic (those inputs contiguous),
    as under torch.compile's dynamic shapes."""
    import torch
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch._subclasses.functional_tensor import dispatch_functionalize
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    env = ShapeEnv() if dynamic_rows else None
    mode = FakeTensorMode(shape_env=env)
    rows, sym = args[0].shape[0], None
    if dynamic_rows:
        sym = env.create_symintnode(env.create_symbol(rows, ConstantSource("rows"),
                                                      dynamic_dim=DimDynamic.DYNAMIC), hint=rows)

    def fake(t):
        if not isinstance(t, torch.Tensor):
            return t
        if sym is not None and t.dim() >= 2 and t.shape[0] == rows:
            return torch.empty((sym, *t.shape[1:]), dtype=t.dtype, device=device)
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device)

    with mode:
        flat = [fake(a) for a in args]
        return make_fx(dispatch_functionalize(fn), tracing_mode="real")(*flat)


def _trace(name, args, kw, device="cuda", dynamic_rows=False):
    """``_trace_fn`` of one call of the operator (its keyword tensors inputs too)."""
    import torch

    op = getattr(torch.ops.npu, name).default
    keys = list(kw)

    def call(*flat):
        return op(*flat[:len(args)], **dict(zip(keys, flat[len(args):])))

    return _trace_fn(call, (*args, *kw.values()), device, dynamic_rows)


def _summary(gm):
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table

    kernels, ops = [], set()
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if "triton_kernel_wrapper" in str(n.target):
            kernels.append(kernel_side_table.get_kernel(n.kwargs["kernel_idx"]).fn.__name__)
        else:
            ops.add(str(n.target))
    return kernels, ops


def main() -> int:
    import torch

    from op_sdk import library
    from op_sdk.triton_kernels import _common
    from tests.ops._helpers import bf16, rand
    from tests.triton.cases import triton_cases

    # no driver to ask for the SM count; Triton's mutation analysis cannot compile either
    # (it assumes every argument written, which only adds clones to the fake graph)
    _common.sm_count = lambda device: 132
    logging.getLogger("torch._higher_order_ops.triton_kernel_wrap").setLevel(logging.CRITICAL)
    cuda = torch.cuda.is_available()
    failed = 0

    def report(what, ok, detail):
        nonlocal failed
        failed += not ok
        print(f"{what}: {'ok' if ok else 'FAILED ' + str(detail)}")

    for name, (args, kw) in triton_cases().items():
        if name in NEEDS_CUDA and not cuda:
            continue
        kernels, ops = _summary(_trace(name, args, kw))
        want = list(KERNEL[name]) if isinstance(KERNEL[name], tuple) else [KERNEL[name]]
        report(f"{name} traced", kernels == want and not any("npu." in o for o in ops),
               (kernels, sorted(ops)))
    # the operators whose launchers read values back (inline=False): one call, no kernel
    from op_sdk.library import get_op
    from tests.triton.cases import call_cases

    for name, (args, kw) in call_cases().items():
        kernels, ops = _summary(_trace(name, args, kw))
        report(f"{name} kept one call", not kernels and get_op(name).inline is None
               and f"npu.{name}.default" in ops, (kernels, sorted(ops)))
    # MoE forms, whose rules read group_index's values: one call (what the launcher traced
    # before the read is dead code, gone after dead-code elimination)
    moe = {"npu_swiglu_quant": ((rand(5, 8),), {"smooth_scales": torch.rand(2, 4) + 0.5,
                                                "group_index": torch.tensor([1, 3], dtype=torch.int32),
                                                "quant_mode": 1}),
           "npu_dynamic_quant": ((rand(7, 64, dtype=bf16),),
                                 {"smooth_scales": torch.rand(2, 64).to(bf16),
                                  "group_index": torch.tensor([3, 7], dtype=torch.int32)})}
    for name, (args, kw) in moe.items():
        gm = _trace(name, args, kw)
        gm.graph.eliminate_dead_code()
        kernels, ops = _summary(gm)
        report(f"{name} MoE kept one call", not kernels and ops == {f"npu.{name}.default",
                                                                    "<built-in function getitem>"},
               (kernels, sorted(ops)))
    # dynamic shapes: a symbolic row count (no guard but 32-bit indexing's size limit)
    for name in ("npu_add_rms_norm_dynamic_quant", "npu_swiglu", "npu_quantize", "npu_quant_matmul"):
        args, kw = triton_cases()[name]
        kernels, ops = _summary(_trace(name, args, kw, dynamic_rows=True))
        report(f"{name} traced with dynamic rows", kernels == [KERNEL[name]]
               and not any("npu." in o for o in ops), (kernels, sorted(ops)))
    # the dynamic branch's int4 / float8 outputs (float8 bits stored through a uint8 view)
    for dst in (torch.quint4x2, 292, 23, 290):
        args, kw = triton_cases()["npu_dynamic_quant"]
        kernels, ops = _summary(_trace("npu_dynamic_quant", args, dict(kw, dst_type=dst)))
        report(f"npu_dynamic_quant dst_type {dst} traced", kernels == ["_rows"]
               and not any("npu." in o for o in ops), (kernels, sorted(ops)))
    # npu_quant_matmul with batched weights: one _qmm launch (a grid axis per batch), also
    # with a symbolic row count
    for dynamic_rows in (False, True):
        i8 = lambda *shape: torch.randint(-128, 128, shape, dtype=torch.int8)  # noqa: E731
        kernels, ops = _summary(_trace("npu_quant_matmul", (i8(3, 24, 32), i8(3, 32, 16),
                                                            torch.rand(16)),
                                       {"output_dtype": torch.bfloat16,
                                        "pertoken_scale": torch.rand(24)},
                                       dynamic_rows=dynamic_rows))
        report(f"npu_quant_matmul batched weights traced (dynamic rows {dynamic_rows})",
               kernels == ["_qmm"] and not any("npu." in o for o in ops), (kernels, sorted(ops)))
    # the A4W4 form (int32-packed int4 x1 and weight, unpacked in the kernel): one _qmm
    from op_sdk.ops._common import pack_int4
    i4 = lambda *shape: pack_int4(torch.randint(-8, 8, shape, dtype=torch.int8))  # noqa: E731
    kernels, ops = _summary(_trace("npu_quant_matmul", (i4(24, 64), i4(16, 64).t(), torch.rand(16)),
                                   {"output_dtype": torch.float16}, dynamic_rows=True))
    report("npu_quant_matmul A4W4 traced (dynamic rows)",
           kernels == ["_qmm"] and not any("npu." in o for o in ops), (kernels, sorted(ops)))
    # and the A8W4 form (int8 x1, int4 weights, a scale row per 256 rows of k)
    kernels, ops = _summary(_trace("npu_quant_matmul",
                                   (torch.randint(-128, 128, (24, 512), dtype=torch.int8),
                                    i4(512, 16), torch.rand(2, 16)),
                                   {"output_dtype": torch.bfloat16,
                                    "pertoken_scale": torch.rand(24, 1)}, dynamic_rows=True))
    report("npu_quant_matmul A8W4 traced (dynamic rows)",
           kernels == ["_qmm"] and not any("npu." in o for o in ops), (kernels, sorted(ops)))
    # and the per-group A4W4 form (a 2-D scale, float16 zero points)
    kernels, ops = _summary(_trace("npu_quant_matmul", (i4(24, 520), i4(520, 16), torch.rand(3, 16)),
                                   {"offset": torch.rand(3, 16).half(), "output_dtype": torch.float16,
                                    "pertoken_scale": torch.rand(24, 1), "group_sizes": [0, 0, 256]},
                                   dynamic_rows=True))
    report("npu_quant_matmul per-group A4W4 traced (dynamic rows)",
           kernels == ["_qmm"] and not any("npu." in o for o in ops), (kernels, sorted(ops)))
    # and the int8 G-B form (a scale per row's group of 128 of k and per 128 x 128 block)
    i8 = lambda *shape: torch.randint(-128, 128, shape, dtype=torch.int8)  # noqa: E731
    kernels, ops = _summary(_trace("npu_quant_matmul", (i8(24, 256), i8(256, 136), torch.rand(2, 2)),
                                   {"pertoken_scale": torch.rand(24, 2), "output_dtype": torch.bfloat16,
                                    "group_sizes": [1, 128, 128]}, dynamic_rows=True))
    report("npu_quant_matmul int8 G-B traced (dynamic rows)",
           kernels == ["_qmm"] and not any("npu." in o for o in ops), (kernels, sorted(ops)))
    # and float8 B-B (a scale per 128 rows and 128 of k)
    f8 = lambda *shape: torch.randn(shape).to(torch.float8_e4m3fn)  # noqa: E731
    kernels, ops = _summary(_trace("npu_quant_matmul", (f8(256, 256), f8(256, 136), torch.rand(2, 2)),
                                   {"pertoken_scale": torch.rand(2, 2), "output_dtype": torch.bfloat16,
                                    "group_sizes": [128, 128, 128]}))
    report("npu_quant_matmul float8 B-B traced",
           kernels == ["_qmm"] and not any("npu." in o for o in ops), (kernels, sorted(ops)))
    # per tensor / per channel: the amax pass, then the quantising pass (also with a
    # symbolic row count)
    for mode in ("pertensor", "perchannel"):
        for dynamic_rows in (False, True):
            kernels, ops = _summary(_trace("npu_dynamic_quant", (rand(3, 7, 64, dtype=bf16),),
                                           {"quant_mode": mode}, dynamic_rows=dynamic_rows))
            report(f"npu_dynamic_quant {mode} traced (dynamic rows {dynamic_rows})",
                   kernels == ["_amax_parts", "_by_amax"] and not any("npu." in o for o in ops),
                   (kernels, sorted(ops)))
    # a form the kernel does not cover (rows over MAX_ROW): the reference's ATen ops
    n = _common.MAX_ROW + 2
    kernels, ops = _summary(_trace("npu_rms_norm", (rand(2, n, dtype=bf16), rand(n, dtype=bf16)), {}))
    report("npu_rms_norm long rows traced", not kernels and "aten.mean.dim" in ops
           and not any("npu." in o for o in ops), (kernels, sorted(ops)))
    # npu_transpose_batchmatmul without scale: torch's bmm into the output, no kernel
    for f in (1, 3):
        kernels, ops = _summary(_trace("npu_transpose_batchmatmul",
                                       (rand(5, 3, 32, dtype=bf16), rand(3, 32, 16, dtype=bf16)),
                                       {"perm_x1": [1, 0, 2], "batch_split_factor": f}))
        report(f"npu_transpose_batchmatmul factor {f} traced into bmm",
               not kernels and "aten.bmm.default" in ops and not any("npu." in o for o in ops),
               (kernels, sorted(ops)))
    # npu_dtype_cast's numeric casts: one kernel; a float8 target (a form only the reference
    # computes): the reference's ATen ops
    kernels, ops = _summary(_trace("npu_dtype_cast", (rand(4, 8, dtype=bf16), 5), {}))
    report("npu_dtype_cast traced", kernels == ["_cast"] and not any("npu." in o for o in ops),
           (kernels, sorted(ops)))
    kernels, ops = _summary(_trace("npu_dtype_cast", (rand(4, 8, dtype=bf16), 292), {}))
    report("npu_dtype_cast float8 traced", not kernels and not any("npu." in o for o in ops),
           (kernels, sorted(ops)))
    # opaque: out of INLINE_DEVICES, and on CPU tensors
    args, kw = triton_cases()["npu_add_rms_norm"]
    library.INLINE_DEVICES.discard("cuda")
    try:
        kernels, ops = _summary(_trace("npu_add_rms_norm", args, kw))
    finally:
        library.INLINE_DEVICES.add("cuda")
    report("npu_add_rms_norm opaque when not inlined",
           not kernels and "npu.npu_add_rms_norm.default" in ops, (kernels, sorted(ops)))
    exporting = torch.compiler.is_exporting
    torch.compiler.is_exporting = lambda: True  # torch.export keeps custom operators
    try:
        kernels, ops = _summary(_trace("npu_add_rms_norm", args, kw))
    finally:
        torch.compiler.is_exporting = exporting
    report("npu_add_rms_norm opaque under torch.export",
           not kernels and "npu.npu_add_rms_norm.default" in ops, (kernels, sorted(ops)))
    kernels, ops = _summary(_trace("npu_add_rms_norm", args, kw, device="cpu"))
    report("npu_add_rms_norm opaque on CPU", not kernels and "npu.npu_add_rms_norm.default" in ops,
           (kernels, sorted(ops)))
    # op_sdk's backend: traced with the operators kept calls (for its fusion passes), then
    # its inline_kernels stage traces through those left (compiler/inline.py)
    from op_sdk.compiler.inline import inline_operators

    def chain(x1, x2, g):
        y, _, x = torch.ops.npu.npu_add_rms_norm(x1, x2, g)
        q, s = torch.ops.npu.npu_dynamic_quant(y)
        # (a float8 target: the cast's reference, no Triton kernel)
        return q, s, torch.ops.npu.npu_dtype_cast(x, 292)

    with library.inline_calls(False):
        gm = _trace_fn(chain, args)
    before = _summary(gm)
    n = inline_operators(gm)
    kernels, ops = _summary(gm)
    # in Inductor's post-grad IR: the cast's reference decomposed by Inductor's table
    report("inline_kernels stage", n == 3 and before[0] == [] and kernels == ["_rows", "_rows"]
           and not any("npu." in o for o in ops) and "aten._to_copy.default" not in ops
           and "prims.convert_element_type.default" in ops, (n, before, kernels, sorted(ops)))
    return 1 if failed else 0


def test_torch_compile_traces_the_operators_on_cuda():
    pytest.importorskip("triton")
    r = run_module(__file__)
    assert r.returncode == 0 and r.stdout.count(": ok") >= 59, r.stdout + r.stderr[-4000:]


if __name__ == "__main__":
    sys.exit(main())
