"""TorchAir's ``ge.attr`` types: a typed attribute value for ``ge.custom_op(..., attrs={...})``
(``ge.attr.Int(3)``, ``ge.attr.ListStr(["a"])``), public as ``op_sdk.ge.attr``.

Each type is a builder with no value (``ge.attr.Int``); calling it gives a value of that
type (``ge.attr.Int(3)``), calling a value gives another value of its type (``None`` keeps
the value). Values compare by type and value, print as ``ge.attr.Int(3)``, and are written
into the graph as GE's ``AttrDef`` field of their type (``i``, ``f``, ``b``, ``s``, ``dt``,
``list { i ... val_type }``, ``list_list_int``, ``list_list_float``), as TorchAir writes them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Bool", "DataType", "Float", "Int", "ListBool", "ListDataType", "ListFloat",
           "ListInt", "ListListFloat", "ListListInt", "ListStr", "Str"]


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# type -> (op_sdk's graph attribute type, the rule a value must meet, its normal form)
_RULES: dict[str, tuple[str, Any, Any]] = {
    "Int": ("Int", _is_int, int),
    "Float": ("Float", _is_number, float),
    "Bool": ("Bool", lambda v: isinstance(v, bool), bool),
    "DataType": ("DataType", _is_int, int),
    "Str": ("String", lambda v: isinstance(v, str), str),
    "ListInt": ("ListInt", _is_int, int),
    "ListFloat": ("ListFloat", _is_number, float),
    "ListBool": ("ListBool", lambda v: isinstance(v, bool), bool),
    "ListDataType": ("ListDataType", _is_int, int),
    "ListStr": ("ListString", lambda v: isinstance(v, str), str),
    "ListListInt": ("ListListInt", _is_int, int),
    "ListListFloat": ("ListListFloat", _is_number, float),
}


class _Attr:
    """One ``ge.attr`` type (``value`` None) or a value of it."""

    __module__ = "op_sdk.ge.attr"

    def __init__(self, cls: str, value: Any = None):
        self.cls = cls
        self.value = value

    @property
    def ir_type(self) -> str:
        """The attribute type op_sdk's graph writes (op_sdk.converters.pbtxt)."""
        return _RULES[self.cls][0]

    def __call__(self, v: Any = None) -> _Attr:
        if isinstance(v, _Attr):
            if v.cls != self.cls:
                raise AssertionError(f"Type mismatch: ge.attr.{v.cls} given where "
                                     f"ge.attr.{self.cls} is expected")
            return v
        v = self.value if v is None else v
        if v is None:
            raise AssertionError(f"ge.attr.{self.cls}: Value cannot be None.")
        return _Attr(self.cls, _normal(self.cls, v))

    def __eq__(self, other) -> bool:
        return isinstance(other, _Attr) and self.cls == other.cls and self.value == other.value

    __hash__ = None  # values are mutable lists for the list types

    def __repr__(self) -> str:
        return f"ge.attr.{self.cls}({self.value!r})"


def _normal(cls: str, v: Any):
    """The value in its normal form, or TypeError naming the type and the rule."""
    _, rule, form = _RULES[cls]
    if cls.startswith("ListList"):
        ok = isinstance(v, (list, tuple)) and all(
            isinstance(row, (list, tuple)) and all(rule(x) for x in row) for row in v)
        if not ok:
            raise TypeError(f"ge.attr.{cls} takes a list of lists of "
                            f"{'ints' if cls == 'ListListInt' else 'floats'}, got {v!r}")
        return [[form(x) for x in row] for row in v]
    if cls.startswith("List"):
        if not isinstance(v, (list, tuple)) or not all(rule(x) for x in v):
            raise TypeError(f"ge.attr.{cls} takes a list of {_LIST_WORDS[cls[4:]]}, got {v!r}")
        return [form(x) for x in v]
    if not rule(v):
        raise TypeError(f"ge.attr.{cls} takes {_WORDS[cls]}, got {v!r}")
    return form(v)


_WORDS = {"Int": "an int", "Float": "a float", "Bool": "a bool", "Str": "a str",
          "DataType": "a ge.DataType code (an int)"}
_LIST_WORDS = {"Int": "ints", "Float": "floats", "Bool": "bools", "Str": "strs",
               "DataType": "ge.DataType codes (ints)"}


Int = _Attr("Int")
Float = _Attr("Float")
Bool = _Attr("Bool")
DataType = _Attr("DataType")
Str = _Attr("Str")
ListInt = _Attr("ListInt")
ListFloat = _Attr("ListFloat")
ListBool = _Attr("ListBool")
ListDataType = _Attr("ListDataType")
ListStr = _Attr("ListStr")
ListListInt = _Attr("ListListInt")
ListListFloat = _Attr("ListListFloat")
