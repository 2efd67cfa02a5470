// npu_transpose_batchmatmul's few-row kernel (torch-free): one batch of
//   out[i, :] = sum_k x[i, k] * w[k, :]     for i < m (few rows), columns [n0, n1)
// with x rows of k contiguous elements, w rows of contiguous columns (the (K, N) weight of
// one head), accumulated in fp32 and rounded once to T. Up to 6 rows of x and 4 vectors of
// columns are accumulated in registers over the whole k loop, so the weight panel is read
// once per 6 rows and the output written once. This is the decode shape of MLA's absorbed
// projections, where a general GEMM spends its time on set-up and packing rather than on
// the ~0.5 MB of weights it has to read.
#pragma once

#include "simd.h"

#define OPK_KERNEL_BODY "batch_matmul.inl"
#include "isa_expand.h"

namespace opk {

// xf: scratch of m * k floats (x converted to fp32; unused when T is float).
template <typename T>
void small_m_matmul(const T* x, int64_t ldx, const T* w, int64_t ldw, T* out, int64_t ldo,
                    int64_t m, int64_t k, int64_t n0, int64_t n1, float* xf) {
  OPK_ISA_CALL(small_m_matmul, x, ldx, w, ldw, out, ldo, m, k, n0, n1, xf);
}

}  // namespace opk
