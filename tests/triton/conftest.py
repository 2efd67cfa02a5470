"""The Triton kernels' tests (marker `triton`): natively on a CUDA device, otherwise on CPU
tensors under Triton's interpreter (TRITON_INTERPRET=1, set by tests/conftest.py before
anything imports Triton). Without Triton they skip, or fail where OP_SDK_REQUIRE_TRITON=1 (.ci/run)."""

import os

import pytest
import torch

CUDA = torch.cuda.is_available()  # without one, tests/conftest.py chose the interpreter

try:
    import triton  # noqa: F401
    MISSING = None
except ImportError as exc:
    MISSING = str(exc)


def _interpret_bf16_as_compiled():
    """Triton's interpreter truncates fp32 -> bfloat16 casts, where compiled Triton (and
    torch) round to nearest even; the kernels' tests check the compiled rule, so the
    interpreter's cast is made to round as the GPU does."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    cast = interpreter.InterpreterBuilder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            bits = torch.from_numpy(np.ascontiguousarray(src.data, dtype=np.float32))
            bits = bits.to(torch.bfloat16).view(torch.uint16).numpy()
            return interpreter.TensorHandle(bits, dst_type.scalar)
        return cast(self, src, dst_type)

    interpreter.InterpreterBuilder.cast_impl = cast_impl


if MISSING is None and not CUDA:
    _interpret_bf16_as_compiled()


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.triton)


@pytest.fixture(autouse=True)
def _triton_installed():
    if MISSING is not None:
        if os.environ.get("OP_SDK_REQUIRE_TRITON") == "1":
            pytest.fail(f"OP_SDK_REQUIRE_TRITON=1 and Triton is not installed: {MISSING}")
        pytest.skip(f"Triton is not installed: {MISSING}")


@pytest.fixture
def device():
    """Where the kernels run: the GPU, or CPU tensors through the interpreter."""
    return "cuda" if CUDA else "cpu"
