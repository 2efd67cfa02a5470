"""benchmarks/torchair_st.py's rules for telling TorchAir's system tests apart: a public name
imported from the internal module TorchAir defines it in is the public name; everything else
of TorchAir's internals is a placeholder."""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "benchmarks"))

import torchair_st  # noqa: E402


def _checkout(root, allowlist, inits):
    st = root / "tests" / "st"
    st.mkdir(parents=True)
    (st / "allowlist_for_publicAPI.json").write_text(json.dumps(allowlist))
    for module, text in inits.items():
        d = root.joinpath("python", *module.split("."))
        d.mkdir(parents=True)
        (d / "__init__.py").write_text(text)
    return str(root)


def test_public_names_imported_from_internal_modules_are_found(tmp_path):
    root = _checkout(tmp_path, {"torchair": ["register_fx_node_ge_converter", "get_compiler"],
                                "torchair.ge": ["Const", "Tensor"]}, {
        "torchair": "from torchair._ge.fx2ge import register_fx_node_ge_converter as _r\n"
                    "from torchair.npu_fx_compiler import get_compiler\n"   # public module
                    "from torchair._ge.fx2ge import _LITE_OPS\n",           # not in the list
        "torchair.ge": "from torchair.ge._ge_graph import Const as _Const\n"
                       "from torchair.ge._ge_graph import TensorBase as Tensor\n",  # another object
    })
    assert torchair_st.public_reexports(root) == {
        "torchair._ge.fx2ge.register_fx_node_ge_converter": ("torchair", "register_fx_node_ge_converter"),
        "torchair.ge._ge_graph.Const": ("torchair.ge", "Const"),
    }


def test_a_checkout_without_the_allowlist_maps_nothing(tmp_path):
    assert torchair_st.public_reexports(str(tmp_path)) == {}


def test_classes():
    rec = {"outcome": "failed", "touched": [], "error": "AssertionError: 2 != 1"}
    assert torchair_st.classify("f.py::C::t", rec) == "failed"
    assert torchair_st.classify("f.py::C::t", {**rec, "touched": ["torchair._x.y"]}) == "internal"
    assert torchair_st.classify("f.py::C::t", {**rec, "touched": ["_privateuse1_backend.npu_device"]}) == "npu"
    assert torchair_st.classify(next(iter(torchair_st.GE_SUBJECT)), rec) == "ge"
