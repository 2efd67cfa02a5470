"""Checks that need compiled Triton (not the interpreter the other tests in this folder use)
run as a child process of the test: the module's own ``main``."""

import os
import subprocess
import sys


def run_module(path: str) -> subprocess.CompletedProcess:
    """``python <path>`` without TRITON_INTERPRET, the repository on its path."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, os.path.abspath(path)], env=env, cwd=root,
                          capture_output=True, text=True, timeout=600)
