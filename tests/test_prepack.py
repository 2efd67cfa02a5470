"""The weight_prepack stage that experimental_config.frozen_parameter turns on: npu_quant_matmul
on a frozen 2-D weight becomes op_sdk::quant_matmul_packed on the weight packed once at
compile time (the packed operators themselves: tests/ops/test_quant_matmul_packed.py)."""

import torch
from torch import nn

import op_sdk
from tests.ops._helpers import rand_i8

npu = torch.ops.npu
bf16 = torch.bfloat16


class _Proj(nn.Module):
    """Two W8A8 projections: one on a buffer weight, one on a weight passed in."""

    def __init__(self, k=128, n=48):
        super().__init__()
        self.register_buffer("w", rand_i8(n, k))
        self.register_buffer("s", torch.rand(n) * 1e-2)

    def forward(self, x, w_in):
        q, qs = npu.npu_dynamic_quant(x)
        a = npu.npu_quant_matmul(q, self.w.t(), self.s, pertoken_scale=qs, output_dtype=bf16)
        b = npu.npu_quant_matmul(q, w_in.t(), self.s, pertoken_scale=qs, output_dtype=bf16)
        return a + b


def _compile(model, inputs, frozen, mode="max-autotune"):
    import torch._inductor.config as inductor_config

    torch._dynamo.reset()
    cfg = op_sdk.CompilerConfig()
    cfg.mode = mode
    cfg.experimental_config.frozen_parameter = frozen
    graphs = []
    cfg.post_grad_custom_post_pass = lambda gm, ex, c: graphs.append(
        [str(n.target) for n in gm.graph.nodes if n.op == "call_function"])
    backend = op_sdk.get_npu_backend(compiler_config=cfg)
    with torch.no_grad(), inductor_config.patch(fx_graph_cache=False):
        out = torch.compile(model, backend=backend, dynamic=False)(*inputs)
    return out, backend.last_report.graphs[0], graphs


def test_frozen_parameter_prepacks_buffer_weights():
    model = _Proj().eval()
    inputs = (torch.randn(5, 128, dtype=bf16), rand_i8(48, 128))
    out, report, graphs = _compile(model, inputs, frozen=True)
    assert report.match_count("weight_prepack") == 1  # the buffer, not the input
    targets = graphs[-1]
    assert targets.count("op_sdk.quant_matmul_packed.default") == 1
    assert targets.count("npu.npu_quant_matmul.default") == 1
    [miss] = report.misses("weight_prepack")
    assert miss.kind == "check" and miss.check == "frozen_weight"
    with torch.no_grad():
        assert torch.equal(out, model(*inputs))


def test_prepack_off_by_default_and_outside_max_autotune():
    model = _Proj().eval()
    inputs = (torch.randn(5, 128, dtype=bf16), rand_i8(48, 128))
    _, report, graphs = _compile(model, inputs, frozen=False)
    assert report.stage("weight_prepack").skipped == "experimental_config.frozen_parameter=False"
    assert "op_sdk.quant_matmul_packed.default" not in graphs[-1]
    _, report, _ = _compile(model, inputs, frozen=True, mode="reduce-overhead")
    assert report.stage("weight_prepack").skipped == "max-autotune only"


def test_prepacked_model_follows_a_replaced_weight():
    """Dynamo does not guard on a buffer's identity: after the buffer is replaced, the
    compiled graph gets the new tensor, and the packed operator sees it is not the
    weight it packed (frozen_parameter's contract covers in-place changes only)."""
    model = _Proj().eval()
    x, w_in = torch.randn(4, 128, dtype=bf16), rand_i8(48, 128)
    torch._dynamo.reset()
    cfg = op_sdk.CompilerConfig()
    cfg.experimental_config.frozen_parameter = True
    compiled = torch.compile(model, backend=op_sdk.get_npu_backend(compiler_config=cfg),
                             dynamic=False)
    import torch._inductor.config as inductor_config

    with torch.no_grad(), inductor_config.patch(fx_graph_cache=False):
        compiled(x, w_in)
        model.w = rand_i8(48, 128)
        assert torch.equal(compiled(x, w_in), model(x, w_in))


def test_demo_model_prepacks_every_projection():
    from op_sdk.app.models import DecoderConfig, DeepSeekW8A8

    model = DeepSeekW8A8(DecoderConfig(layers=2, hidden=256, heads=2, intermediate=256,
                                       vocab=128)).eval()
    ids = model.example_tokens(1, 3)
    out, report, graphs = _compile(model, (ids,), frozen=True)
    # 4 projections per layer; the fp32 head on MKL's packed GEMM
    assert report.match_count("weight_prepack", "npu_quant_matmul") == 8
    assert report.match_count("weight_prepack", "mm") == 1
    assert "npu.npu_quant_matmul.default" not in graphs[-1]
    assert "aten.mm.default" not in graphs[-1]
    assert graphs[-1].count("mkl._mkl_linear.default") == 1
    assert not report.misses("weight_prepack")
    ref, _, _ = _compile(model, (ids,), frozen=False)
    # the projections are bit for bit the same; the head sums in another order
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
