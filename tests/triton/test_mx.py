"""The MX quantisation operators' Triton kernel (op_sdk/triton_kernels/mx.py): against the
references computed on CPU, bit for bit (npu_dynamic_mx_quant; the fused norms given the
kernel's own rstd, which is checked against float64 on its own: its sum of squares is a
tree sum), over dtypes, every destination, scale_alg and round mode, odd sizes and partial
blocks, 3-D, layouts, empty inputs, subnormal results and NaN / inf blocks; outputs in the
fake's shapes, dtypes and strides; the forms the kernel does not cover run the reference;
the rules raise naming the operator and the argument."""

import pytest
import torch

from op_sdk.library import get_op
from op_sdk.ops.rms_norm_dynamic_mx_quant import rms_norm_dynamic_mx_quant_reference
from tests.ops._helpers import bf16, fp16, fp32, relayout, significant_strides
from tests.ops.test_rms_norm_dynamic_mx_quant import _compare, _normalised
from tests.ops._helpers import rms_norm_fp64

npu = torch.ops.npu
E4M3, E5M2, E2M1, E1M2 = 292, 291, 296, 297
FORMS = [(E4M3, 0, "rint"), (E4M3, 1, "rint"), (E5M2, 0, "rint"), (E5M2, 1, "rint"),
         (24, 1, "rint"), (23, 0, "rint"), (E2M1, 0, "rint"), (E2M1, 0, "round"),
         (E2M1, 0, "floor"), (E1M2, 0, "rint"), (E1M2, 0, "round"), (E1M2, 0, "floor")]


def K(name):
    return get_op(name).kernels["cuda"]


def _x(*shape, dtype=bf16, seed=0):
    """Normal values spread over 12 decades along the last dim (subnormal float8 / float4
    results after scaling), an inf and a NaN in rows of their own where there are rows."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g) * torch.logspace(-9, 3, shape[-1])
    x = x.to(dtype)
    rows = x.reshape(-1, shape[-1]) if x.numel() else x
    if rows.shape[0] >= 3 and shape[-1] >= 3:
        rows[1, shape[-1] // 2] = float("inf")
        rows[2, 0] = float("nan")
    return x


def _bits(t):
    return t.view(torch.uint8) if t.dtype.itemsize == 1 else t


def _check_outputs(out, ref, fake, exact):
    assert len(out) == len(ref) == len(fake)
    for i, (o, r, f) in enumerate(zip(out, ref, fake)):
        assert (o.dtype, tuple(o.shape)) == (r.dtype, tuple(r.shape)), i
        assert significant_strides(o) == significant_strides(f), (i, o.stride(), f.stride())
        if i in exact:  # bit for bit (a float output: NaN where NaN)
            o, r = _bits(o.cpu()), _bits(r)
            assert torch.equal(o, r) or (o.is_floating_point() and torch.equal(
                o.isnan(), r.isnan()) and torch.equal(o.nan_to_num(), r.nan_to_num())), i


def _fake(op, args, kw):
    to_meta = lambda v: v.to("meta") if isinstance(v, torch.Tensor) else v  # noqa: E731
    return op(*(to_meta(a) for a in args), **{k: to_meta(v) for k, v in kw.items()})


def _on(device, args, kw):
    mv = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
    return tuple(mv(a) for a in args), {k: mv(v) for k, v in kw.items()}


# ---- npu_dynamic_mx_quant -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [bf16, fp16, fp32])
@pytest.mark.parametrize("form", FORMS, ids=lambda f: f"{f[0]}-{f[1]}-{f[2]}")
@pytest.mark.parametrize("shape", [(3, 64), (5, 70), (2, 3, 130), (4, 1), (0, 64)])
def test_dynamic_mx_quant_is_bit_exact(dtype, form, shape, device):
    dst, alg, mode = form
    if dst in (E2M1, E1M2) and shape[-1] % 2:
        shape = (*shape[:-1], shape[-1] + 1)  # float4 packs pairs: an even last dim
    kw = {"dst_type": dst, "scale_alg": alg, "round_mode": mode}
    x = _x(*shape, dtype=dtype, seed=shape[-1])
    args, dkw = _on(device, (x,), kw)
    out = K("npu_dynamic_mx_quant")(*args, **dkw)
    _check_outputs(out, npu.npu_dynamic_mx_quant(x, **kw),
                   _fake(npu.npu_dynamic_mx_quant, (x,), kw), exact=(0, 1))


@pytest.mark.parametrize("layout", ["strided", "padded_rows", "permuted", "broadcast"])
@pytest.mark.parametrize("dst", [E4M3, E2M1])
def test_dynamic_mx_quant_layouts(layout, dst, device):
    (x,), _ = relayout((_x(6, 96, seed=3),), {}, layout)
    kw = {"dst_type": dst}
    args, dkw = _on(device, (x,), kw)
    out = K("npu_dynamic_mx_quant")(*args, **dkw)
    _check_outputs(out, npu.npu_dynamic_mx_quant(x, **kw),
                   _fake(npu.npu_dynamic_mx_quant, (x,), kw), exact=(0, 1))


def test_dynamic_mx_quant_subnormals_ties_and_saturation(device):
    """float8 subnormal results and their ties, signed zeros, OCP's code-0 blocks and the
    saturation at the format's max, bit for bit."""
    x = torch.zeros(5, 64)
    x[0] = torch.linspace(200.0, 440.0, 64)
    x[1, ::2], x[1, 1::2] = 300.0, 300.0 * 2.0 ** -12
    x[2, :40], x[2, 40:] = -0.0, -(2.0 ** -20)
    x[3] = 2.0 ** -120
    x[4] = 7.5
    for kw in ({"dst_type": E4M3}, {"dst_type": E5M2, "scale_alg": 1}, {"dst_type": E2M1},
               {"dst_type": E1M2, "round_mode": "floor"}, {"dst_type": E4M3, "scale_alg": 1}):
        args, dkw = _on(device, (x,), kw)
        out = K("npu_dynamic_mx_quant")(*args, **dkw)
        _check_outputs(out, npu.npu_dynamic_mx_quant(x, **kw),
                       _fake(npu.npu_dynamic_mx_quant, (x,), kw), exact=(0, 1))


