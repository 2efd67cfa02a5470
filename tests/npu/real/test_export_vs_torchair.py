"""op_sdk's dynamo_export against torch_npu's TorchAir's (its GE calls left out:
tests/npu/real/torchair_export.py) on the same models and the same input tensors: the
exported graphs have the same operators (type and count), the same Data nodes in the same
order (named after the model's arguments), the same RefData names; across two processes the
same collectives, rank folders and ATC configuration files."""

from __future__ import annotations

import json
import os
import socket
import sys

import pytest
import torch

import op_sdk
from tests.export_models import cases, node_names, op_counts
from tests.npu.real.torchair_export import exporter

CASES = cases()
# where op_sdk's graph differs from TorchAir's, on purpose (docs/torchair.md): TorchAir's
# converters write a Pack nothing reads (the view by a computed size) and zeros' value as a
# Cast of a float Const, and read an empty tensor's static size back from its Shape
DIFFERENT = {"sizes_computed", "empty_sum"}


def _export(fn, case, path):
    model, args, dynamic = case
    torch._dynamo.reset()
    fn(*args, model=model, export_path=str(path), dynamic=dynamic)
    torch._dynamo.reset()
    return (path / "dynamo.pbtxt").read_text()


@pytest.mark.parametrize("name", [n for n in CASES if n not in DIFFERENT])
def test_export_writes_torchairs_graph(tmp_path, name):
    theirs_fn, _ = exporter()
    case = CASES[name]  # the same tensors for both: RefData names carry the tensor's id
    theirs = _export(theirs_fn, case, tmp_path / "theirs")
    with pytest.warns(UserWarning, match="is not written"):
        ours = _export(op_sdk.dynamo_export, case, tmp_path / "ours")
    assert op_counts(ours) == op_counts(theirs)
    for kind in ("Data", "RefData", "NetOutput"):
        assert node_names(ours, kind) == node_names(theirs, kind), kind


def _first_input(self, other, *, alpha=1, meta_outputs=None):
    return self


def test_a_converter_registered_for_an_aten_operator_replaces_the_builtin_one(tmp_path):
    """The same script converter of aten.add (its first input) registered with both:
    add(x, y) of two uint16 inputs exports as the same graph, one Data and the NetOutput
    (what TorchAir's test_torch_uint_16_32_64 counts after its test_lite_export)."""
    theirs_fn, _ = exporter()
    import torchair

    from op_sdk.converters.registry import _CONVERTERS, load_slices

    op = torch.ops.aten.add.Tensor
    load_slices()
    theirs_saved, ours_saved = op._ge_converter, _CONVERTERS[op]
    try:
        torchair.register_fx_node_ge_converter(op)(_first_input)
        op_sdk.register_fx_node_ge_converter(op)(_first_input)
        theirs = _export(theirs_fn, CASES["uint16"], tmp_path / "theirs")
        with pytest.warns(UserWarning, match="is not written"):
            ours = _export(op_sdk.dynamo_export, CASES["uint16"], tmp_path / "ours")
    finally:
        op._ge_converter, _CONVERTERS[op] = theirs_saved, ours_saved
    assert op_counts(ours) == op_counts(theirs) == {"Data": 1, "NetOutput": 1}
    assert node_names(ours, "Data") == node_names(theirs, "Data")
    assert ours.count("dtype: DT_UINT16") == theirs.count("dtype: DT_UINT16") == 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root)
                  for f in fs if f != "options.json")  # (TorchAir's GE options: not op_sdk's)


def test_export_with_collectives_writes_torchairs_graphs_and_atc_config(tmp_path):
    import torch.multiprocessing as mp

    from tests import export_worker

    sys.path.insert(0, os.getcwd())
    for side in ("torchair", "op_sdk"):
        mp.spawn(export_worker.run, args=(2, _free_port(), side, str(tmp_path / side)), nprocs=2)
    theirs, ours = tmp_path / "torchair", tmp_path / "op_sdk"
    assert _files(ours) == _files(theirs)
    for f in _files(theirs):
        if f.endswith(".json"):
            assert json.loads((ours / f).read_text()) == json.loads((theirs / f).read_text()), f
        else:
            a, b = (theirs / f).read_text(), (ours / f).read_text()
            assert op_counts(b) == op_counts(a), f
            assert b.count(" dim: -1") == a.count(" dim: -1"), f
            assert node_names(b, "Data") == node_names(a, "Data"), f
