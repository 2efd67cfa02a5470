"""Sample calls for every operator: (name, args, kwargs), shared by the opcheck and
fake-vs-kernel tests. Shapes are small and odd on purpose."""

import torch

bf16, fp16, fp32 = torch.bfloat16, torch.float16, torch.float32


def _r(*shape, dtype=fp32, grad=False):
    t = torch.randn(*shape, dtype=dtype)
    return t.requires_grad_(grad) if grad else t


def samples():
    torch.manual_seed(0)
    h = 24
    out = [
        ("npu_rms_norm", (_r(5, h, dtype=bf16), _r(h, dtype=fp32)), {}),
        ("npu_rms_norm", (_r(2, 3, h, grad=True), _r(h, grad=True)), {"epsilon": 1e-5}),
        ("npu_rms_norm", (_r(2, 3, 8, dtype=fp16), _r(3, 8, dtype=fp16)), {}),
        ("npu_add_rms_norm", (_r(7, h, dtype=fp16), _r(7, h, dtype=fp16), _r(h, dtype=fp16)), {}),
        ("npu_add_rms_norm", (_r(3, 5, h, grad=True), _r(3, 5, h, grad=True), _r(h, grad=True)), {}),
        ("npu_add_rms_norm_cast", (_r(7, h, dtype=bf16), _r(7, h, dtype=bf16), _r(h, dtype=bf16)), {}),
        ("npu_dynamic_quant", (_r(7, h, dtype=bf16),), {}),
        ("npu_dynamic_quant", (_r(2, 5, h, dtype=fp16),), {"smooth_scales": _r(h, dtype=fp16)}),
        ("npu_dynamic_quant", (_r(6, 16, dtype=bf16),),
         {"smooth_scales": _r(3, 16, dtype=bf16),
          "group_index": torch.tensor([2, 2, 6], dtype=torch.int32)}),
        ("npu_dynamic_quant", (_r(5, 16),), {"dst_type": torch.quint4x2}),
        ("npu_dynamic_quant", (_r(2, 5, h),), {"quant_mode": "pertensor"}),
        ("npu_dynamic_quant", (_r(2, 5, h),), {"quant_mode": "perchannel"}),
        ("npu_quantize", (_r(5, h), torch.rand(h) + 0.1, torch.randint(-3, 3, (h,), dtype=torch.int32),
                          torch.qint8, -1, True), {}),
        ("npu_quantize", (_r(4, 6, h, dtype=bf16), torch.rand(6).to(bf16) + 0.1, None, torch.quint8,
                          1, True), {}),
        ("npu_quantize", (_r(5, 16, dtype=fp16), _r(16, dtype=fp16), _r(16, dtype=fp16),
                          torch.quint4x2, 1, False), {}),
        ("npu_add_rms_norm_quant", (_r(5, h, dtype=fp16), _r(5, h, dtype=fp16), _r(h, dtype=fp16),
                                    torch.rand(h) + 0.01, torch.randint(-2, 2, (h,), dtype=torch.int32)),
         {}),
        ("npu_add_rms_norm_quant", (_r(2, 3, h, dtype=bf16), _r(2, 3, h, dtype=bf16), _r(h, dtype=bf16),
                                    (torch.rand(h) + 0.01).to(bf16), None, _r(h, dtype=bf16),
                                    (torch.rand(h) + 0.01).to(bf16)), {"div_mode": False}),
        ("npu_add_rms_norm_dynamic_quant", (_r(5, h, dtype=bf16), _r(5, h, dtype=bf16), _r(h, dtype=bf16)),
         {"smooth_scale1": _r(h, dtype=bf16), "output_mask": [True, False]}),
        ("npu_add_rms_norm_dynamic_quant", (_r(2, 3, h, dtype=fp16), _r(2, 3, h, dtype=fp16),
                                            _r(h, dtype=fp16)),
         {"smooth_scale1": _r(h, dtype=fp16), "smooth_scale2": _r(h, dtype=fp16),
          "beta": _r(h, dtype=fp16)}),
        ("npu_add_rms_norm_dynamic_quant", (_r(5, h, dtype=bf16), _r(5, h, dtype=bf16), _r(h, dtype=bf16)),
         {}),
        ("npu_transpose_batchmatmul", (_r(3, 5, 16), _r(3, 16, 8)), {}),
        ("npu_transpose_batchmatmul", (_r(5, 3, 16, dtype=bf16), _r(3, 8, 16, dtype=bf16)),
         {"perm_x1": [1, 0, 2], "perm_x2": [0, 2, 1], "batch_split_factor": 2}),
        ("npu_quant_matmul", (torch.randint(-128, 128, (5, 32), dtype=torch.int8),
                              torch.randint(-128, 128, (32, 16), dtype=torch.int8), torch.rand(16) / 100),
         {}),
        ("npu_quant_matmul", (torch.randint(-128, 128, (5, 32), dtype=torch.int8),
                              torch.randint(-128, 128, (32, 16), dtype=torch.int8), torch.rand(16) / 100),
         {"pertoken_scale": torch.rand(5), "output_dtype": torch.bfloat16, "bias": _r(16, dtype=bf16)}),
        ("npu_quant_matmul", (torch.randint(-128, 128, (2, 5, 32), dtype=torch.int8),
                              torch.randint(-128, 128, (32, 16), dtype=torch.int8), torch.rand(1)),
         {"bias": torch.randint(-9, 9, (16,), dtype=torch.int32), "output_dtype": torch.int32}),
        # the documented contract beyond A2 / A3 (tests/test_contract_widened.py)
        ("npu_add_rms_norm_quant", (_r(5, h), _r(5, h), _r(h), torch.rand(h) + 0.01, None),
         {"dst_type": 290}),
        ("npu_add_rms_norm_quant", (_r(2, 3, h, dtype=bf16), _r(2, 3, h, dtype=bf16), _r(h, dtype=bf16),
                                    torch.rand(h) + 0.01, torch.randint(-2, 2, (h,), dtype=torch.int32)),
         {"dst_type": torch.float8_e4m3fn}),
        ("npu_dynamic_quant", (_r(2, 5, h),), {"quant_mode": "perchannel", "smooth_scales": _r(5)}),
        ("npu_quantize", (_r(2, 3, 4, 16), torch.rand(1, 1, 4, 1) + 0.1, torch.zeros(1, 1, 4, 1),
                          torch.qint8, -2, False), {}),
        ("npu_transpose_batchmatmul", (_r(3, 5, 16, dtype=fp16), _r(3, 16, 8, dtype=fp16)),
         {"scale": torch.rand(24) + 0.5}),
        ("npu_dtype_cast", (_r(5, 7), torch.complex64), {}),
        ("npu_dtype_cast", (_r(5, 7), torch.int8), {}),
        ("npu_dtype_cast", (_r(5, 7, dtype=bf16, grad=False), torch.float32), {"input_dtype": bf16}),
        ("_npu_dtype_cast", (_r(5, 7, grad=True), torch.float16), {}),
        ("npu_scatter_nd_update", (_r(6, 4, 3), torch.tensor([[1], [4]]), _r(2, 4, 3)), {}),
        ("npu_scatter_nd_update_", (_r(6, 4, 3), torch.tensor([[1, 2], [4, 0]], dtype=torch.int32),
                                    _r(2, 3)), {}),
    ]
    return out
