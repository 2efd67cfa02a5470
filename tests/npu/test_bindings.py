"""The OpPlugin-style eager bindings without torch_npu (op_sdk.npu.binding): every aclnn=
declaration agrees with its pinned prototype and its schema, the committed csrc/npu/
sources are what the declarations generate, a binding source whose aclnn arguments are out
of order is rejected naming the operator, parameter and argument, declaration errors name
the operator, argument and rule, and the registration decision backfills exactly the
operators torch_npu lacks. Compiling and loading them beside the real torch_npu:
tests/npu/real/test_bindings.py."""

import dataclasses
import os
import re

import pytest

import op_sdk
from op_sdk.app import deliverables
from op_sdk.npu import binding as nb
from op_sdk.npu import build as nbuild
from op_sdk.npu import prototypes as protos
from op_sdk.library import OpDef
from tests.ops import gather_dict

# the tree these tests are in (its setup.py; op_sdk may be installed elsewhere)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINDINGS = deliverables.declared_bindings()
IDS = [o.name for o in BINDINGS]


def test_the_bindings_declared():
    names = {o.qualname for o in BINDINGS}
    assert {"npu::npu_rms_norm", "npu::npu_add_rms_norm", "npu::npu_add_rms_norm_quant",
            "npu::npu_add_rms_norm_dynamic_quant", "npu::npu_dynamic_quant",
            "npu::npu_quant_matmul", "npu::npu_add_rms_norm_cast", "npu::npu_quantize",
            "npu::npu_transpose_batchmatmul", "npu::npu_dtype_cast", "npu::_npu_dtype_cast",
            "npu::npu_scatter_nd_update", "npu::npu_scatter_nd_update_"} <= names
    # every npu operator op_sdk defines has one, but those its slice says need none
    none = gather_dict("NO_ACLNN_BINDING")
    assert {o.qualname for o in op_sdk.registered_ops() if o.namespace == "npu"} - set(none) <= names
    assert not set(none) & names
    # each binds to the API torch_npu's own kernel calls
    apis = {o.name: o.aclnn.api for o in BINDINGS}
    assert apis["npu_quant_matmul"] == "aclnnQuantMatmulV4"
    assert apis["npu_dtype_cast"] == apis["_npu_dtype_cast"] == "aclnnCast"
    assert apis["npu_scatter_nd_update"] == apis["npu_scatter_nd_update_"] == "aclnnScatterNdUpdate"
    assert apis["npu_transpose_batchmatmul"] == "aclnnTransposeBatchMatMul"
    assert apis["npu_quantize"] == "aclnnQuantize"  # div_mode=True; False: its otherwise=
    assert op_sdk.get_op("npu_quantize").aclnn.apis == ("aclnnQuantize", "aclnnAscendQuantV3")


@pytest.mark.parametrize("opdef", BINDINGS, ids=IDS)
def test_committed_source_is_the_generated_one(opdef):
    path = nb.source_path(opdef)
    assert os.path.exists(path), f"{path} missing: run op_sdk.app.deliverables.write_binding_sources()"
    assert open(path).read() == nb.generate_source(opdef), (
        f"{path} differs from its aclnn= declaration; regenerate it "
        "with op_sdk.app.deliverables.write_binding_sources()")


def test_no_stray_binding_source():
    assert set(nb.binding_sources()) == {o.name for o in BINDINGS}


@pytest.mark.parametrize("opdef", BINDINGS, ids=IDS)
def test_source_argument_order_is_the_prototypes(opdef):
    source = open(nb.source_path(opdef)).read()
    nb.check_source(opdef, source)
    # the call passes one argument per prototype parameter, and each aclnn output writes the
    # return of its name
    plan = nb.binding_plan(opdef)
    assert len(plan) == len(opdef.aclnn.prototype.params)
    for bound in plan:
        if bound.kind == "output":
            # (or an output the prototype's declaration names as such: aclnnRmsNormQuant's y)
            # (the return named in snake case after a camel-case parameter: kCacheRef's k_cache)
            stems = (bound.target, protos._camel(bound.target))
            assert (bound.param.name in [s + e for s in stems for e in ("Out", "Ref")] + ["out"]
                    or (bound.param.written and bound.param.name == bound.target))
            assert bound.param.ref == (bound.target in opdef.aclnn.copy_of)


