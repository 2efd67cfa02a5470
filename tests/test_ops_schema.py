"""Every operator exists with exactly the contract's schema (compared parsed, not as text),
is registered through define_op, and accepts dtypes as torch.dtype or integer code."""

import pytest
import torch

import op_sdk

# The contract's schema strings (shared/spec/ops.md), verbatim.
SPEC_SCHEMAS = [
    "npu_rms_norm(Tensor input, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
    "npu_add_rms_norm(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor, Tensor)",
    "npu_add_rms_norm_cast(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor, Tensor, Tensor)",
    'npu_dynamic_quant(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None, int? dst_type=None, str quant_mode="pertoken", float dst_type_max=0.0) -> (Tensor, Tensor)',
    "npu_quantize(Tensor input, Tensor scales, Tensor? zero_points, int dtype, int axis=1, bool div_mode=True) -> Tensor",
    "npu_add_rms_norm_quant(Tensor x1, Tensor x2, Tensor gamma, Tensor scales1, Tensor? zero_points1, Tensor? beta=None, Tensor? scales2=None, Tensor? zero_points2=None, *, int axis=-1, float epsilon=1e-06, bool div_mode=True, int? dst_type=None) -> (Tensor, Tensor, Tensor)",
    "npu_add_rms_norm_dynamic_quant(Tensor x1, Tensor x2, Tensor gamma, *, Tensor? smooth_scale1=None, Tensor? smooth_scale2=None, Tensor? beta=None, float epsilon=1e-06, bool[2]? output_mask=None, int? y_dtype=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_transpose_batchmatmul(Tensor input, Tensor weight, *, Tensor? bias=None, Tensor? scale=None, int[]? perm_x1=None, int[]? perm_x2=None, int[]? perm_y=None, int? batch_split_factor=1) -> Tensor",
    "npu_quant_matmul(Tensor x1, Tensor x2, Tensor scale, *, Tensor? offset=None, Tensor? pertoken_scale=None, Tensor? bias=None, int? output_dtype=None, int? x1_dtype=None, int? x2_dtype=None, int? pertoken_scale_dtype=None, int? scale_dtype=None, int[]? group_sizes=None, Tensor? y_scale=None) -> Tensor",
    "npu_dtype_cast(Tensor input, int dtype, int? input_dtype=None) -> Tensor",
    "_npu_dtype_cast(Tensor input, ScalarType dtype) -> Tensor",
    "npu_scatter_nd_update_(Tensor(a!) input, Tensor indices, Tensor updates) -> Tensor(a!)",
    "npu_scatter_nd_update(Tensor input, Tensor indices, Tensor updates) -> Tensor",
]


@pytest.mark.parametrize("spec", SPEC_SCHEMAS, ids=lambda s: s.split("(")[0])
def test_schema_matches_contract(spec):
    name = spec.split("(")[0]
    expected = torch._C.parse_schema("npu::" + spec)
    actual = getattr(torch.ops.npu, name).default._schema
    assert actual == expected, f"{actual} != {expected}"
    # and it came from the definition API
    assert op_sdk.get_op(name).op._schema == expected


def test_every_registered_npu_op_is_in_the_contract():
    names = {s.split("(")[0] for s in SPEC_SCHEMAS}
    assert {o.name for o in op_sdk.registered_ops() if o.namespace == "npu"} == names


@pytest.mark.parametrize("name", ["npu_rms_norm", "npu_add_rms_norm", "npu_add_rms_norm_cast",
                                  "npu_add_rms_norm_quant", "npu_add_rms_norm_dynamic_quant"])
def test_epsilon_default_is_1e_6(name):
    # why schemas are compared parsed: 1e-06 prints back as 9.9999999999999995e-07
    (eps,) = [a for a in getattr(torch.ops.npu, name).default._schema.arguments
              if a.name == "epsilon"]
    assert eps.default_value == 1e-6


@pytest.mark.parametrize("code,dtype", [(1, torch.int8), (12, torch.qint8)])
def test_int_dtype_argument_takes_dtype_or_code(code, dtype):
    x = torch.randn(4, 16)
    s = torch.full((16,), 0.1)
    by_code = torch.ops.npu.npu_quantize(x, s, None, code, -1)
    by_dtype = torch.ops.npu.npu_quantize(x, s, None, dtype, -1)
    assert by_code.dtype == by_dtype.dtype == torch.int8
    assert torch.equal(by_code, by_dtype)


def test_input_keyword_for_self():
    # torch_npu renames `self` to `input`: callers may pass input= by keyword
    x = torch.randn(3, 8)
    y, _ = torch.ops.npu.npu_dynamic_quant(input=x)
    assert y.shape == x.shape
