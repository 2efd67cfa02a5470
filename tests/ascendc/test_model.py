"""The CPU model of the Ascend C API (kernels/ascendc/model/kernel_operator.h): what it must
catch (tiny deliberately wrong kernels, tests/ascendc/driver_faults.cpp) and its number
conversions (exact software fp16 / bf16, round to nearest even, saturating int8)."""

import ctypes

import pytest
import torch

from tests.ascendc import _kernels as K

pytestmark = pytest.mark.ascendc

# the driver builds these tests call (tests/ascendc/_kernels.py builds them together)
VARIANTS = [("faults", ())]


def _fault(kernels, which, blocks=1):
    lib = kernels.lib("faults")
    x = torch.arange(16, dtype=torch.float16)
    err = ctypes.create_string_buffer(4096)
    rc = lib.opsdk_fault(ctypes.c_int(which), ctypes.c_void_p(x.data_ptr()), ctypes.c_uint64(16),
                         ctypes.c_uint32(blocks), err, ctypes.c_int(len(err)))
    return rc, err.value.decode(), x


def test_correct_kernel_runs(kernels):
    rc, msg, x = _fault(kernels, 0, blocks=1)
    assert rc == 0, msg
    assert torch.equal(x, torch.arange(16, dtype=torch.float16) * 2)


@pytest.mark.parametrize("which,pattern", [
    (1, r"DataCopy at .*driver_faults\.cpp:\d+: the 32-byte rule: 7 elements of 2 B = 14 B"),
    (2, r"TPipe::InitBuffer .*unified-buffer overflow: buffer 'inQueueX' \(TQue<VECIN>, 2 x 102400 B\).*"
        r"ascend910b holds 196608 B"),
    (3, r"kernel end \(block 0\): queue 'inQueueX' \(TQue<VECIN>\) is unbalanced at kernel end: "
        r"1 tensor\(s\) allocated and not freed, 1 enqueued and not dequeued"),
    (4, r"DataCopyPad .*out-of-bounds global-memory access: elements \[0, 17\) of a GlobalTensor of 16"),
    (5, r"GlobalTensor::SetGlobalBuffer .*outside every global-memory allocation"),
    (6, r"event \(HardEvent \d+, id 1\) has 1 SetFlag without a matching WaitFlag"),
    (7, r"WaitFlag .*waits for event id 2 that was never set"),
    (8, r"Add .*not 32-byte aligned"),
    (9, r"TQue::DeQue .*queue 'inQueueX' is empty"),
    (10, r"Add .*out-of-bounds unified-buffer access: elements \[0, 64\) of a LocalTensor of 32 elements "
         r"in buffer 'outQueueY'"),
    (11, r"Cast at .*driver_faults\.cpp:\d+: round mode not supported for float -> hifloat8_t"),
])
def test_model_catches(kernels, which, pattern):
    rc, msg, _ = _fault(kernels, which)
    assert rc != 0
    assert pytest.importorskip("re").search(pattern, msg), msg


def test_fault_in_a_later_block_is_reported(kernels):
    rc, msg, _ = _fault(kernels, 3, blocks=3)
    assert rc != 0 and "block 0" in msg


def _convert(kernels, kind, mode, src, out_dtype, chunk=4096):
    """In chunks: four buffers of `chunk` fp32 values fit the unified buffer."""
    if src.numel() > chunk:
        return torch.cat([_convert(kernels, kind, mode, p, out_dtype) for p in src.split(chunk)])
    lib = kernels.lib("faults")
    src = src.contiguous()
    out = torch.empty(src.numel(), dtype=out_dtype)
    err = ctypes.create_string_buffer(4096)
    rc = lib.opsdk_convert(ctypes.c_int(kind), ctypes.c_int(mode), ctypes.c_void_p(src.data_ptr()),
                           ctypes.c_void_p(out.data_ptr()), ctypes.c_uint32(src.numel()), err,
                           ctypes.c_int(len(err)))
    if rc:
        raise K.KernelError(err.value.decode())
    return out


def _awkward_floats(n=20000):
    torch.manual_seed(0)
    v = torch.cat([torch.randn(n) * 10 ** torch.randint(-9, 6, (n,)).float(),
                   torch.tensor([0.0, -0.0, 65504.0, 65519.99, 65520.0, -70000.0, 6e-8, 3e-8, 2.98e-8,
                                 float("inf"), float("-inf"), 1e-45, 3.4e38])])
    return v


