"""Host and device buffers for tests: outputs start poisoned, so an element a kernel forgets
to write shows up (NaN, or 0xDEADBEEF)."""
import numpy as np

from lowlevel import cuda


def poisoned(shape, dtype=np.float32) -> np.ndarray:
    """A host array full of a value no kernel computes by accident (NaN, or 0xDEADBEEF)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.full(shape, np.nan, dtype)
    return np.full(shape, 0xDEADBEEF & ((1 << (8 * dtype.itemsize - (dtype.kind == "i"))) - 1), dtype)


def device_poisoned(nbytes: int):
    """A device allocation filled with 0xFF bytes (NaN as float32), so unwritten elements show;
    filled when it returns, so that work on any stream sees the poison (cuMemsetD8 is
    asynchronous on the legacy stream, which a non-blocking stream does not wait for)."""
    d = cuda.mem_alloc(nbytes)
    cuda.memset_d8(d, 0xFF, nbytes)
    cuda.synchronize()
    return d


def upload(host: np.ndarray):
    """A device allocation holding `host` (1 byte for an empty array: mem_alloc takes no 0)."""
    dev = cuda.mem_alloc(max(1, host.nbytes))
    if host.nbytes:
        cuda.memcpy_htod(dev, np.ascontiguousarray(host))
        cuda.synchronize()      # from pageable memory the DMA may still run: ready for any stream
    return dev


def download(dev, shape, dtype=np.float32) -> np.ndarray:
    """The device array at `dev`, copied into a poisoned host array of `shape` and `dtype`."""
    out = poisoned(shape, dtype)
    if out.nbytes:
        cuda.memcpy_dtoh(out, dev)
    return out
