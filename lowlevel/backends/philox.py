"""Philox4x32-10 in numpy, and the CPU backend's random kernels built on it.

Philox (Salmon, Moraes, Dror and Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3",
SC'11; the generator of cuRAND and of PyTorch's CUDA tensors) maps a 128-bit counter and
a 64-bit key to four 32-bit words by ten rounds of multiplies and xors. The words of a
counter depend on nothing else, so the CPU (here, vectorised over the blocks) and the
GPU (ptx/philox.ptx, one thread per block) compute the same words for the same counters:
`ll.manual_seed(s)` then `ll.rand(n)` gives the same numbers on every device.

How the words become numbers is the same on both devices (frontend/random.py says which
call uses which counters):

    rand float32   word i: its top `bits` bits (24; 11 for float16, 8 for bfloat16, so
                   that rounding to the narrow type never gives 1.0) times 2^-bits
    rand float64   words 2i and 2i+1: 27 + 26 bits, times 2^-53
    randn float32  words i, i+1 (i even): Box-Muller, r = sqrt(-2 ln u1) with u1 = 1 - v
                   in (0, 1], angle 2 pi (u2 - 1/2) rounded to float32; r cos and r sin,
                   negated (the angle is 2 pi u2 - pi). The uniforms are bit for bit the
                   GPU's; the GPU's ln, sin and cos are approximate (about 2^-21), so the
                   normals agree to a few units in the 6th digit, not bit for bit.
    randint        word i % range (range <= 2^32), else the 64 bits of words 2i, 2i+1
                   % range; plus low, in int64
"""
import numpy as np

from ..dispatch import CPU, register_kernel

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)        # the round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85                              # the key's Weyl increments
MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32(counter: np.ndarray, stream: int, key: int, rounds: int = 10) -> np.ndarray:
    """The four words of each counter, as an array (len(counter), 4) of uint32: counter
    holds the low 64 bits of each block's counter (uint64), `stream` its high 64 bits."""
    counter = np.asarray(counter, np.uint64)
    c0, c1 = counter & MASK32, counter >> np.uint64(32)
    c2 = np.full_like(counter, stream & 0xFFFFFFFF)
    c3 = np.full_like(counter, (stream >> 32) & 0xFFFFFFFF)
    k0, k1 = key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF
    for _ in range(rounds):
        p0, p1 = c0 * M0, c2 * M1                   # exact: 32 x 32 bits fit in 64
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & MASK32,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & MASK32)
        k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    return np.stack([c0, c1, c2, c3], axis=1).astype(np.uint32)


def words(count: int, stream: int, key: int, counter0: int = 0) -> np.ndarray:
    """The first `count` words of blocks counter0, counter0 + 1, ... in order (uint32)."""
    blocks = -(-count // 4)
    counters = (np.uint64(counter0) + np.arange(blocks, dtype=np.uint64))
    return philox4x32(counters, stream, key).reshape(-1)[:count]


def uniform_f32(n: int, bits: int, stream: int, key: int) -> np.ndarray:
    """n floats on [0, 1), each `bits` random bits (exact in float32)."""
    return (words(n, stream, key) >> np.uint32(32 - bits)).astype(np.float32) * np.float32(2.0 ** -bits)


def uniform_f64(n: int, stream: int, key: int) -> np.ndarray:
    w = words(2 * n, stream, key).astype(np.uint64)
    bits53 = ((w[0::2] >> np.uint64(5)) << np.uint64(26)) | (w[1::2] >> np.uint64(6))
    return bits53.astype(np.float64) * 2.0 ** -53


def normal_f32(n: int, stream: int, key: int) -> np.ndarray:
    """n standard normals by Box-Muller on pairs of words (the float32 steps as the GPU
    rounds them; ln, sqrt, cos and sin in float64, rounded once)."""
    w = words(n + n % 2, stream, key)
    v = (w[0::2] >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)
    u1 = (np.float32(1.0) - v).astype(np.float64)
    u2 = (w[1::2] >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)
    angle = ((u2 - np.float32(0.5)) * np.float32(2 * np.pi)).astype(np.float64)
    r = np.sqrt(-2.0 * np.log(u1))
    out = np.empty(n + n % 2, np.float64)
    out[0::2], out[1::2] = -r * np.cos(angle), -r * np.sin(angle)
    return out[:n].astype(np.float32)


def randint64(n: int, low: int, span: int, stream: int, key: int) -> np.ndarray:
    """n integers low + (random bits % span), int64; one word each for span <= 2^32."""
    if span <= 1 << 32:
        r = words(n, stream, key).astype(np.uint64) % np.uint64(span)
    else:
        w = words(2 * n, stream, key).astype(np.uint64)
        r = ((w[1::2] << np.uint64(32)) | w[0::2]) % np.uint64(span)
    return (r + np.uint64(low & 0xFFFFFFFFFFFFFFFF)).view(np.int64)


# ---- the CPU backend's kernels: each writes its result into `out`, a new contiguous tensor ------
@register_kernel("random_uniform", CPU)
def random_uniform(out, bits: int, stream: int, key: int):
    n = out.numel()
    view = out.host_view().reshape(-1)
    view[...] = uniform_f64(n, stream, key) if out.dtype.name == "float64" else uniform_f32(n, bits, stream, key)
    return out


@register_kernel("random_normal", CPU)
def random_normal(out, stream: int, key: int):
    out.host_view().reshape(-1)[...] = normal_f32(out.numel(), stream, key)
    return out


@register_kernel("random_integers", CPU)
def random_integers(out, low: int, span: int, stream: int, key: int):
    out.host_view().reshape(-1)[...] = randint64(out.numel(), low, span, stream, key)
    return out