def test_float_to_half_and_bfloat16_round_to_nearest_even(kernels):
    v = _awkward_floats()
    h = _convert(kernels, 0, 1, v, torch.int16)  # CAST_RINT
    assert torch.equal(h, v.half().view(torch.int16))
    b = _convert(kernels, 1, 1, v, torch.int16)
    assert torch.equal(b, v.bfloat16().view(torch.int16))


def test_half_and_bfloat16_to_float_exact(kernels):
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    for kind, dt in ((2, torch.float16), (3, torch.bfloat16)):
        f = _convert(kernels, kind, 0, bits, torch.float32)
        ref = bits.view(dt).float()
        same = (f.view(torch.int32) == ref.view(torch.int32)) | (torch.isnan(f) & torch.isnan(ref))
        assert bool(same.all())


def test_float_to_half_other_modes(kernels):
    v = torch.tensor([1.0 + 2 ** -11, -(1.0 + 2 ** -11), 1.0 + 3 * 2 ** -12, 70000.0, -70000.0])
    one_up, one = 0x3C01, 0x3C00
    trunc = _convert(kernels, 0, 5, v, torch.int16).view(torch.float16)   # CAST_TRUNC
    assert trunc.tolist()[:3] == [1.0, -1.0, 1.0] and trunc[3] == 65504 and trunc[4] == -65504
    floor = _convert(kernels, 0, 2, v, torch.int16)                       # CAST_FLOOR
    assert floor[0] == one and floor[1].view(torch.float16) < -1.0
    ceil = _convert(kernels, 0, 3, v, torch.int16)                        # CAST_CEIL
    assert ceil[0] == one_up and torch.isinf(ceil.view(torch.float16)[3])
    rnd = _convert(kernels, 0, 4, v, torch.int16)                         # CAST_ROUND: tie away
    assert rnd[0] == one_up and rnd[1].view(torch.float16) == -rnd[0].view(torch.float16)
    odd = _convert(kernels, 0, 6, v, torch.int16)                         # CAST_ODD
    assert odd[0] == one_up and odd[2] == one_up


def test_float_to_int8_rounds_half_to_even_and_saturates(kernels):
    v = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 126.5, 127.49, 127.5, 300.0, -128.5, -1e9, 1e9,
                      float("nan"), 3.4999998])
    q = _convert(kernels, 4, 0, v, torch.int8)
    ref = torch.round(torch.nan_to_num(v, nan=0.0)).clamp(-128, 127).to(torch.int8)
    assert torch.equal(q, ref)


def test_half_to_int4_packs_two_per_byte_and_saturates(kernels):
    """Cast half -> int4b_t: element 2k in the low nibble of byte k; [-8, 7]; the round modes."""
    from op_sdk.ops._common import pack_int4
    v = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 6.5, 7.49, 7.5, 100.0, -8.5, -1e4, 1e4, float("nan"), -3.0, 3.0, 0.0,
                      -7.5, -6.5, 4.5, -4.5, 1.0, -1.0, 65504.0, -65504.0], dtype=torch.float16)
    rint = _convert(kernels, 5, 1, v.view(torch.int16), torch.uint8)[: v.numel() // 2]
    ref = torch.round(torch.nan_to_num(v.float(), nan=0.0)).clamp(-8, 7).to(torch.int8)
    assert torch.equal(rint.view(torch.uint8), pack_int4(ref.reshape(3, 8)).view(torch.uint8).reshape(-1))
    for mode, fn in ((2, torch.floor), (3, torch.ceil), (5, torch.trunc)):
        got = _convert(kernels, 5, mode, v.view(torch.int16), torch.uint8)[: v.numel() // 2]
        want = fn(torch.nan_to_num(v.float(), nan=0.0)).clamp(-8, 7).to(torch.int8)
        assert torch.equal(got, pack_int4(want.reshape(3, 8)).view(torch.uint8).reshape(-1)), mode
    with pytest.raises(K.KernelError, match="odd int4 element"):
        _convert(kernels, 7, 1, v[:4].view(torch.int16), torch.uint8)


def test_float_to_int32_round_modes(kernels):
    """Cast float -> int32 with RINT / FLOOR / CEIL / ROUND (ties away) / TRUNC, saturating."""
    v = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.7, -2.7, 3e9, -3e9, 1e-30, -1e-30])
    half_away = lambda t: torch.sign(t) * torch.floor(t.abs() + 0.5)  # noqa: E731
    for mode, fn in ((1, torch.round), (2, torch.floor), (3, torch.ceil), (4, half_away), (5, torch.trunc)):
        got = _convert(kernels, 6, mode, v, torch.int32)
        want = fn(v.double()).clamp(-2 ** 31, 2 ** 31 - 1).to(torch.int32)
        assert torch.equal(got, want), mode


