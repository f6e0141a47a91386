"""Context limits, stream priorities, and what identifies a device (UUID, PCI bus id).

cuCtxGetLimit/cuCtxSetLimit keep the limits per context, with the defaults an H200 reports.
The emulated GPU honours three of them: STACK_SIZE (the per-thread call stack of recursive
device functions, isa/recursion.py: a deeper recursion is a stack overflow), PRINTF_FIFO_SIZE (a launch's printf records beyond the
FIFO are dropped, as on a GPU; the emulator charges each record its formatted text, while a
GPU charges a header, the format pointer and the arguments, so the cut falls at a different
record), and MALLOC_HEAP_SIZE (device-side malloc returns NULL once the heap is used up,
isa/heap.py). As the driver documents, both must be set before the first launch of a kernel
that uses printf (malloc) in the context: afterwards a change is CUDA_ERROR_INVALID_VALUE.
The others are recorded.

Stream priorities range over [0, -5] (least, greatest), as on Hopper; out-of-range values
are clamped, as the driver documents. The emulator records them but does not schedule by
them: each stream's worker thread runs its work as the host's scheduler runs the thread.
"""
import bisect
import ctypes
import threading
import uuid

from ...capi.constants import DEVICE_ATTRIBUTE
from ...capi.memory_constants import LIMIT
from ..ptx.ir import Instruction
from ..tools.base import Tool
from . import device
from .context import Context, api, current, device_ordinal
from .entry import write_out
from .errors import EmuError
from .memory import allocate

LEAST_PRIORITY, GREATEST_PRIORITY = 0, -5
_L = {name.removeprefix("CU_LIMIT_"): value for name, value in LIMIT.items()}
DEFAULTS = {
    _L["STACK_SIZE"]: 1024,
    _L["PRINTF_FIFO_SIZE"]: 1 << 20,
    _L["MALLOC_HEAP_SIZE"]: 8 << 20,
    _L["DEV_RUNTIME_SYNC_DEPTH"]: 2,
    _L["DEV_RUNTIME_PENDING_LAUNCH_COUNT"]: 2048,
    _L["MAX_L2_FETCH_GRANULARITY"]: 64,
    _L["PERSISTING_L2_CACHE_SIZE"]: 0,
    _L["CIG_ENABLED"]: 0,                  # primary contexts are not CIG contexts
}
READ_ONLY = {_L["CIG_ENABLED"]}
# Set only before the first launch of a kernel that uses them: limit -> the pseudo instruction
FIXED_AFTER_USE = {_L["PRINTF_FIFO_SIZE"]: {"_vprintf"}, _L["MALLOC_HEAP_SIZE"]: {"_malloc", "_free"}}


def limit(ctx: Context, number: int) -> int:
    return ctx.limits.get(number, DEFAULTS[number])


def _known(number: int) -> None:
    if number not in DEFAULTS:
        raise EmuError("CUDA_ERROR_UNSUPPORTED_LIMIT", f"limit {number} is not supported by the emulated device")


@api
def cuCtxGetLimit(value_out, number):
    ctx = current()
    _known(number)
    write_out(ctypes.c_size_t, value_out, limit(ctx, number))


@api
def cuCtxSetLimit(number, value):
    ctx = current()
    _known(number)
    if number in READ_ONLY:
        raise EmuError("CUDA_ERROR_UNSUPPORTED_LIMIT", f"limit {number} can only be queried")
    if FIXED_AFTER_USE.get(number, set()) & ctx.used_calls:
        raise EmuError("CUDA_ERROR_INVALID_VALUE",
                       f"limit {number} must be set before the first launch of a kernel that uses it")
    if number == _L["MAX_L2_FETCH_GRANULARITY"] and value > 128:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"MAX_L2_FETCH_GRANULARITY {value} exceeds 128")
    if number == _L["PERSISTING_L2_CACHE_SIZE"] and value:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "the emulated device has no persisting L2 cache")
    ctx.limits[number] = value


@api
def cuCtxGetStreamPriorityRange(least_out, greatest_out):
    current()
    if least_out:
        write_out(ctypes.c_int, least_out, LEAST_PRIORITY)
    if greatest_out:
        write_out(ctypes.c_int, greatest_out, GREATEST_PRIORITY)


