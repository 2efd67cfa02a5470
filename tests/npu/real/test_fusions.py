"""The default fusions fire on torch_npu's own schemas and Meta functions: every variant
of every default fusion, with the same exact counts and numerics as without torch_npu
(the checks of tests/test_patterns_fusions.py, run here beside the real torch_npu)."""

import pytest

from tests import test_patterns_fusions as fusions


@pytest.mark.parametrize("fusion,variant", fusions.CASES, ids=fusions.IDS)
def test_default_fusion_fires_on_torch_npu_schemas(fusion, variant):
    fusions.test_fires(fusion, variant)


def test_every_layer_of_a_decoder_fuses():
    fusions.test_every_layer_fuses_and_getitem_anchor_is_exact()
