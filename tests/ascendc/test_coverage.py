"""Every Ascend C kernel of kernels/ascendc/ is run on the CPU model: its folder's op_kernel
source is included by a driver that calls its kernel entry, that the kernel builder compiles
and a test file calls, so the level "CPU-model tested" that `op-sdk ops --npu` and
docs/operators.md report for it (op_sdk/app/deliverables.py) is one these tests establish."""

import re

import pytest

import op_sdk
from op_sdk.app.deliverables import ascendc_kernel, ascendc_root
from tests.ascendc._kernels import HERE, KERNELS, variants

pytestmark = pytest.mark.ascendc

KERNEL_FOLDERS = sorted(p.name for p in KERNELS.iterdir()
                        if p.is_dir() and (p / "op_kernel" / f"{p.name}.cpp").is_file())


def _drivers_including(folder: str) -> list[str]:
    pattern = f'#include "{folder}/op_kernel/{folder}.cpp"'
    return [p.stem[len("driver_"):] for p in HERE.glob("driver_*.cpp") if pattern in p.read_text()]


def test_there_are_kernels():
    assert len(KERNEL_FOLDERS) >= 8, KERNEL_FOLDERS


@pytest.mark.parametrize("folder", KERNEL_FOLDERS)
def test_every_kernel_has_a_driver_that_is_built_and_called(folder):
    drivers = _drivers_including(folder)
    assert drivers, f"no tests/ascendc/driver_*.cpp includes kernels/ascendc/{folder}"
    built = {d for d, _ in variants()}
    tests = " ".join(p.read_text() for p in HERE.glob("test_*.py") if p.name != "test_coverage.py")
    entry = re.compile(rf"(?<![\w.]){folder}\s*\(\s*\(GM_ADDR\)")
    assert any(entry.search((HERE / f"driver_{d}.cpp").read_text()) for d in drivers), \
        f"no driver calls the kernel entry {folder}(...) (including its source is not running it)"
    for driver in drivers:
        assert driver in built, (f"driver_{driver}.cpp is not among the kernel builder's variants "
                                 f"(a test module's VARIANTS)")
        assert re.search(rf"""\blib\(\s*["']{driver}["']""", tests + (HERE / "_kernels.py").read_text()), \
            f"no test calls the {driver} driver"


def test_reported_level_follows_the_kernel_folders():
    assert ascendc_root() is not None
    for opdef in op_sdk.registered_ops():
        if not opdef.module.startswith("op_sdk.ops.") or opdef.namespace != "npu":
            continue
        level = ascendc_kernel(opdef)
        if opdef.slice in KERNEL_FOLDERS:
            assert level.startswith("source + CPU-model tested"), (opdef.name, level)
        else:
            assert level.startswith("CANN's own kernel"), (opdef.name, level)