def _swap(source: str, api: str, i: int, j: int) -> str:
    m = re.search(rf"EXEC_NPU_CMD_EXT\({api}, (.*?)\);", source)
    args = m.group(1).split(", ")
    args[i], args[j] = args[j], args[i]
    return source[:m.start(1)] + ", ".join(args) + source[m.end(1):]


@pytest.mark.parametrize("name,i,j,param", [
    ("npu_add_rms_norm", 0, 1, "x1"),            # two tensors: only names tell them apart
    ("npu_add_rms_norm_quant", 4, 5, "scales2Optional"),
    ("npu_rms_norm", 3, 4, "yOut"),              # outputs swapped
    ("npu_quant_matmul", 6, 7, "transposeX1"),   # constants swapped
    ("npu_add_rms_norm_cast", 4, 5, "y1Out"),    # fp32 y1 and x1-dtype y2 swapped
    ("npu_transpose_batchmatmul", 4, 5, "permX1"),
    ("npu_scatter_nd_update", 1, 2, "indices"),
    ("npu_quantize", 3, 4, "dtype"),
])
def test_wrong_argument_order_is_detected(name, i, j, param):
    opdef = op_sdk.get_op(name)
    bad = _swap(open(nb.source_path(opdef)).read(), opdef.aclnn.api, i, j)
    with pytest.raises(nb.BindingError) as err:
        nb.check_source(opdef, bad)
    msg = str(err.value)
    assert opdef.qualname in msg and f"parameter {i + 1} '{param}'" in msg, msg
    assert "rule: the aclnn argument order is the prototype's" in msg, msg


def test_missing_or_extra_argument_is_detected():
    opdef = op_sdk.get_op("npu_rms_norm")
    source = open(nb.source_path(opdef)).read()
    short = source.replace("EXEC_NPU_CMD_EXT(aclnnRmsNorm, input, gamma, epsilon,",
                           "EXEC_NPU_CMD_EXT(aclnnRmsNorm, input, gamma,")
    with pytest.raises(nb.BindingError, match="passes 4 arguments, the prototype has 5"):
        nb.check_source(opdef, short)
    other = source.replace("EXEC_NPU_CMD_EXT(aclnnRmsNorm,", "EXEC_NPU_CMD_EXT(aclnnAddRmsNorm,")
    with pytest.raises(nb.BindingError, match="calls aclnnAddRmsNorm; rule: the declared API"):
        nb.check_source(opdef, other)


def _opdef(schema: str, namespace: str = "bindtest") -> OpDef:
    name = schema.split("(", 1)[0]
    return OpDef(namespace, name, schema, reference=lambda *a: None, fake=None, kernels={},
                 native=(), backward=None, setup_context=None, functional=None,
                 module="tests.npu.test_bindings")


RMS = "rms(Tensor input, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)"


@pytest.mark.parametrize("schema,binding,words", [
    (RMS, nb.AclnnBinding("aclnnNoSuchOp", outputs=("y", "rstd")),
     ["no prototype for aclnnNoSuchOp", "declared", "pinned"]),
    (RMS, nb.AclnnBinding("aclnnRmsNorm", outputs=("y", "rstd")),
     ["parameter 1 'x'", "takes schema argument 'x'", "rule: each aclnn parameter takes"]),
    (RMS, nb.AclnnBinding("aclnnRmsNorm", outputs=("y",), rename={"x": "input"}),
     ["outputs= names 1 returns", "the schema has 2"]),
    (RMS, nb.AclnnBinding("aclnnRmsNorm", outputs=("y", "r"), rename={"x": "input"}),
     ["parameter 5 'rstdOut'", "no return is named 'rstd'"]),
    (RMS, nb.AclnnBinding("aclnnRmsNorm", outputs=("y", "rstd"), rename={"x": "inp"}),
     ["'inp' is no argument of the schema"]),
    (RMS, nb.AclnnBinding("aclnnRmsNorm", outputs=("y", "rstd"), rename={"xx": "input"}),
     ["rename= names 'xx', which is no parameter of aclnnRmsNorm"]),
    ("rms(Tensor input, Tensor gamma, float epsilon=1e-06, bool flag=False) -> (Tensor, Tensor)",
     nb.AclnnBinding("aclnnRmsNorm", outputs=("y", "rstd"), rename={"x": "input"}),
     ["schema argument(s) ['flag'] reach no parameter", "requires="]),
    ("rms(Tensor input, Tensor? gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
     nb.AclnnBinding("aclnnRmsNorm", outputs=("y", "rstd"), rename={"x": "input"}),
     ["optional argument 'gamma' (Tensor?)", "parameter 2 'gamma'", "may not be null"]),
    ("rms(Tensor input, Tensor gamma, int epsilon=1) -> (Tensor, Tensor)",
     nb.AclnnBinding("aclnnRmsNorm", outputs=("y", "rstd"), rename={"x": "input"}),
     ["argument 'epsilon' (int) cannot be passed to parameter 3 'epsilon' (double)"]),
    (RMS, nb.AclnnBinding("aclnnRmsNorm", outputs=("y", "rstd"), rename={"x": "gamma"}),
     ["argument 'gamma' is passed again, to parameter 2 'gamma'", "reaches one aclnn parameter"]),
    (RMS, nb.AclnnBinding("aclnnRmsNorm", outputs=("y", "rstd"), rename={"x": "input"},
                          requires={"epsilon": None}),
     ["requires= allows None for argument 'epsilon' (float)", "rule: None only for optional"]),
    ("rms(Tensor input, Tensor gamma, float epsilon=1e-06, float[] d=[]) -> (Tensor, Tensor)",
     nb.AclnnBinding("aclnnRmsNorm", outputs=("y", "rstd"), rename={"x": "input"}),
     ["argument 'd' has type float[], which the bindings do not handle"]),
])
def test_declaration_errors_name_operator_argument_and_rule(schema, binding, words):
    with pytest.raises(nb.BindingError) as err:
        nb.check_binding(_opdef(schema), binding)
    msg = str(err.value)
    assert msg.startswith(f"bindtest::rms binding to {binding.api}: "), msg
    for w in words:
        assert w in msg, msg