def clamp_priority(priority: int) -> int:
    return max(GREATEST_PRIORITY, min(LEAST_PRIORITY, priority))


# ---- identity ------------------------------------------------------------------------------
def device_uuid(ordinal: int) -> bytes:
    """16 bytes, stable for each emulated device (a name-based UUID)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"lowlevel-emu-device-{ordinal}").bytes


@api
def cuDeviceGetUuid(uuid_out, dev):
    device_ordinal(dev)
    if not uuid_out:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "NULL uuid")
    ctypes.memmove(uuid_out, device_uuid(dev), 16)


@api
def cuDeviceGetPCIBusId(buf, length, dev):
    device_ordinal(dev)
    if length <= 0 or not buf:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "PCI bus id buffer is empty")
    values = device.attributes(dev)
    domain, bus, slot = (values[DEVICE_ATTRIBUTE[f"CU_DEVICE_ATTRIBUTE_PCI_{k}_ID"]] for k in ("DOMAIN", "BUS", "DEVICE"))
    text = f"{domain:04x}:{bus:02x}:{slot:02x}.0".encode()[: length - 1] + b"\0"
    ctypes.memmove(buf, text, len(text))


# ---- what a launch takes from the limits ----------------------------------------------------
class PrintfFifo:
    """The room left in a launch's printf FIFO: `take(records)` keeps those that fit."""

    def __init__(self, size: int):
        self.room = size

    def take(self, records: list[str]) -> list[str]:
        kept = []
        for text in records:
            cost = len(text.encode())
            if cost <= self.room:
                self.room -= cost
                kept.append(text)
        return kept


def note_launch(ctx: Context, kernel) -> None:
    """A kernel is launched: the limits it uses are fixed from now on, and a kernel that
    uses malloc or free gets the context's heap (made now, at its fixed size)."""
    used = {i.opcode for i in kernel.body if isinstance(i, Instruction) and i.opcode in ("_vprintf", "_malloc", "_free")}
    with ctx.lock:
        ctx.used_calls |= used
        if used & {"_malloc", "_free"} and ctx.heap is None:
            size = limit(ctx, _L["MALLOC_HEAP_SIZE"])
            ctx.heap = DeviceHeap(allocate(ctx, size), size)


class DeviceHeap:
    """The malloc heap of a context: one device allocation, carved first fit into 16-byte
    aligned blocks. Kernels of several streams may call it at once: it takes a lock."""

    ALIGN = 16

    def __init__(self, base: int, size: int):
        self.base = base
        self._free = [(base, size)]            # (address, length), sorted by address
        self._blocks: dict[int, int] = {}      # address -> length of each live block
        self._lock = threading.Lock()

    def malloc(self, nbytes: int) -> int:
        """A block of at least `nbytes` (0 gets the smallest block), or 0 (NULL)."""
        need = max(self.ALIGN, -(-nbytes // self.ALIGN) * self.ALIGN)
        with self._lock:
            for i, (address, length) in enumerate(self._free):
                if length >= need:
                    self._free[i:i + 1] = [(address + need, length - need)] if length > need else []
                    self._blocks[address] = need
                    return address
        return 0

    def free(self, address: int) -> bool:
        """Give a block back; False if `address` is not a live block."""
        with self._lock:
            length = self._blocks.pop(address, None)
            if length is None:
                return False
            bisect.insort(self._free, (address, length))
            merged = []
            for a, n in self._free:
                if merged and merged[-1][0] + merged[-1][1] == a:
                    merged[-1] = (merged[-1][0], merged[-1][1] + n)
                else:
                    merged.append((a, n))
            self._free = merged
            return True


class LaunchLimits(Tool):
    """Hands a launch the context's printf FIFO, malloc heap and per-thread stack size (read
    by isa/printf.py, isa/heap.py and isa/recursion.py as attributes of the launch)."""

    def __init__(self, ctx: Context):
        self.ctx = ctx

    def initialize(self, launch) -> None:
        launch.printf_fifo = PrintfFifo(limit(self.ctx, _L["PRINTF_FIFO_SIZE"]))
        launch.heap = self.ctx.heap
        launch.stack_bytes = limit(self.ctx, _L["STACK_SIZE"])
