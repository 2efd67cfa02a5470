"""op_sdk beside the real torch_npu (run by tests/npu/test_torch_npu_real.py in the
stubbed environment): the import works in every order, op_sdk defines nothing torch_npu
defines, every C++ kernel registers beside torch_npu's (the signature probe), every npu
operator has op_sdk's CPU kernel, every schema equals torch_npu's, and over a grid of
calls (the ``meta_grid()`` of every tests/ops slice) op_sdk's CPU outputs, op_sdk's fakes
and torch_npu's Meta functions agree on shapes, dtypes and strides."""

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch_npu

import op_sdk
from op_sdk import _native
from tests.ops import gather
from tests.ops._helpers import relayout, significant_strides

from tests.npu.real.conftest import TORCH_NPU_DEFINES, TORCH_NPU_META  # noqa: E402

# the npu operators of op_sdk that torch_npu defines too; those it lacks op_sdk owns
NPU_OPS = [o for o in op_sdk.registered_ops() if o.qualname in TORCH_NPU_DEFINES]
OWNED = [o for o in op_sdk.registered_ops() if o.namespace == "npu" and o.qualname not in TORCH_NPU_DEFINES]
CASES = gather("meta_grid")


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, **env))


ORDERS = ["import torch, torch_npu, op_sdk", "import torch_npu, op_sdk", "import op_sdk, torch_npu",
          "import op_sdk"]
AUTOLOADS = ["0", "1"]


@pytest.fixture(scope="module")
def import_orders():
    """Each import order in a fresh interpreter, with torch's device-backend autoload off and
    on, all at once (one process per core: each import of torch_npu and op_sdk takes about
    7 s): {(order, autoload): the finished process}."""
    from concurrent.futures import ThreadPoolExecutor

    def check(order, autoload):
        return _run(f"""
            {order}
            import sys, torch
            assert "torch_npu" in sys.modules
            assert torch.npu.is_available() is False
            import op_sdk
            bad = {{o.qualname: o.native_errors for o in op_sdk.registered_ops() if o.native_errors}}
            assert not bad, bad
            print("ok")
        """, TORCH_DEVICE_BACKEND_AUTOLOAD=autoload)

    cases = [(o, a) for o in ORDERS for a in AUTOLOADS]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return dict(zip(cases, pool.map(lambda c: check(*c), cases)))


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("autoload", AUTOLOADS)
def test_import_in_any_order_keeps_the_process_and_the_native_kernels(import_orders, order, autoload):
    out = import_orders[(order, autoload)]
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-4000:]


def test_torch_npu_is_real_and_owns_the_namespace():
    assert torch_npu.__version__.startswith("2.13.0")
    assert op_sdk.library.torch_npu_module() is torch_npu
    assert NPU_OPS
    for opdef in NPU_OPS:
        assert not opdef.owned, f"op_sdk defined {opdef.qualname}, which torch_npu defines"
    for opdef in OWNED:  # what torch_npu lacks, op_sdk defines
        assert opdef.owned, opdef.qualname


@pytest.mark.parametrize("opdef", NPU_OPS, ids=lambda o: o.name)
def test_meta_kernel_is_torch_npus(opdef):
    """op_sdk registers no Meta / fake function for an operator torch_npu defines with one;
    for one torch_npu defines without (npu_format_cast, get_npu_format), op_sdk's fake is
    its Meta kernel, so that torch.compile traces it."""
    dump = torch._C._dispatch_dump(opdef.qualname)
    meta = [line for line in dump.splitlines() if line.startswith("Meta")]
    assert meta, dump
    if opdef.qualname not in TORCH_NPU_META:
        assert opdef.name.startswith(("npu_format_cast", "get_npu_format")), opdef.qualname
        assert os.path.dirname(op_sdk.__file__) in "\n".join(meta), dump
        return
    assert os.path.dirname(op_sdk.__file__) not in "\n".join(meta), dump
    assert "torch_npu" in "\n".join(meta), dump


@pytest.mark.parametrize("opdef", NPU_OPS, ids=lambda o: o.name)
def test_schema_equals_torch_npus(opdef):
    ours = torch._C.parse_schema(f"{opdef.qualname}{opdef.schema[len(opdef.name):]}")
    theirs = opdef.op._schema
    assert str(ours) == str(theirs)


