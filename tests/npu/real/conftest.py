"""Tests that run inside the real torch_npu environment (tests/npu/torch_npu_env.py):
tests/npu/test_torch_npu_real.py starts pytest on this folder in a subprocess with the
wheel on PYTHONPATH and the stub CANN libraries on LD_LIBRARY_PATH. Anywhere else they
are not collected (they import torch_npu at module level).

Before any test: torch_npu must be the real one, imported (torch's backend autoload
imports it with torch), and no NPU may be visible, so nothing reaches ACL or GE. Meta
functions that branch on the CANN version see a pinned one (PINNED_CANN), read from no
library."""

import os

IN_ENV = os.environ.get("OP_SDK_TORCH_NPU_REAL") == "1"
PINNED_CANN = "8.5.0"

collect_ignore_glob = [] if IN_ENV else ["test_*.py"]

if IN_ENV:
    import torch

    import torch_npu  # noqa: F401

    assert torch.npu.is_available() is False, "a device is visible: refusing to run"
    assert torch_npu.__file__.startswith(os.environ["OP_SDK_TORCH_NPU_SITE"]), torch_npu.__file__
    from torch_npu.op_plugin.meta import _meta_registrations as _meta

    _meta.get_cann_version = lambda module="CANN": PINNED_CANN

    import sys

    assert "op_sdk" not in sys.modules, "op_sdk was imported before the registry was read"
    # the npu operators torch_npu itself defines, read before op_sdk backfills what it lacks
    # (an in-tree npu_* slice torch_npu does not have: op_sdk defines and binds it)
    TORCH_NPU_DEFINES = frozenset(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("npu::"))
    # ... and those of them with a Meta kernel of torch_npu's (op_sdk registers its fake for
    # the others: npu_format_cast, get_npu_format)
    TORCH_NPU_META = frozenset(n for n in TORCH_NPU_DEFINES
                               if torch._C._dispatch_has_kernel_for_dispatch_key(n, "Meta"))
else:
    TORCH_NPU_DEFINES = TORCH_NPU_META = frozenset()
