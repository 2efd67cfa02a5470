"""The `ascendc` marker and the session's kernel builder (tests/ascendc/_kernels.py)."""

import pytest

from tests.ascendc._kernels import KernelBuilder, compiler


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "ascendc: Ascend C kernels (kernels/ascendc) compiled with g++ against the CPU model of "
        "the Ascend C API and compared with the operators' references")


@pytest.fixture(scope="session")
def kernels(tmp_path_factory):
    cxx = compiler()
    if cxx is None:
        pytest.skip("g++ not found: the Ascend C kernel tests compile the kernels with g++ (set CXX to another compiler)")  # noqa: E501
    b = KernelBuilder(tmp_path_factory.mktemp("ascendc_build"), cxx)
    yield b
    b.close()