@pytest.mark.parametrize("opdef", NPU_OPS, ids=lambda o: o.name)
def test_every_npu_op_has_op_sdks_cpu_kernel(opdef):
    devices = opdef.kernel_devices()
    want = "native" if "cpu" in opdef.native else "python" if "cpu" in opdef.kernels else "reference"
    assert devices.get("cpu") == want, devices
    assert not opdef.native_errors
    assert torch._C._dispatch_has_kernel_for_dispatch_key(opdef.qualname, "CPU")


def test_signature_probe_every_native_kernel_registers_beside_torch_npu():
    """Each C++ kernel of op_sdk._C, registered through a runtime library next to
    torch_npu's kernels, one operator at a time: no operator reports an error."""
    native = _native.native_ops()
    assert {(o.namespace, o.name) for o in op_sdk.registered_ops() if "cpu" in o.native} == set(native)
    for ns, name in native:
        opdef = op_sdk.get_op(name, ns)
        assert opdef.native_errors == {}, (name, opdef.native_errors)
        assert opdef.kernel_devices()["cpu"] == "native"


def _meta(x):
    return x.to("meta") if isinstance(x, torch.Tensor) else x


def _signature(out):
    """Shapes, dtypes and the strides of dims of size > 1 of each output (an int: itself)."""
    out = out if isinstance(out, (tuple, list)) else (out,)
    return [(tuple(t.shape), t.dtype, significant_strides(t)) if isinstance(t, torch.Tensor) else t
            for t in out]


@pytest.mark.parametrize("layout", ["contiguous", "permuted"])
@pytest.mark.parametrize("i", range(len(CASES)), ids=lambda i: f"{CASES[i][0]}-{i}")
def test_cpu_kernel_fake_and_torch_npu_meta_agree(i, layout):
    """...on shapes, dtypes and strides, with the inputs contiguous and dense-permuted (the
    strides Inductor takes from the Meta function when torch_npu is present)."""
    name, args, kwargs = CASES[i]
    # tensors of 3 dims and more, dims 0 and 1 swapped in memory: a 2-D transpose would
    # change what a packed int4 / float4 operand means (its layout is told by its strides)
    big = [k for k, v in list(enumerate(args)) + list(kwargs.items())
           if isinstance(v, torch.Tensor) and v.dim() >= 3]
    args, kwargs = relayout(args, kwargs, layout, which=big)
    opdef = op_sdk.get_op(name)
    cpu = _signature(opdef(*(a.clone() if isinstance(a, torch.Tensor) else a for a in args), **kwargs))
    margs, mkwargs = tuple(_meta(a) for a in args), {k: _meta(v) for k, v in kwargs.items()}
    theirs = _signature(opdef(*margs, **mkwargs))  # torch_npu's Meta kernel (op_sdk's fake where it has none)
    fake = opdef.fake or opdef.reference
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = _signature(fake(*margs, **mkwargs)) if opdef.functional is None else theirs
    assert cpu == theirs == ours, f"cpu {cpu}\ntorch_npu meta {theirs}\nop_sdk fake {ours}"


def test_documented_differences_from_torch_npus_meta():
    """Where op_sdk answers differently on purpose (README, "Answered differently")."""
    x = torch.randn(2, 6, 16)
    # int4 + perchannel: torch_npu 2.13.0's Meta gives x.shape[:-2] + [H, H/8]; its eager
    # kernel and op_sdk give x.shape[:-1] + [H/8]
    y, _ = torch.ops.npu.npu_dynamic_quant(x, quant_mode="perchannel", dst_type=torch.quint4x2)
    ym, _ = torch.ops.npu.npu_dynamic_quant(x.to("meta"), quant_mode="perchannel",
                                            dst_type=torch.quint4x2)
    assert tuple(y.shape) == (2, 6, 2) and tuple(ym.shape) == (2, 16, 2)
    # int32 output with div_mode=False: plain int32 of the input's shape, as the Meta says
    q = torch.ops.npu.npu_quantize(x, torch.ones(16), None, torch.int32, -1, False)
    qm = torch.ops.npu.npu_quantize(x.to("meta"), torch.ones(16, device="meta"), None,
                                    torch.int32, -1, False)
    assert q.shape == qm.shape == x.shape and q.dtype == qm.dtype == torch.int32


