"""Helpers the tests of tests/emu share: device buffers in an emulated DeviceMemory, and
kernel launches straight through the engine.

The `mem` and `rng` fixtures these tests take live in tests/conftest.py.
"""
import struct

import numpy as np

from lowlevel.emu.engine.scheduler import run_kernel

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"
POISON = 0xDEADBEEF

# the register type a PTX load or store of each type goes through, and its numpy dtype
PTX_REG = {"pred": "pred", "u8": "b16", "s8": "b16", "u16": "b16", "s16": "b16",
           "b16": "b16", "u32": "b32", "s32": "b32", "b32": "b32", "u64": "b64",
           "s64": "b64", "b64": "b64", "f32": "f32", "f64": "f64"}
PTX_NP = {"u8": np.uint8, "s8": np.int8, "u16": np.uint16, "s16": np.int16, "b16": np.uint16,
          "u32": np.uint32, "s32": np.int32, "b32": np.uint32, "u64": np.uint64, "s64": np.int64,
          "b64": np.uint64, "f32": np.float32, "f64": np.float64}


class Buf:
    """A device allocation holding a numpy array's bytes, or, given `n` and `dtype` instead
    of an array, poison: the numpy scalar `poison` repeated over its bytes (by default
    0xDEADBEEF in every 4-byte word; np.uint8(0xFF) makes every byte 0xFF, NaN as float32)."""

    def __init__(self, mem, array=None, *, n=None, dtype=None, poison=np.uint32(POISON)):
        self.mem = mem
        if array is None:
            array = np.empty(n, dtype)
            pattern = np.frombuffer(np.asarray(poison).tobytes(), np.uint8)
            array.reshape(-1).view(np.uint8)[:] = np.resize(pattern, array.nbytes)
        array = np.ascontiguousarray(array)
        self.dtype, self.shape, self.nbytes = array.dtype, array.shape, array.nbytes
        self.addr = mem.alloc(max(array.nbytes, 1))
        mem.u8[self.addr + self.mem.shift:self.addr + self.mem.shift + array.nbytes] = array.view(np.uint8).ravel()

    def read(self):
        raw = self.mem.u8[self.addr + self.mem.shift:self.addr + self.mem.shift + self.nbytes].copy()
        return raw.view(self.dtype).reshape(self.shape)

    def free(self):
        self.mem.free(self.addr)


_PACK = {"u8": "B", "s8": "b", "u16": "H", "s16": "h", "u32": "I", "s32": "i", "b32": "I",
         "u64": "Q", "s64": "q", "b64": "Q", "f32": "f", "f64": "d"}


def pack_params(kernel, args) -> bytes:
    """The parameter buffer of `kernel` for `args`, one per parameter: numbers, a Buf (its
    address), or bytes exactly as large as the parameter."""
    buf = bytearray(kernel.param_size)
    assert len(args) == len(kernel.params)
    for p, a in zip(kernel.params, args):
        if isinstance(a, Buf):
            a = a.addr
        if isinstance(a, (bytes, bytearray)):
            assert len(a) == p.size
            buf[p.offset:p.offset + p.size] = a
        else:
            struct.pack_into("<" + _PACK[p.type], buf, p.offset, a)
    return bytes(buf)


def launch(mod, name, grid, block, *args, mem, shared=0, tools=None):
    """Run kernel `name` of `mod` on `mem` with `args` (see pack_params) and `shared` bytes
    of dynamic shared memory, observed by `tools` (None: the environment's); returns the
    engine's LaunchStats."""
    params = pack_params(mod.kernels[name], args)
    return run_kernel(mod, name, grid, block, params, mem, shared_bytes=shared, tools=tools)
