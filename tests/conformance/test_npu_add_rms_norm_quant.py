# Conformance port of the upstream unit test of npu_add_rms_norm_quant.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_add_rms_norm_quant.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21 (the file's last change:
#   147320421eb3b38c8d81bcf7dd4884c25347ca7c). Rewritten for op_sdk on CPU, not copied.
"""npu_add_rms_norm_quant against upstream's two goldens (without beta: y / scales + zp,
clipped, converted with numpy's astype; with beta: torch.quantize_per_channel) under
upstream's element-wise ``compare`` (benchmark 1 for the quantized outputs, 2**-7 for x).

Upstream's benchmark of 1 accepts any relative error up to 100 %, so every int8 output is
also checked against the contract's formula (rint(y / scales + zp) in fp32, saturated).

Where op_sdk answers differently (listed in docs/conformance.md):
- y2 without scales2: upstream's golden quantizes with scale 1 and zero point 0; the
  contract returns zeros. Asserted as zeros.
- Several Ascend950 cases pass float32 x1 with int32 zero points, float16 x1 with float16
  scales and int32 zero points, or bfloat16 x1 with bfloat16 scales and int32 zero points:
  op_sdk's dtype table (op_sdk/ops/add_rms_norm_quant.py, ARQ_DTYPES) rejects those
  pairs. Asserted to raise, and the float32 ones are also run "adapted" with the same zero
  points as float32 (the pair op_sdk takes for float32 x1).
- hifloat8 output (dst_type 290): op_sdk returns the HiFloat8 bytes as uint8 (torch has no
  hifloat8 dtype); they are decoded here and compared with a HiFloat8 rounding of
  upstream's golden (upstream uses en_dtypes).
"""

import math

import pytest
import torch

from tests.conformance._golden import (
    NPU_FLOAT8_E4M3FN,
    NPU_FLOAT8_E5M2,
    NPU_HIFLOAT8,
    assert_benchmark,
    hifloat8_to_float,
    npu,
    quantize_per_channel_int_repr,
    round_to_hifloat8,
)

BENCH_X = math.pow(2, -7)
BENCH_INT8 = 1
BENCH_FLOAT8 = 1e-8

# dst_type -> (the golden's clip range, the output's torch dtype: HiFloat8 bytes are uint8)
QUANT_RANGE = {1: (-128, 127), NPU_FLOAT8_E5M2: (-57345, 57344),
               NPU_FLOAT8_E4M3FN: (-449, 448), NPU_HIFLOAT8: (-32769, 32768)}
DST_DTYPE = {1: torch.int8, NPU_FLOAT8_E5M2: torch.float8_e5m2,
             NPU_FLOAT8_E4M3FN: torch.float8_e4m3fn, NPU_HIFLOAT8: torch.uint8}

SHAPES_910B = [
    ([16], [16]), ([2, 16], [16]), ([2, 16], [2, 16]), ([16, 32], [16, 32]),
    ([16, 32], [32]), ([2, 2, 2, 8, 16, 32], [2, 2, 2, 8, 16, 32]),
    ([2, 2, 2, 8, 16, 32], [16, 32]), ([2, 2, 2, 8, 16, 32], [32]),
    ([2, 2, 2, 2, 2, 16, 32], [2, 2, 2, 2, 2, 16, 32]), ([2, 2, 2, 2, 2, 16, 32], [16, 32]),
    ([2, 2, 2, 2, 2, 16, 32], [32]), ([2, 2, 2, 2, 2, 8, 16, 32], [2, 2, 2, 2, 2, 8, 16, 32]),
    ([2, 2, 2, 2, 2, 8, 16, 32], [16, 32]), ([2, 2, 2, 2, 2, 8, 16, 32], [32]),
]
SHAPES_950 = [([16], [16]), ([2, 16], [16]), ([16, 32], [32]), ([2, 2, 2, 8, 16, 32], [32]),
              ([2, 2, 2, 8, 16, 32], [16, 32])]