def test_dynamic_mx_quant_routed_forms_and_rules(device):
    """Other axes and block sizes, scale_alg 2 and dst_type_max run the reference (the same
    bits); a broken rule raises naming the operator and the argument."""
    x = _x(4, 64, seed=5)
    for kw in ({"axis": 0, "dst_type": E4M3}, {"block_size": 64, "dst_type": E5M2},
               {"dst_type": E2M1, "scale_alg": 2}, {"dst_type": E2M1, "scale_alg": 2,
                                                      "dst_type_max": 7.0}):
        args, dkw = _on(device, (x,), kw)
        out = K("npu_dynamic_mx_quant")(*args, **dkw)
        _check_outputs(out, npu.npu_dynamic_mx_quant(x, **kw),
                       _fake(npu.npu_dynamic_mx_quant, (x,), kw), exact=(0, 1))
    with pytest.raises(Exception, match="npu_dynamic_mx_quant.*round_mode"):
        K("npu_dynamic_mx_quant")(x.to(device), dst_type=E4M3, round_mode="floor")
    with pytest.raises(Exception, match="npu_dynamic_mx_quant.*scale_alg"):
        K("npu_dynamic_mx_quant")(x.to(device), dst_type=E2M1, scale_alg=1)


# ---- the fused norms ----------------------------------------------------------------------

def _norm_inputs(shape, dtype, gdt, seed):
    g = torch.Generator().manual_seed(seed)
    x1 = (torch.randn(*shape, generator=g) * 3).to(dtype)
    x2 = torch.randn(*shape, generator=g).to(dtype)
    gamma = (torch.rand(shape[-1], generator=g) + 0.5).to(gdt or dtype)
    beta = (torch.randn(shape[-1], generator=g) * 0.1).to(gdt or dtype)
    return x1, x2, gamma, beta


def _check_norm(y, s, rstd, x32, dtype, gamma, beta, eps, form):
    dst, alg, mode = form
    rstd = rstd.cpu()
    _compare(y.cpu(), s.cpu(), x32, dtype, gamma, beta, eps, dst, rstd, scale_alg=alg,
             round_mode=mode)
    want = rms_norm_fp64(x32, gamma.double(), eps)[1]
    torch.testing.assert_close(rstd.double(), want, rtol=1e-6, atol=0)


NORM_FORMS = [f for f in FORMS if f[0] in (E4M3, E5M2, E2M1, E1M2)]


@pytest.mark.parametrize("dtype,gdt", [(bf16, None), (fp16, None), (bf16, fp32)])
@pytest.mark.parametrize("form", NORM_FORMS, ids=lambda f: f"{f[0]}-{f[1]}-{f[2]}")
@pytest.mark.parametrize("shape", [(3, 64), (5, 70), (2, 3, 130)])
def test_rms_norm_dynamic_mx_quant(dtype, gdt, form, shape, device):
    x, _, g, b = _norm_inputs(shape, dtype, gdt, seed=shape[-1])
    kw = {"dst_type": form[0], "scale_alg": form[1], "round_mode": form[2], "epsilon": 1e-5}
    for beta in (None, b):
        args, dkw = _on(device, (x, g), {**kw, "beta": beta})
        out = K("npu_rms_norm_dynamic_mx_quant")(*args, **dkw)
        _check_outputs(out, npu.npu_rms_norm_dynamic_mx_quant(x, g, **kw, beta=beta),
                       _fake(npu.npu_rms_norm_dynamic_mx_quant, (x, g), {**kw, "beta": beta}),
                       exact=())
        _check_norm(out[0], out[1], out[2], x.float(), dtype, g, beta, 1e-5, form)


