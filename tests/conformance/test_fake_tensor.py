# Conformance port of the fake-tensor (meta) cases of op_sdk's operators.
# Upstream: Ascend/op-plugin, test/core_tests/test_fake_tensor.py (classes TestNpuDtypeCast,
#   TestNpuRmsNorm, TestNpuAddRmsNorm, TestNpuDynamicQuant, TestAddRmsNormQuant,
#   TestAddRmsNormDynamicQuant, TestQuantMatmul, TestTransposeBatchMatmul), read at commit
#   517f2e7d0f202f38b76310706cb977ca2388ad21 (the file's last change:
#   6b46b284d04116e7ac551fddb916027629176579).
# Rewritten for op_sdk on CPU, not copied.
"""Output shapes, dtypes and devices under FakeTensorMode (op_sdk's fake functions and,
for the backward cases, its autograd formulas on fake tensors). Upstream moves the inputs
to the NPU; here they stay on CPU.

Upstream's npu_quant_matmul meta cases pass a 3-D bias (1, 1, n) (a (batch, 1, n) bias of
the 3-D output); each is also run with the bias as (n,). Differs (docs/conformance.md): a
bfloat16 bias without pertoken_scale is outside the contract's subset.
"""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from tests.conformance._golden import NPU_HIFLOAT8, npu

OUTSIDE_SUBSET = r"npu_quant_matmul: argument '\w+' .*supported subset"


@pytest.fixture
def fake_mode():
    with FakeTensorMode() as mode:
        yield mode


def expect(t, shape, dtype, device=None):
    assert isinstance(t, FakeTensor)
    assert t.shape == torch.Size(shape) and t.dtype == dtype
    if device is not None:
        assert t.device == device


# ---- TestNpuDtypeCast ----------------------------------------------------------------------

def test_npu_dtype_cast(fake_mode):
    x = torch.randn((2, 3), dtype=torch.float32)
    expect(npu.npu_dtype_cast(x, torch.float16), x.shape, torch.float16)


def test_npu_dtype_cast_backward(fake_mode):
    x = torch.randn((2, 3), dtype=torch.float32).requires_grad_(True)
    out = npu.npu_dtype_cast(x, torch.float16)
    out.sum().backward()
    assert out.dtype == torch.float16 and x.grad.shape == x.shape


# ---- TestNpuRmsNorm / TestNpuAddRmsNorm ----------------------------------------------------

def test_npu_rms_norm(fake_mode):
    x = torch.randn((2, 3), dtype=torch.float32)
    gamma = torch.randn((3,), dtype=torch.float32)
    y, rstd = npu.npu_rms_norm(x, gamma)
    expect(y, x.shape, x.dtype, x.device)
    expect(rstd, [2, 1], torch.float32, x.device)


def test_npu_rms_norm_backward(fake_mode):
    x = torch.randn((2, 3), dtype=torch.float32).requires_grad_(True)
    gamma = torch.randn((3,), dtype=torch.float32).requires_grad_(True)
    npu.npu_rms_norm(x, gamma)[0].backward(torch.randn((2, 3), dtype=torch.float32))
    expect(x.grad, x.shape, x.dtype, x.device)
    expect(gamma.grad, gamma.shape, gamma.dtype, gamma.device)


def test_npu_add_rms_norm(fake_mode):
    x1 = torch.randn((2, 3), dtype=torch.float32)
    x2 = torch.randn((2, 3), dtype=torch.float32)
    gamma = torch.randn((3,), dtype=torch.float32)
    y, rstd, x = npu.npu_add_rms_norm(x1, x2, gamma)
    expect(y, x1.shape, x1.dtype, x1.device)
    expect(rstd, [2, 1], torch.float32, x1.device)
    expect(x, x1.shape, x1.dtype, x1.device)


# ---- TestNpuDynamicQuant -------------------------------------------------------------------

def test_npu_dynamic_quant(fake_mode):
    x = torch.randn((4, 2048, 1024)).to(torch.float16)
    smooth_scales = torch.randn((1024,)).to(torch.float16)
    y, scale = npu.npu_dynamic_quant(x, smooth_scales=smooth_scales)
    expect(y, [4, 2048, 1024], torch.int8, x.device)
    expect(scale, [4, 2048], torch.float32, x.device)


