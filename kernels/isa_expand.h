// Compiles the kernel body named by OPK_KERNEL_BODY once per instruction set (see simd.h):
// in opk::generic (portable C++) everywhere, and on x86-64 also in opk::avx2 with the
// baseline flags and in opk::avx512 under a target pragma.
// No include guard on purpose: each kernel header includes this file once, for its body.
#ifndef OPK_KERNEL_BODY
#error "define OPK_KERNEL_BODY before including isa_expand.h"
#endif

namespace opk {
namespace generic {
#include OPK_KERNEL_BODY
}  // namespace generic
}  // namespace opk

#if OPK_X86
namespace opk {
namespace avx2 {
#include OPK_KERNEL_BODY
}  // namespace avx2
}  // namespace opk

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
// GCC 12's _mm512_undefined_epi32 (`__m512i __Y = __Y;`) trips -Wuninitialized once
// inlined into these bodies: a false positive of the intrinsic headers
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
namespace opk {
namespace avx512 {
#include OPK_KERNEL_BODY
}  // namespace avx512
}  // namespace opk
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

#undef OPK_KERNEL_BODY
