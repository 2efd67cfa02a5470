// kernel_operator.h: a CPU model of the subset of the Ascend C kernel API that the kernels
// under kernels/ascendc/ use. It lets those kernel sources compile with a host C++17
// compiler and run on the CPU, one block index at a time, with the rules of the hardware
// that a wrong kernel breaks (unified-buffer budget, the 32-byte rule of DataCopy, queue
// and event balance, global-memory bounds) checked on every call.
//
// What is modelled, what is assumed and what is not modelled: docs/ascendc.md.
// Every rule violation throws AscendC::ModelError; the message names the API, the call
// site (file:line) and the rule.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

// ---- kernel-language keywords and registration macros (no meaning on the CPU) -----------
#define __global__
#define __aicore__
#define __gm__
#define GM_ADDR uint8_t*
#define KERNEL_TASK_TYPE_DEFAULT(type)
#define REGISTER_TILING_DEFAULT(type)
#define GET_TILING_DATA_WITH_STRUCT(Type, var, ptr) \
    Type var;                                       \
    ::AscendC::model::LoadTiling(&(var), (ptr), sizeof(Type))

#define ASCENDC_MODEL_SITE const char *site_file = __builtin_FILE(), int site_line = __builtin_LINE()

namespace AscendC {

class ModelError : public std::runtime_error {
public:
    explicit ModelError(const std::string &m) : std::runtime_error(m) {}
};

// ---- 16-bit floating-point types ----------------------------------------------------------
enum class RoundMode { CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD, CAST_HYBRID };

namespace model {

[[noreturn]] inline void Fail(const char *api, const char *file, int line, const std::string &rule)
{
    std::ostringstream os;
    os << api << " at " << (file ? file : "?") << ":" << line << ": " << rule;
    throw ModelError(os.str());
}

// Round |a| * sign (a double holding a float exactly) to an integer in the given mode.
inline double RoundInteger(double v, RoundMode mode)
{
    switch (mode) {
        case RoundMode::CAST_FLOOR: return std::floor(v);
        case RoundMode::CAST_CEIL: return std::ceil(v);
        case RoundMode::CAST_TRUNC: return std::trunc(v);
        case RoundMode::CAST_ROUND: return std::round(v);  // half away from zero
        case RoundMode::CAST_ODD: {
            double t = std::trunc(v);
            if (t != v && std::fmod(std::fabs(t), 2.0) == 0.0) t += (v > 0 ? 1.0 : -1.0);
            return t;
        }
        default: {  // CAST_NONE / CAST_RINT: half to even
            double f = std::floor(v), d = v - f;
            if (d > 0.5 || (d == 0.5 && std::fmod(f, 2.0) != 0.0)) f += 1.0;
            return f;
        }
    }
}

// float (exact in a double) -> a binary16-like format with `p` fraction bits, minimum normal
// exponent emin, maximum exponent emax, exponent bias `bias`; returns the bit pattern.
// Exact software rounding in the given mode; IEEE overflow (the INF/NaN mode of the chip).
inline uint16_t EncodeSmallFloat(float f, int p, int emin, int emax, int bias, RoundMode mode)
{
    uint32_t fb;
    std::memcpy(&fb, &f, 4);
    uint16_t sign = (fb >> 31) ? 0x8000 : 0;
    const uint16_t expAll = static_cast<uint16_t>(((1u << (15 - p)) - 1) << p);
    if (std::isnan(f)) return static_cast<uint16_t>(sign | expAll | (1u << (p - 1)));
    if (std::isinf(f)) return static_cast<uint16_t>(sign | expAll);
    double v = f;
    if (v == 0.0) return sign;
    double a = std::fabs(v);
    int ex;
    std::frexp(a, &ex);
    int e = std::max(ex - 1, emin);
    double quantum = std::ldexp(1.0, e - p);
    double r = RoundInteger(v / quantum, mode) * quantum;  // signed, rounded
    double ar = std::fabs(r);
    double maxFinite = std::ldexp(2.0 - std::ldexp(1.0, -p), emax);
    if (ar > maxFinite) {
        bool toInf;
        switch (mode) {
            case RoundMode::CAST_TRUNC:
            case RoundMode::CAST_ODD: toInf = false; break;
            case RoundMode::CAST_FLOOR: toInf = sign != 0; break;
            case RoundMode::CAST_CEIL: toInf = sign == 0; break;
            default: toInf = true;
        }
        if (toInf) return static_cast<uint16_t>(sign | expAll);
        ar = maxFinite;
    }
    if (ar == 0.0) return sign;
    std::frexp(ar, &ex);
    int er = ex - 1;
    if (er < emin) {  // subnormal
        return static_cast<uint16_t>(sign | static_cast<uint16_t>(ar / std::ldexp(1.0, emin - p)));
    }
    uint32_t mant = static_cast<uint32_t>(ar / std::ldexp(1.0, er - p)) - (1u << p);
    return static_cast<uint16_t>(sign | ((er + bias) << p) | mant);
}

inline float DecodeSmallFloat(uint16_t b, int p, int emin, int bias)
{
    int expBits = (b >> p) & ((1 << (15 - p)) - 1);
    uint32_t mant = b & ((1u << p) - 1);
    double s = (b & 0x8000) ? -1.0 : 1.0;
    if (expBits == (1 << (15 - p)) - 1) {
        return mant ? std::numeric_limits<float>::quiet_NaN()
                    : static_cast<float>(s * std::numeric_limits<double>::infinity());
    }
    if (expBits == 0) return static_cast<float>(s * std::ldexp(static_cast<double>(mant), emin - p));
    return static_cast<float>(s * std::ldexp(static_cast<double>(mant + (1u << p)), expBits - bias - p));
}

}  // namespace model
}  // namespace AscendC

// IEEE binary16. Conversions are exact software conversions, round to nearest even.
struct half {
    uint16_t bits = 0;
    half() = default;
    half(float f) : bits(AscendC::model::EncodeSmallFloat(f, 10, -14, 15, 15, AscendC::RoundMode::CAST_RINT)) {}
    half(double f) : half(static_cast<float>(f)) {}
    half(int v) : half(static_cast<float>(v)) {}
    operator float() const { return AscendC::model::DecodeSmallFloat(bits, 10, -14, 15); }
    static half FromBits(uint16_t b) { half h; h.bits = b; return h; }
};

// bfloat16: the top 16 bits of a binary32. Round to nearest even from float.
struct bfloat16_t {
    uint16_t bits = 0;
    bfloat16_t() = default;
    bfloat16_t(float f) : bits(AscendC::model::EncodeSmallFloat(f, 7, -126, 127, 127, AscendC::RoundMode::CAST_RINT)) {}
    bfloat16_t(double f) : bfloat16_t(static_cast<float>(f)) {}
    bfloat16_t(int v) : bfloat16_t(static_cast<float>(v)) {}
    operator float() const { return AscendC::model::DecodeSmallFloat(bits, 7, -126, 127); }
    static bfloat16_t FromBits(uint16_t b) { bfloat16_t h; h.bits = b; return h; }
};