def test_define_op_rejects_a_bad_declaration_before_defining_anything():
    with pytest.raises(nb.BindingError, match="bindtest::rms_bad binding to aclnnRmsNorm"):
        op_sdk.define_op("rms_bad(Tensor x, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
                         namespace="bindtest", reference=lambda x, g, e=1e-6: (x, x),
                         aclnn=nb.AclnnBinding("aclnnRmsNorm", outputs=("y",)))
    assert "bindtest::rms_bad" not in {o.qualname for o in op_sdk.registered_ops()}


def test_apply_rotary_pos_emb_runs_the_in_place_api_on_copies():
    """aclnnApplyRotaryPosEmbV2 updates queryRef / keyRef in place; the functional operator's
    returns share the arguments' names (copy_of={"query": "query", ...}): each branch copies
    query and key into the outputs the Meta function allocated and passes those, never the
    caller's tensors; layout and rotary_mode pick the branch, an unknown one is refused."""
    source = nb.generate_source(op_sdk.get_op("npu_apply_rotary_pos_emb"))
    assert source.count("query_out.copy_(query);") == 12 and source.count("key_out.copy_(key);") == 12
    assert source.count("EXEC_NPU_CMD_EXT(aclnnApplyRotaryPosEmbV2, query_out, key_out, cos, sin, "
                        "layout, rotaryMode);") == 12
    assert "aclnnApplyRotaryPosEmbV2, query," not in source
    assert ('(layout == c10::string_view("BSND") || layout == c10::string_view("BSH")) && '
            'rotary_mode == c10::string_view("half")') in source
    assert "argument 'rotary_mode' must be 'interleave'" in source
    assert "return {query_out, key_out};" in source


def test_out_of_place_scatter_updates_a_copy_of_its_input():
    """aclnnScatterNdUpdate writes varRef in place: the functional operator passes it a
    copy of input (allocated from the Meta function, then filled), never input itself; the
    in-place operator passes input and returns it."""
    source = nb.generate_source(op_sdk.get_op("npu_scatter_nd_update"))
    assert ("  var_out.copy_(input);\n"
            "  OPSDK_CHECK_ACLNN_ARGS(aclnnScatterNdUpdate, var_out, ") in source
    assert ("EXEC_NPU_CMD_EXT(aclnnScatterNdUpdate, var_out, indices, updates);\n"
            "  return var_out;") in source
    assert "at::Tensor npu_scatter_nd_update_npu(\n    const at::Tensor& input," in source
    inplace = nb.generate_source(op_sdk.get_op("npu_scatter_nd_update_"))
    assert "at::Tensor& npu_scatter_nd_update__npu(\n    at::Tensor& input," in inplace
    assert ("EXEC_NPU_CMD_EXT(aclnnScatterNdUpdate, input, indices, updates);\n"
            "  return input;") in inplace
    assert "empty_outputs" not in inplace
    assert 'op_sdk_npu::meta_outputs("npu::npu_scatter_nd_update_"' in inplace
    # passing input itself to the functional form's varRef would write the caller's tensor
    opdef = op_sdk.get_op("npu_scatter_nd_update")
    with pytest.raises(nb.BindingError, match="argument 'input' \\(read-only\\) is passed to "
                       "parameter 1 'varRef'.*mutable \\(a!\\) argument, and only it"):
        nb.check_binding(opdef, nb.AclnnBinding("aclnnScatterNdUpdate", outputs=("var",),
                                                rename={"varRef": "input"}))
    with pytest.raises(nb.BindingError, match="parameter 1 'varRef'.*in-place parameter"):
        nb.check_binding(opdef, nb.AclnnBinding("aclnnScatterNdUpdate", outputs=("var",)))


