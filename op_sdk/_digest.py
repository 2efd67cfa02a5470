"""Content digests of Python callables: the identity of a user pass or a pattern function in
cache keys (the compiler's config fingerprint, a pattern registry's uuid)."""

from __future__ import annotations

import inspect

__all__ = ["callable_digest"]


def callable_digest(fn, _seen: frozenset = frozenset()) -> str | None:
    """A stable digest of a function's code (source when available, else bytecode and
    constants) and of the values it captured. None when that cannot be named (no code,
    or a captured object other than a scalar, dtype, device or function): such a
    callable cannot feed a cache key."""
    import hashlib

    if id(fn) in _seen:  # a function that captures itself (recursion)
        return "<recursive>"
    _seen = _seen | {id(fn)}
    fn = inspect.unwrap(fn)
    target = fn.func if hasattr(fn, "func") and hasattr(fn, "args") else fn  # partial
    h = hashlib.sha256()
    h.update(getattr(target, "__qualname__", type(target).__qualname__).encode())
    try:
        h.update(inspect.getsource(target).encode())
    except (OSError, TypeError):
        code = getattr(target, "__code__", None)
        if code is None:
            return None
        h.update(_code_bytes(code))
    # values a closure or partial captured change behaviour without changing the source
    captured = []
    for cell in getattr(target, "__closure__", None) or ():
        try:
            captured.append(cell.cell_contents)
        except ValueError:  # empty cell
            captured.append(None)
    if target is not fn:
        captured.extend([fn.args, sorted(fn.keywords.items())])
    for value in captured:
        text = _value_repr(value, _seen)
        if text is None:  # an object whose identity we cannot name: not hashable
            return None
        h.update(text.encode())
    return h.hexdigest()


def _code_bytes(code) -> bytes:
    parts = [code.co_code, repr(code.co_names).encode()]
    for const in code.co_consts:
        parts.append(_code_bytes(const) if inspect.iscode(const) else repr(const).encode())
    return b"|".join(parts)


def _value_repr(value, _seen: frozenset = frozenset()) -> str | None:
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    import torch

    if isinstance(value, (torch.dtype, torch.device)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        parts = [_value_repr(v, _seen) for v in value]
        return None if None in parts else "(" + ",".join(parts) + ")"
    if callable(value):
        return callable_digest(value, _seen)
    return None
