"""``torchair.ge`` as op_sdk has it: the API a GE converter is written against.

``import op_sdk as torchair`` gives a TorchAir converter the names it uses, with TorchAir's
signatures: ``ge.custom_op`` (both forms: ``inputs=`` / ``outputs=`` / ``attrs=``, or the
arguments by the type's registered prototype), ``ge.Const(v, dtype=None, node_name=None,
readable=True)``, ``ge.Cast(x, *, dst_type, dependencies=[], node_name=None)``,
``ge.Clone(x, *, dependencies=[], node_name=None)`` (a TensorMove), ``ge.DataType`` (the
ge::DataType codes), ``ge.Format`` (the storage formats), ``ge.Tensor`` (what a converter
receives and returns), ``ge.TensorSpec`` (what ``meta_outputs`` holds), ``ge.attr`` (the
typed attribute values), and ``ge.<IrType>(...)`` for every operator of op_sdk's pinned
prototype table (:mod:`op_sdk.converters.ir`).

The graph built is op_sdk's (:class:`op_sdk.converters.GeGraph`: the ``pbtxt`` dump, and
``op_sdk.dynamo_export``), or TorchAir's own while TorchAir runs the converter (where
torch_npu is installed). docs/converters.md, "TorchAir's ge API".
"""

from __future__ import annotations

import enum as _enum

from op_sdk.converters import TensorSpec
from op_sdk.converters import ir as _ir
from op_sdk.converters.graph import Tensor
from op_sdk.converters.graph import ge as _ge
from op_sdk.ge import attr
from op_sdk.ops.format_cast import Format as _NpuFormat

__all__ = ["custom_op", "Const", "Cast", "DataType", "Format", "Tensor", "TensorSpec", "Clone",
           "attr"]

custom_op = _ge.custom_op
Const = _ge.Const
Cast = _ge.Cast
Clone = _ge.Clone

# ge::DataType: every code, as TorchAir's ge.DataType (class attributes)
DataType = type("DataType", (), {"__module__": "op_sdk.ge",
                                 "__doc__": "ge::DataType: the codes of GE's data types.",
                                 **dict(sorted(_ir.GE_DTYPE.items(), key=lambda kv: kv[1]))})

# GE's storage formats, as TorchAir's ge.Format (an Enum of FORMAT_<name>), from the one table
# op_sdk keeps of them (torch_npu.Format's, op_sdk.ops.format_cast)
Format = _enum.Enum("Format", [(f"FORMAT_{f.name}", f.value) for f in _NpuFormat],
                    module="op_sdk.ge")


def __getattr__(name: str):
    """``ge.<IrType>``: an operator of the prototype table."""
    return getattr(_ge, name)
