"""Every constraint of every operator (the CASES and BAD_CALLS of tests/ops/test_<slice>.py)
raises an error naming the operator, the argument and the rule: CASES both from the kernel
(CPU) and from the fake function (meta tensors); BAD_CALLS from the native kernel's own
checks and from the reference alike."""

import pytest
import torch

from tests.ops import gather, opdef

CASES = gather("CASES")
BAD_CALLS = gather("BAD_CALLS")


def _build(v, device):
    if isinstance(v, tuple) and len(v) == 3 and v[0] == "T":
        _, shape, dtype = v
        if dtype.is_floating_point:
            return (torch.rand(shape, device=device) + 0.5).to(dtype)
        return torch.zeros(shape, dtype=dtype, device=device)
    if isinstance(v, (list, tuple)):
        return type(v)(_build(x, device) for x in v)
    if isinstance(v, dict):
        return {k: _build(x, device) for k, x in v.items()}
    return v


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_constraint_raises_naming_op_and_argument(case, device):
    _, name, args, kwargs, arg, exc = case
    op = opdef(name)
    with pytest.raises(exc) as info:
        op(*_build(args, device), **_build(kwargs, device))
    msg = str(info.value)
    assert op.packet.rstrip("_") in msg, msg  # the operator, not its overload
    assert f"'{arg}'" in msg, msg
    # the rule is stated, not just the names
    assert len(msg) > len(op.name) + len(arg) + 20, msg


@pytest.mark.parametrize("i", range(len(BAD_CALLS)),
                         ids=lambda i: f"{BAD_CALLS[i][0]}-{BAD_CALLS[i][1]}-{i}")
def test_constraint_violation_names_operator_and_argument(i):
    """The C++ launcher and the Python reference reject the call naming the same argument."""
    name, arg, args, kwargs = BAD_CALLS[i]
    op = opdef(name)
    assert "cpu" in op.native, f"{name} has no native CPU kernel: its checks belong in CASES"
    for fn in (op.op, op.reference):
        with pytest.raises(RuntimeError) as info:
            fn(*args, **kwargs)
        assert f"{op.packet}: argument '{arg}'" in str(info.value), str(info.value)
