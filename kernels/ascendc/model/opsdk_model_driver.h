// The CPU launcher of Ascend C kernels on op_sdk's CPU model of the Ascend C API
// (kernel_operator.h beside this file): runs a kernel once per block index, sequentially,
// and turns a model error into a message for the caller (ctypes). Used by the tests of
// kernels/ascendc and by the drivers `op-sdk new-op` writes.
#pragma once

#include <cstdio>
#include <cstring>
#include <exception>

#include "kernel_operator.h"

namespace opsdk_driver {

inline void SetError(char *err, int errLen, const char *msg)
{
    if (err && errLen > 0) {
        std::snprintf(err, static_cast<size_t>(errLen), "%s", msg);
    }
}

// kernel(): one call of the kernel entry for the current block index.
template <typename F>
inline int RunBlocks(uint32_t blockDim, uint32_t ubBytes, char *err, int errLen, F kernel)
{
    int rc = 0;
    try {
        for (uint32_t b = 0; b < blockDim; ++b) {
            AscendC::model::BeginBlock(b, blockDim, ubBytes);
            kernel();
            AscendC::model::EndBlock();
        }
    } catch (const std::exception &e) {
        SetError(err, errLen, e.what());
        rc = 1;
    }
    AscendC::model::ClearGm();
    return rc;
}

}  // namespace opsdk_driver

#define OPSDK_GM(ptr, bytes, name) AscendC::model::RegisterGm((ptr), (bytes), (name))
