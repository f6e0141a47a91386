"""The arena behind the driver's device memories: one memfd seen by the emulator and, on the
pages managed and page-locked allocations open, by the host at the device addresses."""
import ctypes

import numpy as np
import pytest

from lowlevel.emu.engine.hostwindow import ADDRESS_SPACE, ORIGIN, PAGE, Arena, HostRanges
from lowlevel.emu.engine.memory import BASE, AccessFault, DeviceMemory

WINDOW = 1 << 44            # a test window well away from the driver's at BASE


def test_window_and_emulator_view_share_bytes(rng):
    arena = Arena(1 << 24, WINDOW)
    try:
        page = int(rng.integers(0, (1 << 24) // PAGE))
        arena.expose(page * PAGE, 1, True)                  # opens the whole page
        data = rng.integers(0, 256, PAGE, dtype=np.uint8)
        ctypes.memmove(WINDOW + page * PAGE, data.ctypes.data, PAGE)
        view = np.frombuffer(arena.map, np.uint8)
        np.testing.assert_array_equal(view[page * PAGE:(page + 1) * PAGE], data)
        view[page * PAGE] ^= 0xFF
        assert ctypes.c_uint8.from_address(WINDOW + page * PAGE).value == data[0] ^ 0xFF
        arena.discard(page * PAGE, PAGE)                    # reads as zeros on both sides
        assert ctypes.string_at(WINDOW + page * PAGE, PAGE) == bytes(PAGE)
        assert not view[page * PAGE:(page + 1) * PAGE].any()
    finally:
        arena.close()


def test_a_second_window_at_the_same_address_is_refused():
    arena = Arena(1 << 20, WINDOW)
    try:
        with pytest.raises(OSError, match="EEXIST"):
            Arena(1 << 20, WINDOW)
    finally:
        arena.close()


def test_visible_allocations_hold_whole_pages(rng):
    mem = DeviceMemory(1 << 24)
    plain = [mem.alloc(int(rng.integers(1, 3000))) for _ in range(3)]
    shown = [mem.alloc(int(rng.integers(1, 3 * PAGE)), visible=True, counted=False) for _ in range(3)]
    more = [mem.alloc(int(rng.integers(1, 3000))) for _ in range(3)]
    pages = {a // PAGE for a in plain + more}
    for a in shown:
        assert a % PAGE == 0
        size = mem.find(a)[1]
        assert not pages & set(range(a // PAGE, -(-(a + size) // PAGE)))     # no device bytes there
    assert mem.used() == sum(max(512, -(-mem.find(a)[1] // 512) * 512) for a in plain + more)
    mem.free(shown[1])
    mem.release()
    assert mem.used() == 0 and mem.find(plain[0]) is None
    with pytest.raises(AccessFault):
        mem.offsets(np.array([shown[0]], np.uint64), 4)


def test_offsets_index_the_address_space(rng):
    mem = DeviceMemory(1 << 22)
    a = mem.alloc(4096)
    values = rng.standard_normal(1024).astype(np.float32)
    ctypes.memmove(mem.host_address(a), values.ctypes.data, values.nbytes)
    idx = mem.offsets(a + 4 * np.arange(1024, dtype=np.uint64), 4) // 4
    np.testing.assert_array_equal(mem.view(np.float32)[idx], values)
    assert int(mem.offsets(np.array([a], np.uint64), 1)[0]) + ORIGIN == mem.host_address(a)
    assert a >= BASE


def test_host_ranges_shift_and_bounds(rng):
    ranges = HostRanges()
    host = rng.standard_normal(int(rng.integers(1, 500))).astype(np.float64)
    start = host.ctypes.data
    ranges.add(start, host.nbytes)
    addrs = start + 8 * np.arange(host.size + 1, dtype=np.uint64)       # one past the end
    inside, shifts = ranges.shifts(addrs, 8)
    assert inside[:-1].all() and not inside[-1]
    np.testing.assert_array_equal(ADDRESS_SPACE.view(np.float64)[(addrs[:-1].astype(np.int64) + shifts[:-1]) // 8], host)
    assert ranges.find(start + 3) == (start, host.nbytes) and ranges.find(start + host.nbytes) is None
    ranges.remove(start)
    assert not ranges.shifts(addrs, 8)[0].any()
