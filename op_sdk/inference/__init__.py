"""``torchair.inference`` as op_sdk has it: ``set_dim_gears`` (op_sdk.compiler.gears).
``cache_compile`` / ``readable_cache`` are not provided yet (docs/torchair.md)."""

from op_sdk.compiler.gears import set_dim_gears

__all__ = ["set_dim_gears"]
