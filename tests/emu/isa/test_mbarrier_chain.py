"""The mbarrier updates of many threads on one object at once (isa/mbarstate.py's
Arrive.group) against the same threads applied one at a time in lane order: returned
states and final objects, on random runs with phases completing mid-run, expect_tx and
complete_tx, arrive_drop, arrives beyond the pending count, tx-counts out of range and
invalid objects."""
import numpy as np
import pytest

from lowlevel.emu.engine.atomics import atomic_rmw
from lowlevel.emu.isa.mbarstate import Arrive, encode, update


def _one_at_a_time(view, idx, b, drop):
    old = np.empty(idx.size, np.uint64)
    for i in range(idx.size):
        old[i] = view[idx[i]]
        view[idx[i]] = update(view[idx[i]:idx[i] + 1], b[i:i + 1], drop)[0]
    return old


@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_group_matches_lane_order(drop, seed):
    rng = np.random.default_rng(seed)
    objects = int(rng.integers(1, 6))
    expected = rng.integers(1, 9, objects)
    words = encode(expected - rng.integers(0, 1, objects), expected, rng.integers(0, 2, objects),
                   rng.integers(-40, 40, objects) * (seed % 3 == 0))
    if seed % 4 == 1:
        words[0] = np.uint64(0)                       # invalid (mbarrier.inval)
    if seed % 5 == 2:
        words[-1] = encode(3, 5, 0, (1 << 20) - 8)    # tx-count about to leave its range
    n = int(rng.integers(2, 60))
    idx = rng.integers(0, objects, n)
    count = rng.integers(0, 3, n).astype(np.uint64)   # 0: expect_tx / complete_tx only
    tx = rng.choice([0, 0, 16, -16, 32, -32], n).astype(np.int64).astype(np.uint64)
    b = count | ((tx & np.uint64(0xFFFFFFFF)) << np.uint64(32))
    agrees_with_lane_order(words, idx, b, drop)


def agrees_with_lane_order(words, idx, b, drop):
    """The grouped arrivals return and leave what one thread at a time does."""
    ref_view = words.copy()
    ref = _one_at_a_time(ref_view, idx, b, drop)
    view = words.copy()
    got = atomic_rmw(view, idx, Arrive(drop), b)
    assert np.array_equal(got, ref)
    assert np.array_equal(view, ref_view)


@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize("tx", [0, 16])
def test_blocks_arriving_once_each(drop, tx):
    """The common run: each block's threads arrive once, the last completing the phase
    (with tx, each also counts and completes 16 bytes)."""
    rng = np.random.default_rng(7)
    blocks, threads = 4, 64
    words = encode(np.full(blocks, threads), np.full(blocks, threads), rng.integers(0, 2, blocks),
                   np.full(blocks, -tx * threads))
    idx = np.repeat(np.arange(blocks), threads)
    b = np.ones(idx.size, np.uint64) | (np.uint64(tx) << np.uint64(32))
    agrees_with_lane_order(words, idx, b, drop)