SHAPES_950_S2 = [([2, 16], [16]), ([16, 32], [32]), ([2, 2, 2, 8, 16, 32], [32])]


def _shape_id(shapes):
    x, q = shapes
    return "x" + "x".join(map(str, x)) + "-q" + "x".join(map(str, q))


# ---- goldens -------------------------------------------------------------------------------

def _norm(x1, x2, gamma, beta, epsilon):
    """The shared part of both upstream goldens: gamma's dims flattened to one, the sum and
    the norm in fp32, (y, the sum)."""
    n = x1.dim() - gamma.dim()
    shape = list(x1.shape[:n]) + [gamma.numel()]
    s = x1.reshape(shape).float() + x2.reshape(shape).float()
    rstd = 1 / torch.sqrt(torch.mean(s.pow(2), dim=-1, keepdim=True) + epsilon)
    y = s * rstd * gamma.reshape(-1).float()
    if beta is not None:
        y = y + beta.reshape(-1).float()
    return y, s


def _qparams(scales1, zp1, scales2, zp2):
    """Upstream's defaults: no zp -> 0, no scales2 -> 1, all flattened to fp32."""
    flat = lambda t: t.reshape(-1).float()  # noqa: E731
    s1 = flat(scales1)
    z1 = flat(zp1) if zp1 is not None else torch.zeros_like(s1)
    s2 = flat(scales2) if scales2 is not None else torch.ones_like(s1)
    z2 = flat(zp2) if zp2 is not None else torch.zeros_like(s1)
    return s1, z1, s2, z2


def _convert(v, dst_type):
    """numpy's astype to the output type: truncation toward zero for int8, round to nearest
    even for float8 (torch's float8 conversion = ml_dtypes'), the HiFloat8 value (as
    float64) for hifloat8."""
    if dst_type == NPU_HIFLOAT8:
        return round_to_hifloat8(v)
    return v.to(DST_DTYPE[dst_type])


def golden_v1(x1, x2, gamma, scales1, zp1, scales2=None, zp2=None, dst_type=1, epsilon=1e-6):
    """Upstream's npu_add_rms_norm_quant_golden (no beta): y / scales + zp, clipped to the
    output type's range, converted."""
    y, s = _norm(x1, x2, gamma, None, epsilon)
    s1, z1, s2, z2 = _qparams(scales1, zp1, scales2, zp2)
    lo, hi = QUANT_RANGE[dst_type]
    q1 = _convert((y / s1 + z1).clamp(lo, hi), dst_type)
    q2 = _convert((y / s2 + z2).clamp(lo, hi), dst_type)
    return q1.reshape(x1.shape), q2.reshape(x1.shape), s.to(x1.dtype).reshape(x1.shape)


def golden_v2(x1, x2, gamma, scales1, zp1, beta, scales2=None, zp2=None, epsilon=1e-6):
    """Upstream's npu_add_rms_norm_quant_v2_golden (with beta): torch.quantize_per_channel
    along the flattened gamma axis with float zero points (round(y / s + zp), saturated)."""
    y, s = _norm(x1, x2, gamma, beta, epsilon)
    s1, z1, s2, z2 = _qparams(scales1, zp1, scales2, zp2)
    axis = y.dim() - 1
    q1 = quantize_per_channel_int_repr(y, s1, z1, axis, torch.qint8)
    q2 = quantize_per_channel_int_repr(y, s2, z2, axis, torch.qint8)
    return q1.reshape(x1.shape), q2.reshape(x1.shape), s.to(x1.dtype).reshape(x1.shape)


def contract_quant(x1, x2, gamma, scales, zp, beta=None, epsilon=1e-6):
    """The contract (docs/operators.md): rint(rmsnorm(x1 + x2) * gamma (+ beta) / scales + zp) in fp32,
    saturated to int8 (rounding half to even)."""
    y, _ = _norm(x1, x2, gamma, beta, epsilon)
    v = y / scales.reshape(-1).float()
    if zp is not None:
        v = v + zp.reshape(-1).float()
    return torch.round(v).clamp(-128, 127).to(torch.int8).reshape(x1.shape)


