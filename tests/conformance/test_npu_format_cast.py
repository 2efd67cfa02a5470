# Conformance port of the upstream unit tests of npu_format_cast, npu_format_cast_ and
# get_npu_format.
# Upstream: Ascend/pytorch (torch_npu), test/custom_ops/test_npu_format_cast.py and
#   test/npu/test_npu_format.py, read at commit 9e73e708ab9350d203475609f36f8a43f6a0c2ab.
# Rewritten for op_sdk on CPU, not copied. On CPU the values stay in torch's layout and the
# format is recorded for the storage (docs/operators.md), so upstream's format ids, shapes,
# round trips, in-place casts, Tensor overload, autograd and error cases run here; its
# same-format cases expect the input's own storage back, which op_sdk's functional result
# is not (a copy with the same record): the port checks the record and the values.
"""npu_format_cast / npu_format_cast_ / get_npu_format against upstream's expectations."""

import numpy as np
import pytest
import torch

from op_sdk.ops.format_cast import Format, get_npu_format
from tests.conformance._golden import assert_rtol_equal, npu

ACL_FORMAT_NCHW, ACL_FORMAT_ND, ACL_FORMAT_NC1HWC0, ACL_FORMAT_FRACTAL_NZ = 0, 2, 3, 29
DTYPE_INT32 = 3

CASTS = [  # (test name, make input)
    ("test_nd_to_nz_format_id_fp16", lambda: torch.rand(8, 16).half()),
    ("test_nd_to_nz_format_id_bf16", lambda: torch.rand(32, 64).bfloat16()),
    ("test_nd_to_nz_format_id_float32", lambda: torch.rand(16, 32).float()),
    ("test_nd_to_nz_non_aligned_shape", lambda: torch.rand(15, 17).half()),
    ("test_2d_nd_to_nz_int8", lambda: torch.randint(-128, 127, (32, 64), dtype=torch.int8)),
    ("test_2d_nd_to_nz_large_shape", lambda: torch.rand(256, 512).half()),
    ("test_3d_nd_to_nz_format_id", lambda: torch.rand(4, 16, 32).half()),
    ("test_3d_nd_to_nz_non_aligned", lambda: torch.rand(3, 15, 17).half()),
    ("test_3d_nd_to_nz_bf16", lambda: torch.rand(2, 16, 32).bfloat16()),
    ("test_3d_nd_to_nz_float32", lambda: torch.rand(2, 16, 32).float()),
    ("test_3d_nd_to_nz_int8", lambda: torch.randint(-128, 127, (4, 16, 32), dtype=torch.int8)),
]


@pytest.mark.parametrize("make", [pytest.param(m, id=n) for n, m in CASTS])
def test_nd_to_nz_and_back(make):
    """Group 1 / 1b and the precision class: the NZ format id, the shape kept, and the round
    trip ND -> NZ -> ND giving the input back (exactly)."""
    t = make()
    expected = t.clone()
    out = npu.npu_format_cast(t, ACL_FORMAT_FRACTAL_NZ)
    assert get_npu_format(out) == ACL_FORMAT_FRACTAL_NZ
    assert out.shape == t.shape
    back = npu.npu_format_cast(out, ACL_FORMAT_ND)
    assert get_npu_format(back) == ACL_FORMAT_ND and back.shape == t.shape
    assert torch.equal(back, expected)


def test_1d_nd_to_nz_fallback_to_nd():
    out = npu.npu_format_cast(torch.empty(12).float(), ACL_FORMAT_FRACTAL_NZ)
    assert get_npu_format(out) == ACL_FORMAT_ND and out.shape == (12,)


def test_inplace_nd_to_nz_and_back_data():
    """Group 2: the in-place cast's format id both ways, the data kept, the same-format
    in-place cast keeping the storage."""
    t = torch.rand(15, 17).half()
    expected = t.clone()
    npu.npu_format_cast_(t, ACL_FORMAT_FRACTAL_NZ)
    assert get_npu_format(t) == ACL_FORMAT_FRACTAL_NZ
    npu.npu_format_cast_(t, ACL_FORMAT_ND)
    assert get_npu_format(t) == ACL_FORMAT_ND
    assert torch.equal(t, expected)
    s = torch.rand(8, 16).half()
    ptr = s.untyped_storage().data_ptr()
    npu.npu_format_cast_(s, ACL_FORMAT_ND)
    assert s.untyped_storage().data_ptr() == ptr


def test_tensor_overload_adopts_dst_format_and_round_trips():
    """Group 3."""
    src = torch.rand(15, 17).half()
    expected = src.clone()
    nz_ref = npu.npu_format_cast(torch.rand(15, 17).half(), ACL_FORMAT_FRACTAL_NZ)
    nd_ref = torch.rand(15, 17).half()
    nz = npu.npu_format_cast(src, nz_ref)
    assert get_npu_format(nz) == ACL_FORMAT_FRACTAL_NZ
    back = npu.npu_format_cast(nz, nd_ref)
    assert torch.equal(back, expected)


