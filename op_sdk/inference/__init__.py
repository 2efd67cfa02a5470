"""``torchair.inference`` as op_sdk has it: ``set_dim_gears`` (op_sdk.compiler.gears) and
``cache_compile`` / ``readable_cache`` (op_sdk.compiler.cache_compile)."""

from op_sdk.compiler.cache_compile import cache_compile, readable_cache
from op_sdk.compiler.gears import set_dim_gears

__all__ = ["set_dim_gears", "cache_compile", "readable_cache"]