@pytest.mark.parametrize("dtype,gdt", [(bf16, None), (fp16, fp32)])
@pytest.mark.parametrize("form", [(E4M3, 0, "rint"), (E5M2, 1, "rint"), (E2M1, 0, "round"),
                                  (E1M2, 0, "floor")], ids=lambda f: f"{f[0]}-{f[1]}-{f[2]}")
@pytest.mark.parametrize("shape", [(3, 64), (5, 70), (2, 3, 130)])
def test_add_rms_norm_dynamic_mx_quant(dtype, gdt, form, shape, device):
    x1, x2, g, b = _norm_inputs(shape, dtype, gdt, seed=shape[-1] + 1)
    kw = {"dst_type": form[0], "scale_alg": form[1], "round_mode": form[2], "beta": b}
    args, dkw = _on(device, (x1, x2, g), kw)
    out = K("npu_add_rms_norm_dynamic_mx_quant")(*args, **dkw)
    _check_outputs(out, npu.npu_add_rms_norm_dynamic_mx_quant(x1, x2, g, **kw),
                   _fake(npu.npu_add_rms_norm_dynamic_mx_quant, (x1, x2, g), kw), exact=(1,))
    x32 = x1.float() + x2.float()
    _check_norm(out[0], out[2], out[3], x32, dtype, g, b, 1e-6, form)


def test_fused_norms_layouts_nonfinite_and_empty(device):
    """Non-contiguous x (the outputs in the fake's layouts); an all-zero row (rstd 1 /
    sqrt(eps)), an inf (rstd 0, the inf's block 255) and a NaN row; empty rows."""
    x, x2, g, _ = _norm_inputs((4, 64), bf16, None, seed=9)
    x[0] = 0
    x[1, 3] = float("inf")
    x[2, 40] = float("nan")
    for layout in ("contiguous", "strided", "broadcast"):
        (xl,), _ = relayout((x,), {}, layout)
        args, dkw = _on(device, (xl, g), {"dst_type": E4M3})
        out = K("npu_rms_norm_dynamic_mx_quant")(*args, **dkw)
        ref = npu.npu_rms_norm_dynamic_mx_quant(xl, g, dst_type=E4M3)
        _check_outputs(out, ref, _fake(npu.npu_rms_norm_dynamic_mx_quant, (xl, g),
                                       {"dst_type": E4M3}), exact=())
        fin = [0, 3]  # the finite rows against the formula (the others below)
        _check_norm(out[0][fin], out[1][fin], out[2][fin], xl[fin].float(), bf16, g, None,
                    1e-6, (E4M3, 0, "rint"))
        args, dkw = _on(device, (xl, x2, g), {"dst_type": E2M1})
        out = K("npu_add_rms_norm_dynamic_mx_quant")(*args, **dkw)
        _check_outputs(out, npu.npu_add_rms_norm_dynamic_mx_quant(xl, x2, g, dst_type=E2M1),
                       _fake(npu.npu_add_rms_norm_dynamic_mx_quant, (xl, x2, g),
                             {"dst_type": E2M1}), exact=(1,))
    y, s, rstd = K("npu_rms_norm_dynamic_mx_quant")(x.to(device), g.to(device), dst_type=E4M3)
    assert float(rstd[1, 0]) == 0 and int(s[1, 0, 0]) == 255 and torch.isnan(rstd[2, 0].cpu())
    assert (s[2].cpu() == 255).all() and (y[2].cpu().view(torch.uint8) == 0).all()
    e = K("npu_rms_norm_dynamic_mx_quant")(x[:0].to(device), g.to(device), dst_type=E2M1)
    assert [list(t.shape) for t in e] == [[0, 32], [0, 1, 2], [0, 1]]


def test_fused_norms_rules(device):
    x, x2, g, _ = (t.to(device) for t in _norm_inputs((2, 64), bf16, None, seed=1))
    with pytest.raises(Exception, match="npu_rms_norm_dynamic_mx_quant.*scale_alg"):
        K("npu_rms_norm_dynamic_mx_quant")(x, g, scale_alg=2)
    with pytest.raises(Exception, match="npu_add_rms_norm_dynamic_mx_quant.*x2"):
        K("npu_add_rms_norm_dynamic_mx_quant")(x, x2.half(), g)
    with pytest.raises(Exception, match="npu_rms_norm_dynamic_mx_quant.*x"):
        K("npu_rms_norm_dynamic_mx_quant")(x.float(), g.float())


def test_reference_and_formula_agree_given_the_references_rstd():
    """The test's formula (_compare) on the reference's own outputs: what the kernels are
    held to is the contract."""
    x, _, g, b = _norm_inputs((3, 96), fp16, fp32, seed=2)
    y, s, rstd = rms_norm_dynamic_mx_quant_reference(x, g, beta=b, dst_type=E5M2, scale_alg=1)
    _check_norm(y, s, rstd, x.float(), fp16, g, b, 1e-6, (E5M2, 1, "rint"))
    assert torch.equal(_normalised(x.float(), g, b, 1e-6, fp16), _normalised(
        x.float(), g, b, 1e-6, fp16, rstd))