# ---- TestAddRmsNormQuant / TestAddRmsNormDynamicQuant --------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_npu_add_rms_norm_quant(fake_mode, dtype):
    x1 = torch.randn([2, 16], dtype=dtype)
    x2 = torch.randn([2, 16], dtype=dtype)
    gamma = torch.randn([16], dtype=dtype)
    if dtype == torch.float16:
        scales1 = torch.randn([16], dtype=torch.float32)
        zero_points1 = torch.randint(-10, 10, [16], dtype=torch.int32)
    else:
        scales1 = torch.randn([16], dtype=dtype)
        zero_points1 = torch.randn([16], dtype=dtype)
    y1, y2, x = npu.npu_add_rms_norm_quant(x1, x2, gamma, scales1, zero_points1)
    expect(y1, x1.shape, torch.int8)
    expect(y2, x1.shape, torch.int8)
    expect(x, x1.shape, x1.dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_npu_add_rms_norm_dynamic_quant_meta(fake_mode, dtype):
    x1 = torch.randn([2, 16], dtype=dtype)
    x2 = torch.randn([2, 16], dtype=dtype)
    gamma, beta = torch.ones([16], dtype=dtype), torch.zeros([16], dtype=dtype)
    smooth = {"smooth_scale1": torch.ones([16], dtype=dtype),
              "smooth_scale2": torch.ones([16], dtype=dtype)}
    y1, y2, x, s1, s2 = npu.npu_add_rms_norm_dynamic_quant(x1, x2, gamma, beta=beta, **smooth)
    for y in (y1, y2):
        expect(y, x1.shape, torch.int8)
    expect(x, x1.shape, x1.dtype)
    for s in (s1, s2):
        expect(s, x1.shape[:-1], torch.float32)
    if dtype == torch.bfloat16:
        # y_dtype=torch.quint4x2: int32 y1 / y2 of last dim / 8 (int4 packed 8 per int32)
        y1, y2, x, s1, s2 = npu.npu_add_rms_norm_dynamic_quant(
            x1, x2, gamma, beta=beta, y_dtype=torch.quint4x2, **smooth)
        for y in (y1, y2):
            expect(y, (2, 2), torch.int32)
        expect(x, x1.shape, x1.dtype)
        for s in (s1, s2):
            expect(s, x1.shape[:-1], torch.float32)


# ---- TestQuantMatmul::test_npu_quant_matmul_meta, one parameter per call -------------------

def _int8_operands():
    return (torch.randint(-1, 1, (1, 1, 1024), dtype=torch.int8),
            torch.randint(-1, 1, (1, 1024, 100), dtype=torch.int8))


@pytest.mark.parametrize("bias_dtype, output_dtype, extra", [
    pytest.param(torch.int32, None, "offset", id="int8-offset-int32_bias"),
    pytest.param(torch.float32, torch.float16, "pertoken", id="fp16-pertoken-fp32_bias"),
    pytest.param(torch.int32, torch.int32, None, id="int32-int32_bias"),
])
@pytest.mark.parametrize("bias_shape", [
    pytest.param((1, 1, 100), id="upstream-3d_bias"),
    pytest.param((100,), id="bias_n"),
])
def test_npu_quant_matmul_meta_int8(fake_mode, bias_dtype, output_dtype, extra, bias_shape):
    x1, x2 = _int8_operands()
    scale = torch.randn(1, dtype=torch.float32)
    kwargs = {"bias": torch.randint(-1, 1, bias_shape, dtype=bias_dtype)}
    if extra == "offset":
        kwargs["offset"] = torch.randn(1, dtype=torch.float32)
    elif extra == "pertoken":
        kwargs["pertoken_scale"] = torch.randn(1, dtype=torch.float32)
    if output_dtype is not None:
        kwargs["output_dtype"] = output_dtype
    out = npu.npu_quant_matmul(x1, x2, scale, **kwargs)
    expect(out, (1, 1, 100), output_dtype or torch.int8)


@pytest.mark.parametrize("bias_shape", [
    pytest.param((1, 1, 100), id="upstream-3d_bias"),
    pytest.param((100,), id="bias_n"),
])
def test_npu_quant_matmul_meta_bf16_bias_without_pertoken(fake_mode, bias_shape):
    # upstream: bfloat16 scale and bias, no pertoken_scale, bfloat16 output
    x1, x2 = _int8_operands()
    scale = torch.randn(1, dtype=torch.bfloat16)
    bias = torch.randint(-1, 1, bias_shape, dtype=torch.bfloat16)
    with pytest.raises(NotImplementedError,
                       match=r"argument 'bias' of a float dtype requires pertoken_scale"):
        npu.npu_quant_matmul(x1, x2, scale, offset=None, bias=bias, output_dtype=torch.bfloat16)


@pytest.mark.parametrize("output_dtype, pertoken", [
    pytest.param(torch.float16, False, id="int4-fp16"),
    pytest.param(torch.bfloat16, True, id="int4-pertoken-bf16"),
])
def test_npu_quant_matmul_meta_int4(fake_mode, output_dtype, pertoken):
    x1 = torch.randint(-1, 1, (16, 8), dtype=torch.int32)
    x2 = torch.randint(-1, 1, (64, 5), dtype=torch.int32)
    scale = torch.randn(1, dtype=torch.float32)
    bias = torch.randint(-1, 1, (40,), dtype=torch.int32)
    pertoken_scale = torch.randn(16, dtype=torch.float32) if pertoken else None
    out = npu.npu_quant_matmul(x1, x2, scale, offset=None, pertoken_scale=pertoken_scale,
                               bias=bias, output_dtype=output_dtype)
    expect(out, (16, 40), output_dtype)


def test_npu_quant_matmul_meta_a8w4(fake_mode):
    x1 = torch.randint(-8, 8, (1, 8192), dtype=torch.int8)
    x2 = torch.randint(-8, 8, (8192, 128), dtype=torch.int32)
    y_offset = torch.randn([128 * 8], dtype=torch.float32)
    x1_scale = torch.randn([1, 1], dtype=torch.float32)
    x2_scale = torch.randint(1, 3, [8192 // 256, 128 * 8], dtype=torch.int64)
    out = npu.npu_quant_matmul(x1, x2, x2_scale, offset=y_offset, pertoken_scale=x1_scale,
                               bias=None, output_dtype=torch.float16, group_sizes=[0, 0, 256])
    expect(out, (1, 128 * 8), torch.float16)


def test_npu_quant_matmul_meta_outside_subset(fake_mode):
    # float8 x1 with y_scale and group sizes; hifloat8 inputs and output
    x1 = torch.randint(-1, 1, (1, 64)).to(torch.float8_e4m3fn)
    x2 = torch.randn((64, 16), dtype=torch.float32)
    scale = torch.randint(-1, 1, (2, 128), dtype=torch.uint8)
    y_scale = torch.randint(-1, 1, (1, 128), dtype=torch.int64)
    with pytest.raises(NotImplementedError, match=OUTSIDE_SUBSET):
        npu.npu_quant_matmul(x1, x2, scale, pertoken_scale=None, scale_dtype=None,
                             pertoken_scale_dtype=None, y_scale=y_scale,
                             output_dtype=torch.bfloat16, group_sizes=[0, 0, 32])
    x1 = torch.randint(-8, 8, (1, 8192), dtype=torch.int8)
    x2 = torch.randint(-8, 8, (8192, 128), dtype=torch.int8)
    with pytest.raises(NotImplementedError, match=OUTSIDE_SUBSET):
        npu.npu_quant_matmul(x1, x2, torch.randn(1), offset=None, pertoken_scale=None,
                             bias=None, output_dtype=NPU_HIFLOAT8, x1_dtype=NPU_HIFLOAT8,
                             x2_dtype=NPU_HIFLOAT8)


# ---- TestTransposeBatchMatmul (all skipped upstream) ---------------------------------------

M, K, N, BATCH = 32, 512, 128, 16


def test_npu_transpose_batchmatmul_meta_1(fake_mode):
    x1 = torch.randn((M, BATCH, K), dtype=torch.float16)
    x2 = torch.randn((BATCH, K, N), dtype=torch.float16)
    scale = torch.randint(1, 10, (BATCH * N,), dtype=torch.int64)
    out = npu.npu_transpose_batchmatmul(x1, x2, scale=scale, perm_x1=[1, 0, 2],
                                        perm_y=[1, 0, 2])
    expect(out, (M, 1, BATCH * N), torch.int8)


@pytest.mark.parametrize("factor", [
    pytest.param(None, id="test_npu_transpose_batchmatmul_meta_2"),
    pytest.param(4, id="test_npu_transpose_batchmatmul_meta_3"),
    # meta_4 passes an NZ weight (npu_format_cast 29); CPU tensors are ND
    pytest.param(1, id="test_npu_transpose_batchmatmul_meta_4"),
])
def test_npu_transpose_batchmatmul_meta(fake_mode, factor):
    x1 = torch.randn((M, BATCH, K), dtype=torch.float16)
    x2 = torch.randn((BATCH, K, N), dtype=torch.float16)
    kwargs = {} if factor is None else {"scale": None, "batch_split_factor": factor}
    out = npu.npu_transpose_batchmatmul(x1, x2, perm_x1=[1, 0, 2], perm_y=[1, 0, 2], **kwargs)
    if factor and factor > 1:
        expect(out, (factor, M, BATCH * N // factor), torch.float16)
    else:
        expect(out, (M, BATCH, N), torch.float16)


# ---- the MX cases (lines 2290-2304 and 3959-3976 of the same file) --------------------------

def test_npu_rms_norm_dynamic_mx_quant_meta(fake_mode):
    """[8, 64] float16, dst_type torch_npu.float8_e5m2: y [8, 64] float8_e5m2, mxscale
    [8, 1, 2] uint8, rstd [8, 1] float32."""
    x = torch.randn(8, 64, dtype=torch.float16)
    g = torch.randn(64, dtype=torch.float16)
    y, s, r = npu.npu_rms_norm_dynamic_mx_quant(x, g, dst_type=291)
    expect(y, (8, 64), torch.float8_e5m2)
    expect(s, (8, 1, 2), torch.uint8)
    expect(r, (8, 1), torch.float32)


def test_npu_add_rms_norm_dynamic_mx_quant_meta(fake_mode):
    x1 = torch.randn(8, 64, dtype=torch.float16)
    x2 = torch.randn(8, 64, dtype=torch.float16)
    g = torch.randn(64, dtype=torch.float16)
    y, x, s, r = npu.npu_add_rms_norm_dynamic_mx_quant(x1, x2, g, dst_type=291)
    expect(y, (8, 64), torch.float8_e5m2)
    expect(x, (8, 64), torch.float16)
    expect(s, (8, 1, 2), torch.uint8)
    expect(r, (8, 1), torch.float32)
