// Deliberately wrong kernels: each breaks one rule the CPU model of the Ascend C API must
// catch (tests/ascendc/test_model.py). Kernel 0 is a correct one (the control), and
// opsdk_convert exposes the model's fp16 / bf16 / int conversions.
#include "driver_common.h"

using namespace AscendC;

namespace {

constexpr int32_t BUFFER_NUM = 2;

// 0: correct: GM -> UB -> GM of 16 halves (32 B) through a VECIN and a VECOUT queue.
// 1: DataCopy of 7 halves (14 B): the 32-byte rule.
// 2: a queue of 2 x 100 KiB: more than the 192 KiB unified buffer.
// 3: AllocTensor + EnQue, never DeQue / FreeTensor: unbalanced queue at kernel end.
// 4: DataCopyPad of 17 elements from a GlobalTensor of 16: out-of-bounds GM access.
// 5: SetGlobalBuffer larger than the launcher's allocation.
// 6: SetFlag without WaitFlag.
// 7: WaitFlag without SetFlag.
// 8: Add on an operand at a 2-byte offset (not 32-byte aligned).
// 9: DeQue of an empty queue.
// 10: a vector instruction over more elements than the tensor holds.
// 11: Cast float -> hifloat8_t with CAST_RINT (Ascend 950 takes CAST_ROUND / CAST_HYBRID only).
class FaultKernel {
public:
    __aicore__ inline void Run(GM_ADDR gm, uint64_t elems, int which)
    {
        xGm.SetGlobalBuffer((__gm__ half *)gm, which == 5 ? elems + 1 : elems);
        uint32_t bytes = which == 2 ? 100 * 1024 : 64;
        pipe.InitBuffer(inQueueX, BUFFER_NUM, bytes);
        pipe.InitBuffer(outQueueY, BUFFER_NUM, 64);
        LocalTensor<half> xLocal = inQueueX.AllocTensor<half>();
        if (which == 1) {
            DataCopy(xLocal, xGm, 7);
        } else if (which == 4) {
            DataCopyExtParams p{1, 17 * sizeof(half), 0, 0, 0};
            DataCopyPad(xLocal, xGm, p, DataCopyPadExtParams<half>{false, 0, 0, half(0.0f)});
        } else {
            DataCopy(xLocal, xGm, 16);
        }
        inQueueX.EnQue(xLocal);
        if (which == 3) return;
        if (which == 9) {
            inQueueX.DeQue<half>();
            inQueueX.DeQue<half>();
        }
        xLocal = inQueueX.DeQue<half>();
        LocalTensor<half> yLocal = outQueueY.AllocTensor<half>();
        if (which == 8) {
            Add(yLocal[1], xLocal, xLocal, 8);
        } else if (which == 10) {
            Add(yLocal, xLocal, xLocal, 64);
        } else if (which == 11) {
            LocalTensor<float> f = yLocal.ReinterpretCast<float>();
            Cast(f, xLocal, RoundMode::CAST_NONE, 16);
            Cast(xLocal.ReinterpretCast<hifloat8_t>(), f, RoundMode::CAST_RINT, 16);
            Add(yLocal, xLocal, xLocal, 16);
        } else {
            Add(yLocal, xLocal, xLocal, 16);
        }
        if (which == 6) SetFlag<HardEvent::V_MTE3>(1);
        if (which == 7) WaitFlag<HardEvent::MTE2_V>(2);
        outQueueY.EnQue(yLocal);
        inQueueX.FreeTensor(xLocal);
        yLocal = outQueueY.DeQue<half>();
        DataCopy(xGm, yLocal, 16);
        outQueueY.FreeTensor(yLocal);
    }

private:
    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueueX;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueueY;
    GlobalTensor<half> xGm;
};

}  // namespace

extern "C" int opsdk_fault(int which, void *gm, uint64_t elems, uint32_t blocks, char *err, int errLen)
{
    OPSDK_GM(gm, elems * sizeof(half), "x");
    return opsdk_driver::RunBlocks(blocks, 192 * 1024, err, errLen, [&] {
        FaultKernel k;
        k.Run((GM_ADDR)gm, elems, which);
    });
}

