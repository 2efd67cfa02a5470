"""npu_format_cast (both overloads), npu_format_cast_ and get_npu_format: the values kept, the
format recorded for the storage (views, .data, detach and weak references of it see it), the
defaults by dims, FRACTAL_NZ on fewer than 2 dims as ND, the refusals, autograd, torch.compile
(the cast traced, get_npu_format a graph break, the in-place cast functionalized with a
warning), and TorchAir's ``use_internal_format_weight`` pattern; the registry-wide tables."""

import gc
import warnings
import weakref

import pytest
import torch

from op_sdk.ops import format_cast as fc
from op_sdk.ops.format_cast import Format, get_npu_format
from tests.ops._helpers import T, bf16, fp16, fp32, npu, rand, strided

SCHEMAS = [
    "npu_format_cast(Tensor input, int acl_format, *, int? customize_dtype=None, "
    "int? input_dtype=None) -> Tensor",
    "npu_format_cast.Tensor(Tensor input, Tensor dst, *, int? customize_dtype=None, "
    "int? input_dtype=None) -> Tensor",
    "npu_format_cast_.acl_format(Tensor(a!) input, int acl_format, *, int? customize_dtype=None, "
    "int? input_dtype=None) -> Tensor(a!)",
    "get_npu_format(Tensor input) -> int",
]

_WHY = ("TorchAir has no converter of it: a weight's format is set before the graph, which "
        "reads the formats of its inputs")
NO_GE_CONVERTER = {
    "npu::npu_format_cast": _WHY,
    "npu::npu_format_cast.Tensor": _WHY,
    "npu::npu_format_cast_.acl_format": _WHY,
    "npu::get_npu_format": "returns an int: a graph break under torch.compile, never in a graph",
}

_TORCH_NPUS = "torch_npu defines it in every version, so a binding of op_sdk's would never register"
NO_ACLNN_BINDING = {f"npu::{name}": _TORCH_NPUS for name in (
    "npu_format_cast", "npu_format_cast.Tensor", "npu_format_cast_.acl_format", "get_npu_format")}

NZ, ND, NCHW = Format.FRACTAL_NZ, Format.ND, Format.NCHW