@pytest.mark.parametrize("k", [256, 1024])
@pytest.mark.parametrize("continuous", [False, True])
def test_a4w4_per_group_is_refused_by_torch_npus_meta(k, continuous):
    """Per-group A4W4 (torch_npu's documented row int32 / int32 / float32 scale
    (ceil(k/256), n) / float16 offset / float32 (m, 1) pertoken_scale / bfloat16 or float16
    output): op_sdk's CPU kernel and fake give (m, n); torch_npu 2.13.0's Meta refuses every
    such call, so the Meta grid cannot hold it (docs/operators.md, "Answered differently")."""
    from op_sdk.ops._common import pack_int4

    m, n, groups = 3, 24, k // 256
    q2 = torch.randint(-8, 8, (k, n), dtype=torch.int8)
    x1 = pack_int4(torch.randint(-8, 8, (m, k), dtype=torch.int8))
    x2 = pack_int4(q2.t().contiguous()).t() if continuous else pack_int4(q2)
    args = (x1, x2, torch.rand(groups, n))
    kwargs = {"offset": torch.randint(-7, 8, (groups, n)).to(torch.float16),
              "pertoken_scale": torch.rand(m, 1), "output_dtype": torch.bfloat16,
              "group_sizes": [1, 1, 256]}
    opdef = op_sdk.get_op("npu_quant_matmul")
    cpu = _signature(opdef(*args, **kwargs))
    margs, mkwargs = tuple(_meta(a) for a in args), {k: _meta(v) for k, v in kwargs.items()}
    assert cpu == _signature(opdef.fake(*margs, **mkwargs)) == [((m, n), torch.bfloat16, (n, 1))]
    # several groups: the (m, 1) pertoken_scale against the scale's k groups; one group:
    # the int32 inputs under a group_sizes with a value above 1
    rule = ("k dimension of scale and pertoken_scale must be equal" if groups > 1
            else "dtype of input must be")
    with pytest.raises(RuntimeError, match=rule):
        opdef(*margs, **mkwargs)  # dispatches to torch_npu's Meta kernel


def test_quant_matmul_float8_int64_scale_refusals_against_torch_npus_meta():
    """float8 / HiFloat8 inputs with an int64 scale (CANN's static T-C / T-T row of
    aclnnQuantMatmulV5; the grid holds the calls both answer): what torch_npu 2.13.0's Meta
    refuses, op_sdk refuses too, naming the argument; what the Meta answers although CANN
    documents no such row, op_sdk refuses naming the argument (docs/operators.md)."""
    from op_sdk.ops._common import pack_quant_scale
    from tests.ops.test_quant_matmul import _f8, _hif8

    opdef = op_sdk.get_op("npu_quant_matmul")
    f16, bf16, f32 = torch.float16, torch.bfloat16, torch.float32
    x1, x2 = _f8(5, 32, dtype=torch.float8_e4m3fn), _f8(32, 16, dtype=torch.float8_e5m2)
    hif8 = {"x1_dtype": 290, "x2_dtype": 290}
    scale = pack_quant_scale(torch.rand(16) + 0.5)
    both = [  # (kwargs, argument op_sdk names)
        ({"bias": torch.randn(1, 16), "output_dtype": f32}, "bias"),
        ({"bias": torch.randn(1, 1, 16), "output_dtype": f32}, "bias"),
        ({"bias": torch.randn(16).to(f16), "output_dtype": f16}, "bias"),
        ({"bias": torch.randn(16).to(bf16), "output_dtype": f32}, "bias"),
        ({"output_dtype": torch.int32}, "output_dtype"),
    ]
    for kwargs, arg in both:
        with pytest.raises(RuntimeError):
            opdef(_meta(x1), _meta(x2), _meta(scale), **{k: _meta(v) for k, v in kwargs.items()})
        with pytest.raises(RuntimeError, match=f"npu_quant_matmul: argument '{arg}'"):
            opdef(x1, x2, scale, **kwargs)
    meta_only = [  # (x1, x2, kwargs, the Meta's dtype, argument op_sdk names)
        (x1, x2, {"output_dtype": torch.float8_e4m3fn}, torch.float8_e4m3fn, "output_dtype"),
        (x1, x2, {"output_dtype": 291}, torch.float8_e5m2, "output_dtype"),
        (_hif8(5, 32), _hif8(32, 16), {**hif8, "output_dtype": 290}, torch.uint8, "output_dtype"),
        (x1, x2, {}, torch.int8, "output_dtype"),
        (x1, x2, {"pertoken_scale": torch.rand(5), "output_dtype": f16}, f16, "pertoken_scale"),
        (x1, x2, {"bias": torch.randn(16).to(bf16), "output_dtype": bf16}, bf16, "bias"),
        (x1, x2, {"bias": torch.randint(-9, 9, (16,), dtype=torch.int32), "output_dtype": f32},
         f32, "bias"),
        (x1, x2, {"offset": torch.randn(16), "output_dtype": f32}, f32, "offset"),
    ]
    for a, b, kwargs, dtype, arg in meta_only:
        mkwargs = {k: _meta(v) for k, v in kwargs.items()}
        assert _signature(opdef(_meta(a), _meta(b), _meta(scale), **mkwargs)) == [((5, 16), dtype, (16, 1))]
        with pytest.raises(RuntimeError, match=f"npu_quant_matmul: argument '{arg}'"):
            opdef(a, b, scale, **kwargs)
        with pytest.raises(RuntimeError, match=f"npu_quant_matmul: argument '{arg}'"):
            opdef.fake(_meta(a), _meta(b), _meta(scale), **mkwargs)