# ---- checks --------------------------------------------------------------------------------

def check(outs, gold, x1, *, scales2_given, benchmark=BENCH_INT8):
    y1, y2, x = outs
    g1, g2, gx = gold
    assert y1.shape == x1.shape and y2.shape == x1.shape and x.shape == x1.shape
    assert y1.dtype == g1.dtype and x.dtype == x1.dtype
    assert_benchmark(g1.float(), y1.float(), benchmark, "y1")
    assert_benchmark(gx.float(), x.float(), BENCH_X, "x")
    if scales2_given:
        assert_benchmark(g2.float(), y2.float(), benchmark, "y2")
    else:
        # the contract: y2 is allocated and all zeros without scales2
        assert y2.dtype == y1.dtype and not y2.float().any()


def check_contract(y, x1, x2, gamma, scales, zp, beta=None):
    """Within 1 of the contract's fp32 formula everywhere, equal but for rare ties (the
    kernel's summation order moves y by an ulp)."""
    c = contract_quant(x1, x2, gamma, scales, zp, beta)
    d = (y.to(torch.int16) - c.to(torch.int16)).abs()
    assert int(d.max()) <= 1 and int((d > 0).sum()) <= 1 + y.numel() // 1000, \
        f"{int((d > 0).sum())} of {y.numel()} elements differ from the contract's formula"


# ---- Ascend910B cases (skipped upstream: "low version of cann") ----------------------------

def inputs_910b(x_shape, q_shape, dtype):
    x1 = torch.randn(x_shape, dtype=dtype)
    x2 = torch.randn(x_shape, dtype=dtype)
    gamma = torch.randn(q_shape, dtype=dtype)
    beta = torch.randn(q_shape, dtype=dtype)
    if dtype == torch.float16:
        scales1 = torch.randn(q_shape, dtype=torch.float32)
        zp1 = torch.randint(-10, 10, q_shape, dtype=torch.int32)
    else:  # scales must not be 0
        scales1 = torch.randn(q_shape, dtype=dtype).uniform_(0.1, 1)
        zp1 = torch.randn(q_shape, dtype=dtype)
    return x1, x2, gamma, beta, scales1, zp1


@pytest.mark.parametrize("dtype", [
    pytest.param(torch.float16, id="test_npu_add_rms_norm_quant"),
    pytest.param(torch.bfloat16, id="test_npu_add_rms_norm_quant_bf16"),
])
@pytest.mark.parametrize("shapes", SHAPES_910B, ids=_shape_id)
def test_add_rms_norm_quant_910b(shapes, dtype):
    x1, x2, gamma, beta, scales1, zp1 = inputs_910b(*shapes, dtype)

    outs = npu.npu_add_rms_norm_quant(x1, x2, gamma, scales1, zp1)
    check(outs, golden_v1(x1, x2, gamma, scales1, zp1), x1, scales2_given=False)
    check_contract(outs[0], x1, x2, gamma, scales1, zp1)

    outs = npu.npu_add_rms_norm_quant(x1, x2, gamma, scales1, zp1, beta)
    check(outs, golden_v2(x1, x2, gamma, scales1, zp1, beta), x1, scales2_given=False)
    check_contract(outs[0], x1, x2, gamma, scales1, zp1, beta)


# ---- Ascend950 cases -----------------------------------------------------------------------

