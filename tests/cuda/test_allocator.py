"""The caching allocator under CUDA tensors: reuse without cuMemAlloc, splitting, per-stream
pools, cross-stream safety, stats and empty_cache."""
import threading

import numpy as np
import pytest

import lowlevel as ll
from lowlevel import cuda
from lowlevel.cuda.allocator import CachingAllocator


def test_reuse_does_not_call_the_driver(driver):
    alloc = CachingAllocator()
    stream = cuda.Stream()
    first = alloc.allocate(10_000, stream)
    assert alloc.driver_allocs == 1
    alloc.free(first)
    again = alloc.allocate(9_000, stream)           # same stream: reused at once
    assert alloc.driver_allocs == 1 and again.ptr == first.ptr
    alloc.free(again)


def test_small_blocks_split_one_segment(driver):
    alloc = CachingAllocator()
    blocks = [alloc.allocate(1000) for _ in range(100)]
    assert alloc.driver_allocs == 1                  # all in one 2 MiB segment
    ptrs = sorted(b.ptr for b in blocks)
    assert all(b - a >= 1024 for a, b in zip(ptrs, ptrs[1:]))      # no overlap (rounded to 512)
    stats = alloc.stats()
    assert stats["allocated"] == 100 * 1024 and stats["reserved"] == 2 << 20
    for b in blocks:
        alloc.free(b)
    assert alloc.stats()["allocated"] == 0 and alloc.stats()["peak"] == 100 * 1024
    # The freed pieces merged back: two blocks of nearly 1 MiB fit the 2 MiB segment again.
    halves = [alloc.allocate((1 << 20) - 512) for _ in range(2)]
    assert alloc.driver_allocs == 1
    for b in halves:
        alloc.free(b)


def test_pools_are_per_stream(driver):
    alloc = CachingAllocator()
    s1, s2 = cuda.Stream(), cuda.Stream()
    block = alloc.allocate(4096, s1)
    alloc.free(block)
    other = alloc.allocate(4096, s2)                # another stream: never the same memory
    assert other.segment is not block.segment
    alloc.free(other)


def test_block_used_on_another_stream_waits_for_that_work(driver):
    alloc = CachingAllocator()
    s1, s2 = cuda.Stream(non_blocking=True), cuda.Stream(non_blocking=True)
    block = alloc.allocate(4096, s1)
    gate = threading.Event()
    s2.add_callback(lambda: gate.wait(20))           # s2's work on the block is still pending
    alloc.record_stream(block, s2)
    alloc.free(block)
    fresh = alloc.allocate(4096, s1)
    assert fresh.ptr != block.ptr                   # held back while s2 may still use it
    gate.set()
    s2.synchronize()
    alloc.free(fresh)
    reused = {alloc.allocate(4096, s1).ptr for _ in range(2)}
    assert block.ptr in reused


def test_empty_cache_returns_free_segments(driver):
    alloc = CachingAllocator()
    big = alloc.allocate(8 << 20)
    assert alloc.stats()["reserved"] == 8 << 20
    alloc.free(big)
    before = cuda.mem_get_info()[0]
    alloc.empty_cache()
    assert alloc.stats()["reserved"] == 0 and alloc.stats()["segments"] == 0
    assert cuda.mem_get_info()[0] >= before + (8 << 20) - (2 << 20)


def test_tensors_use_the_allocator(driver, rng):
    cuda.empty_cache()
    start = cuda.memory_stats()
    for _ in range(20):
        t = ll.tensor(rng.standard_normal((64, 64)).astype(np.float32), device="cuda")
        u = (t * 2).sum(0)
        del t, u
    stats = cuda.memory_stats()
    assert stats["driver_allocs"] - start["driver_allocs"] <= 1   # one segment served them all
    assert stats["peak"] >= 64 * 64 * 4


def test_a_freed_block_is_taken_again_by_a_request_of_its_size(driver):
    """The fast path: a freed block is kept whole for its stream and rounded size, so the
    next request of that size on that stream takes it as it is (no split, no new Block)."""
    alloc = CachingAllocator()
    s1, s2 = cuda.Stream(), cuda.Stream()
    first = alloc.allocate(1000, s1)
    alloc.free(first)
    again = alloc.allocate(700, s1)                 # rounds to the same 1024 bytes
    assert again is first and alloc.stats()["allocated"] == 1024
    alloc.free(again)
    other = alloc.allocate(1000, s2)                # another stream never takes it
    assert other.segment is not first.segment
    with pytest.raises(RuntimeError, match="double free"):
        alloc.free(again)
    alloc.free(other)


def test_kept_blocks_merge_before_a_new_segment_and_in_empty_cache(driver):
    alloc = CachingAllocator()
    blocks = [alloc.allocate(4096) for _ in range(4)]
    for b in blocks:
        alloc.free(b)                                # kept whole, each on its size's list
    # two blocks of nearly 1 MiB fit the 2 MiB segment only once the kept ones merged back
    halves = [alloc.allocate((1 << 20) - 512) for _ in range(2)]
    assert alloc.driver_allocs == 1 and halves[0].ptr == blocks[0].ptr
    for b in halves:
        alloc.free(b)
    alloc.empty_cache()                              # kept blocks' segments go back too
    assert alloc.stats()["reserved"] == 0 and alloc.stats()["segments"] == 0


def test_a_dropped_tensor_is_freed_at_the_allocators_next_safe_point(driver):
    """A storage's finalizer only queues its block (free_later); the next allocation, stats()
    or empty_cache() frees it, but not inside a host callback or while a capture is open."""
    from lowlevel.cuda import context
    t = ll.empty(300, device="cuda")
    alloc, block = t.storage.allocator, t.storage.block
    used = alloc.stats()["allocated"]
    del t
    assert block in alloc.returned and not block.free
    assert alloc.stats()["allocated"] == used - block.size and block.free     # stats() is a safe point
    for hold, release in ((lambda: context.set_in_host_callback(True), lambda: context.set_in_host_callback(False)),
                          (context.capture_began, context.capture_ended)):
        t = ll.empty(300, device="cuda")
        block = t.storage.block
        hold()
        try:
            del t
            other = alloc.allocate(300)                  # not a safe point now: the block waits
            assert block in alloc.returned and not block.free and other is not block
        finally:
            release()
        again = alloc.allocate(300)                      # a safe point: freed, and reused at once
        assert block.free is False and again is block and not alloc.returned
        alloc.free(other)
        alloc.free(again)
