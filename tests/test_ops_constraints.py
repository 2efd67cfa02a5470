"""Every constraint of the contract raises an error naming the operator, the argument and
the rule, both from the kernel (CPU) and from the fake function (meta tensors)."""

import pytest
import torch

import op_sdk  # noqa: F401

bf16, fp16, fp32, i8, i32 = torch.bfloat16, torch.float16, torch.float32, torch.int8, torch.int32


def T(*shape, dtype=fp32):
    return ("T", shape, dtype)


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    # npu_rms_norm
    ("rms/gamma-dtype-pair", "npu_rms_norm", (T(4, 8, dtype=fp16), T(8, dtype=bf16)), {}, "gamma", RuntimeError),
    ("rms/fp32-x-half-gamma", "npu_rms_norm", (T(4, 8), T(8, dtype=fp16)), {}, "gamma", RuntimeError),
    ("rms/gamma-shape", "npu_rms_norm", (T(4, 8), T(6)), {}, "gamma", RuntimeError),
    ("rms/gamma-too-many-dims", "npu_rms_norm", (T(8), T(1, 8)), {}, "gamma", RuntimeError),
    # npu_add_rms_norm
    ("add/x2-shape", "npu_add_rms_norm", (T(4, 8), T(5, 8), T(8)), {}, "x2", RuntimeError),
    ("add/x2-dtype", "npu_add_rms_norm", (T(4, 8, dtype=fp16), T(4, 8, dtype=bf16), T(8, dtype=fp16)), {},
     "x2", RuntimeError),
    ("add/gamma-dtype", "npu_add_rms_norm", (T(4, 8, dtype=fp16), T(4, 8, dtype=fp16), T(8)), {},
     "gamma", RuntimeError),
    ("add/x1-dtype", "npu_add_rms_norm", (T(4, 8, dtype=torch.float64), T(4, 8, dtype=torch.float64),
                                          T(8, dtype=torch.float64)), {}, "x1", RuntimeError),
    ("add/x1-9-dims", "npu_add_rms_norm", (T(*[1] * 8 + [8]), T(*[1] * 8 + [8]), T(8)), {}, "x1", RuntimeError),
    ("add/gamma-shape", "npu_add_rms_norm", (T(4, 8), T(4, 8), T(4)), {}, "gamma", RuntimeError),
    # npu_add_rms_norm_cast
    ("cast/fp32-input", "npu_add_rms_norm_cast", (T(4, 8), T(4, 8), T(8)), {}, "x1", RuntimeError),
    # npu_dynamic_quant
    ("dq/1-dim", "npu_dynamic_quant", (T(8),), {}, "input", RuntimeError),
    ("dq/int-input", "npu_dynamic_quant", (T(4, 8, dtype=i32),), {}, "input", RuntimeError),
    ("dq/dst-type", "npu_dynamic_quant", (T(4, 8),), {"dst_type": torch.int32}, "dst_type", RuntimeError),
    ("dq/quant-mode", "npu_dynamic_quant", (T(4, 8),), {"quant_mode": "perblock"}, "quant_mode", RuntimeError),
    ("dq/int4-last-dim", "npu_dynamic_quant", (T(4, 12),), {"dst_type": torch.quint4x2}, "input", RuntimeError),
    ("dq/smooth-len", "npu_dynamic_quant", (T(4, 8),), {"smooth_scales": T(7)}, "smooth_scales", RuntimeError),
    ("dq/group-dtype", "npu_dynamic_quant", (T(4, 8),),
     {"smooth_scales": T(2, 8), "group_index": T(2, dtype=torch.int64)}, "group_index", RuntimeError),
    ("dq/group-needs-smooth", "npu_dynamic_quant", (T(4, 8),), {"group_index": T(2, dtype=i32)},
     "smooth_scales", RuntimeError),
    ("dq/group-smooth-shape", "npu_dynamic_quant", (T(4, 8),),
     {"smooth_scales": T(3, 8), "group_index": T(2, dtype=i32)}, "smooth_scales", RuntimeError),
    ("dq/too-many-groups", "npu_dynamic_quant", (T(4, 8),),
     {"smooth_scales": T(1025, 8), "group_index": T(1025, dtype=i32)}, "group_index", RuntimeError),
    ("dq/group-pertensor", "npu_dynamic_quant", (T(4, 8),),
     {"smooth_scales": T(2, 8), "group_index": T(2, dtype=i32), "quant_mode": "pertensor"},
     "group_index", RuntimeError),
    ("dq/dst-type-max", "npu_dynamic_quant", (T(4, 8),), {"dst_type_max": 127.0}, "dst_type_max", RuntimeError),
    # npu_quantize
    ("q/dtype", "npu_quantize", (T(4, 8), T(8), None, torch.float16, -1), {}, "dtype", RuntimeError),
    ("q/scales-size", "npu_quantize", (T(4, 8), T(5), None, 1, -1), {}, "scales", RuntimeError),
    ("q/scales-along-axis", "npu_quantize", (T(4, 8), T(8), None, 1, 0), {}, "scales", RuntimeError),
    ("q/axis-range", "npu_quantize", (T(4, 8), T(8), None, 1, 2), {}, "axis", RuntimeError),
    ("q/zp-size", "npu_quantize", (T(4, 8), T(8), T(3, dtype=i32), 1, -1), {}, "zero_points", RuntimeError),
    ("q/int4-needs-mul-mode", "npu_quantize", (T(4, 8), T(8), None, torch.quint4x2, -1, True), {},
     "dtype", RuntimeError),
    ("q/int4-last-dim", "npu_quantize", (T(4, 12), T(12), None, torch.quint4x2, -1, False), {},
     "input", RuntimeError),
    ("q/mul-mode-scales-dtype", "npu_quantize", (T(4, 8, dtype=fp16), T(8), None, 1, -1, False), {},
     "scales", RuntimeError),
    ("q/mul-mode-zp-dtype", "npu_quantize", (T(4, 8), T(8), T(8, dtype=i32), 1, -1, False), {},
     "zero_points", RuntimeError),
    # npu_add_rms_norm_quant
    ("arq/axis", "npu_add_rms_norm_quant", (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16),
                                            T(16), None), {"axis": 0}, "axis", RuntimeError),
    ("arq/fp16-scales-dtype", "npu_add_rms_norm_quant", (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16),
                                                         T(16, dtype=fp16), T(16, dtype=bf16), None), {},
     "scales1", RuntimeError),
    ("arq/fp16-zp-dtype", "npu_add_rms_norm_quant", (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16),
                                                     T(16, dtype=fp16), T(16), T(16, dtype=i8)), {},
     "zero_points1", RuntimeError),
    ("arq/bf16-scales-dtype", "npu_add_rms_norm_quant", (T(4, 16, dtype=bf16), T(4, 16, dtype=bf16),
                                                         T(16, dtype=bf16), T(16, dtype=fp16), None), {},
     "scales1", RuntimeError),
    ("arq/scales-shape", "npu_add_rms_norm_quant", (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16),
                                                    T(16, dtype=fp16), T(8), None), {}, "scales1", RuntimeError),
    ("arq/fp64-x", "npu_add_rms_norm_quant", (T(4, 16, dtype=torch.float64), T(4, 16, dtype=torch.float64),
                                              T(16, dtype=torch.float64), T(16), None), {}, "x1", RuntimeError),
    ("arq/zp2-without-scales2", "npu_add_rms_norm_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16), T(16), None, None, None,
      T(16, dtype=i32)), {}, "zero_points2", RuntimeError),
    ("arq/dst-type", "npu_add_rms_norm_quant", (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16),
                                                T(16, dtype=fp16), T(16), None), {"dst_type": torch.int32},
     "dst_type", RuntimeError),
    ("arq/beta-shape", "npu_add_rms_norm_quant", (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16),
                                                  T(16, dtype=fp16), T(16), None, T(8, dtype=fp16)), {},
     "beta", RuntimeError),
    # npu_add_rms_norm_dynamic_quant
    ("ardq/1-dim", "npu_add_rms_norm_dynamic_quant", (T(16, dtype=fp16), T(16, dtype=fp16),
                                                      T(16, dtype=fp16)), {}, "x1", RuntimeError),
    ("ardq/fp32", "npu_add_rms_norm_dynamic_quant", (T(4, 16), T(4, 16), T(16)), {}, "x1", RuntimeError),
    ("ardq/mask-both-false", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)), {"output_mask": [False, False]},
     "output_mask", RuntimeError),
    ("ardq/mask-length", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)), {"output_mask": [True]},
     "output_mask", RuntimeError),
    ("ardq/smooth1-needs-mask0", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)),
     {"smooth_scale1": T(16, dtype=fp16), "output_mask": [False, True]}, "smooth_scale1", RuntimeError),
    ("ardq/smooth2-needs-mask1", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)),
     {"smooth_scale2": T(16, dtype=fp16), "output_mask": [True, False]}, "smooth_scale2", RuntimeError),
    ("ardq/smooth2-needs-smooth1", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)), {"smooth_scale2": T(16, dtype=fp16)},
     "smooth_scale2", RuntimeError),
    ("ardq/smooth-dtype", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)), {"smooth_scale1": T(16)},
     "smooth_scale1", RuntimeError),
    ("ardq/beta-len", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)), {"beta": T(8, dtype=fp16)},
     "beta", RuntimeError),
    ("ardq/y-dtype", "npu_add_rms_norm_dynamic_quant",
     (T(4, 16, dtype=fp16), T(4, 16, dtype=fp16), T(16, dtype=fp16)), {"y_dtype": torch.int32},
     "y_dtype", RuntimeError),
    # npu_transpose_batchmatmul
    ("tbmm/bias", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5)), {"bias": T(5)}, "bias", RuntimeError),
    ("tbmm/scale-fp32-input", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5)), {"scale": T(10)},
     "scale", RuntimeError),
    ("tbmm/scale-length", "npu_transpose_batchmatmul", (T(2, 3, 4, dtype=fp16), T(2, 4, 5, dtype=fp16)),
     {"scale": T(5)}, "scale", RuntimeError),
    ("tbmm/scale-dtype", "npu_transpose_batchmatmul", (T(2, 3, 4, dtype=fp16), T(2, 4, 5, dtype=fp16)),
     {"scale": T(10, dtype=fp16)}, "scale", RuntimeError),
    ("tbmm/perm-x1", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5)), {"perm_x1": [0, 2, 1]},
     "perm_x1", RuntimeError),
    ("tbmm/perm-x2", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5)), {"perm_x2": [1, 0, 2]},
     "perm_x2", RuntimeError),
    ("tbmm/perm-y", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5)), {"perm_y": [0, 1, 2]},
     "perm_y", RuntimeError),
    ("tbmm/2d", "npu_transpose_batchmatmul", (T(3, 4), T(2, 4, 5)), {}, "input", RuntimeError),
    ("tbmm/mixed-dtype", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5, dtype=bf16)), {},
     "weight", RuntimeError),
    ("tbmm/k-mismatch", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 6, 5)), {}, "weight", RuntimeError),
    ("tbmm/batch-limit", "npu_transpose_batchmatmul", (T(65536, 1, 1), T(65536, 1, 1)), {}, "input",
     RuntimeError),
    ("tbmm/n-limit", "npu_transpose_batchmatmul", (T(1, 1, 1), T(1, 1, 65536)), {}, "weight", RuntimeError),
    ("tbmm/split", "npu_transpose_batchmatmul", (T(2, 3, 4), T(2, 4, 5)), {"batch_split_factor": 3},
     "batch_split_factor", RuntimeError),
    # npu_quant_matmul
    ("qmm/x1-dtype", "npu_quant_matmul", (T(4, 8), T(8, 6, dtype=i8), T(6)), {}, "x1", NotImplementedError),
    ("qmm/group-sizes", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"group_sizes": [1, 1, 1]}, "group_sizes", NotImplementedError),
    ("qmm/y-scale", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"y_scale": T(6)}, "y_scale", NotImplementedError),
    ("qmm/k", "npu_quant_matmul", (T(4, 8, dtype=i8), T(7, 6, dtype=i8), T(6)), {}, "x2", RuntimeError),
    ("qmm/scale-shape", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(5)), {}, "scale",
     RuntimeError),
    ("qmm/pertoken-shape", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"pertoken_scale": T(3), "output_dtype": torch.float16}, "pertoken_scale", RuntimeError),
    ("qmm/pertoken-int8-out", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"pertoken_scale": T(4)}, "pertoken_scale", NotImplementedError),
    ("qmm/output-dtype", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"output_dtype": torch.float32}, "output_dtype", RuntimeError),
    ("qmm/float-bias-no-pertoken", "npu_quant_matmul", (T(4, 8, dtype=i8), T(8, 6, dtype=i8), T(6)),
     {"bias": T(6, dtype=bf16), "output_dtype": torch.bfloat16}, "bias", NotImplementedError),
    # casts and scatter
    ("cast/dtype", "npu_dtype_cast", (T(4), 12), {}, "dtype", RuntimeError),
    ("cast/input-dtype", "npu_dtype_cast", (T(4), 5), {"input_dtype": 5}, "input_dtype", RuntimeError),
    ("scatter/indices-dtype", "npu_scatter_nd_update", (T(5, 3), T(2, 1), T(2, 3)), {}, "indices", RuntimeError),
    ("scatter/k", "npu_scatter_nd_update", (T(5, 3), T(2, 3, dtype=torch.int64), T(2)), {}, "indices",
     RuntimeError),
    ("scatter/updates-shape", "npu_scatter_nd_update", (T(5, 3), T(2, 1, dtype=torch.int64), T(2, 4)), {},
     "updates", RuntimeError),
    ("scatter/updates-dtype", "npu_scatter_nd_update", (T(5, 3), T(2, 1, dtype=torch.int64),
                                                        T(2, 3, dtype=fp16)), {}, "updates", RuntimeError),
    ("scatter_/updates-shape", "npu_scatter_nd_update_", (T(5, 3), T(2, 1, dtype=torch.int64), T(2, 4)), {},
     "updates", RuntimeError),
]


def _build(v, device):
    if isinstance(v, tuple) and len(v) == 3 and v[0] == "T":
        _, shape, dtype = v
        if dtype.is_floating_point:
            return torch.rand(*shape, device=device).to(dtype) + 0.5
        return torch.zeros(*shape, dtype=dtype, device=device)
    if isinstance(v, (list, tuple)):
        return type(v)(_build(x, device) for x in v)
    if isinstance(v, dict):
        return {k: _build(x, device) for k, x in v.items()}
    return v


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_constraint_raises_naming_op_and_argument(case, device):
    _, name, args, kwargs, arg, exc = case
    op = getattr(torch.ops.npu, name)
    with pytest.raises(exc) as info:
        op(*_build(args, device), **_build(kwargs, device))
    msg = str(info.value)
    assert name.rstrip("_") in msg, msg
    assert f"'{arg}'" in msg, msg
    # the rule is stated, not just the names
    assert len(msg) > len(name) + len(arg) + 20, msg