def inputs_950(x_shape, q_shape, zp="int32"):
    """Upstream's float32 x1, x2, gamma, beta and scales; zero points int32 randint(-10, 10)
    ("int32"), the same values as float32 ("int32-as-float32", the adapted variant), or
    float32 randn ("float32")."""
    x1 = torch.randn(x_shape, dtype=torch.float32)
    x2 = torch.randn(x_shape, dtype=torch.float32)
    gamma = torch.randn(q_shape, dtype=torch.float32)
    beta = torch.randn(q_shape, dtype=torch.float32)
    scales1 = torch.randn(q_shape, dtype=torch.float32)
    if zp == "float32":
        zp1 = torch.randn(q_shape, dtype=torch.float32)
    else:
        zp1 = torch.randint(-10, 10, q_shape, dtype=torch.int32)
        if zp == "int32-as-float32":
            zp1 = zp1.float()
    return x1, x2, gamma, beta, scales1, zp1


# float32 x1 takes float32 scales with float32 zero points only (op_sdk's dtype table)
REJECTED_ZP = r"npu_add_rms_norm_quant: argument '(zero_points1|x1)'"
ZP_VARIANTS = [pytest.param("int32", id="upstream-int32_zp"),
               pytest.param("int32-as-float32", id="adapted-float32_zp")]


def to_plain(t):
    """Output values as float64: HiFloat8 bytes decoded, everything else converted."""
    return hifloat8_to_float(t) if t.dtype == torch.uint8 else t.to(torch.float64)


def run_or_rejected(zp, *args, **kwargs):
    """The call's outputs; or, for upstream's int32 zero points with float32 x1 (which
    op_sdk's 950 dtype table refuses, docs/conformance.md), None after asserting that the
    call raises naming them."""
    if zp == "int32":
        with pytest.raises(RuntimeError, match=REJECTED_ZP):
            npu.npu_add_rms_norm_quant(*args, **kwargs)
        return None
    return npu.npu_add_rms_norm_quant(*args, **kwargs)


@pytest.mark.parametrize("zp", ZP_VARIANTS)
@pytest.mark.parametrize("shapes", SHAPES_950, ids=_shape_id)
def test_npu_add_rms_norm_quant_950_v1_int8(shapes, zp):
    x1, x2, gamma, _, scales1, zp1 = inputs_950(*shapes, zp)
    outs = run_or_rejected(zp, x1, x2, gamma, scales1, zp1)
    if outs is None:
        return
    check(outs, golden_v1(x1, x2, gamma, scales1, zp1), x1, scales2_given=False)
    check_contract(outs[0], x1, x2, gamma, scales1, zp1)


@pytest.mark.parametrize("zp", ZP_VARIANTS)
@pytest.mark.parametrize("shapes", SHAPES_950, ids=_shape_id)
def test_npu_add_rms_norm_quant_950_v2_beta_int8(shapes, zp):
    x1, x2, gamma, beta, scales1, zp1 = inputs_950(*shapes, zp)
    outs = run_or_rejected(zp, x1, x2, gamma, scales1, zp1, beta)
    if outs is None:
        return
    check(outs, golden_v2(x1, x2, gamma, scales1, zp1, beta), x1, scales2_given=False)
    check_contract(outs[0], x1, x2, gamma, scales1, zp1, beta)


@pytest.mark.parametrize("zp", ZP_VARIANTS)
@pytest.mark.parametrize("shapes", SHAPES_950_S2, ids=_shape_id)
def test_npu_add_rms_norm_quant_950_scales2_zero_points2(shapes, zp):
    x1, x2, gamma, beta, scales1, zp1 = inputs_950(*shapes, zp)
    scales2 = torch.randn(shapes[1], dtype=torch.float32)
    zp2 = torch.randint(-10, 10, shapes[1], dtype=torch.int32).to(zp1.dtype)
    kw = {"scales2": scales2, "zero_points2": zp2}
    outs = run_or_rejected(zp, x1, x2, gamma, scales1, zp1, **kw)
    outs_beta = run_or_rejected(zp, x1, x2, gamma, scales1, zp1, beta, **kw)
    if outs is None:
        return
    # without beta (upstream: the V1 kernel passing scales2 / zero_points2 through)
    check(outs, golden_v1(x1, x2, gamma, scales1, zp1, scales2, zp2), x1, scales2_given=True)
    check_contract(outs[0], x1, x2, gamma, scales1, zp1)
    check_contract(outs[1], x1, x2, gamma, scales2, zp2)
    # with beta (upstream: the V2 kernel)
    check(outs_beta, golden_v2(x1, x2, gamma, scales1, zp1, beta, scales2, zp2), x1,
          scales2_given=True)
    check_contract(outs_beta[0], x1, x2, gamma, scales1, zp1, beta)
    check_contract(outs_beta[1], x1, x2, gamma, scales2, zp2, beta)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shapes", SHAPES_950_S2, ids=_shape_id)
