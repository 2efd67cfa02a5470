// Which valid MX quantisation calls the native kernels of kernels/mx_quant.h compute: the
// destination, round mode and scale_alg of op_sdk/ops/_mx.py's rules, for blocks of 32
// along the last dim. Only says which calls a kernel takes (std::nullopt: the reference's,
// which also holds every rule's check and words).
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "float8_codes.h"
#include "mx_quant.h"

namespace opsdk {

constexpr int64_t kFloat4E2m1 = 296, kFloat4E1m2 = 297;

// dst_type / round_mode / scale_alg of a kernel's form: float8 with scale_alg 0 / 1 and
// round_mode "rint", float4 with scale_alg 0 and any of the three round modes
inline std::optional<opk::MxForm> mx_form(int64_t dst_type, c10::string_view round_mode,
                                          int64_t scale_alg) {
  opk::MxDst dst;
  if (dst_type == kFloat8E4m3fn || dst_type == kNpuE4m3fn) dst = opk::MxDst::e4m3;
  else if (dst_type == kFloat8E5m2 || dst_type == kNpuE5m2) dst = opk::MxDst::e5m2;
  else if (dst_type == kFloat4E2m1) dst = opk::MxDst::e2m1;
  else if (dst_type == kFloat4E1m2) dst = opk::MxDst::e1m2;
  else return std::nullopt;
  const bool fp4 = opk::mx_fp4(dst);
  int round = -1;
  if (round_mode == "rint") round = 0;
  else if (fp4 && round_mode == "round") round = 1;
  else if (fp4 && round_mode == "floor") round = 2;
  if (round < 0) return std::nullopt;
  if (fp4 ? scale_alg != 0 : (scale_alg != 0 && scale_alg != 1)) return std::nullopt;
  return opk::MxForm{dst, static_cast<int>(scale_alg), round};
}

// y and mxscale of an x quantised along its last dim in blocks of 32, as torch_npu's Meta
// allocates them: a float8 y in x's layout, a float4 y (uint8, last dim halved) and mxscale
// contiguous
inline std::pair<LikeOutput, at::Tensor> mx_outputs(const at::Tensor& x, opk::MxDst dst) {
  std::vector<int64_t> s_shape(x.sizes().begin(), x.sizes().end());
  s_shape.back() = opk::mx_scale_row(x.size(-1)) / 2;
  s_shape.push_back(2);
  at::Tensor scale = new_output(s_shape, x.options().dtype(at::kByte));
  LikeOutput y = opk::mx_fp4(dst)
                     ? LikeOutput::itself(halved_output(x, x.dim() - 1, at::kByte))
                     : output_like(x, dst == opk::MxDst::e4m3 ? at::kFloat8_e4m3fn
                                                              : at::kFloat8_e5m2);
  return {y, scale};
}

}  // namespace opsdk
