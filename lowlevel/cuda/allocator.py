"""A caching allocator for tensor memory: cuMemAlloc once, reuse many times.

cuMemAlloc is slow and, on a real GPU, synchronises the device; a tensor library that
called it for every result would serialise everything. So memory is taken from the driver
in segments and handed out in blocks:

  - requests are rounded up to 512 bytes; those under 1 MiB share 2 MiB segments, larger
    ones get a segment of their own size rounded up to 2 MiB;
  - a block larger than the request is split, and the rest stays free;
  - a freed block goes back to the pool of the stream it was allocated on, where the next
    request on that stream may take it at once: stream order guarantees the old work on it
    comes first. A block also used on other streams (record_stream) is held back until an
    event recorded on each of them has passed, checked without waiting;
  - neighbouring free blocks of a segment merge; empty_cache() returns whole free
    segments to the driver;
  - while a CUDA graph captures (graph_capture.py), what is allocated on its capturing
    stream comes from the graph's private pool (a GraphPool): the graph's replays write
    those addresses, so neither eager work nor another graph gets them while the graph
    lives. Memory freed into it stays in it; release_pool() returns it when the graph goes.

A tensor's storage hands its block back by `free_later` (a finalizer may run anywhere, even
inside this allocator's lock): the block waits in `returned` and is freed at the
allocator's next safe point (an allocation, stats(), empty_cache()) that is also one of
lowlevel's (no host callback running, no capture open: context.releases_allowed()).

The fast path: a freed block (used on no other stream) is first kept whole on a free list
of its pool (its stream's, or its graph's) and exact rounded size, so that the next request of that size on that
stream takes it in O(1), with no split and no merge (the loop of a program that makes the
same tensors over and over). A request that finds no block of its size there first merges
that stream's kept blocks back into its pool, then searches as above: nothing is lost to
the fast path, and the driver is asked for a segment only when merged memory does not fit.
"""
import collections
import ctypes
import threading

from ..capi.constants import STREAM_CAPTURE_MODE
from . import context
from .context import ensure_context, releases_allowed
from .memory import mem_alloc
from .stream import Event

ROUND = 512
SMALL_LIMIT = 1 << 20
SMALL_SEGMENT = 2 << 20
LARGE_ROUND = 2 << 20
RELAXED = STREAM_CAPTURE_MODE["CU_STREAM_CAPTURE_MODE_RELAXED"]


class GraphPool:
    """The private memory of one CUDA graph: the free-list key of its blocks, instead of a
    stream's handle. `dead` once the graph is gone (release_pool)."""

    __slots__ = ("name", "dead", "reserved")

    def __init__(self, name: str = "graph"):
        self.name, self.dead, self.reserved = name, False, 0

    def __repr__(self):
        return f"<GraphPool {self.name} {self.reserved} bytes{' (released)' if self.dead else ''}>"


class Block:
    """A piece of a segment: [ptr, ptr + size). `stream` is the handle it belongs to."""

    __slots__ = ("segment", "ptr", "size", "stream", "free", "prev", "next", "other_streams", "events")

    def __init__(self, segment, ptr: int, size: int, stream: int):
        self.segment, self.ptr, self.size, self.stream = segment, ptr, size, stream
        self.free = True
        self.prev = self.next = None
        self.other_streams: set = set()         # streams (objects) that also used this block
        self.events: list = []                  # events that must pass before reuse

    def __repr__(self):
        return f"<Block {self.ptr:#x} +{self.size} {'free' if self.free else 'used'}>"

    @property
    def address(self) -> int:
        """`ptr` for those outside the allocator: refused (ContextResetError) once the
        context its segment was allocated in is reset, when the address means nothing."""
        allocation = self.segment.allocation
        if allocation.context_generation != allocation.context.generation:
            allocation.check_context()
        return self.ptr


class _Segment:
    def __init__(self, allocation, stream: int, small: bool, pool):
        self.allocation = allocation            # the DeviceAllocation from cuMemAlloc
        self.stream = stream
        self.small = small
        self.pool = pool                        # the free-list key: `stream`, or a GraphPool