// 4-bit signed integer, two per byte (element 2k in the low nibble of byte k). Only a
// LocalTensor<int4b_t> view (ReinterpretCast of a byte buffer) and Cast half -> int4b_t are
// modelled; element offsets into it must be even.
struct int4b_t {
    uint8_t raw = 0;
};

// The 8-bit floating-point element types of Ascend 950 (one byte of bits each). Only Cast
// float -> them is modelled (below); tests read the bytes back.
struct fp8_e5m2_t {
    uint8_t bits = 0;
};
struct fp8_e4m3fn_t {
    uint8_t bits = 0;
};
struct hifloat8_t {
    uint8_t bits = 0;
};

namespace AscendC {
namespace model {

// float -> an OCP 8-bit float (p fraction bits, minimum normal exponent emin, exponent bias),
// round half to even, saturating: every |value| past the largest finite one (inf included)
// gives that value with the sign (the documented default overflow handling of Cast); NaN
// gives sign | 0x7F (a NaN in both formats).
inline uint8_t EncodeFloat8Sat(float f, int p, int emin, int bias, double maxFinite)
{
    uint32_t fb;
    std::memcpy(&fb, &f, 4);
    uint8_t sign = (fb >> 31) ? 0x80 : 0;
    if (std::isnan(f)) return static_cast<uint8_t>(sign | 0x7F);
    double a = std::fabs(static_cast<double>(f));
    double ar;
    if (std::isinf(f)) {
        ar = maxFinite;
    } else {
        if (a == 0.0) return sign;
        int ex;
        std::frexp(a, &ex);
        int e = std::max(ex - 1, emin);
        double quantum = std::ldexp(1.0, e - p);
        ar = RoundInteger(a / quantum, RoundMode::CAST_RINT) * quantum;
        if (ar > maxFinite) ar = maxFinite;
    }
    if (ar == 0.0) return sign;
    int ex;
    std::frexp(ar, &ex);
    int er = ex - 1;
    if (er < emin) return static_cast<uint8_t>(sign | static_cast<uint8_t>(ar / std::ldexp(1.0, emin - p)));
    uint32_t mant = static_cast<uint32_t>(ar / std::ldexp(1.0, er - p)) - (1u << p);
    return static_cast<uint8_t>(sign | ((er + bias) << p) | mant);
}

// float -> HiFloat8, round half away from zero (CAST_ROUND), saturating to +-32768 (inf too);
// NaN gives 0. The format: sign, a prefix-coded "dot" field, exponent, mantissa:
//   bits 6..3 = 0000: 2^(bits 2..0 - 23) (0: zero)          dot 0001: 2^0 x 1.mmm
//   dot 001s: 2^(+-1) x 1.mmm    dot 01s e: 2^(+-(2 + e)) x 1.mmm
//   dot 10s ee: 2^(+-(4 + ee)) x 1.mm    dot 11s eee: 2^(+-(8 + eee)) x 1.m
// (s: the exponent's sign); 0x6E is 32768, 0x6F inf, 0x80 NaN.
inline uint8_t EncodeHiFloat8Sat(float f)
{
    if (std::isnan(f)) return 0;
    double a = std::fabs(static_cast<double>(f));
    bool neg = std::signbit(f);
    uint32_t code;
    if (a >= 40960.0) {  // 1.25 * 2^15 rounds past the largest finite value
        code = 110;
    } else if (a < std::ldexp(1.0, -23)) {
        code = 0;
    } else if (a < std::ldexp(1.0, -22)) {  // half way to the smallest value rounds up
        code = 1;
    } else {
        int ex;
        double m = std::frexp(a, &ex);  // a = m * 2^ex, m in [0.5, 1)
        int e = ex - 1;
        double frac = m * 2.0 - 1.0;
        int ae = std::abs(e);
        int fbits = e < -15 ? 0 : (ae <= 3 ? 3 : (ae <= 7 ? 2 : 1));
        double step = std::ldexp(1.0, fbits);
        int q = static_cast<int>(std::floor(frac * step + 0.5));
        if (q >= static_cast<int>(step)) {
            ++e;
            q = 0;
        }
        ae = std::abs(e);
        int en = e < 0 ? 1 : 0;
        if (e < -15) code = static_cast<uint32_t>(e + 23);
        else if (e == 0) code = static_cast<uint32_t>(8 + q);
        else if (ae == 1) code = static_cast<uint32_t>(16 + 8 * en + q);
        else if (ae <= 3) code = static_cast<uint32_t>(32 + 16 * en + 8 * (ae - 2) + q);
        else if (ae <= 7) code = static_cast<uint32_t>(64 + 16 * en + 4 * (ae - 4) + q);
        else code = static_cast<uint32_t>(96 + 16 * en + 2 * (ae - 8) + q);
    }
    if (code != 0 && neg) code += 128;
    return static_cast<uint8_t>(code);
}

}  // namespace model
}  // namespace AscendC