def test_defaults_dtype_of_and_const_scalars():
    """Optional arguments the API needs a value of get the reference's default; an aclnn
    dtype parameter gets the dtype of the output the Meta function allocated; a prototype's
    const scalar (``const int32_t batchSplitFactor``) takes the plain converted type."""
    tbmm = nb.generate_source(op_sdk.get_op("npu_transpose_batchmatmul"))
    assert ("const at::IntArrayRef perm_y_value = perm_y.has_value() ? *perm_y : "
            "at::IntArrayRef(perm_y_default);") in tbmm
    assert "const std::vector<int64_t> perm_y_default = {1, 0, 2};" in tbmm
    assert ("const auto batch_split_factor_int32_t = static_cast<int32_t>("
            "batch_split_factor_value);") in tbmm
    assert "OPSDK_ACLNN_PROTOTYPE(aclnnTransposeBatchMatMul, " in tbmm and ", const int32_t, " in tbmm
    cast = nb.generate_source(op_sdk.get_op("npu_dtype_cast"))
    assert "const at::ScalarType y_dtype = y_out.scalar_type();" in cast
    assert "EXEC_NPU_CMD_EXT(aclnnCast, input, y_dtype, y_out);" in cast
    quant = nb.generate_source(op_sdk.get_op("npu_quantize"))
    assert ("EXEC_NPU_CMD_EXT(aclnnQuantize, input, scales, zero_points, y_dtype, "
            "axis_int32_t, y_out);") in quant


def test_binding_selected_by_an_argument():
    """npu_quantize calls aclnnQuantize for div_mode=True and aclnnAscendQuantV3 otherwise,
    as torch_npu's kernel does: one allocation from the Meta function, then one block per
    API; the second block rejects the output dtypes AscendQuantV3 cannot write as op_sdk
    defines them, naming the argument, and maps axis to one of the last two."""
    opdef = op_sdk.get_op("npu_quantize")
    source = nb.generate_source(opdef)
    assert source.count("op_sdk_npu::empty_outputs(") == 1
    first, second = source.split("  if (div_mode == true) {\n")[1].split("  } else {\n")
    assert "EXEC_NPU_CMD_EXT(aclnnQuantize, " in first and "AscendQuantV3" not in first
    assert second.startswith("    TORCH_CHECK(dtype == 1 || dtype == 12 || dtype == 16,\n"
                             "                \"npu::npu_quantize: argument 'dtype' must be")
    assert ("EXEC_NPU_CMD_EXT(aclnnAscendQuantV3, input, scales, zero_points, sqrtMode, "
            "roundMode, y_dtype, axis_int32_t, y_out);") in second
    assert "const auto axis_int32_t = op_sdk_npu::ascend_quant_axis(axis);" in second
    assert ("const int32_t y_dtype = "
            "static_cast<int32_t>(ConvertType(y_out.scalar_type()));") in second
    assert 'const char* roundMode = "round";' in second
    # each call is checked against its own prototype, in order
    nb.check_source(opdef, source)
    swapped = _swap(source, "aclnnAscendQuantV3", 5, 6)
    with pytest.raises(nb.BindingError, match="binding to aclnnAscendQuantV3: argument 6 is "
                       "'axis_int32_t', but parameter 6 'dstType'"):
        nb.check_source(opdef, swapped)
    one = re.sub(r"    OPSDK_CHECK_ACLNN_ARGS\(aclnnAscendQuantV3.*?"
                 r"EXEC_NPU_CMD_EXT\(aclnnAscendQuantV3.*?;\n", "", source, flags=re.S)
    with pytest.raises(nb.BindingError, match="the source has 1 EXEC_NPU_CMD_EXT calls; rule: "
                       "exactly 2, one per declared API \\(aclnnQuantize, aclnnAscendQuantV3\\)"):
        nb.check_source(opdef, one)


