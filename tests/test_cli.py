"""The op-sdk command: each subcommand on a small model, the JSON schema, the report (and
its rendering in headless Chromium), and one-line errors for a user's mistakes."""

import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = ["--layers", "1", "--hidden", "256", "--heads", "2", "--intermediate", "512",
         "--vocab", "512"]


def op_sdk_cmd(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="2")
    return subprocess.run([sys.executable, "-m", "op_sdk", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=timeout)


def test_ops_lists_every_operator_with_its_kernels():
    out = op_sdk_cmd("ops", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert "npu::npu_add_rms_norm_dynamic_quant" in rows
    assert rows["npu::npu_add_rms_norm_dynamic_quant"]["kernels"]["cpu"] == "native"
    assert rows["npu::npu_scatter_nd_update_"]["schema"].startswith("npu::npu_scatter_nd_update_(Tensor(a!)")
    text = op_sdk_cmd("ops", "--schemas")
    assert text.returncode == 0 and "npu::npu_quant_matmul" in text.stdout


def test_demo_prints_the_table_and_writes_the_json(tmp_path):
    path = tmp_path / "demo.json"
    out = op_sdk_cmd("demo", *SMALL, "--tokens", "4", "--repeats", "2", "--quiet", "--json", str(path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "add_rms_norm_dynamic_quant" in out.stdout and "Time per forward" in out.stdout
    data = json.loads(path.read_text())
    # the demo compiles with frozen_parameter: every projection weight is prepacked
    # (common_calls: the layer's two identical fp32 upcasts of one view, merged by the
    # native_ops stage)
    assert data["patterns"] == {"add_rms_norm_dynamic_quant": 1,
                                "add_rms_norm_dynamic_quant_flatten": 1, "add_rms_norm_cast": 1,
                                "transpose_batchmatmul": 2, "weight_prepack": 5,
                                "common_calls": 1}
    for key in ("max_abs_error", "speedup_vs_eager", "speedup_vs_inductor"):
        assert isinstance(data[key], float) and data[key] == data[key], key  # a number, not NaN
    assert set(data["seconds_per_forward"]) == {"eager", "inductor", "op_sdk"}
    assert data["max_abs_error"] < 0.05 * data["reference_max_abs"]  # demo.TOLERANCE
    assert data["within_tolerance"] == {"inductor": True, "op_sdk": True}
    for name in ("eager", "inductor", "op_sdk"):
        st = data["seconds_spread"][name]
        assert st["min"] <= st["q1"] <= st["median"] <= st["q3"] <= st["max"] and st["n"] == 5 * 2
    assert "within tolerance" in out.stdout and "IQR" in out.stdout
    row = {r["pattern"]: r for r in data["fusions"]}["add_rms_norm_dynamic_quant"]
    assert row["matches"] == 1 and row["nodes_before"] > row["nodes_after"] and row["bytes_saved"] > 0
    assert data["machine"]["torch"] and data["command"].startswith("op-sdk demo")


@pytest.mark.parametrize("args,words", [
    (["demo", "--hidden", "1000"], ["hidden", "multiple of 16"]),
    (["demo", "--dtype", "float32"], ["dtype", "bfloat16"]),
    (["demo", "--mlp-quant", "int4"], ["mlp_quant"]),
    (["demo", "--json", "/nonexistent-dir/out.json"], ["No such file", "/nonexistent-dir/out.json"]),
    (["report", "--mode", "fastest"], ["mode", "max-autotune"]),
    (["bench", "--decode", "one,two"], ["--decode"]),
])
def test_user_errors_are_one_line_and_exit_nonzero(args, words):
    out = op_sdk_cmd(*args)
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    err = out.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for w in words:
        assert w in err, err


@pytest.mark.parametrize("args,words", [
    (["demo", "--quick"], ["unrecognized arguments: --quick"]),
    (["demo", "--layers", "0"], ["--layers", ">= 1"]),
    (["bench", "--repeats", "-1"], ["--repeats", ">= 1"]),
    (["bench", "--wait-quiet", "-2"], ["--wait-quiet", ">= 0"]),
    (["fuse", "in.onnx", "-o", "out.onnx", "--threshold-us", "-3"], ["--threshold-us", ">= 0"]),
    (["ops", "--tokens", "4"], ["unrecognized arguments: --tokens 4"]),
])
def test_a_bad_flag_gets_its_subcommands_usage(args, words):
    """argparse's errors (a flag the subcommand does not take, a value of the wrong kind):
    the subcommand's own usage, then one error line naming it."""
    out = op_sdk_cmd(*args)
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert lines[0].startswith(f"usage: op-sdk {args[0]} "), lines
    assert lines[-1].startswith(f"op-sdk {args[0]}: error: "), lines
    for w in words:
        assert w in lines[-1], lines


def test_help_and_usage_errors_import_no_torch():
    """The console script's module (pyproject: op-sdk = op_sdk_cli:main) answers --help, a
    subcommand's help and a usage error without importing torch or op_sdk (python's
    start-up instead of torch's seconds); --version imports torch only."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        assert tomllib.load(f)["project"]["scripts"]["op-sdk"] == "op_sdk_cli:main"
    code = ("import sys, op_sdk_cli\n"
            "for argv in (['--help'], ['report', '--help'], ['demo', '--quick'], ['bench', '--repeats', '0']):\n"
            "    try:\n        op_sdk_cli.main(argv)\n    except SystemExit:\n        pass\n"
            "print('IMPORTED', 'torch' in sys.modules, 'op_sdk' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "IMPORTED False False", out.stdout + out.stderr
    assert "usage: op-sdk report" in out.stdout and "op-sdk demo: error" in out.stderr
    version = subprocess.run([sys.executable, "-m", "op_sdk_cli", "--version"], capture_output=True,
                             text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert version.returncode == 0 and version.stdout.startswith("op-sdk 0.") and "torch 2." in version.stdout


def test_help_is_plain_text_and_shows_defaults():
    top = op_sdk_cmd("--help")
    assert top.returncode == 0 and "``" not in top.stdout
    for sub in ("demo", "report", "bench", "ops", "new-op", "fuse", "docs"):
        assert sub in top.stdout
    bench = op_sdk_cmd("bench", "--help")
    assert bench.returncode == 0 and "``" not in bench.stdout
    for default in ("(default: 1,4,16)", "(default: 512)", "(default: 10)", "(default: bench_results)"):
        assert default in " ".join(bench.stdout.split()), default


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    res = op_sdk_cmd("report", *SMALL, "--aux-layer", "0", "--tokens", "4", "--out", str(out),
                     "--trace")
    assert res.returncode == 0, res.stderr[-3000:]
    return out


def test_report_has_regions_near_misses_and_dumps(report_dir):
    html = (report_dir / "report.html").read_text()
    md = (report_dir / "report.md").read_text()
    assert 'id="fusion-table"' in html and "<svg" in html and 'class="region"' in html
    # the tapped layer keeps its norm output alive: that fusion must be a near miss there
    assert "other_user" in html and "would disappear after fusion" in html
    assert "```mermaid" in md and "flowchart TD" in md
    assert any(f.endswith(".txt") for f in os.listdir(report_dir / "dumps"))
    assert "transpose_batchmatmul" in html  # all five fusions run with --fusions all


def test_report_pictures_are_laid_out_and_labelled_for_people(report_dir):
    """The fused regions are laid out by Graphviz (edges routed around the boxes), each
    operator over the source line it comes from (a fused operator: the span of the lines
    it replaced), inputs by what produces them and their dtype and shape, never by FX
    names; reshapes drawn as views; each stage's dump "before" ahead of its "after"."""
    import re

    if shutil.which("dot") is None:
        if os.environ.get("CI"):
            pytest.fail("Graphviz (dot) is required in CI (.ci/run installs it)")
        pytest.skip("Graphviz is not installed")
    html = (report_dir / "report.html").read_text()
    regions = re.findall(r'<div class="region".*?</div></div></div>', html, re.S)
    assert len(regions) >= 3
    for region in regions:
        assert region.count('class="graph"') == 2, region[:300]  # before and after, by dot
        texts = re.findall(r"<text[^>]*>([^<]*)</text>", region)
        assert not [t for t in texts if re.search(r"\barg\d+_\d+|getitem_\d+|\w+_\d+$", t)], texts
        before, after = texts[:texts.index("after")], texts[texts.index("after"):]
        for half in (before, after):  # in "after" the fused operator's span of lines
            assert any(re.fullmatch(r"models\.py:\d+(&#45;\d+)?", t) for t in half), half
        assert any(re.fullmatch(r"input (bf16|fp32|fp16)\[[\d, ]+\]", t) for t in texts), texts
    assert "view / layout" in html and "#f4f4f4" in html
    stages = [re.sub(r"_rank_.*", "", m) for m in re.findall(r"<summary>([^<]+)</summary>", html)]
    afters = [i for i, name in enumerate(stages) if name.endswith("_after")]
    assert afters and all(stages[i - 1] == stages[i][:-len("_after")] + "_before" for i in afters), stages


def test_report_trace_is_a_chrome_trace_of_one_compiled_call(report_dir):
    import json

    events = json.loads((report_dir / "trace.json").read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    assert any(str(n).startswith("Torch-Compiled Region") for n in names)
    assert any(str(n).startswith("npu::") for n in names)  # the fused operators ran
    html = (report_dir / "report.html").read_text()
    assert 'id="trace-threads"' in html and "trace.json" in html


USER_MODEL = """
import torch
import op_sdk  # noqa: F401  (defines torch.ops.npu)
from helper import HIDDEN  # a sibling module: the file's folder is on sys.path


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gamma = torch.nn.Parameter(torch.rand(HIDDEN, dtype=torch.float16) + 0.5)

    def forward(self, x, residual):
        y, _, h = torch.ops.npu.npu_add_rms_norm(x, residual, self.gamma)
        q, s = torch.ops.npu.npu_dynamic_quant(y)
        return q, s, h * 2


def make_model():
    x = torch.randn(2, 5, HIDDEN, dtype=torch.float16)
    return Block().eval(), (x, torch.randn_like(x))


def not_a_pair():
    return 3
"""


def test_report_takes_the_users_model(tmp_path):
    """op-sdk report FILE.py:FUNCTION compiles the model the function returns (with its
    example inputs) and reports its fusions; a wrong MODEL is one line naming the rule."""
    (tmp_path / "helper.py").write_text("HIDDEN = 64\n")
    model = tmp_path / "my_model.py"
    model.write_text(USER_MODEL)
    out = tmp_path / "report"
    res = op_sdk_cmd("report", f"{model}:make_model", "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "fused add_rms_norm_dynamic_quant x1" in res.stdout, res.stdout
    html = (out / "report.html").read_text()
    assert "Block from" in html and "[2, 5, 64] float16" in html
    assert "add_rms_norm_dynamic_quant" in html and "fused add_rms_norm_dynamic_quant x1" in html
    for spec, words in ((f"{model}", "must be FILE.py:FUNCTION"),
                        (f"{tmp_path / 'none.py'}:make_model", "no file"),
                        (f"{model}:missing", "has no function 'missing'"),
                        (f"{model}:not_a_pair", "must return (model, example_inputs)")):
        res = op_sdk_cmd("report", spec, "--out", str(out))
        assert res.returncode == 2 and "op-sdk report: error: MODEL" in res.stderr \
            and words in res.stderr and res.stderr.count("\n") == 1, res.stderr


def test_bench_fusions_takes_the_users_model(tmp_path):
    """op-sdk bench --fusions FILE.py:FUNCTION: the user's model compiled with the fusions
    as configured, with every match and with none, timed per forward; the results file
    carries the machine, the command and each contender's fusions and outcome."""
    (tmp_path / "helper.py").write_text("HIDDEN = 64\n")
    model = tmp_path / "my_model.py"
    model.write_text(USER_MODEL)
    res = op_sdk_cmd("bench", "--fusions", f"{model}:make_model", "--repeats", "2",
                     "--out", str(tmp_path / "b"))
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads((tmp_path / "b" / "bench_model_fusions.json").read_text())
    rows = {r["contender"]: r for r in data["results"]}
    assert set(rows) == {"op_sdk", "every match", "no fusion"}
    fused = {f["pattern"]: f["matches"] for f in rows["op_sdk"]["fusions"]}
    assert fused.get("add_rms_norm_dynamic_quant") == 1
    assert not any(f["matches"] for f in rows["no fusion"]["fusions"])
    assert all(r["ms_per_forward"] > 0 and r["n"] == 2 * 5 for r in rows.values())
    assert data["machine"]["torch"] and data["command"].startswith("op-sdk bench --fusions")
    assert "op_sdk: fused add_rms_norm_dynamic_quant x1" in res.stdout, res.stdout
    bad = op_sdk_cmd("bench", f"{model}:make_model")
    assert bad.returncode == 2 and "MODEL is read with --fusions only" in bad.stderr


def test_report_renders_in_headless_chromium(report_dir, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is required in CI (.ci/run installs it)")
        pytest.skip("chromium is not installed")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}"]
    url = (report_dir / "report.html").as_uri()
    shot = tmp_path / "report.png"
    subprocess.run(flags + [f"--screenshot={shot}", "--window-size=1280,2000", url],
                   capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))
    assert pixels.std() > 0.05  # not a blank page
    dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.stdout.count('class="region"') >= 3  # the fused regions were laid out
    assert dom.stdout.count("<svg") >= 6 and "Near misses" in dom.stdout


def test_bench_writes_results_and_plots(tmp_path):
    out = op_sdk_cmd("bench", *SMALL, "--decode", "1", "--prefill", "64", "--repeats", "2",
                     "--no-kernels", "--quiet", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads((tmp_path / "results.json").read_text())
    assert [r["tokens"] for r in data["e2e"]] == [1, 64]
    assert data["e2e"][1]["phase"] == "prefill"
    for row in data["e2e"]:
        assert set(row["seconds"]) == {"eager", "inductor", "inductor_cpp", "op_sdk"}
        assert all(t > 0 for t in row["seconds"].values())
        assert row["speedup_vs_inductor_cpp"] == row["seconds"]["inductor_cpp"] / \
            row["seconds"]["op_sdk"]
        assert max(row["max_abs_error"].values()) < 0.5  # compiled logits agree with eager
    assert (tmp_path / "e2e.png").stat().st_size > 5_000
    again = op_sdk_cmd("bench", "--plot-only", str(tmp_path / "results.json"))
    assert again.returncode == 0 and "e2e.png" in again.stdout