namespace AscendC {

namespace model {
// bits per element (int4b_t: 4, the rest: 8 * sizeof)
template <typename T>
struct ElemBits {
    static constexpr uint64_t value = 8 * sizeof(T);
};
template <>
struct ElemBits<int4b_t> {
    static constexpr uint64_t value = 4;
};
}  // namespace model

enum class TPosition { GM, VECIN, VECOUT, VECCALC, A1, B1, C1 };
using QuePosition = TPosition;
enum class HardEvent { MTE2_V, V_MTE2, V_MTE3, MTE3_V, MTE2_MTE3, MTE3_MTE2, V_S, S_V, MTE2_S, S_MTE2, MTE3_S, S_MTE3 };
enum pipe_t { PIPE_S, PIPE_V, PIPE_MTE2, PIPE_MTE3, PIPE_ALL };
using event_t = int32_t;

namespace model {

struct SocSpec {
    const char *name;
    uint32_t ubBytes;
};
inline SocSpec SocByName(const std::string &name)
{
    if (name == "ascend910b" || name == "ascend910_93") return {"ascend910b", 192 * 1024};
    if (name == "ascend310p") return {"ascend310p", 256 * 1024};
    throw ModelError("model: unknown SoC '" + name + "' (known: ascend910b, ascend910_93, ascend310p)");
}

struct GmRegion {
    uintptr_t begin, end;
    std::string name;
};

struct BufferSlot {  // one buffer of a TQue / TBuf in the unified buffer
    uint32_t offset = 0, bytes = 0;
    bool allocated = false, queued = false;
};

struct QueueState {  // shared between a TQue / TBuf object and the simulator
    std::string name;  // the first argument of the InitBuffer call, as written
    std::string kind;
    int depth = 0;
    std::vector<BufferSlot> slots;
    std::vector<int> fifo;  // slot indices, EnQue order
    bool alive = true;
};

struct Sim {
    std::string soc = "ascend910b";
    uint32_t ubBytes = 192 * 1024;
    std::vector<uint8_t> ub;  // the unified buffer of the running block
    uint32_t ubUsed = 0;
    int64_t blockIdx = 0, blockNum = 1;
    bool running = false;
    std::vector<GmRegion> gm;
    std::vector<QueueState *> queues;  // owned here; TQue/TBuf keep a pointer
    std::map<std::pair<int, int>, int> events;
    double deqScale = 1.0;
    ~Sim() { Reset(); }
    void Reset()
    {
        for (auto *q : queues) delete q;
        queues.clear();
        events.clear();
        ubUsed = 0;
        deqScale = 1.0;
    }
};

inline Sim &S()
{
    static Sim sim;
    return sim;
}

inline uint8_t *UbBase() { return S().ub.data(); }

// The text of the first argument of the call at file:line (the buffer's name in the kernel
// source), or "" when the source cannot be read.
inline std::string ArgumentAt(const char *file, int line, const char *callee)
{
    std::ifstream in(file ? file : "");
    std::string text;
    for (int i = 1; std::getline(in, text); ++i) {
        if (i != line) continue;
        size_t p = text.find(callee);
        if (p == std::string::npos) return "";
        p = text.find('(', p);
        if (p == std::string::npos) return "";
        size_t q = text.find_first_of(",)", p + 1);
        std::string arg = text.substr(p + 1, q == std::string::npos ? std::string::npos : q - p - 1);
        arg.erase(0, arg.find_first_not_of(" \t"));
        arg.erase(arg.find_last_not_of(" \t") + 1);
        return arg;
    }
    return "";
}

inline void LoadTiling(void *dst, const uint8_t *src, size_t bytes)
{
    if (src == nullptr) throw ModelError("GET_TILING_DATA_WITH_STRUCT: the tiling pointer is null");
    std::memcpy(dst, src, bytes);
}

// ---- the driver's side: one run of a kernel for every block index --------------------------
inline void RegisterGm(const void *p, size_t bytes, const std::string &name)
{
    if (!p) return;
    auto b = reinterpret_cast<uintptr_t>(p);
    S().gm.push_back({b, b + bytes, name});
}

inline void ClearGm() { S().gm.clear(); }

inline void BeginBlock(int64_t idx, int64_t num, uint32_t ubBytes, const std::string &soc = "ascend910b")
{
    Sim &s = S();
    s.Reset();
    s.soc = soc;
    s.ubBytes = ubBytes;
    s.ub.assign(ubBytes, 0xA5);  // the UB's contents are undefined at kernel start
    s.blockIdx = idx;
    s.blockNum = num;
    s.running = true;
}

// The end-of-kernel checks: every queue balanced, every event waited for.
inline void EndBlock()
{
    Sim &s = S();
    s.running = false;
    std::ostringstream os;
    for (auto *q : s.queues) {
        int alloc = 0;
        for (auto &sl : q->slots) alloc += sl.allocated;
        if (!q->fifo.empty() || alloc)
            os << "queue '" << q->name << "' (" << q->kind << ") is unbalanced at kernel end: " << alloc
               << " tensor(s) allocated and not freed, " << q->fifo.size() << " enqueued and not dequeued; ";
    }
    for (auto &e : s.events)
        if (e.second != 0)
            os << "event (HardEvent " << e.first.first << ", id " << e.first.second << ") has " << e.second
               << " SetFlag without a matching WaitFlag at kernel end; ";
    std::string msg = os.str();
    s.Reset();
    if (!msg.empty()) throw ModelError("kernel end (block " + std::to_string(s.blockIdx) + "): " + msg);
}

}  // namespace model

inline int64_t GetBlockIdx() { return model::S().blockIdx; }
inline int64_t GetBlockNum() { return model::S().blockNum; }

template <typename A, typename B>
struct IsSameType {
    static constexpr bool value = std::is_same<A, B>::value;
};

// ---- tensors ------------------------------------------------------------------------------
template <typename T>
class GlobalTensor {
public:
    __aicore__ inline void SetGlobalBuffer(__gm__ T *buffer, uint64_t size = 0, ASCENDC_MODEL_SITE)
    {
        base_ = buffer;
        size_ = size;
        auto b = reinterpret_cast<uintptr_t>(buffer), e = b + size * sizeof(T);
        auto &gm = model::S().gm;
        if (!gm.empty() && size > 0) {
            bool ok = false;
            for (auto &r : gm) ok = ok || (b >= r.begin && e <= r.end);
            if (!ok) {
                std::ostringstream os;
                os << "the buffer [" << (void *)b << ", +" << size * sizeof(T)
                   << " B) lies outside every global-memory allocation the launcher passed";
                model::Fail("GlobalTensor::SetGlobalBuffer", site_file, site_line, os.str());
            }
        }
    }
    __aicore__ inline GlobalTensor operator[](uint64_t offset) const
    {
        GlobalTensor g = *this;
        g.base_ = base_ + offset;
        g.size_ = offset <= size_ ? size_ - offset : 0;
        g.under_ = offset > size_;
        return g;
    }
    __aicore__ inline T GetValue(uint64_t i, ASCENDC_MODEL_SITE) const
    {
        Check(i, 1, "GlobalTensor::GetValue", site_file, site_line);
        return base_[i];
    }
    __aicore__ inline void SetValue(uint64_t i, T v, ASCENDC_MODEL_SITE)
    {
        Check(i, 1, "GlobalTensor::SetValue", site_file, site_line);
        base_[i] = v;
    }
    __aicore__ inline uint64_t GetSize() const { return size_; }
    __gm__ T *GetPhyAddr() const { return base_; }
    // Every global-memory access of the model goes through here.
    void Check(uint64_t first, uint64_t count, const char *api, const char *file, int line) const
    {
        if (base_ == nullptr) model::Fail(api, file, line, "GlobalTensor used before SetGlobalBuffer");
        if (under_ || first + count > size_) {
            std::ostringstream os;
            os << "out-of-bounds global-memory access: elements [" << first << ", " << first + count
               << ") of a GlobalTensor of " << size_ << " elements" << (under_ ? " (offset past its end)" : "");
            model::Fail(api, file, line, os.str());
        }
    }

private:
    __gm__ T *base_ = nullptr;
    uint64_t size_ = 0;
    bool under_ = false;
};

template <typename T>
class LocalTensor {
public:
    LocalTensor() = default;
    LocalTensor(uint32_t byteOffset, uint32_t elems, int queue, int slot)
        : off_(byteOffset), size_(elems), queue_(queue), slot_(slot) {}
    __aicore__ inline LocalTensor operator[](uint32_t offset) const
    {
        LocalTensor t = *this;
        if (offset > size_) throw ModelError("LocalTensor::operator[]: offset past the tensor's end");
        if ((offset * model::ElemBits<T>::value) % 8 != 0)
            throw ModelError("LocalTensor::operator[]: offset inside a byte (an odd int4 element)");
        t.off_ = off_ + static_cast<uint32_t>(offset * model::ElemBits<T>::value / 8);
        t.size_ = size_ - offset;
        return t;
    }
    template <typename U>
    __aicore__ inline LocalTensor<U> ReinterpretCast() const
    {
        return LocalTensor<U>(off_, static_cast<uint32_t>(size_ * model::ElemBits<T>::value / model::ElemBits<U>::value),
                              queue_, slot_);
    }
    __aicore__ inline T GetValue(uint32_t i, ASCENDC_MODEL_SITE) const
    {
        Check(i, 1, "LocalTensor::GetValue", site_file, site_line, false);
        T v;
        std::memcpy(&v, model::UbBase() + off_ + i * sizeof(T), sizeof(T));
        return v;
    }
    __aicore__ inline void SetValue(uint32_t i, T v, ASCENDC_MODEL_SITE) const
    {
        Check(i, 1, "LocalTensor::SetValue", site_file, site_line, false);
        std::memcpy(model::UbBase() + off_ + i * sizeof(T), &v, sizeof(T));
    }
    __aicore__ inline uint32_t GetSize() const { return size_; }
    T *Data() const { return reinterpret_cast<T *>(model::UbBase() + off_); }
    uint32_t ByteOffset() const { return off_; }
    int Queue() const { return queue_; }
    int Slot() const { return slot_; }
    // Bounds (count elements from `first`) and, for vector / copy operands, 32-byte alignment.
    void Check(uint64_t first, uint64_t count, const char *api, const char *file, int line, bool aligned = true) const
    {
        if (queue_ < 0) model::Fail(api, file, line, "LocalTensor used before it was allocated (AllocTensor / Get)");
        auto &qs = model::S().queues;
        if (queue_ >= (int)qs.size() || !qs[queue_]->alive)
            model::Fail(api, file, line, "LocalTensor of a buffer that no longer exists");
        if (first + count > size_) {
            std::ostringstream os;
            os << "out-of-bounds unified-buffer access: elements [" << first << ", " << first + count
               << ") of a LocalTensor of " << size_ << " elements in buffer '" << qs[queue_]->name << "'";
            model::Fail(api, file, line, os.str());
        }
        if (aligned && off_ % 32 != 0) {
            std::ostringstream os;
            os << "operand address (unified-buffer offset " << off_ << ") is not 32-byte aligned";
            model::Fail(api, file, line, os.str());
        }
    }

private:
    uint32_t off_ = 0, size_ = 0;
    int queue_ = -1, slot_ = -1;
};

// ---- queues, buffers, pipe ----------------------------------------------------------------
template <TPosition pos, int32_t depth>
class TQue {
public:
    template <typename T>
    __aicore__ inline LocalTensor<T> AllocTensor(ASCENDC_MODEL_SITE)
    {
        auto *q = State("TQue::AllocTensor", site_file, site_line);
        for (size_t i = 0; i < q->slots.size(); ++i) {
            auto &sl = q->slots[i];
            if (!sl.allocated) {
                sl.allocated = true;
                return LocalTensor<T>(sl.offset, sl.bytes * 8 / model::ElemBits<T>::value, id_, static_cast<int>(i));
            }
        }
        model::Fail("TQue::AllocTensor", site_file, site_line,
                    "queue '" + q->name + "': every buffer is already allocated (FreeTensor missing?)");
    }
    template <typename T>
    __aicore__ inline void EnQue(const LocalTensor<T> &t, ASCENDC_MODEL_SITE)
    {
        auto *q = Own(t, "TQue::EnQue", site_file, site_line);
        auto &sl = q->slots[t.Slot()];
        if (sl.queued) model::Fail("TQue::EnQue", site_file, site_line, "tensor enqueued twice in '" + q->name + "'");
        if ((int)q->fifo.size() >= depth)
            model::Fail("TQue::EnQue", site_file, site_line,
                        "queue '" + q->name + "' is full (depth " + std::to_string(depth) + ")");
        sl.queued = true;
        q->fifo.push_back(t.Slot());
    }
    template <typename T>
    __aicore__ inline LocalTensor<T> DeQue(ASCENDC_MODEL_SITE)
    {
        auto *q = State("TQue::DeQue", site_file, site_line);
        if (q->fifo.empty())
            model::Fail("TQue::DeQue", site_file, site_line,
                        "queue '" + q->name + "' is empty (the kernel would wait for ever)");
        int i = q->fifo.front();
        q->fifo.erase(q->fifo.begin());
        q->slots[i].queued = false;
        return LocalTensor<T>(q->slots[i].offset, q->slots[i].bytes * 8 / model::ElemBits<T>::value, id_, i);
    }
    template <typename T>
    __aicore__ inline void FreeTensor(const LocalTensor<T> &t, ASCENDC_MODEL_SITE)
    {
        auto *q = Own(t, "TQue::FreeTensor", site_file, site_line);
        auto &sl = q->slots[t.Slot()];
        if (sl.queued)
            model::Fail("TQue::FreeTensor", site_file, site_line, "tensor freed while still enqueued in '" + q->name + "'");
        sl.allocated = false;
    }
    int id_ = -1;

private:
    model::QueueState *State(const char *api, const char *file, int line)
    {
        if (id_ < 0) model::Fail(api, file, line, "queue used before TPipe::InitBuffer");
        return model::S().queues[id_];
    }
    template <typename T>
    model::QueueState *Own(const LocalTensor<T> &t, const char *api, const char *file, int line)
    {
        auto *q = State(api, file, line);
        if (t.Queue() != id_ || t.Slot() < 0 || !q->slots[t.Slot()].allocated)
            model::Fail(api, file, line, "the tensor was not allocated from queue '" + q->name + "'");
        return q;
    }
};

template <TPosition pos = TPosition::VECCALC>
class TBuf {
public:
    template <typename T>
    __aicore__ inline LocalTensor<T> Get(ASCENDC_MODEL_SITE)
    {
        if (id_ < 0) model::Fail("TBuf::Get", site_file, site_line, "buffer used before TPipe::InitBuffer");
        auto &sl = model::S().queues[id_]->slots[0];
        return LocalTensor<T>(sl.offset, sl.bytes * 8 / model::ElemBits<T>::value, id_, 0);
    }
    template <typename T>
    __aicore__ inline LocalTensor<T> Get(uint32_t count, ASCENDC_MODEL_SITE)
    {
        auto t = Get<T>(site_file, site_line);
        if (count > t.GetSize())
            model::Fail("TBuf::Get", site_file, site_line, "asks for more elements than the buffer holds");
        return LocalTensor<T>(t.ByteOffset(), count, id_, 0);
    }
    int id_ = -1;
};

class TPipe {
public:
    TPipe() = default;
    ~TPipe() { Destroy(); }
    template <TPosition pos, int32_t depth>
    __aicore__ inline void InitBuffer(TQue<pos, depth> &que, uint8_t num, uint32_t len, ASCENDC_MODEL_SITE)
    {
        if (num < 1 || num > 8)
            model::Fail("TPipe::InitBuffer", site_file, site_line, "a queue holds 1 to 8 buffers");
        que.id_ = Add(num, len, depth, pos == TPosition::VECIN ? "TQue<VECIN>" : pos == TPosition::VECOUT ? "TQue<VECOUT>" : "TQue",
                      site_file, site_line);
    }
    template <TPosition pos>
    __aicore__ inline void InitBuffer(TBuf<pos> &buf, uint32_t len, ASCENDC_MODEL_SITE)
    {
        buf.id_ = Add(1, len, 0, "TBuf<VECCALC>", site_file, site_line);
    }
    __aicore__ inline void Destroy()
    {
        for (int id : mine_)
            if (id < (int)model::S().queues.size()) model::S().queues[id]->alive = false;
        mine_.clear();
    }
    __aicore__ inline void Reset() { Destroy(); }

private:
    int Add(int num, uint32_t len, int depth, const char *kind, const char *file, int line)
    {
        auto &s = model::S();
        if (!s.running) model::Fail("TPipe::InitBuffer", file, line, "called outside a kernel run");
        uint32_t bytes = (len + 31u) / 32u * 32u;  // buffers are whole 32-byte blocks
        auto *q = new model::QueueState();
        q->name = model::ArgumentAt(file, line, "InitBuffer");
        if (q->name.empty()) q->name = "#" + std::to_string(s.queues.size());
        q->kind = kind;
        q->depth = depth;
        uint64_t need = static_cast<uint64_t>(bytes) * num;
        if (s.ubUsed + need > s.ubBytes) {
            std::ostringstream os;
            os << "unified-buffer overflow: buffer '" << q->name << "' (" << kind << ", " << num << " x " << bytes
               << " B) needs " << need << " B at offset " << s.ubUsed << ", the unified buffer of " << s.soc
               << " holds " << s.ubBytes << " B (" << s.ubUsed + need - s.ubBytes << " B over)";
            delete q;
            model::Fail("TPipe::InitBuffer", file, line, os.str());
        }
        for (int i = 0; i < num; ++i) {
            model::BufferSlot sl;
            sl.offset = s.ubUsed;
            sl.bytes = bytes;
            s.ubUsed += bytes;
            q->slots.push_back(sl);
        }
        s.queues.push_back(q);
        int id = static_cast<int>(s.queues.size()) - 1;
        mine_.push_back(id);
        return id;
    }
    std::vector<int> mine_;
};

// ---- synchronisation ----------------------------------------------------------------------
template <pipe_t pipe>
__aicore__ inline void PipeBarrier() {}

template <HardEvent ev>
__aicore__ inline void SetFlag(int32_t id, ASCENDC_MODEL_SITE)
{
    if (id < 0 || id > 7) model::Fail("SetFlag", site_file, site_line, "event id must be 0 to 7");
    model::S().events[{static_cast<int>(ev), id}] += 1;
}
template <HardEvent ev>
__aicore__ inline void WaitFlag(int32_t id, ASCENDC_MODEL_SITE)
{
    int &n = model::S().events[{static_cast<int>(ev), id}];
    if (n <= 0)
        model::Fail("WaitFlag", site_file, site_line,
                    "waits for event id " + std::to_string(id) + " that was never set (the kernel would hang)");
    n -= 1;
}

// ---- data movement ------------------------------------------------------------------------
struct DataCopyExtParams {
    uint16_t blockCount = 1;
    uint32_t blockLen = 0;   // bytes
    uint32_t srcStride = 0;  // GM side: bytes; UB side: 32-byte blocks
    uint32_t dstStride = 0;  // GM side: bytes; UB side: 32-byte blocks
    uint32_t rsv = 0;
    DataCopyExtParams() = default;
    DataCopyExtParams(uint16_t c, uint32_t l, uint32_t s, uint32_t d, uint32_t r)
        : blockCount(c), blockLen(l), srcStride(s), dstStride(d), rsv(r) {}
};
template <typename T>
struct DataCopyPadExtParams {
    bool isPad = false;
    uint8_t leftPadding = 0, rightPadding = 0;
    T paddingValue{};
    DataCopyPadExtParams() = default;
    DataCopyPadExtParams(bool p, uint8_t l, uint8_t r, T v) : isPad(p), leftPadding(l), rightPadding(r), paddingValue(v) {}
};

namespace model {
template <typename T>
inline void Check32(uint64_t count, const char *api, const char *file, int line)
{
    if ((count * sizeof(T)) % 32 != 0) {
        std::ostringstream os;
        os << "the 32-byte rule: " << count << " elements of " << sizeof(T) << " B = " << count * sizeof(T)
           << " B is not a multiple of 32 B (use DataCopyPad for any length)";
        Fail(api, file, line, os.str());
    }
}
}  // namespace model

// GM -> UB
template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src, uint32_t count, ASCENDC_MODEL_SITE)
{
    model::Check32<T>(count, "DataCopy", site_file, site_line);
    dst.Check(0, count, "DataCopy", site_file, site_line);
    src.Check(0, count, "DataCopy", site_file, site_line);
    std::memcpy(dst.Data(), src.GetPhyAddr(), count * sizeof(T));
}
// UB -> GM
template <typename T>
__aicore__ inline void DataCopy(const GlobalTensor<T> &dst, const LocalTensor<T> &src, uint32_t count, ASCENDC_MODEL_SITE)
{
    model::Check32<T>(count, "DataCopy", site_file, site_line);
    src.Check(0, count, "DataCopy", site_file, site_line);
    dst.Check(0, count, "DataCopy", site_file, site_line);
    std::memcpy(dst.GetPhyAddr(), src.Data(), count * sizeof(T));
}
// UB -> UB
template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T> &dst, const LocalTensor<T> &src, uint32_t count, ASCENDC_MODEL_SITE)
{
    model::Check32<T>(count, "DataCopy", site_file, site_line);
    src.Check(0, count, "DataCopy", site_file, site_line);
    dst.Check(0, count, "DataCopy", site_file, site_line);
    std::memmove(dst.Data(), src.Data(), count * sizeof(T));
}

