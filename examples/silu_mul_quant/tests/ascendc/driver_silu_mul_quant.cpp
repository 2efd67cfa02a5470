// ctypes entry of the SiluMulQuant kernel (kernels/ascendc/silu_mul_quant) on the CPU model.
// -DDTYPE_GATE=half|bfloat16_t. opsdk_expf: the model's Exp on the host (std::exp in fp32),
// for the tests' emulation of the kernel's h.
#include <cmath>

#include "opsdk_model_driver.h"
#include "silu_mul_quant/op_kernel/silu_mul_quant.cpp"

extern "C" void opsdk_expf(const float *in, float *out, uint64_t n)
{
    for (uint64_t i = 0; i < n; ++i) out[i] = std::exp(in[i]);
}

extern "C" int opsdk_run(void *gate, void *up, void *y, void *scale, uint64_t rows, uint32_t cols, uint32_t coreNum,
                         uint32_t ubBytes, uint32_t *keyOut, char *err, int errLen)
{
    SiluMulQuantTilingData td = TilingSiluMulQuant(rows, cols, sizeof(DTYPE_GATE), coreNum, ubBytes);
    *keyOut = td.tilingKey;
    if (td.tilingKey == opsdk_ascendc::TILING_KEY_INVALID) {
        opsdk_driver::SetError(err, errLen, "tiling: no tiling fits the unified buffer");
        return 2;
    }
    uint64_t n = rows * cols;
    OPSDK_GM(gate, n * sizeof(DTYPE_GATE), "gate");
    OPSDK_GM(up, n * sizeof(DTYPE_GATE), "up");
    OPSDK_GM(y, n, "y");
    OPSDK_GM(scale, rows * sizeof(float), "scale");
    OPSDK_GM(&td, sizeof(td), "tiling");
    return opsdk_driver::RunBlocks(td.blockDim, ubBytes, err, errLen, [&] {
        silu_mul_quant((GM_ADDR)gate, (GM_ADDR)up, (GM_ADDR)y, (GM_ADDR)scale, nullptr, (GM_ADDR)&td);
    });
}