// The model's Cast over n values: kind 0 float -> half, 1 float -> bfloat16 (mode: RoundMode),
// 2 half -> float, 3 bfloat16 -> float, 4 float -> int8 through int32 / half (kernel_common.h),
// 5 half -> int4 (mode; packed two per byte, n / 2 bytes out), 6 float -> int32 (mode),
// 7 an int4 view indexed at an odd element (an error), 8 half -> uint8 (mode),
// 9 float -> fp8_e5m2_t, 10 float -> fp8_e4m3fn_t, 11 float -> hifloat8_t (mode; one byte each).
#include "common/kernel_common.h"
extern "C" int opsdk_convert(int kind, int mode, const void *in, void *out, uint32_t n, char *err, int errLen)
{
    return opsdk_driver::RunBlocks(1, 192 * 1024, err, errLen, [&] {
        TPipe pipe;
        TBuf<TPosition::VECCALC> a, b, c, d;
        pipe.InitBuffer(a, n * 4 + 32);
        pipe.InitBuffer(b, n * 4 + 32);
        pipe.InitBuffer(c, n * 4 + 32);
        pipe.InitBuffer(d, n * 4 + 32);
        RoundMode m = static_cast<RoundMode>(mode);
        if (kind == 0 || kind == 1 || kind == 4) {
            LocalTensor<float> src = a.Get<float>();
            std::memcpy(src.Data(), in, n * 4);
            if (kind == 0) {
                Cast(b.Get<half>(), src, m, n);
                std::memcpy(out, b.Get<half>().Data(), n * 2);
            } else if (kind == 1) {
                Cast(b.Get<bfloat16_t>(), src, m, n);
                std::memcpy(out, b.Get<bfloat16_t>().Data(), n * 2);
            } else {
                opsdk_ascendc::FloatToInt8(b.Get<int8_t>(), src, c.Get<int32_t>(), d.Get<half>(), n);
                std::memcpy(out, b.Get<int8_t>().Data(), n);
            }
        } else if (kind == 5 || kind == 7) {
            std::memcpy(a.Get<half>().Data(), in, n * 2);
            LocalTensor<int4b_t> q = b.Get<int8_t>().ReinterpretCast<int4b_t>();
            Cast(kind == 7 ? q[1] : q, a.Get<half>(), m, n);
            std::memcpy(out, b.Get<int8_t>().Data(), (n + 1) / 2);
        } else if (kind >= 9 && kind <= 11) {
            std::memcpy(a.Get<float>().Data(), in, n * 4);
            LocalTensor<uint8_t> y = b.Get<uint8_t>();
            if (kind == 9) Cast(y.ReinterpretCast<fp8_e5m2_t>(), a.Get<float>(), m, n);
            if (kind == 10) Cast(y.ReinterpretCast<fp8_e4m3fn_t>(), a.Get<float>(), m, n);
            if (kind == 11) Cast(y.ReinterpretCast<hifloat8_t>(), a.Get<float>(), m, n);
            std::memcpy(out, y.Data(), n);
        } else if (kind == 8) {
            std::memcpy(a.Get<half>().Data(), in, n * 2);
            Cast(b.Get<uint8_t>(), a.Get<half>(), m, n);
            std::memcpy(out, b.Get<uint8_t>().Data(), n);
        } else if (kind == 6) {
            std::memcpy(a.Get<float>().Data(), in, n * 4);
            Cast(b.Get<int32_t>(), a.Get<float>(), m, n);
            std::memcpy(out, b.Get<int32_t>().Data(), n * 4);
        } else if (kind == 2) {
            std::memcpy(a.Get<half>().Data(), in, n * 2);
            Cast(b.Get<float>(), a.Get<half>(), RoundMode::CAST_NONE, n);
            std::memcpy(out, b.Get<float>().Data(), n * 4);
        } else {
            std::memcpy(a.Get<bfloat16_t>().Data(), in, n * 2);
            Cast(b.Get<float>(), a.Get<bfloat16_t>(), RoundMode::CAST_NONE, n);
            std::memcpy(out, b.Get<float>().Data(), n * 4);
        }
    });
}