def test_quant_matmul_scale_goes_through_the_quant_param_conversion():
    """npu_quant_matmul's scale reaches aclnnQuantMatmulV4 through quant_matmul_scale, which
    reads offset, pertoken_scale and the allocated output (torch_npu's op-plugin converts a
    float32 scale with npu_trans_quant_param when there is no pertoken_scale and the output is
    neither bfloat16 nor int32); the call passes the prepared tensor, the offset as it is."""
    opdef = op_sdk.get_op("npu_quant_matmul")
    source = nb.generate_source(opdef)
    line = ("  const auto scale_acltensor = op_sdk_npu::quant_matmul_scale(scale, offset, "
            "pertoken_scale, out_out);")
    assert line in source
    assert source.index("at::Tensor out_out = outputs[0];") < source.index(line)
    assert ("EXEC_NPU_CMD_EXT(aclnnQuantMatmulV4, x1, x2, scale_acltensor, offset, pertoken_scale, "
            "bias, transposeX1, transposeX2, out_out);") in source
    nb.check_source(opdef, source)
    header = open(os.path.join(nb.SOURCE_DIR, "binding.h")).read()
    assert "inline at::Tensor quant_matmul_scale(" in header
    assert 'findSchemaOrThrow("npu::npu_trans_quant_param", "")' in header


def test_conversion_context_must_be_the_operators():
    opdef = op_sdk.get_op("npu_quant_matmul")
    saved = nb.CONVERSIONS["quant_matmul_scale"]
    try:
        nb.CONVERSIONS["quant_matmul_scale"] = ("Tensor", "aclTensor*", ("offset", "nope"))
        with pytest.raises(nb.BindingError, match="which reads 'nope', no argument or return"):
            nb.check_binding(opdef, opdef.aclnn)
    finally:
        nb.CONVERSIONS["quant_matmul_scale"] = saved
    wrong = dataclasses.replace(opdef.aclnn, convert={"offset": "ascend_quant_axis"})
    with pytest.raises(nb.BindingError, match="through ascend_quant_axis, which takes int to int32_t"):
        nb.check_binding(opdef, wrong)


@pytest.mark.parametrize("name,check", [
    ("npu_scatter_nd_update", "TORCH_CHECK(indices.dim() >= 2,\n              \"npu::npu_scatter_nd_update: "
     "argument 'indices' must have at least 2 dims for op_sdk's binding to aclnnScatterNdUpdate (CANN 8.5.0), "
     "whose document requires it; got \", indices.dim());"),
    ("npu_scatter_nd_update_", "TORCH_CHECK(indices.dim() >= 2,\n              \"npu::npu_scatter_nd_update_: "
     "argument 'indices' must have at least 2 dims"),
    ("npu_transpose_batchmatmul", "TORCH_CHECK(!scale.has_value() || scale->scalar_type() == at::kLong,\n"
     "              \"npu::npu_transpose_batchmatmul: argument 'scale' must have dtype int64 for op_sdk's "
     "binding to aclnnTransposeBatchMatMul (CANN 8.5.0), whose document requires it; got \", "
     "scale->scalar_type());"),
])
def test_tensor_requires_generates_checks_naming_argument_rule_and_value(name, check):
    """What the APIs document beyond op_sdk's references: aclnnScatterNdUpdate takes indices
    of at least 2 dims (the reference takes 1-D ones), aclnnTransposeBatchMatMul an int64
    scale (the reference also takes float32): the bindings reject the rest before any
    allocation, naming the argument, the rule and the value."""
    source = nb.generate_source(op_sdk.get_op(name))
    assert check in source, source
    assert source.index(check.split(",")[0]) < source.index("op_sdk_npu::")


@pytest.mark.parametrize("rules,words", [
    ({"nope": {"min_dim": 2}}, "tensor_requires= names 'nope', which is no tensor argument"),
    ({"indices": {"min_dim": 0}}, "tensor_requires= gives 'indices' the rule min_dim=0"),
    ({"indices": {"dtype": "int128"}}, "tensor_requires= gives 'indices' the rule dtype='int128'"),
])
def test_tensor_requires_errors(rules, words):
    opdef = op_sdk.get_op("npu_scatter_nd_update")
    with pytest.raises(nb.BindingError) as err:
        nb.check_binding(opdef, dataclasses.replace(opdef.aclnn, tensor_requires=rules))
    assert words in str(err.value), str(err.value)


