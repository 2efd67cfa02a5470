"""One description of the machine a result was measured on, for every results file: the
CPU model and its SIMD flags (as lscpu reports them), core and thread counts, the
instruction set op_sdk's kernels actually run (from op_sdk._C), oneDNN's ISA cap when one
is set, and the versions."""

from __future__ import annotations

import os
import platform

import torch

__all__ = ["machine_facts", "SIMD_FLAGS"]

# The flags that decide which kernels run (op_sdk's, oneDNN's, Inductor's).
SIMD_FLAGS = ("avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512dq",
              "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16",
              "asimd", "asimddp", "sve", "i8mm")


def _cpuinfo() -> dict[str, str]:
    try:
        with open("/proc/cpuinfo") as f:
            first = f.read().split("\n\n")[0]
    except OSError:
        return {}
    pairs = (line.split(":", 1) for line in first.splitlines() if ":" in line)
    return {k.strip(): v.strip() for k, v in pairs}


def machine_facts(threads: int | None = None) -> dict:
    info = _cpuinfo()
    flags = set((info.get("flags") or info.get("Features") or "").split())
    try:
        from op_sdk import _native

        kernels = _native.cpu_isa() if _native.load() else {"isa": "reference (no op_sdk._C)"}
    except Exception as exc:  # the description must never fail a run
        kernels = {"isa": f"unknown ({exc})"}
    facts = {
        "cpu": info.get("model name") or platform.processor() or platform.machine(),
        # "AMD EPYC" alone names no generation: family 25 is Zen 3 / Zen 4, 26 Zen 5
        "cpu_family_model": "/".join(info.get(k, "?") for k in ("vendor_id", "cpu family",
                                                               "model", "stepping")),
        "arch": platform.machine(),
        "simd_flags": [f for f in SIMD_FLAGS if f in flags],
        "cores": os.cpu_count(),
        "threads": threads if threads is not None else torch.get_num_threads(),
        "op_sdk_kernels": kernels,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    for var in ("OP_SDK_CPU_ISA", "OP_SDK_AMX", "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY"):
        if os.environ.get(var):
            facts.setdefault("env", {})[var] = os.environ[var]
    return facts
