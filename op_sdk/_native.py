"""Loads the compiled extension ``op_sdk._C`` and registers its kernels, one operator at a
time, when ``op_sdk.library.define_op`` asks (``register``). Loading registers nothing:
a kernel whose C++ signature another library's kernel contradicts (torch_npu's) must cost
that operator its native kernel, with a warning, not the process."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys

log = logging.getLogger("op_sdk")

_STATE: dict[str, object] = {}


def load() -> bool:
    """Load the extension once; return whether it loaded."""
    if "loaded" not in _STATE:
        import torch  # noqa: F401  (loads libc10 / libtorch, which the extension links to)

        try:
            _STATE["module"] = _import_extension()
            _STATE["loaded"] = True
        except ImportError as exc:
            _STATE["loaded"] = False
            _STATE["error"] = str(exc)
            log.warning("op_sdk: the native CPU kernels (op_sdk._C) did not load (%s); every "
                        "operator runs its plain-PyTorch reference on CPU", exc)
    return bool(_STATE["loaded"])


def _import_extension():
    """op_sdk._C, or the build OP_SDK_NATIVE_LIB names (a path to another build of the same
    sources: the sanitizer build of .ci/sanitize)."""
    path = os.environ.get("OP_SDK_NATIVE_LIB")
    if not path:
        return importlib.import_module("op_sdk._C")
    spec = importlib.util.spec_from_file_location("op_sdk._C", path)
    if spec is None or not os.path.isfile(path):
        raise ImportError(f"OP_SDK_NATIVE_LIB={path!r} is not an extension module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["op_sdk._C"] = module
    return module


def load_error() -> str | None:
    """Why the extension did not load, or None."""
    return _STATE.get("error")  # type: ignore[return-value]


def native_ops() -> list[tuple[str, str]]:
    """(namespace, name) of every operator the extension has a kernel for."""
    return list(_STATE["module"].native_ops()) if load() else []  # type: ignore[union-attr]


def register(namespace: str, name: str) -> dict[str, str]:
    """Register ``namespace::name``'s native CPU and Autograd{CPU,CUDA} kernels.

    Returns {dispatch key: error} for the kernels that could not be registered (empty when
    all were); {"CPU": reason} when the extension is not loaded or has no such kernel.
    """
    if not load():
        return {"CPU": f"op_sdk._C did not load: {load_error()}"}
    results = _STATE["module"].register_kernels(namespace, name)  # type: ignore[union-attr]
    if not results:
        return {"CPU": f"op_sdk._C has no kernel for {namespace}::{name}"}
    return {key: error for key, error in results if error}


def cpu_isa() -> dict:
    """The instruction set the native kernels run on this CPU ("generic", "avx2",
    "avx2_vnni" or "avx512", OP_SDK_CPU_ISA applied) and whether the int8 GEMM paths exist
    ("vnni": AVX-512 VNNI, "amx", "avx_vnni"); {} when the extension is not loaded."""
    return dict(_STATE["module"].cpu_isa()) if load() else {}  # type: ignore[union-attr]


def int8_gemm(m: int, packed: bool = False) -> str:
    """The int8 GEMM npu_quant_matmul runs for ``m`` rows of x1 and an (n, k) row-major
    weight passed as ``w.t()`` (``packed``: quant_matmul_packed on its prepacked copy):
    "avx512_vnni", "amx", "avx_vnni", "avx2" or "aten" (ATen's int8 GEMM); "reference"
    when the extension is not loaded."""
    if not load():
        return "reference"
    return str(_STATE["module"].int8_gemm(int(m), bool(packed)))  # type: ignore[union-attr]


def cpu_output_pool(release: bool = False) -> dict:
    """The pool the native CPU kernels take their large outputs (2 MiB and up) from:
    ``budget_bytes`` (OP_SDK_CPU_POOL_MB, default min(256 MiB, RAM / 16); 0: no pool),
    ``free_bytes`` (blocks kept for the next outputs), ``in_use_bytes`` (blocks held by
    live tensors), ``hits`` / ``misses`` (requests served from a kept block / by a new
    one) and ``released_bytes``. ``release=True`` first gives every kept block back to the
    OS (as torch.cuda.empty_cache does for CUDA's caching allocator). {} when the
    extension is not loaded."""
    if not load():
        return {}
    return dict(_STATE["module"].output_pool(bool(release)))  # type: ignore[union-attr]