// GM -> UB, any length: blockCount blocks of blockLen bytes; each block lands on a 32-byte
// boundary in the UB (plus dstStride 32-byte blocks); the tail up to 32 B is padded with
// paddingValue when isPad, left undefined (a 0xA5 pattern here) otherwise.
template <typename T>
__aicore__ inline void DataCopyPad(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const DataCopyExtParams &p,
                                   const DataCopyPadExtParams<T> &pad, ASCENDC_MODEL_SITE)
{
    if (p.blockLen % sizeof(T) != 0)
        model::Fail("DataCopyPad", site_file, site_line, "blockLen must be a whole number of elements");
    if (pad.leftPadding + pad.rightPadding > 32 / sizeof(T))
        model::Fail("DataCopyPad", site_file, site_line, "left + right padding must fit one 32-byte block");
    uint64_t n = p.blockLen / sizeof(T);
    uint64_t ubBlock = (static_cast<uint64_t>(p.blockLen) + 31) / 32 * 32 + static_cast<uint64_t>(p.dstStride) * 32;
    uint64_t gmStep = p.blockLen + p.srcStride;
    for (uint32_t b = 0; b < p.blockCount; ++b) {
        uint64_t u = b * ubBlock / sizeof(T), g = b * gmStep;
        if (g % sizeof(T)) model::Fail("DataCopyPad", site_file, site_line, "srcStride must be whole elements");
        g /= sizeof(T);
        uint64_t padded = (static_cast<uint64_t>(p.blockLen) + 31) / 32 * 32 / sizeof(T);
        dst.Check(u, padded, "DataCopyPad", site_file, site_line);
        src.Check(g, n, "DataCopyPad", site_file, site_line);
        std::memcpy(dst.Data() + u, src.GetPhyAddr() + g, n * sizeof(T));
        for (uint64_t i = n; i < padded; ++i) {
            if (pad.isPad) {
                dst.Data()[u + i] = pad.paddingValue;
            } else {
                std::memset(reinterpret_cast<uint8_t *>(dst.Data() + u + i), 0xA5, sizeof(T));
            }
        }
    }
}
// UB -> GM, any length: srcStride in 32-byte blocks (UB), dstStride in bytes (GM).
template <typename T>
__aicore__ inline void DataCopyPad(const GlobalTensor<T> &dst, const LocalTensor<T> &src, const DataCopyExtParams &p,
                                   ASCENDC_MODEL_SITE)
{
    if (p.blockLen % sizeof(T) != 0)
        model::Fail("DataCopyPad", site_file, site_line, "blockLen must be a whole number of elements");
    uint64_t n = p.blockLen / sizeof(T);
    uint64_t ubBlock = (static_cast<uint64_t>(p.blockLen) + 31) / 32 * 32 + static_cast<uint64_t>(p.srcStride) * 32;
    uint64_t gmStep = p.blockLen + p.dstStride;
    for (uint32_t b = 0; b < p.blockCount; ++b) {
        uint64_t u = b * ubBlock / sizeof(T), g = b * gmStep;
        if (g % sizeof(T)) model::Fail("DataCopyPad", site_file, site_line, "dstStride must be whole elements");
        g /= sizeof(T);
        src.Check(u, n, "DataCopyPad", site_file, site_line);
        dst.Check(g, n, "DataCopyPad", site_file, site_line);
        std::memcpy(dst.GetPhyAddr() + g, src.Data() + u, n * sizeof(T));
    }
}

