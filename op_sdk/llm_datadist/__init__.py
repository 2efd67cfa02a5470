"""``torchair.llm_datadist`` as op_sdk has it: ``create_npu_tensors`` checks its arguments as
TorchAir does, then raises: it wraps NPU memory that LLM-DataDist allocated (the KV-cache
transfer between prefill and decode instances) as torch tensors, and there is no NPU memory
here to wrap (docs/torchair.md)."""

from __future__ import annotations

import torch

__all__ = ["create_npu_tensors"]

_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
           torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.complex64,
           torch.complex128)


def _check(name: str, value, classes: tuple, inner=None) -> None:
    if not isinstance(value, classes):
        raise TypeError(f"{name} only support {[c.__name__ for c in classes]}, but got "
                        f"{type(value)}.")
    for v in value if inner is not None else ():
        if not isinstance(v, inner):
            raise TypeError(f"{name} inner type only support {[inner]}, but got {type(v)}.")


def create_npu_tensors(shape: list[int], dtype: torch.dtype, addresses: list[int]) -> list[torch.Tensor]:
    _check("shape", shape, (list, tuple), int)
    _check("addresses", addresses, (list, tuple), int)
    _check("dtype", dtype, (torch.dtype,))
    if dtype not in _DTYPES:
        raise ValueError(f"unsupported dtype: {dtype}, supported = {list(_DTYPES)}")
    raise RuntimeError("torchair.llm_datadist.create_npu_tensors (op_sdk.llm_datadist): it wraps "
                       "NPU memory that LLM-DataDist allocated at the given device addresses; "
                       "this machine has no NPU, so there is no such memory to make tensors of")
