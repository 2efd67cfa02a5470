"""The documentation that is generated or checkable stays true: the generated files are
current, every OP_SDK_* environment variable the code reads is documented, and the README
starts with the two commands .ci/run relies on."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def test_generated_docs_are_current():
    from op_sdk.app import docs

    stale = [os.path.relpath(p, ROOT) for p in docs.update(ROOT, check=True)]
    assert not stale, f"out of date (run `op-sdk docs`): {stale}"


def test_docs_check_command_fails_on_a_stale_file(tmp_path):
    os.makedirs(tmp_path / "docs")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "docs" / "operators.md").write_text(
        "x\n<!-- generated:operators -->\nold\n<!-- end:operators -->\n")
    run = lambda *a: subprocess.run([sys.executable, "-m", "op_sdk", "docs", *a], cwd=tmp_path,  # noqa: E731
                                    capture_output=True, text=True, timeout=300)
    stale = run("--check")
    assert stale.returncode == 1 and "out of date: docs/options.md" in stale.stdout, stale.stdout
    assert run().returncode == 0 and run("--check").returncode == 0
    assert "| `npu_rms_norm` | native C++" in (tmp_path / "docs" / "operators.md").read_text()


def test_every_environment_variable_is_documented():
    used = set()
    for top in ("op_sdk", "csrc", "kernels", "tests", ".ci", "benchmarks"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith((".py", ".cpp", ".h", ".inl")) or top == ".ci":
                    used |= set(re.findall(r"OP_SDK_[A-Z0-9_]+", _read(dirpath, name)))
    documented = set(re.findall(r"`(OP_SDK_[A-Z0-9_]+)", _read("docs", "environment.md")))
    assert used and not (used - documented), f"undocumented: {sorted(used - documented)}"


def test_readme_starts_with_the_two_commands():
    block = _read("README.md").split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert len(block) == 2 and block[0].endswith("op-sdk demo") and "pytest" in block[1], block
    ci = _read(".ci", "run")
    assert "sed -n 2p" in ci and ".ci/install_check" in ci


def test_documents_cite_only_files_the_repository_has():
    """Every relative Markdown link resolves inside the repository, and no document cites
    the specification folder the project was started from (shared/), which it does not
    ship."""
    import glob
    import re

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = [os.path.join(root, p) for p in ("README.md", "CONTRIBUTING.md")]
    for pattern in ("docs/*.md", "examples/**/*.md", "benchmarks/**/*.md"):
        files += glob.glob(os.path.join(root, pattern), recursive=True)
    bad = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                for m in re.finditer(r"\]\(([^)\s]+)\)", line):
                    target = m.group(1).split("#")[0]
                    if not target or "://" in target or target.startswith("mailto:"):
                        continue
                    if not os.path.exists(os.path.join(os.path.dirname(f), target)):
                        bad.append(f"{os.path.relpath(f, root)}:{n}: {target}")
                if re.search(r"(?<![\w-])shared/", line):
                    bad.append(f"{os.path.relpath(f, root)}:{n}: shared/")
    assert not bad, bad