// ---- vector instructions over `count` elements ---------------------------------------------
// 16-bit float operands are computed in fp32 and rounded back to nearest even (docs).
namespace model {
template <typename T>
inline float Ld(const T &v) { return static_cast<float>(v); }
template <typename T>
inline T St(float v) { return T(v); }
template <>
inline float St<float>(float v) { return v; }
template <typename T>
inline void VecCheck(int32_t count, const char *api, const char *file, int line)
{
    static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value || std::is_same<T, bfloat16_t>::value ||
                      std::is_same<T, int32_t>::value || std::is_same<T, int16_t>::value,
                  "vector instruction on an unsupported element type");
    if (count < 0) Fail(api, file, line, "negative count");
}
template <typename T, typename F>
inline void Binary(const LocalTensor<T> &d, const LocalTensor<T> &a, const LocalTensor<T> &b, int32_t n, F f, const char *api,
                   const char *file, int line)
{
    VecCheck<T>(n, api, file, line);
    d.Check(0, n, api, file, line);
    a.Check(0, n, api, file, line);
    b.Check(0, n, api, file, line);
    T *pd = d.Data();
    const T *pa = a.Data(), *pb = b.Data();
    for (int32_t i = 0; i < n; ++i) pd[i] = St<T>(f(Ld(pa[i]), Ld(pb[i])));
}
template <typename T, typename F>
inline void Unary(const LocalTensor<T> &d, const LocalTensor<T> &a, int32_t n, F f, const char *api, const char *file,
                  int line)
{
    VecCheck<T>(n, api, file, line);
    d.Check(0, n, api, file, line);
    a.Check(0, n, api, file, line);
    T *pd = d.Data();
    const T *pa = a.Data();
    for (int32_t i = 0; i < n; ++i) pd[i] = St<T>(f(Ld(pa[i])));
}
}  // namespace model