def test_quant_matmul_int8_int64_scale_refusals_against_torch_npus_meta():
    """int8 inputs with npu_trans_quant_param's int64 scale (aclnnQuantMatmulV4's UINT64 /
    INT64 rows; the grid holds the calls both answer, an offset tensor among them): an int32
    output both refuse, and a bfloat16 scale with an int8 / float16 output; a pertoken_scale
    and a float bias torch_npu 2.13.0's Meta answers and op_sdk refuses, naming the argument
    (docs/operators.md)."""
    from op_sdk.ops._common import pack_quant_scale
    from tests.ops._helpers import rand_i8

    opdef = op_sdk.get_op("npu_quant_matmul")
    f16, bf16, i8 = torch.float16, torch.bfloat16, torch.int8
    x1, x2 = rand_i8(5, 32), rand_i8(32, 16)
    scale = pack_quant_scale(torch.rand(16) / 100)
    for s in (scale, scale.view(torch.uint64)):
        with pytest.raises(RuntimeError):
            opdef(_meta(x1), _meta(x2), _meta(s), output_dtype=torch.int32)
        with pytest.raises(RuntimeError, match="npu_quant_matmul: argument 'output_dtype'"):
            opdef(x1, x2, s, output_dtype=torch.int32)
    for out in (None, i8, f16):  # a bfloat16 scale: bfloat16 / int32 outputs only
        bf = (torch.rand(16) / 100).to(bf16)
        kw = {"output_dtype": out} if out is not None else {}
        if out == f16:
            kw["pertoken_scale"] = torch.rand(5)
        with pytest.raises(RuntimeError):
            opdef(_meta(x1), _meta(x2), _meta(bf), **{k: _meta(v) if isinstance(v, torch.Tensor)
                                                      else v for k, v in kw.items()})
        for fn in (opdef, opdef.fake):
            with pytest.raises(RuntimeError, match="npu_quant_matmul: argument 'output_dtype'"):
                fn(x1, x2, bf, **kw)
    meta_only = [  # (kwargs, the Meta's dtype, argument op_sdk names)
        ({"pertoken_scale": torch.rand(5), "output_dtype": f16}, f16, "pertoken_scale"),
        ({"pertoken_scale": torch.rand(5), "output_dtype": bf16}, bf16, "pertoken_scale"),
        ({"bias": torch.randn(16), "output_dtype": f16}, f16, "bias"),
        ({"bias": torch.randn(16).to(bf16), "output_dtype": bf16}, bf16, "bias"),
    ]
    for kwargs, dtype, arg in meta_only:
        mkwargs = {k: _meta(v) for k, v in kwargs.items()}
        assert _signature(opdef(_meta(x1), _meta(x2), _meta(scale), **mkwargs)) == [((5, 16), dtype, (16, 1))]
        with pytest.raises(NotImplementedError, match=f"npu_quant_matmul: argument '{arg}'"):
            opdef(x1, x2, scale, **kwargs)
        with pytest.raises(NotImplementedError, match=f"npu_quant_matmul: argument '{arg}'"):
            opdef.fake(_meta(x1), _meta(x2), _meta(scale), **mkwargs)


