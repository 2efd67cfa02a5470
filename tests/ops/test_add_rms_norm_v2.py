"""npu_add_rms_norm_v2 (in place) and npu_add_rms_norm_v2_functional: npu_add_rms_norm's
results, bit for bit, as (rstd, y, x) or written into x1 (y) and x2 (x); under torch.compile
the in-place call is functionalized into the twin and written back; the registry-wide tables."""

import pytest
import torch

from tests.ops._helpers import T, assert_bits_equal as _bits, bad, bf16, fp16, fp32, npu, rand, strided, zeros

SCHEMAS = [
    "npu_add_rms_norm_v2(Tensor(a!) x1, Tensor(b!) x2, Tensor gamma, float epsilon=1e-06) -> Tensor",
    "npu_add_rms_norm_v2_functional(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) "
    "-> (Tensor, Tensor, Tensor)",
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_add_rms_norm_v2_functional": "AddRmsNorm",
            "npu::npu_add_rms_norm_v2": "InplaceAddRmsNorm"}

DTYPES = [fp32, fp16, bf16]


def samples():
    h = 24
    return [
        ("npu_add_rms_norm_v2_functional", (rand(5, h, dtype=bf16), rand(5, h, dtype=bf16),
                                            rand(h, dtype=bf16)), {}),
        ("npu_add_rms_norm_v2_functional", (rand(2, 3, h), rand(2, 3, h), rand(3, h)), {"epsilon": 1e-5}),
        ("npu_add_rms_norm_v2", (rand(5, h, dtype=fp16), rand(5, h, dtype=fp16), rand(h, dtype=fp16)), {}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real)."""
    cases = []
    for lead in [(5,), (2, 3)]:
        for dt in DTYPES:
            for name in ("npu_add_rms_norm_v2_functional", "npu_add_rms_norm_v2"):
                cases.append((name, (rand(*lead, 24, dtype=dt), rand(*lead, 24, dtype=dt),
                                     rand(24, dtype=dt)), {"epsilon": 1e-5}))
        cases.append(("npu_add_rms_norm_v2_functional", (rand(*lead, 4, 6, dtype=bf16),
                                                         rand(*lead, 4, 6, dtype=bf16),
                                                         rand(4, 6, dtype=bf16)), {}))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("v2f/x2-shape", "npu_add_rms_norm_v2_functional", (T(4, 8), T(3, 8), T(8)), {}, "x2", RuntimeError),
    ("v2f/x2-dtype", "npu_add_rms_norm_v2_functional", (T(4, 8), T(4, 8, dtype=fp16), T(8)), {}, "x2",
     RuntimeError),
    ("v2f/gamma-dtype", "npu_add_rms_norm_v2_functional", (T(4, 8, dtype=bf16), T(4, 8, dtype=bf16), T(8)), {},
     "gamma", RuntimeError),
    ("v2f/gamma-shape", "npu_add_rms_norm_v2_functional", (T(4, 8), T(4, 8), T(6)), {}, "gamma", RuntimeError),
    ("v2/gamma-shape", "npu_add_rms_norm_v2", (T(4, 8), T(4, 8), T(6)), {}, "gamma", RuntimeError),
]

BAD_CALLS = [
    bad("npu_add_rms_norm_v2_functional", "x2", zeros(4, 8), zeros(4, 7), zeros(8)),
    bad("npu_add_rms_norm_v2_functional", "gamma", zeros(4, 8), zeros(4, 8), zeros(8, dtype=fp16)),
    bad("npu_add_rms_norm_v2_functional", "x1", zeros(4, 8, dtype=torch.int32),
        zeros(4, 8, dtype=torch.int32), zeros(8, dtype=torch.int32)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,gdims", [((1, 96), 1), ((257, 96), 1), ((2, 3, 7), 1), ((4, 3, 7), 2)])
def test_is_add_rms_norm_reordered_and_written_in_place(dtype, shape, gdims):
    torch.manual_seed(0)
    x1, x2 = rand(*shape, dtype=dtype), rand(*shape, dtype=dtype)
    g = rand(*shape[len(shape) - gdims:], dtype=dtype)
    y, rstd, x = npu.npu_add_rms_norm(x1, x2, g, 1e-5)
    for got, want in zip(npu.npu_add_rms_norm_v2_functional(x1, x2, g, 1e-5), (rstd, y, x)):
        _bits(got, want)
    a, b = x1.clone(), x2.clone()
    r = npu.npu_add_rms_norm_v2(a, b, g, 1e-5)
    _bits(r, rstd)
    _bits(a, y)
    _bits(b, x)


def test_strided_stride_zero_empty_and_nonfinite():
    torch.manual_seed(0)
    x1, x2, g = strided(rand(33, 40, dtype=bf16)), strided(rand(33, 40, dtype=bf16)), rand(40, dtype=bf16)
    y, rstd, x = npu.npu_add_rms_norm(x1, x2, g)
    for got, want in zip(npu.npu_add_rms_norm_v2_functional(x1, x2, g), (rstd, y, x)):
        _bits(got, want)
    stride_before = x1.stride()
    r = npu.npu_add_rms_norm_v2(x1, x2, g)  # written through the views' strides
    assert x1.stride() == stride_before
    _bits(r, rstd)
    _bits(x1, y)
    _bits(x2, x)
    e = rand(1, 40, dtype=bf16).expand(5, 40)  # read: fine; written: refused
    _bits(npu.npu_add_rms_norm_v2_functional(e, e, g)[1], npu.npu_add_rms_norm(e, e, g)[0])
    with pytest.raises(RuntimeError, match="npu_add_rms_norm_v2.*x1.*share memory"):
        npu.npu_add_rms_norm_v2(e, rand(5, 40, dtype=bf16), g)
    r = npu.npu_add_rms_norm_v2(torch.empty(0, 40, dtype=bf16), torch.empty(0, 40, dtype=bf16), g)
    assert r.shape == (0, 1) and r.dtype == fp32
    n1 = torch.tensor([[1.0, float("nan"), 2.0, 3.0], [1.0, float("inf"), 2.0, 3.0]])
    n2, gm = torch.ones(2, 4), torch.ones(4)
    want = npu.npu_add_rms_norm(n1, n2, gm)
    got = npu.npu_add_rms_norm_v2_functional(n1, n2, gm)
    for a, b in zip(got, (want[1], want[0], want[2])):
        torch.testing.assert_close(a, b, equal_nan=True, rtol=0, atol=0)
    assert torch.isnan(got[1][0]).all() and got[0][1].item() == 0.0


def test_in_place_call_requires_no_grad():
    a, b, g = rand(3, 8, grad=True), rand(3, 8), rand(8)
    with pytest.raises(RuntimeError, match="npu_add_rms_norm_v2.*x1.*requires grad"):
        npu.npu_add_rms_norm_v2(a, b, g)


@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_in_place_call_is_the_twin_and_writes_back(dynamic):
    """Under torch.compile the in-place call becomes the functional twin in the graph (as
    TorchAir's graphs hold it), its new values written back into x1 and x2."""
    seen = []

    def backend(gm, example_inputs):
        from torch._functorch.aot_autograd import aot_module_simplified

        def record(g, _):
            seen.append(g)
            return g
        return aot_module_simplified(gm, example_inputs, fw_compiler=record)

    def f(a, b, g):
        return npu.npu_add_rms_norm_v2(a, b, g) * 2

    cf = torch.compile(f, backend=backend, dynamic=dynamic, fullgraph=True)
    g = rand(16, dtype=bf16)
    for rows in (3, 5):
        x1, x2 = rand(rows, 16, dtype=bf16), rand(rows, 16, dtype=bf16)
        y, rstd, x = npu.npu_add_rms_norm(x1, x2, g)
        out = cf(x1, x2, g)
        _bits(out, rstd * 2)
        _bits(x1, y)
        _bits(x2, x)
    targets = {str(n.target) for gm in seen for n in gm.graph.nodes if n.op == "call_function"}
    assert "npu.npu_add_rms_norm_v2_functional.default" in targets
    assert "npu.npu_add_rms_norm_v2.default" not in targets
    # the new values of x1 and x2 leave the graph (AOTAutograd copies them back)
    assert all(len(gm.graph.output_node().args[0]) == 3 for gm in seen)


def test_onnx_export_runs_in_onnxruntime(tmp_path):
    """The functional twin exports as AddRmsNorm with its outputs reordered; the in-place call
    exports functionalized into it (tests/test_onnx_export.py's harness)."""
    from tests.test_onnx_export import Op, _check

    x1, x2, g = rand(3, 33), rand(3, 33), rand(33)
    _check(tmp_path, Op(lambda a, b, c: npu.npu_add_rms_norm_v2_functional(a, b, c)), (x1, x2, g),
           ["AddRmsNorm"])

    def inplace(a, b, c):
        a, b = a.clone(), b.clone()
        rstd = npu.npu_add_rms_norm_v2(a, b, c)
        return rstd, a, b
    _check(tmp_path, Op(inplace), (x1, x2, g), ["AddRmsNorm"])
