// OpDef of AddRmsNormDynamicQuant (npu_add_rms_norm_dynamic_quant): the inputs, outputs and
// attributes of the Ascend IR prototype (op_graph/add_rms_norm_dynamic_quant_proto.h), the dtype
// combinations the kernel supports (column i of every DataType list is one binary), ND format,
// ascend910b / ascend910_93 vector cores. int8 and int4 outputs (dst_type DT_INT8 / DT_INT4);
// ascend950 adds float8_e5m2 / float8_e4m3fn / hifloat8 outputs.
#include <vector>

#include "register/op_def_registry.h"

namespace ops {
class AddRmsNormDynamicQuant : public OpDef {
public:
    explicit AddRmsNormDynamicQuant(const char *name) : OpDef(name)
    {
        this->Input("x1")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("x2")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("gamma")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("smooth_scale1")
            .ParamType(OPTIONAL)
            .DataType({ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("smooth_scale2")
            .ParamType(OPTIONAL)
            .DataType({ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("beta")
            .ParamType(OPTIONAL)
            .DataType({ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("y1")
            .ParamType(REQUIRED)
            .DataType({ge::DT_INT8, ge::DT_INT8, ge::DT_INT4, ge::DT_INT4})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("y2")
            .ParamType(REQUIRED)
            .DataType({ge::DT_INT8, ge::DT_INT8, ge::DT_INT4, ge::DT_INT4})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("x")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("scale1")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("scale2")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND})
            .UnknownShapeFormat({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Attr("epsilon").AttrType(OPTIONAL).Float(1e-6f);
        this->Attr("output_mask").AttrType(OPTIONAL).ListBool({});
        this->Attr("dst_type").AttrType(OPTIONAL).Int(ge::DT_INT8);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");
        // Ascend 950: y1 / y2 also float8_e5m2 / float8_e4m3fn / hifloat8 (one binary per column)
        std::vector<ge::DataType> x, y, f;
        std::vector<ge::Format> nd;
        for (ge::DataType o : {ge::DT_INT8, ge::DT_INT4, ge::DT_FLOAT8_E5M2, ge::DT_FLOAT8_E4M3FN, ge::DT_HIFLOAT8}) {
            for (ge::DataType t : {ge::DT_FLOAT16, ge::DT_BF16}) {
                x.push_back(t);
                y.push_back(o);
                f.push_back(ge::DT_FLOAT);
                nd.push_back(ge::FORMAT_ND);
            }
        }
        OpAICoreConfig a950;
        a950.Input("x1").ParamType(REQUIRED).DataType(x).Format(nd).UnknownShapeFormat(nd);
        a950.Input("x2").ParamType(REQUIRED).DataType(x).Format(nd).UnknownShapeFormat(nd);
        a950.Input("gamma").ParamType(REQUIRED).DataType(x).Format(nd).UnknownShapeFormat(nd);
        a950.Input("smooth_scale1").ParamType(OPTIONAL).DataType(x).Format(nd).UnknownShapeFormat(nd);
        a950.Input("smooth_scale2").ParamType(OPTIONAL).DataType(x).Format(nd).UnknownShapeFormat(nd);
        a950.Input("beta").ParamType(OPTIONAL).DataType(x).Format(nd).UnknownShapeFormat(nd);
        a950.Output("y1").ParamType(REQUIRED).DataType(y).Format(nd).UnknownShapeFormat(nd);
        a950.Output("y2").ParamType(REQUIRED).DataType(y).Format(nd).UnknownShapeFormat(nd);
        a950.Output("x").ParamType(REQUIRED).DataType(x).Format(nd).UnknownShapeFormat(nd);
        a950.Output("scale1").ParamType(REQUIRED).DataType(f).Format(nd).UnknownShapeFormat(nd);
        a950.Output("scale2").ParamType(REQUIRED).DataType(f).Format(nd).UnknownShapeFormat(nd);
        this->AICore().AddConfig("ascend950", a950);
    }
};
OP_ADD(AddRmsNormDynamicQuant);
}  // namespace ops
