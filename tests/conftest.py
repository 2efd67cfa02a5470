"""Markers of the suite (select with -m, e.g. `pytest -m torch_npu_real tests`)."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "torch_npu_real: runs checks inside an environment with the real torch_npu "
        "wheel and no-op CANN stub libraries (tests/npu/torch_npu_env.py)")
    config.addinivalue_line(
        "markers", "triton: a Triton kernel's test (tests/triton): natively on a CUDA device, "
        "else under Triton's interpreter on CPU")
