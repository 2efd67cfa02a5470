"""A grid of calls per npu operator (shapes, dtypes, options) for comparing op_sdk's CPU
kernels, op_sdk's fake functions and torch_npu's Meta functions: 2-D and 3-D inputs,
odd sizes, every dtype the contract lists, every option that changes an output's shape
or dtype."""

import itertools

import torch

bf16, fp16, fp32, i8, i32 = torch.bfloat16, torch.float16, torch.float32, torch.int8, torch.int32


def _r(*shape, dtype=fp32):
    return torch.randn(*shape).to(dtype)


def _pos(*shape, dtype=fp32):
    return (torch.rand(*shape) + 0.05).to(dtype)


def _i8(*shape):
    return torch.randint(-128, 128, shape, dtype=i8)


LEADS = [(5,), (2, 3)]  # 2-D and 3-D inputs
H = 24


def grid():
    torch.manual_seed(0)
    cases = []
    add = lambda name, args, kwargs=None: cases.append((name, args, kwargs or {}))  # noqa: E731
    for lead in LEADS:
        for dt, gdt in [(fp16, fp32), (bf16, fp32), (fp16, fp16), (bf16, bf16), (fp32, fp32)]:
            add("npu_rms_norm", (_r(*lead, H, dtype=dt), _r(H, dtype=gdt)), {"epsilon": 1e-5})
        add("npu_rms_norm", (_r(*lead, 4, 6, dtype=bf16), _r(4, 6, dtype=bf16)))
        for dt in (fp16, bf16, fp32):
            add("npu_add_rms_norm", (_r(*lead, H, dtype=dt), _r(*lead, H, dtype=dt), _r(H, dtype=dt)))
        for dt in (fp16, bf16):
            add("npu_add_rms_norm_cast", (_r(*lead, H, dtype=dt), _r(*lead, H, dtype=dt),
                                          _r(H, dtype=dt)))
        for dt in (fp16, bf16, fp32):
            x = _r(*lead, H, dtype=dt)
            add("npu_dynamic_quant", (x,))
            add("npu_dynamic_quant", (x,), {"smooth_scales": _pos(H, dtype=dt)})
            add("npu_dynamic_quant", (x,), {"dst_type": torch.quint4x2})
            add("npu_dynamic_quant", (x,), {"quant_mode": "pertensor"})
            add("npu_dynamic_quant", (x,), {"dst_type": i8})
        for dt in (fp16, bf16, fp32):
            x = _r(*lead, H, dtype=dt)
            add("npu_quantize", (x, _pos(H), None, torch.qint8, -1, True))
            add("npu_quantize", (x, _pos(1), None, torch.quint8, -1, True))
            add("npu_quantize", (x, _pos(H), torch.randint(-3, 3, (H,), dtype=i32), torch.qint32, -1, True))
            add("npu_quantize", (x, _pos(H, dtype=dt), _r(H, dtype=dt), torch.qint8, 1, False))
            add("npu_quantize", (x, _pos(H, dtype=dt), None, torch.quint4x2, -1, False))
        for dt, sdt, zdt in [(fp16, fp32, i32), (bf16, bf16, bf16)]:
            x1, x2, g = _r(*lead, H, dtype=dt), _r(*lead, H, dtype=dt), _r(H, dtype=dt)
            s, z = _pos(H, dtype=sdt), torch.randint(-3, 3, (H,)).to(zdt)
            add("npu_add_rms_norm_quant", (x1, x2, g, s, z))
            add("npu_add_rms_norm_quant", (x1, x2, g, s, None), {"div_mode": False})
            add("npu_add_rms_norm_quant", (x1, x2, g, s, z, None, _pos(H, dtype=sdt), z))
            if dt == bf16:
                add("npu_add_rms_norm_quant", (x1, x2, g, s, None, _r(H, dtype=dt)))
        for dt in (fp16, bf16):
            x1, x2, g = _r(*lead, H, dtype=dt), _r(*lead, H, dtype=dt), _r(H, dtype=dt)
            s1, s2, b = _pos(H, dtype=dt), _pos(H, dtype=dt), _r(H, dtype=dt)
            add("npu_add_rms_norm_dynamic_quant", (x1, x2, g))
            add("npu_add_rms_norm_dynamic_quant", (x1, x2, g), {"smooth_scale1": s1, "smooth_scale2": s2})
            add("npu_add_rms_norm_dynamic_quant", (x1, x2, g), {"smooth_scale1": s1, "smooth_scale2": s2,
                                                                 "beta": b})
            for mask in ([True, True], [True, False]):
                add("npu_add_rms_norm_dynamic_quant", (x1, x2, g), {"output_mask": mask})
    for dt, (p1, p2), f in itertools.product((fp16, bf16, fp32), [([0, 1, 2], [0, 1, 2]),
                                                                     ([1, 0, 2], [0, 1, 2]),
                                                                     ([0, 1, 2], [0, 2, 1])], (1, 2)):
        b, m, k, n = 4, 5, 16, 6
        x = _r(*([b, m, k] if p1 == [0, 1, 2] else [m, b, k]), dtype=dt)
        w = _r(*([b, k, n] if p2 == [0, 1, 2] else [b, n, k]), dtype=dt)
        add("npu_transpose_batchmatmul", (x, w), {"perm_x1": p1, "perm_x2": p2, "perm_y": [1, 0, 2],
                                                  "batch_split_factor": f})
    for lead, out in itertools.product([(), (2,)], [None, fp16, bf16, torch.int32, i8]):
        x1, x2 = _i8(*lead, 5, 32), _i8(32, 16)
        kw = {"output_dtype": out} if out is not None else {}
        if out in (fp16, bf16):
            add("npu_quant_matmul", (x1, x2, _pos(16) / 100), dict(kw, pertoken_scale=_pos(5)))
        add("npu_quant_matmul", (x1, x2, _pos(1) / 100), kw)
        if out == torch.int32:
            add("npu_quant_matmul", (x1, x2, _pos(16)), dict(kw, bias=torch.randint(-9, 9, (16,), dtype=i32)))
    # the documented contract beyond A2 / A3: the 950 dtype table and 8-bit float outputs,
    # per-channel smoothing, per-head scales, the int8-output scale, complex casts
    for lead in LEADS:
        for (dt, sdt, zdt), dst in itertools.product(
                [(fp16, fp32, i32), (bf16, fp32, i32), (fp32, fp32, fp32), (fp16, fp16, fp16),
                 (bf16, bf16, bf16), (fp16, fp32, fp32), (bf16, fp32, fp32)],
                [None, torch.float8_e5m2, torch.float8_e4m3fn, 290, 291, 292]):
            x1, x2, g = _r(*lead, H, dtype=dt), _r(*lead, H, dtype=dt), _r(H, dtype=dt)
            s, z = _pos(H, dtype=sdt), torch.randint(-3, 3, (H,)).to(zdt)
            add("npu_add_rms_norm_quant", (x1, x2, g, s, z, None, s, z), {"dst_type": dst})
        add("npu_dynamic_quant", (_r(*lead, 6, H),), {"quant_mode": "perchannel",
                                                      "smooth_scales": _pos(6)})
        add("npu_quantize", (_r(*lead, 4, H), _pos(*([1] * len(lead)), 4, 1),
                             _r(*([1] * len(lead)), 4, 1), torch.qint8, -2, False))
    for f in (1,):
        add("npu_transpose_batchmatmul", (_r(4, 5, 16, dtype=fp16), _r(4, 16, 6, dtype=fp16)),
            {"scale": torch.randint(1, 2**30, (24,)), "batch_split_factor": f})
    from op_sdk.ops._common import pack_int4
    for m, cont in itertools.product((1, 5), (False, True)):  # A4W4, both x2 layouts
        q2 = torch.randint(-8, 8, (64, 24), dtype=i8)
        x2 = pack_int4(q2.t().contiguous()).t() if cont else pack_int4(q2)
        x1 = pack_int4(torch.randint(-8, 8, (m, 64), dtype=i8))
        add("npu_quant_matmul", (x1, x2, _pos(24)), {"output_dtype": fp16})
        add("npu_quant_matmul", (x1, x2, _pos(24)), {"output_dtype": bf16, "pertoken_scale": _pos(m)})
    for out in (fp16, bf16):  # A8W4 per group
        add("npu_quant_matmul", (_i8(3, 512), pack_int4(torch.randint(-8, 8, (512, 16), dtype=i8)),
                                 torch.randint(1, 2**30, (2, 16))),
            {"pertoken_scale": _pos(3, 1), "offset": _r(16), "output_dtype": out})
    for src, dst in itertools.product((fp32, torch.complex64), (torch.complex64, torch.complex128, fp32)):
        add("npu_dtype_cast", (_r(3, 5).to(src), dst))
    for src, dst in itertools.product((fp32, fp16, bf16), (i8, i32, fp16, bf16, fp32)):
        add("npu_dtype_cast", (_r(5, 7, dtype=src), dst))
        add("_npu_dtype_cast", (_r(2, 3, 7, dtype=src), dst))
    for dt in (fp32, fp16, bf16):
        for name in ("npu_scatter_nd_update", "npu_scatter_nd_update_"):
            add(name, (_r(6, 4, 3, dtype=dt), torch.tensor([[1], [4]]), _r(2, 4, 3, dtype=dt)))
            add(name, (_r(6, 4, 3, dtype=dt), torch.tensor([[1, 2], [4, 0]], dtype=i32), _r(2, 3, dtype=dt)))
    return cases