def test_selected_binding_errors():
    opdef = op_sdk.get_op("npu_quantize")
    main = opdef.aclnn
    other = main.otherwise
    cases = [
        (dataclasses.replace(main, otherwise=None), "when= and otherwise= go together"),
        (dataclasses.replace(main, otherwise=dataclasses.replace(other, outputs=("z",))),
         "otherwise= binding aclnnAscendQuantV3 names the returns ('z',)"),
        (dataclasses.replace(main, otherwise=dataclasses.replace(other, convert={"axis": "nope"})),
         "convert= names 'nope' for argument 'axis'"),
        (dataclasses.replace(main, otherwise=dataclasses.replace(other, requires={})),
         "schema argument(s) ['dtype'] reach no parameter of aclnnAscendQuantV3"),
        (dataclasses.replace(main, when={"div_mode": True, "axis": 1}, meta_only=("dtype", "axis")),
         "argument 'axis' is passed to parameter 5 'axis' (int32_t) and also listed in"),
    ]
    for binding, words in cases:
        with pytest.raises(nb.BindingError) as err:
            nb.check_binding(opdef, binding)
        assert words in str(err.value), str(err.value)


@pytest.mark.parametrize("schema,binding,words", [
    ("q(Tensor input, int dtype, int? input_dtype=None) -> Tensor",
     nb.AclnnBinding("aclnnCast", outputs=("y",), rename={"self": "input"},
                     dtype_of={"dtype": "y"}, meta_only=("dtype",)),
     ["schema argument(s) ['input_dtype'] reach no parameter"]),
    ("q(Tensor input, int dtype) -> Tensor",
     nb.AclnnBinding("aclnnCast", outputs=("y",), rename={"self": "input"},
                     dtype_of={"dtype": "z"}, meta_only=("dtype",)),
     ["dtype_of= names 'z', which is no return"]),
    ("q(Tensor input, int dtype) -> Tensor",
     nb.AclnnBinding("aclnnCast", outputs=("y",), rename={"self": "input"},
                     dtype_of={"out": "y"}),
     ["dtype_of= gives parameter 3 'out' (aclTensor*) the dtype of 'y'",
      "rule: a dtype goes to an aclDataType (or int32_t / int64_t) parameter"]),
    ("q(Tensor input, int dtype) -> Tensor",
     nb.AclnnBinding("aclnnCast", outputs=("y",), rename={"self": "input"},
                     dtype_of={"dtype": "y"}, acl_dtypes={"y": "FLOAT8_E8M0"}),
     ["acl_dtypes= tags 'y' with 'FLOAT8_E8M0'", "rule: an aclDataType enumerator (ACL_...)"]),
    ("q(Tensor input, int dtype) -> Tensor",
     nb.AclnnBinding("aclnnCast", outputs=("y",), rename={"self": "input"},
                     dtype_of={"dtype": "y"}, acl_dtypes={"z": "ACL_FLOAT8_E8M0"}),
     ["acl_dtypes= names 'z', which is no return the binding allocates"]),
    ("q(Tensor input, int dtype, int? axis=None) -> Tensor",
     nb.AclnnBinding("aclnnCast", outputs=("y",), rename={"self": "input"},
                     dtype_of={"dtype": "y"}, meta_only=("dtype", "axis"),
                     defaults={"axis": 1}),
     ["defaults= names ['axis'], which reach no parameter"]),
    ("q(Tensor input, ScalarType dtype, Tensor? flag=None) -> Tensor",
     nb.AclnnBinding("aclnnCast", outputs=("y",), rename={"self": "input"},
                     defaults={"flag": 1.0}),
     ["defaults= gives argument 'flag' (Tensor?)", "optional int, float or int[] argument"]),
    ("q(Tensor(a!) input, Tensor indices, Tensor updates) -> Tensor(a!)",
     nb.AclnnBinding("aclnnScatterNdUpdate", outputs=("out",), rename={"varRef": "input"}),
     ["the return 'out' is the mutable argument 'input'"]),
    ("q(Tensor input, Tensor indices, Tensor updates) -> Tensor",
     nb.AclnnBinding("aclnnScatterNdUpdate", outputs=("var",), copy_of={"var": "updates"}),
     ["argument 'updates' is passed to parameter 3 'updates' (const aclTensor*) and also "
      "copied by copy_of="]),
])
def test_new_declaration_errors(schema, binding, words):
    opdef = _opdef(schema)
    with pytest.raises(nb.BindingError) as err:
        nb.check_binding(opdef, binding)
    msg = str(err.value)
    assert msg.startswith(f"bindtest::q binding to {binding.api}: "), msg
    for w in words:
        assert w in msg, msg


