"""npugraph_ex's ``inference``: ``cache_compile`` / ``readable_cache`` with npugraph_ex's
CompilerConfig (or its options as a dict), op_sdk.compiler.cache_compile underneath."""

from __future__ import annotations

from typing import Any

from op_sdk.compiler import cache_compile as _cache
from op_sdk.compiler.npugraph_ex import CompilerConfig, config_from_options, op_sdk_config

__all__ = ["cache_compile", "readable_cache"]

readable_cache = _cache.readable_cache


def cache_compile(func, *, config: CompilerConfig | None = None, dynamic: bool = True,
                  cache_dir: str | None = None, global_rank: int | None = None,
                  tp_rank: int | None = None, pp_rank: int | None = None,
                  options: dict[str, Any] | None = None,
                  custom_decompositions: dict | None = None) -> _cache.CachedMethod:
    """npugraph_ex's ``cache_compile``: as ``op_sdk.inference.cache_compile``, configured by
    npugraph_ex's ``config`` or by ``options`` (its option names, validated), not both."""
    if config is not None and options is not None:
        raise ValueError("npugraph_ex.inference.cache_compile: give config or options, not both")
    if config is None:
        config = config_from_options(options)
    ours = op_sdk_config(config, "npugraph_ex.inference.cache_compile: config")
    return _cache.cache_compile(func, config=ours, dynamic=dynamic, cache_dir=cache_dir,
                                global_rank=global_rank, tp_rank=tp_rank, pp_rank=pp_rank,
                                custom_decompositions=custom_decompositions)
