"""``torchair.ge.attr``: the typed attribute values of ``ge.custom_op(..., attrs={...})``
(op_sdk.converters.attr)."""

from op_sdk.converters.attr import (Bool, DataType, Float, Int, ListBool, ListDataType,  # noqa: F401
                                    ListFloat, ListInt, ListListFloat, ListListInt, ListStr, Str,
                                    __all__)