def test_requires_generates_a_check_naming_the_argument():
    source = nb.generate_source(op_sdk.get_op("npu_add_rms_norm_quant"))
    assert ("TORCH_CHECK(!beta.has_value(),\n              \"npu::npu_add_rms_norm_quant: argument "
            "'beta' must be None for op_sdk's binding to aclnnAddRmsNormQuant") in source


# ---- the pinned prototypes, declared by the slices ---------------------------------------------------------


@pytest.mark.parametrize("api", sorted(protos.PROTOTYPES))
def test_prototype_entries_cite_their_source(api):
    proto = protos.PROTOTYPES[api]
    assert proto.cann and proto.source
    assert proto.signature().startswith(f"aclnnStatus {api}GetWorkspaceSize(")
    assert proto.signature().endswith("uint64_t* workspaceSize, aclOpExecutor** executor)")
    assert any(p.output or p.ref for p in proto.params)


def test_every_declared_prototype_is_called_by_a_binding():
    # the prototypes live beside the bindings that call them (the slices' modules): none is
    # left behind when a binding changes API (a plugin's, loaded by an earlier test, included)
    called = {api for o in op_sdk.registered_ops() if o.aclnn is not None for api in o.aclnn.apis}
    assert set(protos.PROTOTYPES) == called


def test_a_second_declaration_must_be_the_same_prototype():
    p = protos.PROTOTYPES["aclnnRmsNorm"]
    params = ", ".join(f"{q.ctype} {q.name}" for q in p.params)
    assert protos.declare(p.api, params, p.source, cann=p.cann) == p
    with pytest.raises(ValueError, match="aclnnRmsNorm: already declared as a different prototype"):
        protos.declare(p.api, params.replace("double epsilon", "float epsilon"), p.source, cann=p.cann)
    assert protos.PROTOTYPES["aclnnRmsNorm"] is p


def _opdef_file(folder):
    return os.path.join(op_sdk.include_dirs()[0], "ascendc", folder, "op_host", f"{folder}_def.cpp")


@pytest.mark.parametrize("folder,op_type,api", [
    # CANN's own generated headers, reproduced from op_sdk's OpDefs of the same operators:
    # the generation rule, and these OpDefs, agree with CANN 8.1.RC1
    ("rms_norm", "RmsNorm", "aclnnRmsNorm"),
    ("add_rms_norm", "AddRmsNorm", "aclnnAddRmsNorm"),
    # and CANN 8.5.0's (hicann/ops-nn's document of the generated API)
    ("add_rms_norm_cast", "AddRmsNormCast", "aclnnAddRmsNormCast"),
])
def test_generated_prototype_rule(folder, op_type, api):
    assert protos.prototype_from_opdef(_opdef_file(folder), op_type) == protos.PROTOTYPES[api].params


def test_prototype_parser_rejects_unknown_types():
    with pytest.raises(ValueError, match="C type 'aclFoo\\*'"):
        protos.parse_params("const aclTensor* x, aclFoo* y")
    # a const scalar is read as declared; a const of an unknown type is still unknown
    assert protos.parse_params("const int32_t n")[0].ctype == "const int32_t"
    with pytest.raises(ValueError, match="C type 'const aclFoo'"):
        protos.parse_params("const aclFoo n")


# ---- registration decision --------------------------------------------------------------


def test_without_torch_npu_every_binding_would_register():
    """Here op_sdk defines every npu operator itself (no torch_npu): all are backfilled,
    none has a PrivateUse1 kernel yet."""
    import torch

    if op_sdk.library.torch_npu_module() is not None:
        pytest.skip("torch_npu is importable here")
    status = nbuild.decide(BINDINGS, lambda q: True,
                       lambda q, k: torch._C._dispatch_has_kernel_for_dispatch_key(q, k))
    assert set(status.values()) == {"register"}, status
    # and without torch_npu, load_bindings loads nothing (the libraries link libtorch_npu)
    assert nbuild.load_bindings(op_sdk.registered_ops()) == {}