def test_half_to_uint8_saturates_in_each_mode(kernels):
    v = torch.tensor([0.5, 1.5, 2.5, -0.5, -3.0, 254.5, 255.49, 255.5, 300.0, 65504.0, -65504.0, 7.5, 7.25, 7.75],
                     dtype=torch.float16)
    for mode, fn in ((1, torch.round), (2, torch.floor), (3, torch.ceil), (5, torch.trunc)):
        got = _convert(kernels, 8, mode, v.view(torch.int16), torch.uint8)
        assert torch.equal(got, fn(v.float()).clamp(0, 255).to(torch.uint8)), mode


def _float8_values():
    """Every float8 / HiFloat8 grid point and the midpoints between them (ties), just above and
    below them, random values over all binades, signed zeros, subnormals, the saturation
    thresholds, +-inf and NaN."""
    from op_sdk.ops._formats import hif8_to_float
    grid = torch.cat([torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dt).float()
                      for dt in (torch.float8_e5m2, torch.float8_e4m3fn)] +
                     [hif8_to_float(torch.arange(256, dtype=torch.int32).to(torch.uint8))])
    grid = grid[torch.isfinite(grid)].unique()
    mids = (grid[1:].double() + grid[:-1].double()) / 2
    mids = mids[mids.float().double() == mids].float()  # exact ties
    near = torch.cat([torch.nextafter(grid, torch.full_like(grid, float("inf"))),
                      torch.nextafter(grid, torch.full_like(grid, float("-inf")))])
    torch.manual_seed(1)
    rnd = torch.randn(20000) * torch.pow(2.0, torch.randint(-30, 20, (20000,)).float())
    special = torch.tensor([0.0, -0.0, 448.0, 464.0, 464.1, 480.0, -1e6, 57344.0, 61440.0, 61440.1, 1e30,
                            32768.0, 40959.996, 40960.0, -40960.0, 2 ** -23, 2 ** -23 * 0.999, 2 ** -22,
                            2 ** -24, 1e-45, float("inf"), float("-inf"), float("nan"), -float("nan")])
    return torch.cat([grid, -grid, mids, -mids, near, rnd, special])


def test_float_to_float8_and_hifloat8_match_op_sdk_formats(kernels):
    """Cast float -> fp8_e5m2_t / fp8_e4m3fn_t (CAST_RINT) and -> hifloat8_t (CAST_ROUND),
    saturating, equal bit for bit op_sdk's conversions (op_sdk/ops/_formats.quantize_float8:
    clamp to the largest finite value, then torch's round to nearest even; the HiFloat8
    encoder rounding half away from zero, NaN -> 0)."""
    from op_sdk.ops._formats import quantize_float8
    v = _float8_values()
    for kind, code in ((9, 23), (10, 24), (11, 290)):
        mode = 4 if code == 290 else 1
        got = _convert(kernels, kind, mode, v, torch.uint8)
        want = quantize_float8(v, code).view(torch.uint8)
        bad = (got != want).nonzero().flatten()
        assert bad.numel() == 0, (code, [(float(v[i]), int(got[i]), int(want[i])) for i in bad[:8]])
    assert _convert(kernels, 10, 1, torch.tensor([float("nan"), -float("nan")]), torch.uint8).tolist() == [0x7F, 0xFF]


@pytest.mark.parametrize("kind, mode", [(9, 4), (10, 5), (11, 1), (11, 7)], ids=["e5m2-round", "e4m3-trunc",
                                                                                 "hif8-rint", "hif8-hybrid"])
def test_float8_casts_take_the_documented_round_mode_only(kernels, kind, mode):
    with pytest.raises(K.KernelError, match="round mode not supported"):
        _convert(kernels, kind, mode, torch.ones(8), torch.uint8)
