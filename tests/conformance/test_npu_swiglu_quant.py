# Conformance port of the upstream unit test of npu_swiglu_quant.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_swiglu_quant.py
#   read at commit 7634a584ca17b8ce54fc077749472a64a4c3a584. Rewritten for op_sdk on CPU,
#   not copied.
"""npu_swiglu_quant against upstream's torch golden (golden_swiglu_quant_torch), compared
with torch_npu's assertRtolEqual as upstream compares: y always, the scale in dynamic mode.

Upstream's one case: 4608 x 2048 float32, 8 MoE groups of 576 rows in cumsum mode, random
(signed) smooth_scales and offsets, activate_left False, dynamic quantisation, int8. The
other parameters run the same golden over its other branches (left activation, static
mode with offsets, count mode, no groups), as upstream's document describes them.
"""

import numpy as np
import pytest
import torch

from tests.conformance._golden import assert_rtol_equal, npu


def swiglu_quant_golden(x, smooth_scales, offsets, group_index, activate_left, quant_mode,
                        group_list_type, dst_type):
    """Upstream's golden: SwiGLU (right half activated unless activate_left), per group
    y * smooth + offset (static only), dynamic: scale = 127 / row max |y|, y * scale; round,
    clamp to [-128, 127], int8."""
    x1, x2 = torch.chunk(x, 2, dim=-1)
    silu = torch.nn.functional.silu
    y = silu(x1) * x2 if activate_left else x1 * silu(x2)
    dmax = 127.0 if dst_type in (torch.int8, None) else 7.0
    if group_index is not None:
        begin = 0
        for i, v in enumerate(group_index.tolist()):
            end = v if group_list_type == 0 else begin + v
            off = offsets[i] if offsets is not None and quant_mode == 0 else 0
            y[begin:end] = y[begin:end] * smooth_scales[i] + off
            begin = end
    else:
        y = y * smooth_scales + (offsets if quant_mode == 0 else 0)
    scale = None
    if quant_mode == 1:
        scale = dmax / torch.max(torch.abs(y), dim=1)[0]
        y = y * scale[:, None]
    return torch.clamp(torch.round(y), -1 - dmax, dmax).to(torch.int8), scale


CASES = {
    # upstream's test_npu_swiglu_quant
    "upstream": dict(rows=4608, hidden=2048, groups=8, activate_left=False, quant_mode=1,
                     group_list_type=0),
    "left": dict(rows=512, hidden=1024, groups=4, activate_left=True, quant_mode=1,
                 group_list_type=0),
    "static": dict(rows=512, hidden=1024, groups=4, activate_left=False, quant_mode=0,
                   group_list_type=0),
    "count": dict(rows=512, hidden=1024, groups=4, activate_left=True, quant_mode=1,
                  group_list_type=1),
    "no_groups": dict(rows=96, hidden=256, groups=None, activate_left=True, quant_mode=1,
                      group_list_type=0),
}


@pytest.mark.parametrize("case", CASES)
def test_npu_swiglu_quant(case, rng):
    c = CASES[case]
    rows, hidden, groups = c["rows"], c["hidden"], c["groups"]
    x = torch.from_numpy(rng.standard_normal((rows, hidden)).astype(np.float32))
    g = groups or 1
    smooth = torch.from_numpy(rng.standard_normal((g, hidden // 2)).astype(np.float32))
    offsets = torch.from_numpy(rng.standard_normal((g, hidden // 2)).astype(np.float32))
    index = None
    if groups is not None:
        size = rows // groups
        ends = [(i + 1) * size for i in range(groups)]
        values = ends if c["group_list_type"] == 0 else [size] * groups
        index = torch.tensor(values, dtype=torch.int32)
    y, scale = npu.npu_swiglu_quant(
        x, smooth_scales=smooth, offsets=offsets, group_index=index,
        activate_left=c["activate_left"], quant_mode=c["quant_mode"],
        group_list_type=c["group_list_type"], dst_type=torch.int8)
    want_y, want_scale = swiglu_quant_golden(
        x.clone(), smooth if groups is not None else smooth[0], offsets if groups is not None
        else offsets[0], index, c["activate_left"], c["quant_mode"], c["group_list_type"],
        torch.int8)
    assert_rtol_equal(want_y, y)
    if c["quant_mode"] == 1:
        assert_rtol_equal(want_scale, scale)
