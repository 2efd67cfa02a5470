import os
import shutil

import pytest


@pytest.fixture(scope="session")
def require_tool():
    """require_tool(name) -> the tool's path; skips without it, or fails under
    OP_SDK_REQUIRE_TOOLCHAINS=1 (.ci/run installs every tool these tests use)."""

    def find(name: str) -> str:
        path = shutil.which(name)
        if path is None:
            reason = (f"{name} is not installed (Debian: apt-get install cmake "
                      "g++-aarch64-linux-gnu qemu-user)")
            if os.environ.get("OP_SDK_REQUIRE_TOOLCHAINS") == "1":
                pytest.fail(reason + "; OP_SDK_REQUIRE_TOOLCHAINS=1 requires it")
            pytest.skip(reason)
        return path

    return find
