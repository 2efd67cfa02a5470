// Shape inference helpers of the norm operators' op_host/*_infershape.cpp (CANN toolkit).
#pragma once

#include "register/op_impl_registry.h"

namespace opsdk_ascendc {

// rstd keeps x's leading dims and has 1 for each of gamma's dims.
inline ge::graphStatus InferRstdShape(const gert::Shape &x, const gert::Shape &gamma, gert::Shape &rstd)
{
    size_t xd = x.GetDimNum(), gd = gamma.GetDimNum();
    if (gd < 1 || gd > xd) return ge::GRAPH_FAILED;
    rstd.SetDimNum(xd);
    for (size_t i = 0; i < xd; ++i) rstd.SetDim(i, i < xd - gd ? x.GetDim(i) : 1);
    return ge::GRAPH_SUCCESS;
}

}  // namespace opsdk_ascendc
