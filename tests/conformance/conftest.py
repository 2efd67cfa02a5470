"""Seeds every conformance case: torch as torch_npu's TestCase.setUp does (SEED, default
666), numpy through the ``rng`` fixture (upstream draws from the unseeded global state)."""

import os

import numpy as np
import pytest
import torch

import op_sdk  # noqa: F401  (defines torch.ops.npu.*)

SEED = int(os.getenv("SEED", "666"))


@pytest.fixture(autouse=True)
def _seed_torch():
    torch.manual_seed(SEED)


@pytest.fixture
def rng():
    return np.random.default_rng(SEED)