class CachingAllocator:
    """One per device context. Thread-safe."""

    def __init__(self):
        self._lock = threading.RLock()
        self._free: dict[tuple, list[Block]] = {}   # (pool key, small) -> free blocks
        self._kept: dict[tuple, list[Block]] = {}   # (pool key, size) -> freed whole, unmerged
        self._released: list = []                   # allocations to free outside the lock
        self.returned: collections.deque = collections.deque()  # dropped by their storage: free_later
        self._pending: list[Block] = []                         # freed, waiting for events
        self._segments: list[_Segment] = []
        self.allocated = 0          # bytes in blocks handed out
        self.reserved = 0           # bytes in segments held from the driver
        self.peak = 0
        self.driver_allocs = 0      # how many times cuMemAlloc was called
        self._capturing: dict = {}  # stream handle -> the GraphPool its allocations come from

    # -- allocate ---------------------------------------------------------------------------
    def allocate(self, nbytes: int, stream=None) -> Block:
        return self.allocate_on(nbytes, 0 if stream is None else stream.handle)

    def allocate_on(self, nbytes: int, handle: int) -> Block:
        """allocate() for the handle of a stream (0: the legacy default stream) already read."""
        size = -(-nbytes // ROUND) * ROUND
        if size < ROUND:
            size = ROUND
        with self._lock:
            # The pool key: the stream's handle, or the GraphPool of a capturing stream.
            pool = self._capturing.get(handle, handle) if self._capturing else handle
            returned = self.returned
            if returned:
                # The op loop's case: the one block waiting is the one just dropped, and
                # _free_returned would keep it whole for (pool, size), where this request
                # would take it back at once (the kept list is last in, first out). It is
                # handed out again without the round trip: still counted in `allocated`,
                # still not free, as handed out. It involves no driver call (no event, no
                # free), so it needs no safe point. Any other case: the round trip, at one.
                block = returned[0] if len(returned) == 1 else None
                if block is not None and block.size == size and not block.free and not block.other_streams \
                        and block.segment.pool == pool and type(pool) is not GraphPool \
                        and not (context.shutting_down or self._pending or self._released):
                    returned.popleft()          # block: only the lock's holder takes from the left
                    return block
                if releases_allowed():
                    self._free_returned()
            # cuEventQuery may not be called during a (global) capture: freed blocks that
            # wait for events stay pending until no graph captures.
            if self._pending and not self._capturing:
                self._release_passed_events()
            kept = self._kept.get((pool, size))
            if kept:
                block = kept.pop()                  # the fast path: a whole block of this size
            else:
                small = size < SMALL_LIMIT
                self._merge_kept(pool)
                block = self._take_free(size, pool, small) or self._new_segment(size, handle, small, pool)
            block.free = False
            self.allocated += block.size
            if self.allocated > self.peak:
                self.peak = self.allocated
        if self._released:
            self._free_released()
        return block

    def _merge_kept(self, pool) -> None:
        """Return the blocks kept whole for pool key `pool` (None: every pool) to their
        free lists, merging them with their free neighbours."""
        for key in [k for k, blocks in self._kept.items() if blocks and (pool is None or k[0] == pool)]:
            for block in self._kept.pop(key):
                self._return(block)

    def _take_free(self, size: int, key, small: bool) -> Block | None:
        pool = self._free.get((key, small))
        if not pool:
            return None
        best = None
        for b in pool:                           # best fit
            if b.size >= size and (best is None or b.size < best.size):
                best = b
        if best is None:
            return None
        pool.remove(best)
        return self._split(best, size, pool)

    def _split(self, block: Block, size: int, pool: list) -> Block:
        rest = block.size - size
        # Split small blocks always; large ones only when the rest is worth keeping.
        if rest >= ROUND and (block.segment.small or rest >= SMALL_LIMIT):
            tail = Block(block.segment, block.ptr + size, rest, block.stream)
            tail.prev, tail.next = block, block.next
            if block.next is not None:
                block.next.prev = tail
            block.next = tail
            block.size = size
            pool.append(tail)
        return block

    def _new_segment(self, size: int, stream: int, small: bool, pool) -> Block:
        seg_size = SMALL_SEGMENT if small else -(-size // LARGE_ROUND) * LARGE_ROUND
        if isinstance(pool, GraphPool):
            allocation = _alloc_while_capturing(seg_size)
        else:
            try:
                allocation = mem_alloc(seg_size)
            except Exception:
                # Out of memory with segments cached: give them back (and the tensors the
                # caches above hold, which may pin segments of streams long gone) and try
                # once more.
                for callback in list(_empty_cache_callbacks):
                    callback()
                self.empty_cache()
                allocation = mem_alloc(seg_size)
        self.driver_allocs += 1
        segment = _Segment(allocation, stream, small, pool)
        self._segments.append(segment)
        self.reserved += seg_size
        if isinstance(pool, GraphPool):
            pool.reserved += seg_size
        block = Block(segment, allocation.ptr, seg_size, stream)
        return self._split(block, size, self._free.setdefault((pool, small), []))

    # -- free -------------------------------------------------------------------------------
    def record_stream(self, block: Block, stream) -> None:
        """Note that work on `stream` (not the block's own) uses `block`."""
        if stream is not None and stream.handle != block.stream:
            block.other_streams.add(stream)

    def free_later(self, block: Block) -> None:
        """Free `block` at the allocator's next safe point: what a finalizer calls (a deque's
        append takes no lock of lowlevel's, wherever the collector runs it)."""
        self.returned.append(block)

    def _free_returned(self) -> None:
        """Free the blocks free_later queued (with the lock held, at a safe point); an error
        (a broken context) is dropped, as the context's queued releases drop theirs."""
        returned, kept = self.returned, self._kept
        while returned:
            try:
                block = returned.popleft()
            except IndexError:              # another thread took the last one
                return
            pool = block.segment.pool
            if block.free or block.other_streams or context.shutting_down or type(pool) is GraphPool:
                try:
                    self._free_locked(block)        # the double free, the events, the exit, graphs
                except Exception:
                    pass
                continue
            # _free_locked's common case, inline: kept whole for its pool and size
            block.free = True
            self.allocated -= block.size
            blocks = kept.get((pool, block.size))
            if blocks is None:
                blocks = kept[(pool, block.size)] = []
            blocks.append(block)

    def free(self, block: Block) -> None:
        with self._lock:
            self._free_locked(block)
        if self._released:
            self._free_released()

    def _free_released(self) -> None:
        """cuMemFree the segments of dead graph pools taken under the lock, outside it (as
        in empty_cache: cuMemFree waits for the device)."""
        with self._lock:
            release, self._released = self._released, []
        for allocation in release:
            allocation.free()

    def _free_locked(self, block: Block) -> None:
        if context.shutting_down:
            return
        if block.free:
            raise RuntimeError(f"double free of {block!r}")
        block.free = True
        self.allocated -= block.size
        pool = block.segment.pool
        if type(pool) is GraphPool:
            # No other stream's order matters: nothing but this graph's (later) captures
            # takes from its pool, and a dead pool's memory goes back to the driver.
            block.other_streams = set()
            self._return(block)
            if pool.dead:
                self._released += self._take_dead_segments()
        elif block.other_streams:
            block.events = [Event(timing=False).record(s) for s in block.other_streams]
            block.other_streams = set()
            self._pending.append(block)
        else:
            kept = self._kept.get((pool, block.size))
            if kept is None:
                kept = self._kept[(pool, block.size)] = []
            kept.append(block)

    def _release_passed_events(self) -> None:
        still = []
        for block in self._pending:
            if all(e.query() for e in block.events):
                block.events = []
                self._return(block)
            else:
                still.append(block)
        self._pending = still

    def _return(self, block: Block) -> None:
        pool = self._free.setdefault((block.segment.pool, block.segment.small), [])
        for neighbour in (block.next, block.prev):      # merge with free neighbours
            if neighbour is not None and neighbour.free and neighbour in pool:
                pool.remove(neighbour)
                first, second = (block, neighbour) if neighbour is block.next else (neighbour, block)
                first.size += second.size
                first.next = second.next
                if second.next is not None:
                    second.next.prev = first
                block = first
        pool.append(block)

    # -- graph pools ------------------------------------------------------------------------
    def begin_pool(self, stream, pool: GraphPool) -> None:
        """From now on, allocations on `stream` (a capturing one) come from `pool`."""
        with self._lock:
            self._capturing[stream.handle] = pool

    def end_pool(self, stream) -> None:
        """Allocations on `stream` come from its own pool again (the capture ended)."""
        with self._lock:
            self._capturing.pop(stream.handle, None)

    def release_pool(self, pool: GraphPool) -> None:
        """The graph of `pool` is gone: its wholly free segments go back to the driver now
        (cuMemFree waits for replays still running), the others when their last block is
        freed."""
        with self._lock:
            pool.dead = True
            self._released += self._take_dead_segments()
        self._free_released()

    # -- giving memory back -----------------------------------------------------------------
    def _take_whole_segments(self, wanted) -> list:
        """Remove the wholly free segments for which `wanted(segment)` holds; their
        allocations, to be freed outside the lock."""
        keep, release = [], []
        for seg in self._segments:
            pool = self._free.get((seg.pool, seg.small), [])
            whole = [b for b in pool if b.segment is seg and b.prev is None and b.next is None] \
                if wanted(seg) else []
            if whole:
                pool.remove(whole[0])
                self.reserved -= seg.allocation.size
                if isinstance(seg.pool, GraphPool):
                    seg.pool.reserved -= seg.allocation.size
                release.append(seg.allocation)
            else:
                keep.append(seg)
        self._segments = keep
        return release

    def _take_dead_segments(self) -> list:
        return self._take_whole_segments(lambda seg: isinstance(seg.pool, GraphPool) and seg.pool.dead)

    def empty_cache(self) -> None:
        """Give every wholly free segment back to the driver (cuMemFree synchronises); a
        live graph's pool keeps its memory (its replays write there)."""
        with self._lock:
            if releases_allowed():
                self._free_returned()
            if not self._capturing:
                self._release_passed_events()
            self._merge_kept(None)
            self._released += self._take_whole_segments(
                lambda seg: not isinstance(seg.pool, GraphPool) or seg.pool.dead)
        # Outside the lock: cuMemFree waits for the device, and a stream worker that drops
        # a tensor meanwhile must be able to return its block.
        self._free_released()

    def stats(self) -> dict:
        with self._lock:
            if self.returned and releases_allowed():
                self._free_returned()
            graphs = sum(seg.allocation.size for seg in self._segments if isinstance(seg.pool, GraphPool))
        self._free_released()
        return {"allocated": self.allocated, "reserved": self.reserved, "peak": self.peak,
                "segments": len(self._segments), "driver_allocs": self.driver_allocs,
                "graph_reserved": graphs}


def _alloc_while_capturing(nbytes: int):
    """cuMemAlloc for a graph's pool while its stream captures. cuMemAlloc is a
    "potentially unsafe" call that a global or thread-local capture forbids; here it is
    safe (the memory stays allocated for as long as the graph can run), so it is made in
    the thread's relaxed interaction mode, then the mode is put back, as the driver's
    cuThreadExchangeStreamCaptureMode documents it (and as PyTorch's allocator does)."""
    drv, _ = ensure_context()
    mode = ctypes.c_int(RELAXED)
    drv.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode))
    try:
        return mem_alloc(nbytes)
    finally:
        drv.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode))


