// OpDef of AddRmsNormQuant (npu_add_rms_norm_quant): the inputs, outputs and attributes of the
// Ascend IR prototype (op_graph/add_rms_norm_quant_proto.h), the dtype combinations the kernel
// supports (column i of every DataType list is one binary), ND format.
// ascend910b / ascend910_93 (Atlas A2 / A3): int8 outputs, fp16 x with fp32 scales and int32
// zero points, or all bf16. ascend950: npu_add_rms_norm_quant's whole table, x (x1, x2, gamma,
// beta, x) -> (scales, zero points): fp16 -> (fp32, int32), (fp16, fp16), (fp32, fp32); bf16 ->
// (fp32, int32), (bf16, bf16), (fp32, fp32); fp32 -> (fp32, fp32); each with an int8,
// float8_e5m2, float8_e4m3fn or hifloat8 output (y1, y2).
#include <vector>

#include "register/op_def_registry.h"

namespace ops {
namespace {
struct Columns {
    std::vector<ge::DataType> x, scales, zeroPoints, y;
    std::vector<ge::Format> nd;
};

Columns MakeColumns(bool a950)
{
    struct Row {
        ge::DataType x, s, z;
    };
    std::vector<Row> rows = {{ge::DT_FLOAT16, ge::DT_FLOAT, ge::DT_INT32}, {ge::DT_BF16, ge::DT_BF16, ge::DT_BF16}};
    std::vector<ge::DataType> outs = {ge::DT_INT8};
    if (a950) {
        rows.push_back({ge::DT_FLOAT16, ge::DT_FLOAT16, ge::DT_FLOAT16});
        rows.push_back({ge::DT_FLOAT16, ge::DT_FLOAT, ge::DT_FLOAT});
        rows.push_back({ge::DT_BF16, ge::DT_FLOAT, ge::DT_INT32});
        rows.push_back({ge::DT_BF16, ge::DT_FLOAT, ge::DT_FLOAT});
        rows.push_back({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT});
        outs = {ge::DT_INT8, ge::DT_FLOAT8_E5M2, ge::DT_FLOAT8_E4M3FN, ge::DT_HIFLOAT8};
    }
    Columns c;
    for (const Row &r : rows) {
        for (ge::DataType o : outs) {
            c.x.push_back(r.x);
            c.scales.push_back(r.s);
            c.zeroPoints.push_back(r.z);
            c.y.push_back(o);
            c.nd.push_back(ge::FORMAT_ND);
        }
    }
    return c;
}

// the inputs and outputs of the IR over the columns c; D: OpDef or OpAICoreConfig
template <typename D>
void DefineAll(D &d, const Columns &c)
{
    d.Input("x1").ParamType(REQUIRED).DataType(c.x).Format(c.nd).UnknownShapeFormat(c.nd);
    d.Input("x2").ParamType(REQUIRED).DataType(c.x).Format(c.nd).UnknownShapeFormat(c.nd);
    d.Input("gamma").ParamType(REQUIRED).DataType(c.x).Format(c.nd).UnknownShapeFormat(c.nd);
    d.Input("scales1").ParamType(REQUIRED).DataType(c.scales).Format(c.nd).UnknownShapeFormat(c.nd);
    d.Input("scales2").ParamType(OPTIONAL).DataType(c.scales).Format(c.nd).UnknownShapeFormat(c.nd);
    d.Input("zero_points1").ParamType(OPTIONAL).DataType(c.zeroPoints).Format(c.nd).UnknownShapeFormat(c.nd);
    d.Input("zero_points2").ParamType(OPTIONAL).DataType(c.zeroPoints).Format(c.nd).UnknownShapeFormat(c.nd);
    d.Input("beta").ParamType(OPTIONAL).DataType(c.x).Format(c.nd).UnknownShapeFormat(c.nd);
    d.Output("y1").ParamType(REQUIRED).DataType(c.y).Format(c.nd).UnknownShapeFormat(c.nd);
    d.Output("y2").ParamType(REQUIRED).DataType(c.y).Format(c.nd).UnknownShapeFormat(c.nd);
    d.Output("x").ParamType(REQUIRED).DataType(c.x).Format(c.nd).UnknownShapeFormat(c.nd);
}
}  // namespace

class AddRmsNormQuant : public OpDef {
public:
    explicit AddRmsNormQuant(const char *name) : OpDef(name)
    {
        DefineAll(*this, MakeColumns(false));
        this->Attr("axis").AttrType(OPTIONAL).Int(-1);
        this->Attr("epsilon").AttrType(OPTIONAL).Float(1e-6f);
        this->Attr("div_mode").AttrType(OPTIONAL).Bool(true);
        this->Attr("dst_type").AttrType(OPTIONAL).Int(ge::DT_INT8);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");
        // Ascend 950: the whole dtype table and the 8-bit float outputs
        OpAICoreConfig a950;
        DefineAll(a950, MakeColumns(true));
        this->AICore().AddConfig("ascend950", a950);
    }
};
OP_ADD(AddRmsNormQuant);
}  // namespace ops
