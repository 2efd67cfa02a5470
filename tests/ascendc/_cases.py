"""Shapes of the kernel tests: (rows, cols, cores, ub bytes, expected tiling key).

Row counts leave a remainder over the blocks; the small unified-buffer sizes force the
split-row key (a row in chunks, with a tail chunk), and one mid size forces several
whole-row tiles per block with a tail tile.
"""

from tests.ascendc._kernels import UB_910B

WHOLE, SPLIT = 1, 2

CASES = [
    (5, 1, 1, UB_910B, WHOLE),
    (10, 7, 3, UB_910B, WHOLE),
    (19, 33, 8, UB_910B, WHOLE),
    (43, 96, 40, UB_910B, WHOLE),
    (21, 1000, 8, UB_910B, WHOLE),
    (23, 1000, 1, 40 * 1024, WHOLE),   # several tiles per block, a tail tile
    (7, 7168, 3, UB_910B, WHOLE),
    (41, 7168, 40, UB_910B, WHOLE),
    (7, 1000, 3, 8 * 1024, SPLIT),     # chunks of a 1000-element row, a tail chunk
    (9, 7168, 8, 16 * 1024, SPLIT),
    (3, 300, 1, 4 * 1024, SPLIT),
]


def case_id(c):
    rows, cols, cores, ub, key = c
    return f"r{rows}-h{cols}-b{cores}-{'whole' if key == WHOLE else 'split'}-ub{ub // 1024}k"


def check_key(key, case):
    """The split-row cases must take the split-row key; the whole-row cases of long rows may
    take either (whether a 7168-element row fits whole depends on the dtype and on how many
    buffers the operator keeps); the others must take the whole-row key."""
    rows, cols, cores, ub, want = case
    if want == SPLIT:
        assert key == SPLIT, f"tiling key {key}, expected the split-row key {SPLIT}"
    elif cols >= 1000:
        assert key in (WHOLE, SPLIT), f"tiling key {key}"
    else:
        assert key == WHOLE, f"tiling key {key}, expected the whole-row key {WHOLE}"