_allocators: dict = {}
_lock = threading.Lock()


def get_allocator() -> CachingAllocator:
    """The caching allocator of the current device context."""
    drv, ctx = ensure_context()
    return allocator_of(drv, ctx)


def allocator_of(drv, ctx) -> CachingAllocator:
    """The caching allocator of context `ctx` of driver `drv` (as ensure_context returns
    them), in its current generation: for a caller that has looked the context up already."""
    key = (id(drv), ctx.ordinal, ctx.generation)
    alloc = _allocators.get(key)            # made once per context: the lock only to make it
    if alloc is None:
        with _lock:
            alloc = _allocators.get(key)
            if alloc is None:
                alloc = _allocators[key] = CachingAllocator()
    return alloc


def memory_stats() -> dict:
    """allocated, reserved and peak bytes (and segments, driver_allocs) of the current device."""
    return get_allocator().stats()


_empty_cache_callbacks: list = []


def on_empty_cache(callback) -> None:
    """Call `callback()` at the start of empty_cache(): a cache of tensors above the
    allocator (the frontend's constants) lets go of its blocks, so that their segments can
    go back to the driver too."""
    if callback not in _empty_cache_callbacks:
        _empty_cache_callbacks.append(callback)


def empty_cache() -> None:
    for callback in list(_empty_cache_callbacks):
        callback()
    get_allocator().empty_cache()       # get_allocator's safe point frees what they dropped
