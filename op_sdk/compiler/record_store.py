"""What the passes recorded in a compile, stored beside Inductor's FX graph cache, so that
a compile Inductor serves from its cache (the passes do not run then) still has its report:
``op_sdk.explain`` and the report show the matches, near misses and stages of the compile
that filled the cache, marked as a cache hit (``CompileReport.cache``).

The record is keyed by what decides both Inductor's cache entry and the passes' work: the
Dynamo graph's code, the example inputs' shapes, strides, dtypes, devices and
requires_grad, grad mode, the executor, and the passes' content uuid
(``PassPipeline.uuid``: op_sdk's pass and pattern sources, the config, the fusion plan,
the user's patterns). A compile Inductor does not cache (uuid None) stores nothing. The
files live in ``<Inductor's cache dir>/op_sdk_reports`` (TORCHINDUCTOR_CACHE_DIR moves
both), one JSON file per key; failing to read or write one never fails a compile.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from typing import Any

import torch

from op_sdk.compiler.report import GraphReport

log = logging.getLogger("op_sdk.compiler")

__all__ = ["key", "save", "load", "folder"]


def folder() -> str:
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return os.path.join(cache_dir(), "op_sdk_reports")


def _meta(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return (tuple(str(d) for d in x.shape), tuple(str(d) for d in x.stride()),
                str(x.dtype), x.device.type, x.requires_grad)
    if isinstance(x, (int, float, bool, torch.SymInt)):
        return (type(x).__name__, str(x))
    return type(x).__name__


def key(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], uuid: str | None,
        executor: str) -> str | None:
    """The record's key for this compile; None where Inductor does not cache it."""
    if uuid is None:
        return None
    parts = (uuid, executor, gm.code, [_meta(x) for x in example_inputs],
             torch.is_grad_enabled())
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def save(k: str | None, graphs: list[GraphReport]) -> None:
    if k is None or not graphs:
        return
    where, tmp = folder(), None
    try:
        os.makedirs(where, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump([g.to_dict() for g in graphs], f)
        os.replace(tmp, os.path.join(where, k + ".json"))
    except (OSError, TypeError, ValueError) as exc:  # a record is optional
        log.debug("op_sdk: the passes' record was not stored: %s", exc)
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)  # no half-written file left beside the cache


def load(k: str | None) -> list[GraphReport]:
    """The stored record of a compile with key ``k``; [] where none is stored."""
    if k is None:
        return []
    try:
        with open(os.path.join(folder(), k + ".json")) as f:
            return [GraphReport.from_dict(d) for d in json.load(f)]
    except FileNotFoundError:
        return []
    except (OSError, TypeError, ValueError, KeyError) as exc:
        log.debug("op_sdk: the passes' stored record could not be read: %s", exc)
        return []
