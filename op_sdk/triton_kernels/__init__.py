"""op_sdk's Triton kernels: the CUDA kernels of the operators on a model's hot path.

The kernels and their launch helpers live here (``norm``: the rms-norm / quantisation row
kernel; ``swiglu``, ``quantize``, ``rotary``: elementwise kernels on (rows, cols) tiles,
and npu_swiglu_quant's row kernel in ``swiglu``; ``quant_matmul``: npu_quant_matmul's int8
GEMM with its dequantising epilogue; ``kv_cache``: npu_kv_rmsnorm_rope_cache's and
npu_qkv_rms_norm_rope_cache's kernels;
``attention``: npu_fused_infer_attention_score's flash attention); each operator's slice
(op_sdk/ops) holds its CUDA launcher, which checks the arguments with the operator's rules,
allocates the outputs as its fake does, runs the reference for the forms the kernel does not
cover, and imports the kernel module on its first call, so ``import op_sdk`` imports no
Triton and compiles nothing. The slice declares it as
``kernels={"cuda": TritonKernel(launcher)}``.

Under torch.compile on CUDA, define_op has AOTAutograd trace the operator through
``TritonKernel.traced`` (op_sdk/library.py, ``INLINE_DEVICES``): the launcher's checks and
allocations become graph nodes and each kernel launch a ``torch.library.wrap_triton`` call,
so Inductor compiles and launches the kernels from its own generated code, with no Python
per call (what ``torch.library.triton_op`` does for its operators).

The launchers also run on CPU tensors under Triton's interpreter (``TRITON_INTERPRET=1``,
set before the first kernel module is imported): the tests' way to check them without a
GPU (docs/triton.md).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable

log = logging.getLogger("op_sdk")

__all__ = ["TritonKernel", "available", "tracing"]

_state = threading.local()


def tracing() -> bool:
    """Whether a launch is being traced for Inductor (``_common.launch`` then records the
    kernel call with ``torch.library.wrap_triton`` instead of running it)."""
    return getattr(_state, "tracing", False)


@contextlib.contextmanager
def _traced():
    prev = tracing()
    _state.tracing = True
    try:
        yield
    finally:
        _state.tracing = prev


@functools.lru_cache(maxsize=None)
def available() -> bool:
    """Whether Triton can be imported here."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


class TritonKernel:
    """An operator's CUDA kernel written in Triton: ``launcher`` (the slice's function),
    or ``fallback`` (define_op sets it to the operator's reference) where Triton cannot be
    imported, with one warning."""

    kind = "triton"

    def __init__(self, launcher: Callable, fallback: Callable | None = None):
        self.launcher = launcher
        self.fallback = fallback
        self.__name__ = getattr(launcher, "__name__", "triton_kernel")
        self._warned = False

    def __call__(self, *args, **kwargs):
        if available():
            return self.launcher(*args, **kwargs)
        if self.fallback is None:
            raise ImportError(f"op_sdk: {self.__name__} needs Triton")
        if not self._warned:
            self._warned = True
            log.warning("op_sdk: Triton is not installed; %s runs its reference on CUDA",
                        self.__name__)
        return self.fallback(*args, **kwargs)

    def __repr__(self) -> str:
        return f"TritonKernel({self.__name__})"

    def traced(self, *args, **kwargs):
        """The launcher as torch.compile traces it: each kernel launch recorded in the graph
        (``_common.launch``), for Inductor to compile and launch."""
        if not available():
            return self(*args, **kwargs)  # the reference, traced as it stands
        with _traced():
            return self.launcher(*args, **kwargs)