@pytest.mark.parametrize("div_mode", [True, False])
def test_npu_quantize_float8_targets_differ_from_torch_npus_meta(div_mode):
    """float8 / HiFloat8 `dtype` targets of npu_quantize: torch_npu 2.13.0's Meta answers a
    float8 (23 / 291, 24 / 292) or uint8 (HiFloat8, 290) tensor in both modes; op_sdk refuses
    them naming `dtype`, since torch_npu documents none of them for npu_quantize and its
    eager kernel and CANN disagree with the Meta (docs/operators.md, "Answered
    differently")."""
    x, s = torch.randn(4, 16), torch.rand(16) + 0.5
    for code, meta_dtype in [(torch.float8_e5m2, torch.float8_e5m2), (291, torch.float8_e5m2),
                             (torch.float8_e4m3fn, torch.float8_e4m3fn),
                             (292, torch.float8_e4m3fn), (290, torch.uint8)]:
        out = torch.ops.npu.npu_quantize(x.to("meta"), s.to("meta"), None, code, -1, div_mode)
        assert out.shape == x.shape and out.dtype == meta_dtype
        with pytest.raises(RuntimeError, match="npu_quantize: argument 'dtype' must be one of"):
            torch.ops.npu.npu_quantize(x, s, None, code, -1, div_mode)


def test_npu_dtype_cast_differs_from_torch_npus_meta():
    """Where op_sdk's npu_dtype_cast refuses what torch_npu 2.13.0's Meta answers
    (docs/operators.md, "Answered differently"): input_dtype=torch_npu.int4 (285), which
    CANN's aclnnCast takes as an output only, and casts outside aclnnCast's documented
    Ascend 950 paths."""
    u = torch.zeros(4, 6, dtype=torch.uint8)
    out = torch.ops.npu.npu_dtype_cast(u.to("meta"), 6, 285)
    assert out.shape == u.shape and out.dtype == torch.float32
    with pytest.raises(RuntimeError, match="npu_dtype_cast: argument 'input_dtype'"):
        torch.ops.npu.npu_dtype_cast(u, 6, 285)
    f8 = torch.zeros(4, 6, dtype=torch.float8_e4m3fn)
    out = torch.ops.npu.npu_dtype_cast(f8.to("meta"), 3)
    assert out.shape == f8.shape and out.dtype == torch.int32
    with pytest.raises(RuntimeError, match="npu_dtype_cast: argument 'dtype'"):
        torch.ops.npu.npu_dtype_cast(f8, 3)


def test_torch_npus_format_api_runs_on_cpu_tensors():
    """torch_npu's own Python API (npu_format_cast, get_npu_format, Format), on CPU tensors,
    runs op_sdk's kernels: vllm-ascend's weight cast and read-back, eager and compiled."""
    w = torch.randn(16, 32, dtype=torch.bfloat16)
    nz = torch_npu.npu_format_cast(w, torch_npu.Format.FRACTAL_NZ)
    assert torch_npu.get_npu_format(nz) == torch_npu.Format.FRACTAL_NZ and torch.equal(nz, w)
    assert torch_npu.get_npu_format(w) == torch_npu.Format.ND
    torch_npu.npu_format_cast_(w, 29)
    assert torch_npu.get_npu_format(w.t()) == torch_npu.Format.FRACTAL_NZ
    f = torch.compile(lambda t: torch_npu.npu_format_cast(t, 2) * 2, fullgraph=True, dynamic=True)
    assert torch.equal(f(nz), w * 2)  # traced with op_sdk's fake (torch_npu has no Meta of it)
