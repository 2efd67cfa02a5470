"""protobuf for reading GE IR with the GE schema that the torch-npu wheel ships (TorchAir's
generated ge_ir_pb2 module): installed once, without dependencies, into a directory of its
own that a torch_npu-environment subprocess adds to its path. The main environment never
imports it."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.npu.torch_npu_env import announce, cache_root

# TorchAir's module for protobuf 4.x (ge_ir_by_protoc_3_19_pb2) reads with any 4.x runtime
PROTOBUF = "protobuf>=4.21,<5"


def prepare_protobuf() -> tuple[str | None, str]:
    root = os.path.join(os.path.dirname(cache_root()), "protobuf-4")
    if os.path.isdir(os.path.join(root, "google", "protobuf")):
        return root, ""
    announce(f"installing {PROTOBUF} into {root} (GE's protobuf schema), once")
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
                        "--disable-pip-version-check", "--only-binary", ":all:", "--target",
                        root, PROTOBUF], check=True, capture_output=True, text=True, timeout=600)
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        return None, f"{PROTOBUF} could not be installed: {detail.strip()[-500:]}"
    return root, ""
