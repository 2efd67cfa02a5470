"""On a CUDA device: each operator with a Triton kernel dispatches to it (the same bits as
calling the launcher), under torch.compile too, and passes torch.library.opcheck. Skips
without a GPU (the interpreter tests in test_kernels.py check the kernels there)."""

import pytest
import torch

from op_sdk.library import get_op
from tests.ops._helpers import bf16, fp16, rand

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _args():
    h = 64
    x1, x2, g = rand(6, h, dtype=bf16), rand(6, h, dtype=bf16), rand(h, dtype=bf16)
    s = torch.rand(h) * 0.05 + 0.01
    return {
        "npu_rms_norm": ((rand(3, 5, h, dtype=fp16), rand(h, dtype=fp16)), {}),
        "npu_add_rms_norm": ((x1, x2, g), {}),
        "npu_add_rms_norm_cast": ((x1, x2, g), {}),
        "npu_add_rms_norm_quant": ((x1.half(), x2.half(), g.half(), s,
                                    torch.randint(-4, 4, (h,), dtype=torch.int32)), {}),
        "npu_add_rms_norm_dynamic_quant": ((x1, x2, g), {"smooth_scale1": (s + 0.5).to(bf16)}),
        "npu_dynamic_quant": ((x1,), {"smooth_scales": (s + 0.5).to(bf16)}),
        "npu_swiglu": ((x1,), {}),
        "npu_swiglu_backward": ((rand(6, h // 2, dtype=bf16), x1), {}),
    }


def _cuda(v):
    return v.cuda() if isinstance(v, torch.Tensor) else v


@pytest.mark.parametrize("name", list(_args()))
def test_operator_runs_its_triton_kernel(name):
    args, kw = _args()[name]
    args, kw = tuple(_cuda(a) for a in args), {k: _cuda(v) for k, v in kw.items()}
    opdef = get_op(name)
    kernel = opdef.kernels["cuda"]
    assert opdef.kernel_devices()["cuda"] == "triton"
    want = kernel(*args, **kw)
    want = want if isinstance(want, tuple) else (want,)
    got = opdef.op(*args, **kw)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want):
        assert g.is_cuda and torch.equal(g, w)
    compiled = torch.compile(lambda *a, **k: opdef.op(*a, **k), fullgraph=True)
    for g, w in zip(compiled(*args, **kw) if len(want) > 1 else (compiled(*args, **kw),), want):
        assert torch.equal(g, w)
    torch.library.opcheck(opdef.op, args, kw, test_utils=("test_schema", "test_faketensor"))
