"""The caching allocator's shortcut for the block just dropped (an op loop: the last result
goes as the next is made): the same block the round trip through the kept list would give,
with the same accounting, and never a block that must wait (used on another stream), one
of another stream or size, or one of a graph's pool."""
import threading

import numpy as np

from lowlevel import cuda
from lowlevel.cuda.allocator import CachingAllocator, GraphPool


def _replay(steps, dropped: bool, stream_handle: int):
    """(ptr, size) of each block a sequence of (nbytes, on the other stream?) requests gets,
    each previous block dropped (free_later: the shortcut may apply) or freed (free(): it
    cannot), then the stats."""
    alloc, got, last, segments = CachingAllocator(), [], None, {}
    for nbytes, other in steps:
        if last is not None:
            (alloc.free_later if dropped else alloc.free)(last)
        last = alloc.allocate_on(nbytes, stream_handle if other else 0)
        base = last.segment.allocation.ptr            # addresses as (segment, offset): each run has its own
        where = (segments.setdefault(base, len(segments)), last.ptr - base)
        got.append((where, last.size, last.stream, alloc.allocated, alloc.peak))
    alloc.free(last)
    return got, alloc.stats()


def test_a_dropped_block_is_reused_exactly_as_a_freed_one(driver):
    """The shortcut gives the block, sizes and stats free() then allocate() give, for
    repeats of one size (the shortcut), other sizes and another stream (the general path)."""
    stream = cuda.Stream()
    rng = np.random.default_rng(0)
    sizes = [300] * 5 + [int(n) for n in rng.integers(1, 5000, 60)] + [700] * 5
    steps = [(n, bool(flip)) for n, flip in zip(sizes, rng.integers(0, 2, len(sizes)) * (rng.random(len(sizes)) < 0.2))]
    assert _replay(steps, True, stream.handle) == _replay(steps, False, stream.handle)


def test_the_block_just_dropped_is_handed_out_again(driver):
    alloc = CachingAllocator()
    block = alloc.allocate_on(300, 0)
    alloc.free_later(block)
    again = alloc.allocate_on(512, 0)                 # the same rounded size
    assert again is block and not again.free and not alloc.returned and alloc.allocated == 512
    alloc.free(again)
    assert alloc.stats()["allocated"] == 0 and alloc.driver_allocs == 1


def test_a_block_used_on_another_stream_waits_for_that_stream(driver):
    """record_stream: the block waits for an event on the other stream (kept busy here by a
    host function that waits), as free() makes it wait; it is not handed out at once."""
    alloc = CachingAllocator()
    other, go = cuda.Stream(), threading.Event()
    other.add_callback(lambda: go.wait(30))
    block = alloc.allocate_on(512, 0)
    alloc.record_stream(block, other)
    alloc.free_later(block)
    try:
        again = alloc.allocate_on(512, 0)
        assert again is not block and block.events, "a block another stream uses was handed out at once"
    finally:
        go.set()
    other.synchronize()
    alloc.free(again)


def test_a_graph_pools_block_is_reused_within_the_graphs_pool(driver):
    alloc = CachingAllocator()
    stream, pool = cuda.Stream(), GraphPool("test")
    with cuda.stream(stream):
        alloc.begin_pool(stream, pool)
        try:
            block = alloc.allocate_on(512, stream.handle)
            alloc.free_later(block)
            again = alloc.allocate_on(512, stream.handle)
        finally:
            alloc.end_pool(stream)
    assert block.segment.pool is pool and again.segment.pool is pool
    assert again is block and alloc.allocated == 512      # merged back, then taken by best fit
    alloc.free(again)
    alloc.release_pool(pool)
    assert alloc.stats()["reserved"] == 0
