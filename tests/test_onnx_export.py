"""op_sdk.export_onnx: models calling torch.ops.npu operators export to ONNX and run in
onnxruntime with PyTorch eager's results.

Every case exports twice: with op_sdk.npu custom nodes + model-local functions (onnxruntime
inlines them), and with ``composite_only=True`` (standard ONNX only). Outputs are compared
with eager: float outputs within the documented tolerance (the composites reduce in
another order than the references), int32 exactly, int8 exactly or within one step where
the value quantised comes out of a reduction (docs/onnx_export.md).

onnxruntime's CPU kernels take fp16 / bf16 tensors only at a few operators and numpy has no
bfloat16: the half-precision cases feed fp32 inputs, cast to the dtype inside the model and
return fp32, so the operators run (and are exported) in the half dtype.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import op_sdk  # noqa: F401

onnx = pytest.importorskip("onnx", reason="ONNX export tests need onnx (a test dependency)")
ort = pytest.importorskip("onnxruntime", reason="ONNX export tests need onnxruntime")
pytest.importorskip("onnxscript", reason="torch.onnx's exporter needs onnxscript")

from op_sdk.onnx.export import DOMAIN  # noqa: E402

npu = torch.ops.npu
BF16, FP16 = torch.bfloat16, torch.float16


def _run(path, args):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, {n: a.numpy() for n, a in zip(names, args)})


def _compare(got, want, tol, int_step):
    want = [w for w in (want if isinstance(want, (tuple, list)) else (want,))]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert tuple(g.shape) == tuple(w.shape), f"output {i}: shape {g.shape} vs {tuple(w.shape)}"
        g = torch.from_numpy(g)
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype} vs {w.dtype}"
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g, w, atol=tol, rtol=tol, equal_nan=True,
                                       msg=lambda m: f"output {i}: {m}")
        elif w.dtype == torch.int32 or int_step == 0:
            assert torch.equal(g, w), f"output {i}: {(g != w).sum()} elements differ"
        else:
            assert (g.int() - w.int()).abs().max() <= int_step if w.numel() else True, \
                f"output {i}: differs by more than {int_step} step"


def _check(tmp_path, module, args, ir_types, *, tol=1e-5, int_step=0, dynamic_shapes=None,
           reruns=()):
    """Export with custom nodes and composite-only; run both in onnxruntime; compare with
    eager on ``args`` and on every extra argument tuple of ``reruns``."""
    module = module.eval()
    for composite_only in (False, True):
        path = tmp_path / f"m_{int(composite_only)}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op_sdk.export_onnx(module, args, path, composite_only=composite_only,
                               dynamic_shapes=dynamic_shapes)
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
        custom = [n for n in model.graph.node if n.domain == DOMAIN]
        if composite_only:
            assert not custom and not model.functions
            assert all(n.domain in ("", "ai.onnx") for n in model.graph.node)
        else:
            assert sorted({n.op_type for n in custom}) == sorted(set(ir_types))
            functions = {(f.domain, f.name, f.overload) for f in model.functions}
            for n in custom:
                assert (n.domain, n.op_type, n.overload) in functions
        for run_args in (args, *reruns):
            with torch.no_grad():
                want = module(*run_args)
            _compare(_run(path, run_args), want, tol, int_step)


class Op(torch.nn.Module):
    """forward(*tensors) = fn(*tensors cast to ``dtypes``), float outputs returned as fp32."""

    def __init__(self, fn, dtypes=None):
        super().__init__()
        self.fn, self.dtypes = fn, dtypes

    def forward(self, *xs):
        if self.dtypes is not None:
            xs = [x.to(d) if d is not None else x for x, d in zip(xs, self.dtypes)]
        out = self.fn(*xs)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        outs = tuple(o.float() if o.dtype in (BF16, FP16) else o for o in outs)
        return outs if len(outs) > 1 else outs[0]


# ---- norms ----------------------------------------------------------------------------------

@pytest.mark.parametrize("xshape,gshape,dt,gdt,tol", [
    ((7, 33), (33,), None, None, 1e-5),
    ((2, 5, 33), (5, 33), None, None, 1e-5),   # rstd (2, 1, 1)
    ((2, 7, 33), (33,), BF16, BF16, 1e-2),
    ((7, 33), (33,), FP16, None, 2e-3),        # fp16 input, fp32 gamma
])
def test_rms_norm(tmp_path, xshape, gshape, dt, gdt, tol):
    args = (torch.randn(xshape), torch.randn(gshape))
    _check(tmp_path, Op(lambda x, g: npu.npu_rms_norm(x, g, 1e-5), (dt, gdt)), args,
           ["RmsNorm"], tol=tol)


@pytest.mark.parametrize("shape,dt,tol", [((2, 7, 33), None, 1e-5), ((7, 33), FP16, 2e-3)])
def test_add_rms_norm(tmp_path, shape, dt, tol):
    args = (torch.randn(shape), torch.randn(shape), torch.randn(shape[-1]))
    _check(tmp_path, Op(lambda a, b, g: npu.npu_add_rms_norm(a, b, g), (dt, dt, dt)), args,
           ["AddRmsNorm"], tol=tol)


def test_add_rms_norm_cast(tmp_path):
    args = (torch.randn(2, 7, 33), torch.randn(2, 7, 33), torch.randn(33))
    _check(tmp_path, Op(lambda a, b, g: npu.npu_add_rms_norm_cast(a, b, g), (BF16,) * 3), args,
           ["AddRmsNormCast"], tol=1e-2)


# ---- quantisation ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape,dt,smooth", [((7, 33), None, False), ((2, 7, 33), BF16, True),
                                             ((3, 33), FP16, True)])
def test_dynamic_quant(tmp_path, shape, dt, smooth):
    x = torch.randn(shape)
    x[0] = 0.0  # an all-zero row: scale 0, y 0
    if smooth:
        args = (x, torch.rand(shape[-1]) + 0.5)
        fn = lambda x, s: npu.npu_dynamic_quant(x, smooth_scales=s)  # noqa: E731
    else:
        args = (x,)
        fn = lambda x: npu.npu_dynamic_quant(x)  # noqa: E731
    _check(tmp_path, Op(fn, (dt, dt)), args, ["DynamicQuant"], tol=0)


@pytest.mark.parametrize("case", ["smooth1", "both_beta_3d", "mask_second"])
@pytest.mark.parametrize("dt", [FP16, BF16])
def test_add_rms_norm_dynamic_quant(tmp_path, case, dt):
    shape = (2, 7, 33) if case == "both_beta_3d" else (7, 33)
    h = shape[-1]
    base = (torch.randn(shape), torch.randn(shape), torch.randn(h))
    if case == "smooth1":
        args = base + (torch.rand(h) + 0.5,)
        fn = lambda a, b, g, s1: npu.npu_add_rms_norm_dynamic_quant(  # noqa: E731
            a, b, g, smooth_scale1=s1)
    elif case == "both_beta_3d":
        args = base + (torch.rand(h) + 0.5, torch.rand(h) + 0.5, torch.randn(h))
        fn = lambda a, b, g, s1, s2, be: npu.npu_add_rms_norm_dynamic_quant(  # noqa: E731
            a, b, g, smooth_scale1=s1, smooth_scale2=s2, beta=be)
    else:  # only the second branch: y1 / scale1 are empty (0,) tensors
        args = base + (torch.rand(h) + 0.5,)
        fn = lambda a, b, g, s2: npu.npu_add_rms_norm_dynamic_quant(  # noqa: E731
            a, b, g, smooth_scale2=s2, output_mask=[False, True])
    _check(tmp_path, Op(fn, (dt,) * len(args)), args, ["AddRmsNormDynamicQuant"], tol=1e-2,
           int_step=1)


@pytest.mark.parametrize("dt", [None, FP16])
def test_add_rms_norm_quant(tmp_path, dt):
    h = 33
    shape = (2, 7, h)
    x1, x2, g = torch.randn(shape), torch.randn(shape), torch.randn(h)
    s1, s2 = torch.rand(h) * 0.05 + 0.01, torch.rand(h) * 0.05 + 0.01
    if dt is None:  # fp32: fp32 scales and zero points, two scale sets, beta
        z1, beta = torch.randint(-4, 4, (h,)).float(), torch.randn(h)
        args = (x1, x2, g, s1, z1, beta, s2)
        fn = lambda a, b, g, s1, z1, be, s2: npu.npu_add_rms_norm_quant(  # noqa: E731
            a, b, g, s1, z1, be, s2)
        dtypes = None
    else:  # fp16 x with fp32 scales and int32 zero points, one scale set (y2 all zeros)
        z1 = torch.randint(-4, 4, (h,), dtype=torch.int32)
        args = (x1, x2, g, s1, z1)
        fn = lambda a, b, g, s1, z1: npu.npu_add_rms_norm_quant(a, b, g, s1, z1)  # noqa: E731
        dtypes = (dt, dt, dt, None, None)
    _check(tmp_path, Op(fn, dtypes), args, ["AddRmsNormQuant"], tol=2e-3, int_step=1)


@pytest.mark.parametrize("case", ["int8_lastaxis", "uint8_fp16", "mul_axis_m2"])
def test_quantize(tmp_path, case):
    x = torch.randn(2, 7, 33) * 4
    if case == "int8_lastaxis":
        args = (x, torch.rand(33) * 0.05 + 0.01, torch.randint(-4, 4, (33,), dtype=torch.int32))
        fn = lambda x, s, z: npu.npu_quantize(x, s, z, torch.qint8, -1, True)  # noqa: E731
        dtypes = None
    elif case == "uint8_fp16":
        args = (x, torch.rand(33) * 0.05 + 0.01, torch.full((33,), 128.0))
        fn = lambda x, s, z: npu.npu_quantize(x, s, z, torch.quint8, -1, True)  # noqa: E731
        dtypes = (FP16, None, None)
    else:  # div_mode=False, per-row of dim -2 scales (input dtype)
        args = (x, torch.rand(7) * 20 + 1)
        fn = lambda x, s: npu.npu_quantize(x, s, None, torch.qint8, -2, False)  # noqa: E731
        dtypes = None
    ir_type = "AscendQuantV2" if case == "mul_axis_m2" else "Quantize"
    _check(tmp_path, Op(fn, dtypes), args, [ir_type], tol=0)


def _int8(*shape):
    return torch.randint(-128, 128, shape, dtype=torch.int8)


@pytest.mark.parametrize("case", ["fp16_pertoken", "bf16_float_bias", "int32_bias",
                                  "int8_offset_3d"])
def test_quant_matmul(tmp_path, case):
    m, k, n = 7, 33, 17
    x1, x2, scale = _int8(m, k), _int8(k, n), torch.rand(n) * 1e-3
    pt = torch.rand(m) + 0.5
    if case == "fp16_pertoken":
        args = (x1, x2, scale, pt)
        fn = lambda a, b, s, p: npu.npu_quant_matmul(  # noqa: E731
            a, b, s, pertoken_scale=p, output_dtype=torch.float16)
        dtypes, tol = None, 0
    elif case == "bf16_float_bias":
        args = (x1, x2, scale, pt, torch.randn(n))
        fn = lambda a, b, s, p, bi: npu.npu_quant_matmul(  # noqa: E731
            a, b, s, pertoken_scale=p, bias=bi, output_dtype=torch.bfloat16)
        dtypes, tol = (None, None, BF16, None, BF16), 0
    elif case == "int32_bias":  # exact int32 accumulation, k large enough to leave fp32
        k = 1100
        x1, x2 = torch.full((m, k), -128, dtype=torch.int8), torch.full((k, n), -128, dtype=torch.int8)
        x1[:, :3] = _int8(m, 3)
        args = (x1, x2, scale, torch.randint(-1000, 1000, (n,), dtype=torch.int32))
        fn = lambda a, b, s, bi: npu.npu_quant_matmul(  # noqa: E731
            a, b, s, bias=bi, output_dtype=torch.int32)
        dtypes, tol = None, 0
    else:  # int8 output with offset, batched x1 (2, m, k)
        args = (_int8(2, m, k), x2, scale * 0.1, torch.randn(n))
        fn = lambda a, b, s, o: npu.npu_quant_matmul(a, b, s, offset=o)  # noqa: E731
        dtypes, tol = None, 0
    _check(tmp_path, Op(fn, dtypes), args, ["QuantBatchMatmulV3"], tol=tol)


@pytest.mark.parametrize("case", ["perm_x1", "perm_x2_split", "fp16_scale_int8"])
def test_transpose_batchmatmul(tmp_path, case):
    b, m, k, n = 3, 7, 33, 10
    if case == "perm_x1":  # input (M, B, K)
        args = (torch.randn(m, b, k), torch.randn(b, k, n))
        fn = lambda x, w: npu.npu_transpose_batchmatmul(x, w, perm_x1=[1, 0, 2])  # noqa: E731
        dtypes, tol = None, 1e-4
    elif case == "perm_x2_split":  # weight (B, N, K), output (2, M, B * N / 2)
        args = (torch.randn(b, m, k), torch.randn(b, n, k))
        fn = lambda x, w: npu.npu_transpose_batchmatmul(  # noqa: E731
            x, w, perm_x2=[0, 2, 1], batch_split_factor=2)
        dtypes, tol = None, 1e-4
    else:  # fp16 in, fp32 scale per (batch, column), int8 (M, 1, B * N)
        args = (torch.randn(m, b, k), torch.randn(b, k, n), torch.rand(b * n) * 0.5)
        fn = lambda x, w, s: npu.npu_transpose_batchmatmul(  # noqa: E731
            x, w, scale=s, perm_x1=[1, 0, 2])
        dtypes, tol = (FP16, FP16, None), 0
    _check(tmp_path, Op(fn, dtypes), args, ["TransposeBatchMatMul"], tol=tol,
           int_step=1 if case == "fp16_scale_int8" else 0)


def test_dtype_cast(tmp_path):
    x = torch.randn(7, 33) * 100
    x[0, 0] = float("nan")

    def fn(x):
        return (npu.npu_dtype_cast(x, torch.int32), npu.npu_dtype_cast(x, torch.float16),
                npu._npu_dtype_cast(x, torch.bfloat16))
    _check(tmp_path, Op(fn), (x,), [], tol=0)


# ---- a W8A8 block, dynamic batch -------------------------------------------------------------

class W8A8Block(torch.nn.Module):
    """residual add + rms-norm + per-token int8 -> int8 GEMM with per-channel and
    per-token dequantisation, bf16 out."""

    def __init__(self, h=64, n=40):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.register_buffer("gamma", torch.randn(h, generator=g).to(BF16))
        self.register_buffer("smooth", (torch.rand(h, generator=g) + 0.5).to(BF16))
        self.register_buffer("w", torch.randint(-128, 128, (h, n), dtype=torch.int8, generator=g))
        self.register_buffer("wscale", torch.rand(n, generator=g) * 1e-2)

    def forward(self, x, residual):
        x, residual = x.to(BF16), residual.to(BF16)
        q, _, r, s, _ = npu.npu_add_rms_norm_dynamic_quant(x, residual, self.gamma,
                                                           smooth_scale1=self.smooth)
        y = npu.npu_quant_matmul(q, self.w, self.wscale, pertoken_scale=s,
                                 output_dtype=torch.bfloat16)
        return y.float(), r.float()


def test_w8a8_block_dynamic_batch(tmp_path):
    batch = torch.export.Dim("batch", min=2, max=64)
    args = (torch.randn(5, 64), torch.randn(5, 64))
    reruns = [(torch.randn(t, 64), torch.randn(t, 64)) for t in (3, 11)]
    # y is a bf16 dequantised product: one int8 step of the activation is ~1 % of it
    _check(tmp_path, W8A8Block(), args, ["AddRmsNormDynamicQuant", "QuantBatchMatmulV3"],
           tol=5e-2, dynamic_shapes={"x": {0: batch}, "residual": {0: batch}}, reruns=reruns)


# ---- what the export refuses ----------------------------------------------------------------

def test_unsupported_argument_names_operator_and_argument(tmp_path):
    x = torch.randn(7, 33)
    with pytest.raises(NotImplementedError, match=r"npu_dynamic_quant: argument 'quant_mode'"):
        op_sdk.export_onnx(Op(lambda x: npu.npu_dynamic_quant(x, quant_mode="pertensor")), (x,),
                           tmp_path / "m.onnx")
    h = 32
    args = (torch.randn(7, h), torch.randn(7, h), torch.randn(h))
    mod = Op(lambda a, b, g: npu.npu_add_rms_norm_dynamic_quant(a, b, g, y_dtype=torch.quint4x2),
             (FP16, FP16, FP16))
    with pytest.raises(NotImplementedError,
                       match=r"npu_add_rms_norm_dynamic_quant: argument 'y_dtype'"):
        op_sdk.export_onnx(mod, args, tmp_path / "m.onnx", composite_only=True)


def test_opset_below_18_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"argument 'opset_version' must be >= 18"):
        op_sdk.export_onnx(Op(lambda x: npu.npu_dynamic_quant(x)), (torch.randn(2, 8),),
                           tmp_path / "m.onnx", opset_version=17)


def test_operator_without_export_is_named(tmp_path):
    args = (torch.randn(8, 4), torch.tensor([[1], [5]]), torch.randn(2, 4))
    with pytest.raises(NotImplementedError, match=r"npu::npu_scatter_nd_update: the operator"):
        op_sdk.export_onnx(Op(lambda x, i, u: npu.npu_scatter_nd_update(x, i, u)), args,
                           tmp_path / "m.onnx")


def test_import_stays_free_of_onnx():
    import subprocess
    import sys

    code = ("import sys, op_sdk; op_sdk.export_onnx; "
            "print([m for m in ('onnx', 'onnxscript', 'onnx_ir') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout
