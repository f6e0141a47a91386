"""What the emulated device says about itself: name, compute capability, limits.

The limits are those of a Hopper-class part (the default compute capability is 9.0) and
they are enforced: a launch beyond them fails as it would on the hardware.
`LOWLEVEL_EMU_CC=8.0` changes the compute capability; `LOWLEVEL_EMU_MEMORY=2G` the memory;
`LOWLEVEL_EMU_DRIVER_VERSION=12040` the CUDA version the driver claims;
`LOWLEVEL_EMU_DEVICES=2` how many devices it presents (read once, by the first cuInit), each
with its own memory (of LOWLEVEL_EMU_MEMORY), primary context and streams.
"""
import functools
import os
from types import MappingProxyType

from ...capi import versions
from ...capi.constants import DEVICE_ATTRIBUTE

# What cuDriverGetVersion reports (CUDA 13.5); LOWLEVEL_EMU_DRIVER_VERSION=12040 makes the
# emulated GPU behave as an older driver, e.g. refusing PTX newer than ISA 8.4.
DRIVER_VERSION = int(os.environ.get("LOWLEVEL_EMU_DRIVER_VERSION", "13050"))


def _parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def compute_capability() -> tuple[int, int]:
    major, minor = os.environ.get("LOWLEVEL_EMU_CC", "9.0").split(".")
    return int(major), int(minor)


def arch() -> int:
    """The compute capability as one number, as in sm_XY: 90 for 9.0, 120 for 12.0."""
    major, minor = compute_capability()
    return major * 10 + minor


def target_refusal(target: str, have: int | None = None) -> str:
    """Why PTX for `.target target` cannot run on this device ('' when it can)."""
    return versions.target_refusal(target, arch() if have is None else have)


def device_count() -> int:
    text = os.environ.get("LOWLEVEL_EMU_DEVICES", "1").strip()
    if not text.isdigit() or not 1 <= int(text) <= 16:
        raise ValueError(f"LOWLEVEL_EMU_DEVICES={text!r}: expected a number of devices from 1 to 16")
    return int(text)


def memory_size() -> int:
    return _parse_size(os.environ.get("LOWLEVEL_EMU_MEMORY", "4G"))


MAX_SHARED_PER_BLOCK = 48 * 1024           # without opting in
# Per compute capability (CUDA C Programming Guide, technical specifications): threads per
# SM, CTA slots per SM, shared memory per SM, per-block opt-in shared memory.
_PER_CC = {(8, 0): (2048, 32, 164, 163), (8, 6): (1536, 16, 100, 99), (8, 7): (2048, 16, 164, 163),
           (8, 9): (1536, 24, 100, 99)}
_DEFAULT_CC = (2048, 32, 228, 227)


def shared_per_block_optin() -> int:
    return _PER_CC.get(compute_capability(), _DEFAULT_CC)[3] * 1024


def name() -> str:
    major, minor = compute_capability()
    return f"lowlevel emulated GPU (sm_{major}{minor})"


def attributes(ordinal: int = 0) -> MappingProxyType:
    """build_attributes(ordinal), read-only, made once per device and LOWLEVEL_EMU_CC (what
    the table depends on, read at each call): cuDeviceGetAttribute does not rebuild it."""
    return _attribute_table(ordinal, os.environ.get("LOWLEVEL_EMU_CC", "9.0"))


@functools.lru_cache(maxsize=64)
def _attribute_table(ordinal: int, cc_setting: str) -> MappingProxyType:
    del cc_setting                          # only the cache's key: compute_capability() reads it
    return MappingProxyType(build_attributes(ordinal))


def build_attributes(ordinal: int = 0) -> dict[int, int]:
    """CUdevice_attribute number -> value for device `ordinal`, made afresh. Attributes not
    modelled report 0."""
    major, minor = compute_capability()
    threads_per_sm, blocks_per_sm, shared_kb, optin_kb = _PER_CC.get((major, minor), _DEFAULT_CC)
    known = {
        "MAX_THREADS_PER_BLOCK": 1024,
        "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024, "MAX_BLOCK_DIM_Z": 64,
        "MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535, "MAX_GRID_DIM_Z": 65535,
        "MAX_SHARED_MEMORY_PER_BLOCK": MAX_SHARED_PER_BLOCK,
        "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": optin_kb * 1024,
        "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": shared_kb * 1024,
        "TOTAL_CONSTANT_MEMORY": 64 * 1024,
        "WARP_SIZE": 32,
        "MAX_PITCH": 2**31 - 1,
        "MAX_REGISTERS_PER_BLOCK": 65536,
        "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536,
        "CLOCK_RATE": 1_980_000,                  # kHz
        "MEMORY_CLOCK_RATE": 2_619_000,           # kHz
        "GLOBAL_MEMORY_BUS_WIDTH": 5120,
        "L2_CACHE_SIZE": 50 * 1024 * 1024,
        "TEXTURE_ALIGNMENT": 512,
        "TEXTURE_PITCH_ALIGNMENT": 32,            # cuMemAllocPitch pitches are multiples of 512
        "MULTIPROCESSOR_COUNT": 132,
        "MAX_THREADS_PER_MULTIPROCESSOR": threads_per_sm,
        "MAX_BLOCKS_PER_MULTIPROCESSOR": blocks_per_sm,
        "RESERVED_SHARED_MEMORY_PER_BLOCK": 1024,
        "COOPERATIVE_LAUNCH": 1,                  # lowlevel/emu/driver/launch_ex.py
        "CLUSTER_LAUNCH": int(major >= 9),        # clusters.py
        "COMPUTE_CAPABILITY_MAJOR": major,
        "COMPUTE_CAPABILITY_MINOR": minor,
        "CONCURRENT_KERNELS": 1,
        "ASYNC_ENGINE_COUNT": 2,
        "UNIFIED_ADDRESSING": 1,
        "CAN_MAP_HOST_MEMORY": 1,                 # hostwindow.py: at the host address
        "CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM": 1,   # as on Linux: registered memory too
        "MANAGED_MEMORY": 1,
        "CONCURRENT_MANAGED_ACCESS": 1,           # as on an H200: host and device at once
        "PAGEABLE_MEMORY_ACCESS": 0,
        "READ_ONLY_HOST_REGISTER_SUPPORTED": 0,
        "HOST_REGISTER_SUPPORTED": 1,
        "INTEGRATED": 0,
        "KERNEL_EXEC_TIMEOUT": 1,                 # the emulator has a watchdog
        "MEMORY_POOLS_SUPPORTED": 1,
        "STREAM_PRIORITIES_SUPPORTED": 1,         # recorded, not scheduled by (limits.py)
        "GLOBAL_L1_CACHE_SUPPORTED": 1,
        "LOCAL_L1_CACHE_SUPPORTED": 1,
        "COMPUTE_MODE": 0,
        "PCI_BUS_ID": 1 + ordinal, "PCI_DEVICE_ID": 0, "PCI_DOMAIN_ID": 0,   # bus 0: the host bridge
    }
    values = {number: 0 for number in DEVICE_ATTRIBUTE.values()}
    for short, value in known.items():
        values[DEVICE_ATTRIBUTE["CU_DEVICE_ATTRIBUTE_" + short]] = value
    return values
