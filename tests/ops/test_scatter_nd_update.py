"""npu_scatter_nd_update and npu_scatter_nd_update_: the functional one leaves its input,
the in-place one writes it and returns it; out-of-range indices raise and write nothing."""

import pytest
import torch

from tests.ops._helpers import T, fp16, npu, rand

SCHEMAS = [
    "npu_scatter_nd_update_(Tensor(a!) input, Tensor indices, Tensor updates) -> Tensor(a!)",
    "npu_scatter_nd_update(Tensor input, Tensor indices, Tensor updates) -> Tensor",
]

# the Ascend IR operator(s) each operator converts to (tests/test_converters.py)
GE_TYPES = {"npu::npu_scatter_nd_update": "ScatterNdUpdate",
            "npu::npu_scatter_nd_update_": "ScatterNdUpdate"}



def samples():
    return [
        ("npu_scatter_nd_update", (rand(6, 4, 3), torch.tensor([[1], [4]]), rand(2, 4, 3)), {}),
        ("npu_scatter_nd_update_", (rand(6, 4, 3), torch.tensor([[1, 2], [4, 0]], dtype=torch.int32),
                                    rand(2, 3)), {}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta function must give the
    same output shapes and dtypes (tests/npu/real): every dtype, int64 and int32 indices,
    whole rows and single elements, in place and not."""
    cases = []
    for dt in (torch.float32, fp16, torch.bfloat16):
        for name in ("npu_scatter_nd_update", "npu_scatter_nd_update_"):
            cases.append((name, (rand(6, 4, 3, dtype=dt), torch.tensor([[1], [4]]), rand(2, 4, 3, dtype=dt)), {}))
            cases.append((name, (rand(6, 4, 3, dtype=dt), torch.tensor([[1, 2], [4, 0]], dtype=torch.int32),
                                 rand(2, 3, dtype=dt)), {}))
    return cases


# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("scatter/indices-dtype", "npu_scatter_nd_update", (T(5, 3), T(2, 1), T(2, 3)), {}, "indices", RuntimeError),
    ("scatter/k", "npu_scatter_nd_update", (T(5, 3), T(2, 3, dtype=torch.int64), T(2)), {}, "indices",
     RuntimeError),
    ("scatter/updates-shape", "npu_scatter_nd_update", (T(5, 3), T(2, 1, dtype=torch.int64), T(2, 4)), {},
     "updates", RuntimeError),
    ("scatter/updates-dtype", "npu_scatter_nd_update", (T(5, 3), T(2, 1, dtype=torch.int64),
                                                        T(2, 3, dtype=fp16)), {}, "updates", RuntimeError),
    ("scatter_/updates-shape", "npu_scatter_nd_update_", (T(5, 3), T(2, 1, dtype=torch.int64), T(2, 4)), {},
     "updates", RuntimeError),
]


def test_scatter_functional_leaves_input_and_inplace_mutates():
    x = torch.zeros(5, 3)
    idx = torch.tensor([[4], [0]])
    upd = torch.tensor([[1.0, 2, 3], [4, 5, 6]])
    out = npu.npu_scatter_nd_update(x, idx, upd)
    assert x.abs().sum() == 0 and out[4].tolist() == [1, 2, 3] and out[0].tolist() == [4, 5, 6]
    r = npu.npu_scatter_nd_update_(x, idx, upd)
    assert r is x and torch.equal(x, out)


@pytest.mark.parametrize("bad", [[[5]], [[-1]]])
def test_scatter_out_of_range_raises_and_writes_nothing(bad):
    x = torch.zeros(5, 3)
    with pytest.raises(RuntimeError, match="npu_scatter_nd_update.*indices"):
        npu.npu_scatter_nd_update_(x, torch.tensor(bad), torch.ones(1, 3))
    assert x.abs().sum() == 0
