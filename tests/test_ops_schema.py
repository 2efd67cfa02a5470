"""Every npu operator of op_sdk exists with exactly the contract's schema (the SCHEMAS of
its tests/ops/test_<slice>.py, compared parsed, not as text), defined through define_op;
epsilon defaults to 1e-6 wherever it is an argument; dtypes are accepted as torch.dtype or
integer code."""

import pytest
import torch

from tests.ops import gather, sdk_ops, slice_module

NPU_OPS = [o for o in sdk_ops() if o.namespace == "npu"]
EPSILON_OPS = [o for o in sdk_ops() if any(a.name == "epsilon" for a in o.op._schema.arguments)]


@pytest.mark.parametrize("opdef", NPU_OPS, ids=lambda o: o.name)
def test_schema_matches_contract(opdef):
    schemas = getattr(slice_module(opdef.slice), "SCHEMAS", ())
    specs = [s for s in schemas if s.split("(")[0] == opdef.name]
    assert len(specs) == 1, f"tests/ops/test_{opdef.slice}.py: {len(specs)} SCHEMAS of {opdef.name}"
    expected = torch._C.parse_schema("npu::" + specs[0])
    actual = opdef.op._schema
    assert actual == expected, f"{actual} != {expected}"
    # and it came from the definition API
    assert torch._C.parse_schema(f"npu::{opdef.schema}") == expected


def test_every_registered_npu_op_is_in_the_contract():
    names = [s.split("(")[0] for s in gather("SCHEMAS")]
    assert len(names) == len(set(names))
    assert {o.name for o in NPU_OPS} == set(names)


# torch_npu's schemas with another default (DeepSeek's MLA kv norm: 1e-05)
OTHER_EPSILON = {name: 1e-5 for name in ("npu_kv_rmsnorm_rope_cache",
                                         "npu_kv_rmsnorm_rope_cache_v2_functional",
                                         "npu_kv_rmsnorm_rope_cache_v2")}


@pytest.mark.parametrize("opdef", EPSILON_OPS, ids=lambda o: o.name)
def test_epsilon_default_is_1e_6(opdef):
    # why schemas are compared parsed: 1e-06 prints back as 9.9999999999999995e-07
    (eps,) = [a for a in opdef.op._schema.arguments if a.name == "epsilon"]
    assert eps.default_value == OTHER_EPSILON.get(opdef.name, 1e-6)


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
