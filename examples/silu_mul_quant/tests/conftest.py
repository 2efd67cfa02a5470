"""The `ascendc` marker and the session's Ascend C kernel builder: tests/ascendc/driver_<slice>.cpp
compiled with g++ against op_sdk's CPU model of the Ascend C API (op_sdk.app.ascendc_run)."""

import pathlib

import pytest

from op_sdk.app import ascendc_run

ROOT = pathlib.Path(__file__).resolve().parents[1]


def pytest_configure(config):
    config.addinivalue_line("markers", "ascendc: Ascend C kernels run on the CPU model of the Ascend C API")


@pytest.fixture(scope="session")
def kernels(tmp_path_factory):
    builder = ascendc_run.Builder(ROOT / "kernels" / "ascendc", tmp_path_factory.mktemp("ascendc_build"),
                                  drivers=ROOT / "tests" / "ascendc")
    if builder.cxx is None:
        pytest.skip("g++ not found: the Ascend C kernel tests compile the kernels with g++ (set CXX)")
    return builder