@pytest.mark.parametrize("fmt", [ACL_FORMAT_ND, ACL_FORMAT_FRACTAL_NZ])
def test_same_format_keeps_format_and_values(fmt):
    """Group 4 (test_same_format_*_noop, test_same_format_get_format_consistent): upstream
    gets the input's own storage back; here a copy with the same record and values."""
    t = npu.npu_format_cast(torch.rand(8, 16).half(), fmt)
    out = npu.npu_format_cast(t, get_npu_format(t))
    assert get_npu_format(out) == get_npu_format(t) == fmt
    assert torch.equal(out, t)


def test_backward():
    """Group 5: requires_grad propagates; the same-format cast supports backward."""
    a = torch.rand(4, 8).half().requires_grad_(True)
    assert npu.npu_format_cast(a, ACL_FORMAT_FRACTAL_NZ).requires_grad
    b = torch.rand(4, 8).float().requires_grad_(True)
    npu.npu_format_cast(b, get_npu_format(b)).sum().backward()
    assert b.grad is not None and torch.equal(b.grad, torch.ones(4, 8))


def test_noncontiguous_with_internal_format_fallback():
    """Group 6 (Atlas A2 / A3 case): a transposed NZ tensor casts back to ND."""
    nz = npu.npu_format_cast(torch.rand(16, 32).half(), ACL_FORMAT_FRACTAL_NZ)
    out = npu.npu_format_cast(nz.transpose(0, 1), ACL_FORMAT_ND)
    assert get_npu_format(out) == ACL_FORMAT_ND and torch.equal(out, nz.transpose(0, 1))


def test_views():
    """Groups 7 and 8: views (a column vector, reshapes, transposes, as_strided) cast to NZ
    and back with their values."""
    t = torch.rand(1, 16).half()
    out = npu.npu_format_cast(t.t(), ACL_FORMAT_FRACTAL_NZ)
    assert get_npu_format(out) == ACL_FORMAT_FRACTAL_NZ and out.shape == (16, 1)
    assert torch.equal(out, t.t())
    t = npu.npu_format_cast(torch.rand(4, 8, 28, 28).float(), ACL_FORMAT_NC1HWC0)
    v = t.reshape(4, -1)
    out = npu.npu_format_cast(v, ACL_FORMAT_NCHW)
    assert get_npu_format(out) == ACL_FORMAT_NCHW
    assert torch.allclose(out, v, rtol=1e-3, atol=1e-5)
    base = torch.rand(32, 64).half()
    for v in (base.t(), torch.as_strided(base, (32, 64), (1, 32))):
        out = npu.npu_format_cast(v, ACL_FORMAT_FRACTAL_NZ)
        assert get_npu_format(out) == ACL_FORMAT_FRACTAL_NZ
        back = npu.npu_format_cast(out, ACL_FORMAT_ND)
        assert torch.allclose(back, v, rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("shape", [(16, 8), (15, 17)])
def test_roundtrip_nz_int32_customize_dtype(shape):
    """TestNpuFormatCastDtypeParam / the int32 C0 = 8 round trips."""
    t = torch.randint(0, 100, shape, dtype=torch.int32)
    nz = npu.npu_format_cast(t, ACL_FORMAT_FRACTAL_NZ, customize_dtype=DTYPE_INT32)
    assert get_npu_format(nz) == ACL_FORMAT_FRACTAL_NZ
    assert torch.equal(npu.npu_format_cast(nz, ACL_FORMAT_ND), t)


def test_z_format_cast_original(rng):
    """TestZFormatCastOriginal: NCHW -> NC1HWC0 keeps the data (against nn.Identity)."""
    x = torch.from_numpy(rng.uniform(-1, 1, (2, 2, 4, 4)).astype(np.float16))
    assert_rtol_equal(torch.nn.Identity()(x).numpy(), npu.npu_format_cast(x, ACL_FORMAT_NC1HWC0))


# test/npu/test_npu_format.py


def test_enum_values():
    assert Format.NCHW.value == 0 and Format.NHWC.value == 1


def test_npu_format_cast_and_cast_():
    tensor = torch.ones(2, 2)
    assert get_npu_format(npu.npu_format_cast(tensor, 0)) == Format.NCHW
    assert get_npu_format(npu.npu_format_cast(tensor, Format.NHWC)) == Format.NHWC
    out3 = npu.npu_format_cast(tensor, Format.FRACTAL_NZ)
    assert get_npu_format(out3) == Format.FRACTAL_NZ
    assert get_npu_format(npu.npu_format_cast(out3, Format.ND)) == Format.ND
    x1, x2 = torch.ones(2, 2), torch.ones(2, 2)
    npu.npu_format_cast_(x1, 0)
    npu.npu_format_cast_(x2, Format.NHWC)
    assert get_npu_format(x1) == Format.NCHW and get_npu_format(x1) == 0
    assert get_npu_format(x2) == Format.NHWC


def test_get_npu_format_weak_ref():
    """upstream's _weak_ref_tensor (a second tensor on the same storage, no reference held)
    reports the storage's format."""
    x1 = torch.ones(2, 2)
    npu.npu_format_cast_(x1, Format.FRACTAL_NZ)
    weak = torch.empty(0).set_(x1.untyped_storage(), x1.storage_offset(), x1.size(), x1.stride())
    assert get_npu_format(weak) == Format.FRACTAL_NZ
    assert x1.data_ptr() == weak.data_ptr()