def test_decision_backfills_only_what_torch_npu_lacks():
    """A registry where torch_npu defines every binding's operator but one: only that one
    registers; an operator that already has a PrivateUse1 kernel never does."""
    from tests.plugin_example import load

    load()
    lacking = "npu::npu_add_rms_norm_quant"
    opdefs = [dataclasses.replace(o, owned=(o.qualname == lacking or o.namespace != "npu"))
              for o in BINDINGS + [op_sdk.get_op("silu_mul_quant", "my_ops")]]
    status = nbuild.decide(opdefs, lambda q: True, lambda q, k: False)
    # torch_npu defines no operator outside its namespace (the example's my_ops::silu_mul_quant)
    own = {lacking} | {o.qualname for o in opdefs if o.namespace != "npu"}
    assert "my_ops::silu_mul_quant" in own
    assert all(status[q] == "register" for q in own)
    others = {q: s for q, s in status.items() if q not in own}
    assert others and all(s.startswith("skipped: torch_npu defines it") for s in others.values())
    taken = nbuild.decide(opdefs, lambda q: True, lambda q, k: q == lacking and k == "PrivateUse1")
    assert taken[lacking] == "skipped: a PrivateUse1 kernel is already registered"


def test_current_version_is_op_plugins():
    assert nbuild.current_version("2.13.0") == 12  # op_plugin/utils/Version.h: V2R13
    assert nbuild.current_version("2.1.0+cpu") == 0


def test_setup_py_builds_no_binding_without_torch_npu():
    from tests.npu.binding_build import setup_extensions

    if op_sdk.library.torch_npu_module() is not None:
        pytest.skip("torch_npu is importable here")
    if not os.path.exists(os.path.join(ROOT, "setup.py")):
        pytest.skip("no source tree beside the tests")
    assert [e[0] for e in setup_extensions(ROOT)] == ["op_sdk._C"]


def test_deliverables_claim_no_more_than_the_tests_reach():
    from op_sdk.app.deliverables import BINDING_LEVEL, npu_deliverables
    from tests.plugin_example import load

    load()  # a user project's operator: its binding source is the project's csrc/npu
    assert nb.source_path(op_sdk.get_op("silu_mul_quant", "my_ops")).endswith(
        os.path.join("examples", "silu_mul_quant", "csrc", "npu", "silu_mul_quant.cpp"))
    assert BINDING_LEVEL == "compiles (x86, against torch_npu headers), registration-checked"
    for opdef in op_sdk.registered_ops():
        level = npu_deliverables(opdef)
        assert level["hardware"] == "not verified"
        if opdef.aclnn is None:
            assert level["opplugin_binding"].startswith("none"), level
        else:
            # the level is what tests/npu/real/test_bindings.py establishes for every source
            # (op_sdk's csrc/npu, and the worked example's, when an earlier test loaded it)
            assert os.path.isfile(nb.source_path(opdef)), opdef.qualname
            branches = opdef.aclnn.branches
            canns = " / ".join(dict.fromkeys(b.prototype.cann for b in branches))
            assert level["opplugin_binding"].startswith(
                f"{' / '.join(b.api for b in branches)} (CANN {canns} "
                f"prototype{'s' if len(branches) > 1 else ''}): {BINDING_LEVEL}")
    missing = dataclasses.replace(op_sdk.get_op("npu_rms_norm"), name="npu_rms_norm_nowhere")
    assert "declared, source not generated" in npu_deliverables(missing)["opplugin_binding"]


def test_dtype_cast_binding_refuses_the_forms_its_tensors_cannot_describe():
    """npu_dtype_cast's HiFloat8 / float4 / int4 targets are uint8-stored outputs and
    input_dtype relabels the input's storage: aclnnCast would need their 950 aclDataType,
    while the binding passes tensors in their torch dtype (a HiFloat8 target would become a
    plain cast to uint8). The binding refuses those calls before any allocation; the
    numeric and float8 targets stay bound."""
    source = nb.generate_source(op_sdk.get_op("npu_dtype_cast"))
    start = source.index("TORCH_CHECK(dtype ==")
    dtype_check = source[start:source.index(",\n", start)]
    allowed = {int(v) for v in re.findall(r"dtype == (\d+)", dtype_check)}
    for code in (290, 296, 297, 285):
        assert code not in allowed
    assert {0, 1, 5, 6, 9, 15, 23, 24, 291, 292} <= allowed
    assert "TORCH_CHECK(!input_dtype.has_value()," in source
    assert source.index("TORCH_CHECK(!input_dtype") < source.index("op_sdk_npu::empty_outputs")
