"""TorchAir's traceable-collective remaps (op_sdk.compiler.collectives): torch.distributed's
send / recv / broadcast / all_to_all traced as functional collectives once a backend is
made (TorchAir's own system test asks for send and recv), computing what the eager calls
compute across two gloo processes, in one graph; what cannot be traced falls back."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import op_sdk

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch has no distributed")


def test_a_backend_installs_the_remaps_and_import_does_not():
    code = ("import sys, op_sdk; "
            "assert 'torch.distributed._functional_collectives' not in sys.modules; "
            "op_sdk.get_npu_backend(); "
            "from torch.distributed._functional_collectives import traceable_collective_remaps as r; "
            "import torch.distributed as d; "
            "assert all(f in r for f in (d.send, d.recv, d.broadcast, d.all_to_all)); "
            "import torch.distributed._functional_collectives as f; "
            "assert all(getattr(f, r[g].__name__) is r[g] for g in (d.send, d.recv))")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_torchairs_system_test():
    """torchair_hcom_st.py's test_patch_for_traceable_collective_remaps, after
    patch_for_hcom (a TorchAir script's import does the same under python -m
    op_sdk.as_torchair)."""
    op_sdk.patch_for_hcom()
    from torch.distributed._functional_collectives import traceable_collective_remaps

    assert torch.distributed.send in traceable_collective_remaps
    assert torch.distributed.recv in traceable_collective_remaps


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_compiled_as_one_graph_equal_eager(tmp_path):
    import torch.multiprocessing as mp

    from tests.collectives_worker import run

    mp.spawn(run, args=(2, _port(), str(tmp_path)), nprocs=2)
    for rank in (0, 1):
        result = json.load(open(tmp_path / f"rank{rank}.json"))
        for mode in ("reduce-overhead", "max-autotune"):
            assert result[mode] == {"equal": True, "graphs": 1}, (rank, mode, result)
        # recv from any source has no functional form: it runs as the eager call
        assert result["any_source"]["equal"], result
