"""What fusions 10 and 11 (npu_add_rms_norm / npu_rms_norm -> npu_dynamic_mx_quant) share: the
variants' forms, the check of npu_dynamic_mx_quant's arguments and the example inputs.

The patterns ignore literal ints and dtypes and do not compare keyword arguments they leave
out, so npu_dynamic_mx_quant's other arguments are checked here: the fused operators quantise
the last dim in blocks of 32 with round_mode "rint", no dst_type_max, no max_low_bound.
dst_type is a pattern scalar (npu_dynamic_mx_quant's keyword-only arguments reach the
post-grad graph spelled, the default too); scale_alg is 1 (``sa1``) or 0, each by its own
variants: a match whose scale_alg is the other variants' is handed to them.
"""

from __future__ import annotations

import torch

from op_sdk.ops._mx import MX_BLOCK
from op_sdk.patterns.checks import node_of, val

npu = torch.ops.npu


def forms(optional_outputs: tuple[str, ...]) -> list[dict]:
    """The variants, most explicit first: scale_alg 1 (a literal of the composite) or 0,
    epsilon spelled or left out, ``optional_outputs`` used or not; dst_type a pattern
    scalar; rstd unused."""
    out = []
    for sa in (1, None):
        for eps in (True, False):
            for used in (True, False) if optional_outputs else (None,):
                f = {"dst_type": True, "epsilon": eps, "rstd": False}
                f.update({o: used for o in optional_outputs})
                if sa is not None:
                    f["scale_alg"] = sa
                out.append(f)
    return out


def name(c: dict) -> str:
    parts = [p for p, on in (("sa1", c.get("scale_alg") == 1), ("eps", c["epsilon"])) if on]
    parts += [o if c[o] else f"no_{o}" for o in ("x_out",) if o in c]
    return "+".join(parts) or "composite"


def mx_args(match) -> str | None | bool:
    dq = node_of(match, npu.npu_dynamic_mx_quant.default)
    kw = dq.kwargs
    parts = getattr(match, "op_sdk_variant", "").split("+")
    alg = kw.get("scale_alg", 0)
    if (alg if alg is not None else 0) != (1 if "sa1" in parts else 0):
        return False  # the other scale_alg's variants
    y = val(dq.args[0])
    bad = []
    axis = kw.get("axis", -1)
    if axis not in (-1, y.dim() - 1):
        bad.append(f"axis={axis}")
    if kw.get("block_size", MX_BLOCK) != MX_BLOCK:
        bad.append(f"block_size={kw['block_size']}")
    if kw.get("round_mode", "rint") != "rint":
        bad.append(f"round_mode={kw['round_mode']!r}")
    for arg in ("dst_type_max", "max_low_bound"):
        if kw.get(arg, 0.0) != 0.0:
            bad.append(f"{arg}={kw[arg]}")
    if bad:
        return ("npu_dynamic_mx_quant is called with " + ", ".join(bad) + "; the fused "
                "operator quantises the last dim in blocks of 32 with round_mode 'rint' "
                "(no dst_type_max / max_low_bound)")
    return None


def example_inputs(activations: tuple[str, ...], dtype, tokens: int, hidden: int,
                   lead: tuple[int, ...]) -> dict:
    """The fusions' example inputs: each activation (lead..., tokens, hidden) normal, then
    gamma in [0.5, 1.5), in ``dtype``; epsilon 1e-5 and dst_type float8_e4m3fn (292)."""
    shape = (*lead, tokens, hidden)
    g = torch.Generator().manual_seed(tokens)
    out = {name: torch.randn(shape, generator=g).to(dtype) for name in activations}
    out["gamma"] = (torch.rand(hidden, generator=g) + 0.5).to(dtype)
    return {**out, "epsilon": 1e-5, "dst_type": 292}