#define ASCENDC_MODEL_BINARY(NAME, EXPR)                                                                          \
    template <typename T>                                                                                         \
    __aicore__ inline void NAME(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, \
                                const int32_t &count, ASCENDC_MODEL_SITE)                                         \
    {                                                                                                             \
        model::Binary(dst, src0, src1, count, [](float a, float b) -> float { return EXPR; }, #NAME, site_file, site_line); \
    }
ASCENDC_MODEL_BINARY(Add, a + b)
ASCENDC_MODEL_BINARY(Sub, a - b)
ASCENDC_MODEL_BINARY(Mul, a * b)
ASCENDC_MODEL_BINARY(Div, a / b)
ASCENDC_MODEL_BINARY(Max, std::fmax(a, b))
ASCENDC_MODEL_BINARY(Min, std::fmin(a, b))
#undef ASCENDC_MODEL_BINARY

#define ASCENDC_MODEL_SCALAR(NAME, EXPR)                                                                           \
    template <typename T, typename U>                                                                              \
    __aicore__ inline void NAME(const LocalTensor<T> &dst, const LocalTensor<T> &src, const U &scalarValue,         \
                                const int32_t &count, ASCENDC_MODEL_SITE)                                          \
    {                                                                                                              \
        const float s = model::Ld(static_cast<T>(scalarValue));                                                    \
        model::Unary(dst, src, count, [s](float a) -> float { return EXPR; }, #NAME, site_file, site_line);         \
    }
ASCENDC_MODEL_SCALAR(Adds, a + s)
ASCENDC_MODEL_SCALAR(Muls, a * s)
ASCENDC_MODEL_SCALAR(Maxs, std::fmax(a, s))
ASCENDC_MODEL_SCALAR(Mins, std::fmin(a, s))
#undef ASCENDC_MODEL_SCALAR

#define ASCENDC_MODEL_UNARY(NAME, EXPR)                                                                          \
    template <typename T>                                                                                        \
    __aicore__ inline void NAME(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t &count,       \
                                ASCENDC_MODEL_SITE)                                                              \
    {                                                                                                            \
        model::Unary(dst, src, count, [](float a) -> float { return EXPR; }, #NAME, site_file, site_line);        \
    }
ASCENDC_MODEL_UNARY(Abs, std::fabs(a))
ASCENDC_MODEL_UNARY(Sqrt, std::sqrt(a))
ASCENDC_MODEL_UNARY(Exp, std::exp(a))
ASCENDC_MODEL_UNARY(Reciprocal, 1.0f / a)
#undef ASCENDC_MODEL_UNARY

template <typename T, typename U>
__aicore__ inline void Duplicate(const LocalTensor<T> &dst, const U &scalarValue, const int32_t &count, ASCENDC_MODEL_SITE)
{
    dst.Check(0, count, "Duplicate", site_file, site_line);
    T v = static_cast<T>(scalarValue);
    for (int32_t i = 0; i < count; ++i) dst.Data()[i] = v;
}

// Reductions of `count` elements to dst[0]. fp32 order of ReduceSum (docs/ascendc.md): the
// elements are summed in 64-element (256-byte) repeats, each by pairwise halving
// (i + 32, then + 16, ... + 1); the repeat sums are then reduced again by the same rule,
// until one value is left. ReduceMax is order-independent. workLocal must hold at least
// one element per repeat, rounded up to a 32-byte block.
namespace model {
inline float TreeSum(const float *v, size_t n)
{
    std::vector<float> cur(v, v + n);
    while (cur.size() > 1) {
        std::vector<float> next((cur.size() + 63) / 64);
        for (size_t r = 0; r < next.size(); ++r) {
            float lane[64];
            size_t m = std::min<size_t>(64, cur.size() - r * 64);
            for (size_t i = 0; i < 64; ++i) lane[i] = i < m ? cur[r * 64 + i] : 0.0f;
            for (size_t w = 32; w >= 1; w /= 2)
                for (size_t i = 0; i < w; ++i) lane[i] = lane[i] + lane[i + w];
            next[r] = lane[0];
        }
        cur.swap(next);
    }
    return cur.empty() ? 0.0f : cur[0];
}
template <typename T>
inline void ReduceChecks(const LocalTensor<T> &dst, const LocalTensor<T> &src, const LocalTensor<T> &work, int32_t count,
                         const char *api, const char *file, int line)
{
    VecCheck<T>(count, api, file, line);
    if (count < 1) Fail(api, file, line, "count must be at least 1");
    dst.Check(0, 1, api, file, line);
    src.Check(0, count, api, file, line);
    uint32_t perRepeat = 256 / sizeof(T), perBlock = 32 / sizeof(T);
    uint32_t need = ((count + perRepeat - 1) / perRepeat + perBlock - 1) / perBlock * perBlock;
    work.Check(0, need, api, file, line);
}
}  // namespace model

template <typename T>
__aicore__ inline void ReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src, const LocalTensor<T> &work,
                                 const int32_t count, ASCENDC_MODEL_SITE)
{
    model::ReduceChecks(dst, src, work, count, "ReduceSum", site_file, site_line);
    std::vector<float> v(count);
    for (int32_t i = 0; i < count; ++i) v[i] = model::Ld(src.Data()[i]);
    dst.Data()[0] = model::St<T>(model::TreeSum(v.data(), v.size()));
}

template <typename T>
__aicore__ inline void ReduceMax(const LocalTensor<T> &dst, const LocalTensor<T> &src, const LocalTensor<T> &work,
                                 const int32_t count, bool calIndex = false, ASCENDC_MODEL_SITE)
{
    model::ReduceChecks(dst, src, work, count, "ReduceMax", site_file, site_line);
    if (calIndex) model::Fail("ReduceMax", site_file, site_line, "calIndex = true is not modelled");
    float m = model::Ld(src.Data()[0]);
    for (int32_t i = 1; i < count; ++i) m = std::fmax(m, model::Ld(src.Data()[i]));
    dst.Data()[0] = model::St<T>(m);
}

// ---- Cast ---------------------------------------------------------------------------------
// The conversions modelled (src -> dst : round modes), everything else is an error:
//   half/bfloat16_t -> float          : CAST_NONE (exact)
//   float -> half                     : CAST_NONE (= RINT), RINT, FLOOR, CEIL, ROUND, TRUNC, ODD
//   float -> bfloat16_t               : CAST_NONE (= RINT), RINT, FLOOR, CEIL, ROUND, TRUNC
//   float -> int32_t                  : RINT, FLOOR, CEIL, ROUND, TRUNC; saturating, NaN -> 0
//   int32_t -> float                  : CAST_NONE (= RINT when inexact)
//   int32_t -> half                   : value * SetDeqScale's scale, then the mode (NONE = RINT)
//   half -> int8_t                    : CAST_NONE (= RINT), RINT, FLOOR, CEIL, ROUND, TRUNC;
//                                       saturating to [-128, 127], NaN -> 0
//   half -> uint8_t                   : as half -> int8_t, saturating to [0, 255]
//   half -> int4b_t                   : as half -> int8_t, saturating to [-8, 7]; two per byte,
//                                       element 2k in the low nibble of byte k
//   float -> fp8_e5m2_t / fp8_e4m3fn_t : CAST_RINT; saturating to the largest finite value
//                                       (inf too), NaN -> sign | 0x7F
//   float -> hifloat8_t               : CAST_ROUND (half away from zero); saturating to +-32768
//                                       (inf too), NaN -> 0
// (The modes per pair are CANN's table for Ascend 950; overflow saturates, the documented
// default of Cast; the NaN results are the model's assumption, see docs/ascendc.md.)
inline void SetDeqScale(half scale) { model::S().deqScale = static_cast<float>(scale); }

namespace model {
template <typename D, typename S>
struct CastRule {
    static constexpr bool supported = false;
};
inline bool ModeIn(RoundMode m, std::initializer_list<RoundMode> ok)
{
    for (auto o : ok)
        if (m == o) return true;
    return false;
}
inline int64_t SatInt(double v, RoundMode m, int64_t lo, int64_t hi)
{
    if (std::isnan(v)) return 0;
    double r = RoundInteger(v, m);
    if (r < lo) return lo;
    if (r > hi) return hi;
    return static_cast<int64_t>(r);
}
}  // namespace model

template <typename D, typename S>
__aicore__ inline void Cast(const LocalTensor<D> &dst, const LocalTensor<S> &src, const RoundMode &mode,
                            const uint32_t count, ASCENDC_MODEL_SITE)
{
    const char *api = "Cast";
    dst.Check(0, count, api, site_file, site_line);
    src.Check(0, count, api, site_file, site_line);
    using R = RoundMode;
    auto need = [&](std::initializer_list<R> ok, const char *what) {
        if (!model::ModeIn(mode, ok))
            model::Fail(api, site_file, site_line, std::string("round mode not supported for ") + what);
    };
    D *pd = dst.Data();
    const S *ps = src.Data();
    std::vector<S> tmp(ps, ps + count);  // in-place casts between equal widths read first
    if constexpr ((std::is_same<S, half>::value || std::is_same<S, bfloat16_t>::value) && std::is_same<D, float>::value) {
        need({R::CAST_NONE}, "half/bfloat16 -> float (exact; use CAST_NONE)");
        for (uint32_t i = 0; i < count; ++i) pd[i] = static_cast<float>(tmp[i]);
    } else if constexpr (std::is_same<S, float>::value && std::is_same<D, half>::value) {
        need({R::CAST_NONE, R::CAST_RINT, R::CAST_FLOOR, R::CAST_CEIL, R::CAST_ROUND, R::CAST_TRUNC, R::CAST_ODD},
             "float -> half");
        R m = mode == R::CAST_NONE ? R::CAST_RINT : mode;
        for (uint32_t i = 0; i < count; ++i) pd[i] = half::FromBits(model::EncodeSmallFloat(tmp[i], 10, -14, 15, 15, m));
    } else if constexpr (std::is_same<S, float>::value && std::is_same<D, bfloat16_t>::value) {
        need({R::CAST_NONE, R::CAST_RINT, R::CAST_FLOOR, R::CAST_CEIL, R::CAST_ROUND, R::CAST_TRUNC}, "float -> bfloat16");
        R m = mode == R::CAST_NONE ? R::CAST_RINT : mode;
        for (uint32_t i = 0; i < count; ++i)
            pd[i] = bfloat16_t::FromBits(model::EncodeSmallFloat(tmp[i], 7, -126, 127, 127, m));
    } else if constexpr (std::is_same<S, float>::value && std::is_same<D, int32_t>::value) {
        need({R::CAST_RINT, R::CAST_FLOOR, R::CAST_CEIL, R::CAST_ROUND, R::CAST_TRUNC}, "float -> int32 (name the rounding)");
        for (uint32_t i = 0; i < count; ++i)
            pd[i] = static_cast<int32_t>(model::SatInt(tmp[i], mode, INT32_MIN, INT32_MAX));
    } else if constexpr (std::is_same<S, int32_t>::value && std::is_same<D, float>::value) {
        need({R::CAST_NONE}, "int32 -> float (use CAST_NONE)");
        for (uint32_t i = 0; i < count; ++i) pd[i] = static_cast<float>(tmp[i]);  // RNE (the host's mode)
    } else if constexpr (std::is_same<S, int32_t>::value && std::is_same<D, half>::value) {
        need({R::CAST_NONE, R::CAST_RINT, R::CAST_FLOOR, R::CAST_CEIL, R::CAST_ROUND, R::CAST_TRUNC}, "int32 -> half");
        R m = mode == R::CAST_NONE ? R::CAST_RINT : mode;
        double sc = model::S().deqScale;
        for (uint32_t i = 0; i < count; ++i) {
            double v = static_cast<double>(tmp[i]) * sc;
            float f = static_cast<float>(v);
            if (static_cast<double>(f) != v)
                model::Fail(api, site_file, site_line, "int32 -> half: the scaled value is not exact in fp32 (not modelled)");
            pd[i] = half::FromBits(model::EncodeSmallFloat(f, 10, -14, 15, 15, m));
        }
    } else if constexpr (std::is_same<S, half>::value && std::is_same<D, int8_t>::value) {
        need({R::CAST_NONE, R::CAST_RINT, R::CAST_FLOOR, R::CAST_CEIL, R::CAST_ROUND, R::CAST_TRUNC}, "half -> int8");
        R m = mode == R::CAST_NONE ? R::CAST_RINT : mode;
        for (uint32_t i = 0; i < count; ++i) pd[i] = static_cast<int8_t>(model::SatInt(static_cast<float>(tmp[i]), m, -128, 127));
    } else if constexpr (std::is_same<S, half>::value && std::is_same<D, uint8_t>::value) {
        need({R::CAST_NONE, R::CAST_RINT, R::CAST_FLOOR, R::CAST_CEIL, R::CAST_ROUND, R::CAST_TRUNC}, "half -> uint8");
        R m = mode == R::CAST_NONE ? R::CAST_RINT : mode;
        for (uint32_t i = 0; i < count; ++i) pd[i] = static_cast<uint8_t>(model::SatInt(static_cast<float>(tmp[i]), m, 0, 255));
    } else if constexpr (std::is_same<S, float>::value && std::is_same<D, fp8_e5m2_t>::value) {
        need({R::CAST_RINT}, "float -> fp8_e5m2_t (CAST_RINT only)");
        for (uint32_t i = 0; i < count; ++i) pd[i].bits = model::EncodeFloat8Sat(tmp[i], 2, -14, 15, 57344.0);
    } else if constexpr (std::is_same<S, float>::value && std::is_same<D, fp8_e4m3fn_t>::value) {
        need({R::CAST_RINT}, "float -> fp8_e4m3fn_t (CAST_RINT only)");
        for (uint32_t i = 0; i < count; ++i) pd[i].bits = model::EncodeFloat8Sat(tmp[i], 3, -6, 7, 448.0);
    } else if constexpr (std::is_same<S, float>::value && std::is_same<D, hifloat8_t>::value) {
        need({R::CAST_ROUND}, "float -> hifloat8_t (CAST_ROUND; CAST_HYBRID, the random rounding, is not modelled)");
        for (uint32_t i = 0; i < count; ++i) pd[i].bits = model::EncodeHiFloat8Sat(tmp[i]);
    } else if constexpr (std::is_same<S, half>::value && std::is_same<D, int4b_t>::value) {
        need({R::CAST_NONE, R::CAST_RINT, R::CAST_FLOOR, R::CAST_CEIL, R::CAST_ROUND, R::CAST_TRUNC}, "half -> int4");
        R m = mode == R::CAST_NONE ? R::CAST_RINT : mode;
        uint8_t *bytes = reinterpret_cast<uint8_t *>(pd);
        for (uint32_t i = 0; i < count; ++i) {
            uint8_t nib = static_cast<uint8_t>(model::SatInt(static_cast<float>(tmp[i]), m, -8, 7)) & 0xF;
            uint8_t &b = bytes[i / 2];
            b = (i % 2) ? static_cast<uint8_t>((b & 0x0F) | (nib << 4)) : static_cast<uint8_t>((b & 0xF0) | nib);
        }
    } else {
        static_assert(sizeof(D) == 0, "Cast: this (dst, src) pair is not modelled (see kernel_operator.h)");
    }
}

}  // namespace AscendC
