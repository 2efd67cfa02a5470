"""On a CUDA device: each operator with a Triton kernel dispatches to it (the same bits as
calling the launcher), under torch.compile too, and passes torch.library.opcheck. Skips
without a GPU (the interpreter tests in test_kernels.py check the kernels there)."""

import pytest
import torch

from op_sdk.library import get_op
from tests.triton.cases import call_cases
from tests.triton.cases import triton_cases as _args

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


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
    torch.library.opcheck(opdef.op, args, kw, test_utils=("test_schema", "test_faketensor"))


def _compiled(opdef, args, kw):
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    compiled = torch.compile(lambda *a, **k: opdef.op(*a, **k), fullgraph=True)
    # Inductor's caches do not key on library.INLINE_DEVICES
    with torch._inductor.config.patch(force_disable_caches=True):
        out, code = run_and_get_code(compiled, *args, **kw)
    return (out if isinstance(out, tuple) else (out,)), "\n".join(code)


@pytest.mark.parametrize("name", list(_args()))
def test_inductor_launches_the_triton_kernel_itself(name):
    """Under torch.compile the launcher is traced (library.INLINE_DEVICES): Inductor's code
    launches the operator's Triton kernel, with no call of the operator, and computes the
    same bits as the eager kernel; taken out of INLINE_DEVICES, the operator is one call."""
    from op_sdk import library

    args, kw = _args()[name]
    args, kw = tuple(_cuda(a) for a in args), {k: _cuda(v) for k, v in kw.items()}
    opdef = get_op(name)
    want = opdef.op(*args, **kw)
    want = want if isinstance(want, tuple) else (want,)
    got, code = _compiled(opdef, args, kw)
    assert f"torch.ops.npu.{name}" not in code and "npu." + name not in code
    assert any(k in code for k in ("_rows", "_swiglu", "_quantize", "_rotary", "_qmm",
                                   "_requant", "_cast")), code[-2000:]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w)
    library.INLINE_DEVICES.discard("cuda")
    try:
        got, code = _compiled(opdef, args, kw)
    finally:
        library.INLINE_DEVICES.add("cuda")
    assert f"torch.ops.npu.{name}.default" in code
    for g, w in zip(got, want):
        assert torch.equal(g, w)


@pytest.mark.parametrize("name", list(call_cases()))
def test_operator_kept_a_call_runs_its_triton_kernel(name):
    """The operators whose launchers read values back to check them (inline=False): the
    operator dispatches to its Triton kernel (the launcher's bits), passes opcheck, and under
    torch.compile stays one call of the operator, with the same bits."""
    args, kw = call_cases()[name]
    args, kw = tuple(_cuda(a) for a in args), {k: _cuda(v) for k, v in kw.items()}
    opdef = get_op(name)
    assert opdef.kernel_devices()["cuda"] == "triton" and opdef.inline is None
    want = opdef.kernels["cuda"](*args, **kw)
    got = opdef.op(*args, **kw)
    for g, w in zip(got, want):
        assert g.is_cuda and torch.equal(g, w)
    torch.library.opcheck(opdef.op, args, kw, test_utils=("test_schema", "test_faketensor"))
    got, code = _compiled(opdef, args, kw)
    assert f"torch.ops.npu.{name}.default" in code
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_op_sdk_backend_fuses_then_inductor_launches_the_kernels():
    """op_sdk's backend on CUDA: its fusion pass sees the operators (traced as calls), the
    fused operator replaces the chain, and its inline_kernels stage leaves Inductor the
    fused operator's Triton kernel to launch, with the fused operator's bits."""
    from torch._inductor.utils import run_and_get_code

    import op_sdk

    npu = torch.ops.npu

    def chain(x1, x2, g):
        y, _, x = npu.npu_add_rms_norm(x1, x2, g)
        q, s = npu.npu_dynamic_quant(y)
        return q, s, x

    x1, x2, g = (torch.randn(*s, dtype=torch.bfloat16, device="cuda") for s in ((6, 64),) * 2 + ((64,),))
    backend = op_sdk.get_npu_backend()
    torch._dynamo.reset()
    with torch._inductor.config.patch(force_disable_caches=True):
        (q, s, x), code = run_and_get_code(torch.compile(chain, backend=backend), x1, x2, g)
    code = "\n".join(code)
    matches = {r["pattern"]: r["matches"] for r in op_sdk.explain(backend).table()}
    assert matches.get("add_rms_norm_dynamic_quant") == 1, matches
    assert "torch.ops.npu." not in code and "_rows" in code
    want_q, _, want_x, want_s, _ = npu.npu_add_rms_norm_dynamic_quant(x1, x2, g)
    assert torch.equal(q, want_q) and torch.equal(s, want_s) and torch.equal(x, want_x)
