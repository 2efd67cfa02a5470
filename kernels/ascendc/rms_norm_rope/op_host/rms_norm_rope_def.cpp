// OpDef of RmsNormRope (op_sdk::rms_norm_rope): the inputs, attributes and outputs of its IR
// prototype (op_graph/rms_norm_rope_proto.h), the dtype combinations the kernel is built for
// (column i of every list is one binary: npu_rms_norm's x / gamma pairs; cos, sin and y of x's
// dtype), ND format, ascend910b / ascend910_93 vector cores. CANN generates aclnnRmsNormRope
// from it (inputs, attributes, outputs), the API the OpPlugin binding calls.
#include "register/op_def_registry.h"

namespace ops {
class RmsNormRope : public OpDef {
public:
    explicit RmsNormRope(const char *name) : OpDef(name)
    {
        const std::vector<ge::DataType> x = {ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT};
        const std::vector<ge::DataType> gamma = {ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT};
        const std::vector<ge::Format> nd(5, ge::FORMAT_ND);
        this->Input("x").ParamType(REQUIRED).DataType(x).Format(nd).UnknownShapeFormat(nd);
        this->Input("gamma").ParamType(REQUIRED).DataType(gamma).Format(nd).UnknownShapeFormat(nd);
        this->Input("cos").ParamType(REQUIRED).DataType(x).Format(nd).UnknownShapeFormat(nd);
        this->Input("sin").ParamType(REQUIRED).DataType(x).Format(nd).UnknownShapeFormat(nd);
        this->Attr("epsilon").AttrType(OPTIONAL).Float(1e-06);
        this->Output("y").ParamType(REQUIRED).DataType(x).Format(nd).UnknownShapeFormat(nd);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");
    }
};
OP_ADD(RmsNormRope);
}  // namespace ops