def samples():
    return [
        ("npu_format_cast", (rand(8, 16, dtype=bf16), 29), {}),
        ("npu_format_cast", (rand(2, 3, 4, 5), 3), {"customize_dtype": 3}),
        ("npu_format_cast.Tensor", (rand(5, 7, dtype=fp16), rand(2, 2)), {}),
        ("npu_format_cast_.acl_format", (rand(6, 4), 29), {}),
        ("get_npu_format", (rand(3, 4),), {}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel and its fake must give the same output shapes,
    dtypes and strides (torch_npu 2.13.0 has no Meta function for these: tests/npu/real)."""
    cases = []
    for shape in [(12,), (8, 16), (3, 15, 17), (2, 3, 4, 5)]:
        for dt in (fp32, fp16, bf16, torch.int8):
            x = rand(*shape).to(dt)
            cases.append(("npu_format_cast", (x, 29), {}))
            cases.append(("npu_format_cast.Tensor", (x, rand(2, 2)), {"customize_dtype": 3}))
            cases.append(("npu_format_cast_.acl_format", (x, 2), {}))
        cases.append(("get_npu_format", (rand(*shape),), {}))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("format/unknown", "npu_format_cast", (T(4, 8), 7), {}, "acl_format", RuntimeError),
    ("format/undefined", "npu_format_cast", (T(4, 8), -1), {}, "acl_format", RuntimeError),
    ("format/nc", "npu_format_cast", (T(4, 8), 35), {}, "acl_format", RuntimeError),
    ("format/customize-dtype", "npu_format_cast", (T(4, 8), 29), {"customize_dtype": 99}, "customize_dtype",
     RuntimeError),
    ("format/input-dtype", "npu_format_cast", (T(4, 8), 29), {"input_dtype": 400}, "input_dtype", RuntimeError),
    ("format/inplace-unknown", "npu_format_cast_.acl_format", (T(4, 8), 12), {}, "acl_format", RuntimeError),
    ("format/like-customize-dtype", "npu_format_cast.Tensor", (T(4, 8), T(2, 2)), {"customize_dtype": 2},
     "customize_dtype", RuntimeError),
]

NO_CONSTRAINTS = {"npu::get_npu_format": "it reads any tensor's format (torch_npu refuses a tensor "
                                          "off the NPU, where op_sdk records formats on every device)"}


@pytest.mark.parametrize("dtype", [fp32, fp16, bf16, torch.int8, torch.int32])
@pytest.mark.parametrize("shape", [(8, 16), (15, 17), (3, 15, 17), (64, 128)])
def test_cast_keeps_values_and_records_the_format(dtype, shape):
    x = rand(*shape).mul(50).to(dtype)
    nz = npu.npu_format_cast(x, 29)
    assert torch.equal(nz, x) and nz.shape == x.shape and nz.dtype == dtype
    assert nz.data_ptr() != x.data_ptr()  # a new tensor
    assert get_npu_format(nz) == NZ and get_npu_format(x) == ND  # the input keeps its own
    back = npu.npu_format_cast(nz, 2)
    assert get_npu_format(back) == ND and torch.equal(back, x)


def test_defaults_by_dims_and_the_enum():
    assert [fc.recorded_format(torch.empty([1] * d)) for d in range(7)] == [2, 2, 2, 2, 0, 30, 2]
    assert get_npu_format(torch.ones(2, 2)) == 2 and isinstance(get_npu_format(torch.ones(2)), Format)
    assert npu.get_npu_format(torch.ones(2, 3, 4, 5)) == 0
    assert str(Format.FRACTAL_NZ) == "FRACTAL_NZ" and Format.NCHW.value == 0 and Format.NHWC.value == 1


def test_nz_on_fewer_than_two_dims_is_nd():
    assert get_npu_format(npu.npu_format_cast(torch.empty(12), 29)) == ND
    assert get_npu_format(npu.npu_format_cast(torch.tensor(3.0), 29)) == ND
    t = torch.empty(12)
    npu.npu_format_cast_(t, 29)
    assert get_npu_format(t) == ND


@pytest.mark.parametrize("fmt", sorted(fc.BASE_FORMAT))
def test_every_known_format_is_recorded(fmt):
    out = npu.npu_format_cast(rand(2, 3, 4, 5), int(fmt))
    assert get_npu_format(out) == fmt


def test_the_record_belongs_to_the_storage():
    nz = npu.npu_format_cast(rand(16, 32, dtype=fp16), 29)
    for view in (nz[1:], nz.t(), nz.view(-1), nz.data, nz.detach(), nz[::2, 3:]):
        assert get_npu_format(view) == NZ
    other = torch.empty(0, dtype=fp16).set_(nz.untyped_storage(), 0, (8,), (1,))
    assert get_npu_format(other) == NZ  # another tensor object on the same storage
    ref = weakref.ref(nz.untyped_storage())
    n = len(fc._RECORDS)
    del nz, view, other
    gc.collect()
    assert ref() is None and len(fc._RECORDS) == n - 1  # the record goes with the storage


def test_layouts_empty_and_nonfinite():
    x = strided(rand(9, 40, dtype=bf16))
    out = npu.npu_format_cast(x, 29)
    assert torch.equal(out, x) and out.stride() == torch.empty_like(x).stride()
    e = rand(1, 40).expand(5, 40)  # stride 0: a dense copy
    out = npu.npu_format_cast(e, 29)
    assert torch.equal(out, e) and out.is_contiguous() and get_npu_format(out) == NZ
    out = npu.npu_format_cast(torch.empty(0, 5, dtype=fp16), 29)
    assert out.shape == (0, 5) and get_npu_format(out) == NZ
    x = torch.tensor([[float("nan"), float("inf")], [-float("inf"), -0.0]])
    out = npu.npu_format_cast(x, 29)
    assert torch.equal(out.view(torch.int32), x.view(torch.int32))  # bit for bit, NaN included


def test_tensor_overload_takes_dsts_format():
    dst = npu.npu_format_cast(rand(8, 16), 29)
    out = npu.npu_format_cast(rand(4, 4, dtype=bf16), dst)
    assert get_npu_format(out) == NZ
    assert get_npu_format(npu.npu_format_cast(out, torch.ones(2, 3, 4, 5))) == NCHW  # unrecorded: its default


def test_inplace_records_and_returns_the_input():
    t = rand(15, 17, dtype=fp16)
    before = t.clone()
    r = npu.npu_format_cast_(t, 29)
    assert r is t and get_npu_format(t) == NZ and torch.equal(t, before)
    npu.npu_format_cast_(t, Format.ND)
    assert get_npu_format(t) == ND and torch.equal(t, before)
    w = torch.ones(2, 2)
    npu.npu_format_cast_(w, 0)  # a base format on any dims, as torch_npu's test does
    assert get_npu_format(w) == NCHW


def test_customize_and_input_dtype_change_no_value():
    x = torch.randint(0, 100, (15, 17), dtype=torch.int32)
    out = npu.npu_format_cast(x, 29, customize_dtype=3)
    assert torch.equal(out, x) and get_npu_format(out) == NZ
    packed = torch.randint(-2**31, 2**31 - 1, (4, 8), dtype=torch.int32)
    out = npu.npu_format_cast(packed, 29, customize_dtype=3, input_dtype=285)  # int4 x 8 per word
    assert torch.equal(out, packed)


def test_autograd_passes_the_gradient():
    a = rand(4, 8, grad=True)
    b = npu.npu_format_cast(a, 29)
    assert b.requires_grad
    (b * torch.arange(8.0)).sum().backward()
    assert torch.equal(a.grad, torch.arange(8.0).expand(4, 8))
    a.grad = None
    npu.npu_format_cast(a, get_npu_format(a)).sum().backward()  # the same-format cast too
    assert torch.equal(a.grad, torch.ones(4, 8))


def test_compiled_cast_records_its_result_dynamic_shapes():
    f = torch.compile(lambda t: npu.npu_format_cast(t, 29) * 2, fullgraph=True, dynamic=True)
    for rows in (3, 9):
        x = rand(rows, 7)
        out = npu.npu_format_cast(f(x), get_npu_format(torch.empty(0)))
        assert torch.equal(out, x * 2)
    cast = torch.compile(lambda t: npu.npu_format_cast(t, 29), fullgraph=True, dynamic=True)
    assert get_npu_format(cast(rand(5, 6))) == NZ  # the compiled call ran the kernel


def test_get_npu_format_is_a_graph_break_that_reads_the_real_record():
    def f(t, w):
        return t + npu.get_npu_format(w)

    w = npu.npu_format_cast(rand(4, 4), 29)
    assert torch.equal(torch.compile(f)(torch.zeros(2), w), torch.full((2,), 29.0))
    with pytest.raises(Exception, match="non-Tensor"):  # fullgraph: no break allowed, said
        torch.compile(lambda t, w: t + npu.get_npu_format(w), fullgraph=True)(torch.zeros(2), w)


def test_compiled_inplace_cast_keeps_values_and_warns_it_records_nothing():
    def f(t):
        npu.npu_format_cast_(t, 29)
        return t + 1

    t = rand(3, 4)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = torch.compile(f, fullgraph=True)(t)
    assert torch.equal(out, t + 1)
    assert any("records no format" in str(w.message) for w in seen)


def test_use_internal_format_weight_pattern():
    """TorchAir's experimental use_internal_format_weight / vllm-ascend: every Linear weight
    cast to FRACTAL_NZ through .data, read back, and the model still computes the same."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    x = rand(3, 16)
    want = model(x)
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            m.weight.data = npu.npu_format_cast(m.weight.data, 29)
    assert all(get_npu_format(m.weight) == NZ for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert get_npu_format(model[0].bias) == ND
    torch.testing.assert_close(model(x), want, rtol=0, atol=0)
    torch.testing.assert_close(torch.compile(model)(x), want)


def test_use_internal_format_weight_records_torchairs_formats():
    """TorchAir's use_internal_format_weight: nn.Linear (and op_sdk's W8A8) weights become
    FRACTAL_NZ, a float16 nn.Conv2d with one group FRACTAL_Z, the others unchanged; the values
    and the model's output stay (CPU weights are cast here, where TorchAir raises)."""
    import op_sdk

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
    convs = torch.nn.ModuleList([torch.nn.Conv2d(4, 4, 3).half(),
                                 torch.nn.Conv2d(4, 4, 3, groups=2).half(),
                                 torch.nn.Conv2d(4, 4, 3)])
    w8 = op_sdk.quantize_w8a8(torch.nn.Sequential(torch.nn.Linear(8, 16)), skip=())
    x = torch.randn(3, 8)
    want, want_w8 = model(x), w8(x.bfloat16())
    before = [c.weight.detach().clone() for c in convs]
    for m in (model, convs, w8):
        assert op_sdk.use_internal_format_weight(m) is None
    fmt = get_npu_format
    assert [int(fmt(m.weight)) for m in model] == [29, 29]
    assert [int(fmt(c.weight)) for c in convs] == [4, 0, 0]
    assert int(fmt(w8[0].weight)) == 29
    assert torch.equal(model(x), want) and torch.equal(w8(x.bfloat16()), want_w8)
    assert all(torch.equal(c.weight, b) for c, b in zip(convs, before))


def test_npu_format_cast_via_cpu_is_the_cast():
    import op_sdk

    x = torch.randn(4, 6)
    y = op_sdk.npu_format_cast_via_cpu(x, 29)
    assert torch.equal(y, x) and int(get_npu_format(y)) == 29