def test_npu_add_rms_norm_quant_950_fp16_bf16(shapes, dtype):
    # upstream: scales in x's dtype with int32 zero points, for float16 and bfloat16; op_sdk
    # pairs float16 / bfloat16 scales with zero points of the same dtype only
    x_shape, q_shape = shapes
    x1 = torch.randn(x_shape, dtype=dtype)
    x2 = torch.randn(x_shape, dtype=dtype)
    gamma = torch.randn(q_shape, dtype=dtype)
    scales1 = torch.randn(q_shape, dtype=dtype).uniform_(0.1, 1)
    zp1 = torch.randint(-10, 10, q_shape, dtype=torch.int32)
    with pytest.raises(RuntimeError,
                       match=r"npu_add_rms_norm_quant: argument '(scales1|zero_points1)'"):
        npu.npu_add_rms_norm_quant(x1, x2, gamma, scales1, zp1)


def _float_dst_case(dst_type, with_y2):
    """Upstream's float8 / dst_type cases: float32 inputs, float32 randn zero points."""
    x1, x2, gamma, _, scales1, zp1 = inputs_950([2, 16], [16], zp="float32")
    y1, y2, x = npu.npu_add_rms_norm_quant(x1, x2, gamma, scales1, zp1, dst_type=dst_type)
    assert y1.dtype == DST_DTYPE[dst_type] and y1.shape == x1.shape
    g1, _, gx = golden_v1(x1, x2, gamma, scales1, zp1, dst_type=dst_type)
    if dst_type == 1:
        assert_benchmark(g1.float(), y1.float(), BENCH_INT8, "y1")
        check_contract(y1, x1, x2, gamma, scales1, zp1)
    else:
        assert_benchmark(to_plain(g1), to_plain(y1), BENCH_FLOAT8, "y1")
    assert_benchmark(gx.float(), x.float(), BENCH_X, "x")
    if with_y2:  # upstream compares y2 against scale 1 / zp 0; the contract: zeros
        assert y2.dtype == y1.dtype and y2.shape == x1.shape and not y2.float().any()


def test_npu_add_rms_norm_quant_float8_e5m2():
    _float_dst_case(NPU_FLOAT8_E5M2, with_y2=False)


@pytest.mark.parametrize("dst_type", [
    pytest.param(1, id="int8"),
    pytest.param(NPU_HIFLOAT8, id="hifloat8"),
    pytest.param(NPU_FLOAT8_E5M2, id="float8_e5m2"),
    pytest.param(NPU_FLOAT8_E4M3FN, id="float8_e4m3fn"),
])
def test_npu_add_rms_norm_quant_950_dst_type(dst_type):
    _float_dst_case(dst_type, with_y2=True)


def test_npu_add_rms_norm_quant_axis_invalid():
    x1, x2 = torch.randn([2, 16]), torch.randn([2, 16])
    gamma, scales1 = torch.randn([16]), torch.randn([16])
    # upstream's call, as written, omits zero_points1 (which has no default in the schema,
    # upstream's included): a RuntimeError, though not about axis
    with pytest.raises(RuntimeError):
        npu.npu_add_rms_norm_quant(x1, x2, gamma, scales1, axis=0)
    # what the case means to test
    with pytest.raises(RuntimeError, match=r"npu_add_rms_norm_quant: argument 'axis'"):
        npu.npu_add_rms_norm_quant(x1, x2, gamma, scales1, None, axis=0)
