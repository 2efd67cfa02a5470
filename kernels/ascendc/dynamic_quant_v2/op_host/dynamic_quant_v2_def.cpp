// OpDef of DynamicQuantV2 (npu_dynamic_quant, per tensor / per channel): the inputs, outputs and
// attributes of the Ascend IR prototype (op_graph/dynamic_quant_v2_proto.h), the dtype
// combinations the kernel supports (column i of every DataType list is one binary: x fp16 /
// bf16, y int8 / int4), ND format, ascend910b / ascend910_93 vector cores; ascend950 adds the
// 8-bit float outputs (y float8_e5m2 / float8_e4m3fn / hifloat8, x fp16 / bf16).
#include <vector>

#include "register/op_def_registry.h"

namespace ops {
class DynamicQuantV2 : public OpDef {
public:
    explicit DynamicQuantV2(const char *name) : OpDef(name)
    {
        this->Input("x")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("smooth_scales")
            .ParamType(OPTIONAL)
            .DataType({ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("group_index")
            .ParamType(OPTIONAL)
            .DataType({ge::DT_INT32, ge::DT_INT32, ge::DT_INT32, ge::DT_INT32})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("y")
            .ParamType(REQUIRED)
            .DataType({ge::DT_INT8, ge::DT_INT8, ge::DT_INT4, ge::DT_INT4})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("scale")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("offset")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Attr("dst_type").AttrType(OPTIONAL).Int(ge::DT_INT8);
        this->Attr("is_symmetrical").AttrType(OPTIONAL).Bool(false);
        this->Attr("quant_mode").AttrType(OPTIONAL).String("pertoken");
        this->Attr("dst_type_max").AttrType(OPTIONAL).Float(0.0f);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");
        // Ascend 950: y also float8_e5m2 / float8_e4m3fn / hifloat8 (one binary per column)
        std::vector<ge::DataType> x, gi, y, f;
        std::vector<ge::Format> nd;
        for (ge::DataType o : {ge::DT_INT8, ge::DT_INT4, ge::DT_FLOAT8_E5M2, ge::DT_FLOAT8_E4M3FN, ge::DT_HIFLOAT8}) {
            for (ge::DataType t : {ge::DT_FLOAT16, ge::DT_BF16}) {
                x.push_back(t);
                gi.push_back(ge::DT_INT32);
                y.push_back(o);
                f.push_back(ge::DT_FLOAT);
                nd.push_back(ge::FORMAT_ND);
            }
        }
        OpAICoreConfig a950;
        a950.Input("x").ParamType(REQUIRED).DataType(x).Format(nd).UnknownShapeFormat(nd);
        a950.Input("smooth_scales").ParamType(OPTIONAL).DataType(x).Format(nd).UnknownShapeFormat(nd);
        a950.Input("group_index").ParamType(OPTIONAL).DataType(gi).Format(nd).UnknownShapeFormat(nd);
        a950.Output("y").ParamType(REQUIRED).DataType(y).Format(nd).UnknownShapeFormat(nd);
        a950.Output("scale").ParamType(REQUIRED).DataType(f).Format(nd).UnknownShapeFormat(nd);
        a950.Output("offset").ParamType(REQUIRED).DataType(f).Format(nd).UnknownShapeFormat(nd);
        this->AICore().AddConfig("ascend950", a950);
    }
};
OP_ADD(DynamicQuantV2);
}  // namespace ops
