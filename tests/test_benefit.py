"""The fusion benefit model: its arithmetic (op_sdk.benefit), and the fusion passes
applying a match only where it predicts a saving (op_sdk/patterns/benefit.py), with the
prediction in the report and the refusals as near misses of kind "benefit"."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from op_sdk.benefit import (DEVICE_MODELS, DeviceModel, Side, Tiling, device_model, predict,
                            tiling_loss)
from op_sdk.patterns import get_fusion
from tests.fusion_harness import compile_and_run, config

npu = torch.ops.npu

# a device with round numbers: 1 GB/s, 1 us per launch, 4 cores, 1 KiB local buffer
TOY = DeviceModel("toy", 1e9, 1e-6, 4, 1024)


# ---- the model's arithmetic -------------------------------------------------------------

def test_side_seconds_are_bytes_over_bandwidth_plus_launches():
    assert Side(1000, 2).seconds(TOY) == pytest.approx(1000 / 1e9 + 2e-6)


def test_fusion_saving_bytes_and_a_launch():
    before, after = Side(3000, 2), Side(2000, 1)
    p = predict(before, after, TOY, Tiling(rows=8, cols=8, itemsize=2))
    # 8 rows >= 4 cores, 8 * 4 B * 4 buffers = 128 B <= 1 KiB: no tiling loss
    assert p.tiling_loss == 0.0
    assert p.benefit == pytest.approx(1000 / 1e9 + 1e-6)
    assert p.accepted and p.reason == ""
    assert p.as_dict()["bytes_before"] == 3000 and p.as_dict()["launches_after"] == 1


def test_idle_cores_cost_the_fused_kernel():
    after = Side(2000, 1)
    # 2 rows on 4 cores: only 2 stream, the fused kernel takes 4/2 = 2x its stream time
    loss = tiling_loss(after, Tiling(rows=2, cols=8, itemsize=2), TOY)
    assert loss == pytest.approx(2000 / 1e9 * (4 / 2 - 1))
    # one row: 4x
    assert tiling_loss(after, Tiling(1, 8, 2), TOY) == pytest.approx(2000 / 1e9 * 3)


def test_small_work_runs_on_few_cores_either_way():
    """Elementwise kernels split no finer than ``grain`` elements: a one-row decode step
    too small to split loses nothing to the row split."""
    coarse = DeviceModel("coarse", 1e9, 1e-6, 4, 1 << 20, grain=64)
    after = Side(2000, 1)
    assert tiling_loss(after, Tiling(rows=1, cols=64), coarse) == 0.0  # 1 core either way
    # 128 elements: the unfused kernels take 2 cores, the fused one row on 1
    assert tiling_loss(after, Tiling(rows=1, cols=128), coarse) == pytest.approx(2000 / 1e9)
    # 4 rows of 64: 4 cores both ways
    assert tiling_loss(after, Tiling(rows=4, cols=64), coarse) == 0.0
    assert DeviceModel.measured_cpu.__wrapped__ is not None  # lazily measured (lru_cache)


def test_spilled_rows_are_read_twice():
    # 128 cols * max(2, 4) B * 4 buffers = 2 KiB > 1 KiB: the 8 rows are read again
    loss = tiling_loss(Side(4096, 1), Tiling(rows=8, cols=128, itemsize=2), TOY)
    assert loss == pytest.approx(8 * 128 * 2 / 1e9)
    # 64 cols: 1 KiB, fits
    assert tiling_loss(Side(4096, 1), Tiling(rows=8, cols=64, itemsize=2), TOY) == 0.0


def test_threshold_is_strict_and_named_in_the_reason():
    before, after = Side(1000, 2), Side(1000, 1)  # saves exactly one launch: 1 us
    assert predict(before, after, TOY, threshold=0.5e-6).accepted
    at = predict(before, after, TOY, threshold=1e-6)
    assert at.benefit == pytest.approx(1e-6)
    assert not predict(before, after, TOY, threshold=1.5e-6).accepted
    p = predict(before, after, TOY, threshold=2e-6)
    assert "threshold 2.00 us" in p.reason and "on toy" in p.reason
    # an equal-cost rewrite saves nothing: refused at threshold 0
    assert not predict(Side(1000, 1), Side(1000, 1), TOY).accepted


def test_unknown_device_is_an_error():
    with pytest.raises(ValueError, match="tpu"):
        device_model("tpu")


def test_import_measures_nothing_and_measurement_ignores_fake_mode():
    code = ("import op_sdk, op_sdk.benefit as b; "
            "print(b.DeviceModel.measured_cpu.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[-1] == "0"
    from torch._subclasses.fake_tensor import FakeTensorMode

    DeviceModel.measured_cpu.cache_clear()
    try:
        with FakeTensorMode():  # a compile's pattern pass runs under one
            cpu = DeviceModel.measured_cpu()
    finally:
        DeviceModel.measured_cpu.cache_clear()
    # fake copies take no time: a fake measurement gives an impossible bandwidth
    assert 1e8 < cpu.bandwidth < 1e12 and 0 < cpu.launch_seconds < 1e-3


# ---- on a real default fusion ------------------------------------------------------------

FUSION = get_fusion("add_rms_norm_cast")
VARIANT = FUSION.variant("npu_dtype_cast+x_out")  # (y float32, y, x_out) out, no view


def _compile(**options):
    """The fusion compiled with the benefit model deciding it (``fusion_benefit_scope``
    "all"; by default it decides the native_ops rewrites only)."""
    options.setdefault("fusion_benefit_scope", "all")
    inputs = FUSION.inputs(VARIANT, torch.float16, tokens=7, hidden=32, lead=(2,))
    cfg = config(**{f"experimental_config__{k}": v for k, v in options.items()})
    return compile_and_run(VARIANT.search_fn, inputs, cfg), inputs


def _hand_bytes():
    """x1, x2: (2, 7, 32) fp16; gamma: (32,) fp16; rstd: (2, 7, 1) fp32."""
    n = 2 * 7 * 32
    x, gamma, rstd, y32 = n * 2, 32 * 2, 2 * 7 * 4, n * 4
    # npu_add_rms_norm reads x1, x2, gamma, writes y, rstd, x_out; the cast reads y and
    # writes the float32 y
    before = (2 * x + gamma) + (x + rstd + x) + x + y32
    # npu_add_rms_norm_cast reads x1, x2, gamma and writes the outputs used: y float32,
    # y, x_out (its rstd is not used)
    after = (2 * x + gamma) + y32 + x + x
    return before, after


def test_default_config_fires_with_a_positive_predicted_benefit():
    result, _ = _compile()
    report = result.report
    assert report.match_count("add_rms_norm_cast", VARIANT.name) == 1, report.summary()
    assert npu.npu_add_rms_norm_cast.default in result.targets
    [p] = report.graphs[0].predicted("add_rms_norm_cast")
    before, after = _hand_bytes()
    assert (p["bytes_before"], p["bytes_after"]) == (before, after) == (6392, 5440)
    assert (p["launches_before"], p["launches_after"]) == (2, 1)
    assert p["benefit"] > 0 and p["accepted"] and p["device"] == "cpu"
    # summed per fusion in explain()'s table and shown in its text
    import op_sdk

    [row] = [r for r in op_sdk.explain(result.backend).table()
             if r["pattern"] == "add_rms_norm_cast"]
    assert row["predicted"] == 1 and row["bytes_before"] == before
    assert row["benefit_us"] == pytest.approx(p["benefit"] * 1e6) and row["rejected"] == 0
    assert f"predicted {before:,} -> {after:,} B, 2 -> 1 launches" in report.summary()


def test_huge_threshold_refuses_and_reports_the_threshold():
    result, _ = _compile(fusion_benefit_threshold_us=1e6)
    report = result.report
    assert report.match_count() == 0, report.summary()
    assert npu.npu_add_rms_norm.default in result.targets
    assert npu._npu_dtype_cast.default in result.targets
    assert npu.npu_add_rms_norm_cast.default not in result.targets
    [miss] = report.misses("add_rms_norm_cast", kind="benefit")
    assert miss.check == "fusion_benefit_threshold_us"
    assert "threshold 1000000.00 us" in miss.reason and "on cpu" in miss.reason
    before, after = _hand_bytes()
    assert f"{before} B, 2 launches" in miss.reason and f"{after} B, 1 launches" in miss.reason
    import op_sdk

    [row] = [r for r in op_sdk.explain(result.backend).table()
             if r["pattern"] == "add_rms_norm_cast"]
    assert row["matches"] == 0 and row["rejected"] == 1


def test_threshold_none_is_todays_behaviour():
    result, _ = _compile(fusion_benefit_threshold_us=None)
    assert result.report.match_count("add_rms_norm_cast") == 1
    assert npu.npu_add_rms_norm_cast.default in result.targets
    assert result.report.graphs[0].predicted() == []  # no model, no prediction
    assert not result.report.misses(kind="benefit")
    # and a huge threshold would have refused it: None really turns the model off
    assert _compile(fusion_benefit_threshold_us=1e6)[0].report.match_count() == 0


def test_by_default_the_fusions_apply_as_torchair_applies_them():
    """With the default scope the model decides the native_ops rewrites only: the default
    fusion applies (no prediction, no refusal) where the model, deciding it, refuses."""
    result, _ = _compile(fusion_benefit_scope="native_ops", fusion_benefit_threshold_us=1e6)
    assert result.report.match_count("add_rms_norm_cast") == 1
    assert npu.npu_add_rms_norm_cast.default in result.targets
    assert result.report.graphs[0].predicted() == [] and not result.report.misses(kind="benefit")
    import op_sdk

    assert op_sdk.CompilerConfig().experimental_config.fusion_benefit_scope.value == "native_ops"
    assert _compile(fusion_benefit_threshold_us=1e6)[0].report.match_count() == 0


def test_npu_device_prices_on_the_npu_model():
    result, _ = _compile(fusion_benefit_device="npu")
    [p] = result.report.graphs[0].predicted("add_rms_norm_cast")
    before, after = _hand_bytes()
    npu_model = DEVICE_MODELS["npu"]
    # 14 rows of 32 on 48 cores: 48 / 14 times the fused kernel's stream time
    loss = after / npu_model.bandwidth * (48 / 14 - 1)
    expected = (before - after) / npu_model.bandwidth + npu_model.launch_seconds - loss
    assert p["device"] == "npu"
    assert p["tiling_loss"] == pytest.approx(loss)
    assert p["benefit"] == pytest.approx(expected)
    cpu = _compile()[0].report.graphs[0].predicted("add_rms_norm_cast")[0]
    assert cpu["device"] == "cpu" and not math.isclose(cpu["benefit"], p["benefit"])
    # a threshold between the NPU's predicted benefit and more refuses it there
    refused = _compile(fusion_benefit_device="npu",
                       fusion_benefit_threshold_us=expected * 1e6 + 0.01)[0]
    assert refused.report.match_count() == 0
    assert "on npu" in refused.report.misses(kind="benefit")[0].reason


def test_transpose_batchmatmul_counts_the_absorbed_transposes():
    """bmm -> transpose: the fused operator absorbs the output transpose (and the input
    one with perm_x1), each priced as a copy on the unfused side."""
    fusion = get_fusion("transpose_batchmatmul")
    variant = fusion.variant("transpose(bmm)")
    inputs = fusion.inputs(variant, torch.float16, batch=3, m=5, k=128, n=128)
    result = compile_and_run(variant.search_fn, inputs,
                             config(experimental_config__fusion_benefit_scope="all"))
    [p] = result.report.graphs[0].predicted("transpose_batchmatmul")
    x1, x2, y = 3 * 5 * 128 * 2, 3 * 128 * 128 * 2, 3 * 5 * 128 * 2
    assert p["bytes_after"] == x1 + x2 + y
    assert p["bytes_before"] == (x1 + x2 + y) + 2 * y  # the transpose: read + write
    assert (p["launches_before"], p["launches_after"]) == (2, 1)


# ---- options -----------------------------------------------------------------------------

@pytest.mark.parametrize("path,value", [
    ("fusion_benefit_threshold_us", "5us"),
    ("fusion_benefit_threshold_us", float("nan")),
    ("fusion_benefit_threshold_us", True),
    ("fusion_benefit_device", "tpu"),
    ("fusion_benefit_device", None),
    ("fusion_benefit_scope", "fusions"),
])
def test_invalid_option_values_name_the_option(path, value):
    import op_sdk

    cfg = op_sdk.CompilerConfig()
    with pytest.raises(ValueError, match=f"experimental_config.{path}"):
        setattr(cfg.experimental_config, path, value)


def test_valid_option_values_and_defaults():
    import op_sdk

    cfg = op_sdk.CompilerConfig()
    assert cfg.experimental_config.fusion_benefit_threshold_us.value == 0.0
    assert cfg.experimental_config.fusion_benefit_device.value == "auto"
    for v in (None, 0, 2.5):
        cfg.experimental_config.fusion_benefit_threshold_us = v
    for v in (-1.0, -3, float("inf"), True):  # a fusion must save time: no negative threshold
        with pytest.raises(ValueError, match="fusion_benefit_threshold_us"):
            cfg.experimental_config.fusion_benefit_threshold_us = v
    for d in ("auto", "cpu", "npu", "cuda"):
        cfg.experimental_config.fusion_benefit_device = d


def test_options_feed_the_cache_key():
    from op_sdk.compiler.dump import GraphDumper
    from op_sdk.compiler.pipeline import PassPipeline
    from op_sdk.compiler.report import CompileReport
    from op_sdk.patterns import PatternRegistry

    def uuid(cfg):
        pipe = PassPipeline(cfg, PatternRegistry("t"), GraphDumper(None, None))
        return pipe.inductor_config_patches(
            CompileReport(0, "max-autotune"))["post_grad_custom_pre_pass"].uuid()

    base = uuid(config("max-autotune"))
    keys = {base}
    for option, value in (("fusion_benefit_threshold_us", 3.0),
                          ("fusion_benefit_threshold_us", None),
                          ("fusion_benefit_device", "npu"),
                          ("fusion_benefit_scope", "all")):
        cfg = config("max-autotune", **{f"experimental_config__{option}": value})
        assert (f"experimental_config.{option}", value) in cfg.fingerprint()
        keys.add(uuid(cfg))
    assert None not in keys and len(keys) == 5
    assert uuid(config("max-autotune")) == base


# ---- op-sdk bench --fusions ---------------------------------------------------------------

def test_fusion_bench_predicts_from_the_pattern_pass_and_writes_results(tmp_path,
                                                                         monkeypatch):
    import json

    from op_sdk.app import fusion_bench

    monkeypatch.setattr(fusion_bench, "HIDDEN", 64)
    fusion = get_fusion("add_rms_norm_cast")
    variant = fusion_bench._variant(fusion)
    inputs = fusion.inputs(variant, torch.float16, tokens=7, hidden=32, lead=(2,))
    p = fusion_bench.predict_case(fusion, variant, inputs, "npu")
    # the variant's outputs are all used: the same bytes as in a compile (see above)
    assert p["device"] == "npu" and p["launches_before"] == 2 and p["launches_after"] == 1
    path = fusion_bench.write_fusion_bench(str(tmp_path / "f.json"), "op-sdk bench --fusions",
                                           rows=(2,), repeats=1, progress=False)
    results = json.loads(open(path).read())
    assert results["command"] == "op-sdk bench --fusions" and "load average" in \
        results["uptime_before"]
    assert results["machine"]["torch"] == torch.__version__
    rows = results["results"]
    from op_sdk.patterns import DEFAULT_FUSIONS

    assert {r["fusion"] for r in rows} == {f.name for f in DEFAULT_FUSIONS}
    for r in rows:
        assert r["measured_unfused_us"] > 0 and r["measured_fused_us"] > 0
        assert r["error_us"] == pytest.approx(r["predicted_benefit_us"]
                                              - r["measured_saved_us"])
    assert "add_rms_norm_cast" in fusion_bench.format_fusion_results(path)


def test_report_pages_show_predictions_and_refusals():
    import dataclasses

    import op_sdk
    from op_sdk.app.report_page import render_html, render_markdown

    def pages(result):
        e = op_sdk.explain(result.backend)
        data = {"fusions": e.table(),
                "near_misses": [dataclasses.asdict(m) for m in e.near_misses]}
        return render_markdown(data), render_html(data)

    md, html = pages(_compile()[0])
    before, after = _hand_bytes()
    assert f"| {before:,} → {after:,} | 2 → 1 |" in md and "Refused by the benefit" not in md
    assert f"{before:,} → {after:,}" in html
    md, html = pages(_compile(fusion_benefit_threshold_us=1e6)[0])
    assert "### Refused by the benefit model" in md and "threshold 1000000.00 us" in md
    assert 'id="benefit-refused"' in html


def test_bench_fusions_command(tmp_path, capsys):
    import json

    from op_sdk.app.cli import main

    assert main(["bench", "--fusions", "--fusion-tokens", "1", "--repeats", "1", "--quiet",
                 "--fusion-device", "npu", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "device model npu" in printed and "bench_fusions.json" in printed
    results = json.loads((tmp_path / "bench_fusions.json").read_text())
    assert results["command"].startswith("op-sdk") and results["device_model"]["name"] == "npu"
    assert [r["tokens"] for r in results["results"]] == [1] * len(results["results"])
