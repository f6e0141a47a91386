"""rand, randn and randint on CUDA: Philox4x32-10 on the device (ptx/philox.ptx), written
straight into the new tensor; no value is made on the host. The words, and the way they
become numbers, are those of backends/philox.py (the CPU's), so a seed gives the same
numbers on both devices (the normals within the GPU's approximate ln, sin and cos).

    random_uniform   rand_f32 (float32, `bits` random bits) or rand_f64 (53 bits)
    random_normal    randn_f32 (Box-Muller)
    random_integers  randint_narrow (range <= 2^32: one word each) or randint_wide
"""
from ...dispatch import CUDA, register_kernel
from ...frontend import dtypes as dt
from .launch import BLOCK, grid_for, launch

MODULE = "philox"


def _draw(kernel: str, out, per_block: int, stream: int, key: int, *extra) -> None:
    """Launch `kernel` over out's Philox blocks (each gives `per_block` elements)."""
    n = out.numel()
    if not n:
        return
    blocks = -(-n // per_block)
    launch(MODULE, kernel, grid_for(blocks), BLOCK, (out, n, blocks, key, 0, stream, *extra))


@register_kernel("random_uniform", CUDA, dtypes=[dt.float32, dt.float64])
def random_uniform(out, bits: int, stream: int, key: int):
    if out.dtype is dt.float64:
        _draw("rand_f64", out, 2, stream, key)
    else:
        _draw("rand_f32", out, 4, stream, key, 32 - bits, 2.0 ** -bits)
    return out


@register_kernel("random_normal", CUDA, dtypes=[dt.float32])
def random_normal(out, stream: int, key: int):
    _draw("randn_f32", out, 4, stream, key)
    return out


@register_kernel("random_integers", CUDA, dtypes=[dt.int64])
def random_integers(out, low: int, span: int, stream: int, key: int):
    if span <= 1 << 32:
        _draw("randint_narrow", out, 4, stream, key, low & 0xFFFFFFFFFFFFFFFF, span)
    else:
        _draw("randint_wide", out, 2, stream, key, low & 0xFFFFFFFFFFFFFFFF, span)
    return out
