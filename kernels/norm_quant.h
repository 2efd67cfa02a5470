// npu_add_rms_norm_quant / npu_add_rms_norm_dynamic_quant row kernels (torch-free).
// Rows are contiguous with n elements; T is bf16 or fp16.
#pragma once

#include "simd.h"

namespace opk {

template <typename T>
struct AddRmsNormQuantParams {
  const T* x1;
  const T* x2;
  const T* gamma;
  const T* beta;          // may be null
  const float* scales1;   // n values, up-cast to fp32 by the caller
  const float* zp1;       // may be null
  const float* scales2;   // may be null (y2 is then all zeros)
  const float* zp2;       // may be null
  int8_t* y1;
  int8_t* y2;
  T* xo;
  int64_t n;
  float eps;
  bool div_mode;
  bool stream;          // non-temporal stores for xo, y1, y2 (n % 16 == 0, 64-byte aligned)
  bool y2_zero_filled;  // y2 already holds zeros (then it is not written without scales2)
};

template <typename T>
struct AddRmsNormDynamicQuantParams {
  const T* x1;
  const T* x2;
  const T* gamma;
  const T* beta;     // may be null
  const T* smooth1;  // may be null
  const T* smooth2;  // may be null
  int8_t* y1;        // null: branch 1 does not run
  int8_t* y2;        // null: branch 2 does not run
  float* scale1;
  float* scale2;
  T* xo;
  int64_t n;
  float eps;
  bool stream;  // non-temporal stores for xo, y1, y2 (n % 16 == 0, 64-byte aligned)
};

// npu_rms_norm_quant: y = x * rstd * gamma + beta (gamma, beta up-cast to fp32 by the caller),
// v = y * inv_scale + offset, rounded to fp16, then to int8 (y8) or int4 packed 8 per int32
// (y4; exactly one of the two is non-null).
template <typename T>
struct RmsNormQuantParams {
  const T* x;
  const float* gamma;
  const float* beta;
  float inv_scale;
  float offset;
  int8_t* y8;
  int32_t* y4;
  int64_t n;
  float eps;
};

}  // namespace opk

#include "quant.h"
#include "rms_norm.h"

#define OPK_KERNEL_BODY "norm_quant.inl"
#include "isa_expand.h"

namespace opk {

// Rows [r0, r1) of the whole problem described by p.
template <typename T>
void add_rms_norm_quant_rows(const AddRmsNormQuantParams<T>& p, int64_t r0, int64_t r1) {
  OPK_ISA_CALL(add_rms_norm_quant_rows, p, r0, r1);
}

template <typename T>
void add_rms_norm_dynamic_quant_rows(const AddRmsNormDynamicQuantParams<T>& p, int64_t r0,
                                     int64_t r1) {
  OPK_ISA_CALL(add_rms_norm_dynamic_quant_rows, p, r0, r1);
}

template <typename T>
void rms_norm_quant_rows(const RmsNormQuantParams<T>& p, int64_t r0, int64_t r1) {
  OPK_ISA_CALL(rms_norm_quant_rows, p, r0, r1);
}

}  // namespace opk
