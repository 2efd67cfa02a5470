"""``import npugraph_ex`` in a process started under ``python -m op_sdk.as_torchair``: installs
the alias, then stands for op_sdk's module (op_sdk._alias)."""

from op_sdk.as_torchair import _replace_stand_in

_replace_stand_in(__name__)
