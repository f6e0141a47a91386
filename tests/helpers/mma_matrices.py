"""Random tensor-core operands for the mma tests (dense and sparse): each element type's
width in bits, a shape's (m, n, k), and a random matrix as values and raw bits."""
import numpy as np

from helpers.fp8 import random_codes

BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f64": 64, "s8": 8, "u8": 8, "s4": 4, "u4": 4, "b1": 1,
        "e4m3": 8, "e5m2": 8}


def dims(shape):
    """(m, n, k) of an mma shape such as "m16n8k32"."""
    m, rest = shape[1:].split("n")
    n, k = rest.split("k")
    return int(m), int(n), int(k)


def random_matrix(rng, kind, shape):
    """(values as float64/int64, raw bits as uint64) of a random matrix of `kind`."""
    if kind == "f16":
        v = rng.standard_normal(shape).astype(np.float16)
        return v.astype(np.float64), v.view(np.uint16).astype(np.uint64)
    if kind == "bf16":
        u = rng.standard_normal(shape).astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
        return u.view(np.float32).astype(np.float64), (u >> 16).astype(np.uint64)
    if kind == "tf32":
        u = rng.standard_normal(shape).astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
        return u.view(np.float32).astype(np.float64), u.astype(np.uint64)
    if kind == "f64":
        v = rng.standard_normal(shape)
        return v, v.view(np.uint64)
    if kind in ("e4m3", "e5m2"):
        return random_codes(rng, kind, shape)
    bits = BITS[kind]
    lo, hi = (-(1 << (bits - 1)), 1 << (bits - 1)) if kind[0] == "s" else (0, 1 << bits)
    v = rng.integers(lo, hi, shape)
    return v.astype(np.int64), (v % (1 << bits)).astype(np.uint64)
