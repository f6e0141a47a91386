"""ptx/hgemm_mma.ptx, the tensor-core float16 matmul (float32 accumulation, one rounding to
float16 at the end), against numpy float64 on every driver present: sizes that are
multiples of the 64 x 64 x 32 tiles, and edge tiles (any M; N and K multiples of 8, as the
kernel requires), K == 0, outputs poisoned first. The bound: the float32 sums (K + 1 ulps
of float32 of sum |a b|) plus the final rounding to float16 (half an ulp of float16)."""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload

from lowlevel import kernels

EPS32, EPS16 = float(np.finfo(np.float32).eps), float(np.finfo(np.float16).eps)


def run(rng, M, N, K):
    f = kernels.module("hgemm_mma").get_function("hgemm_mma")
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    C = device_poisoned(max(1, M * N * 2))
    f.launch(((N + 63) // 64, (M + 63) // 64), (128, 1, 1), (upload(A), upload(B), C, M, N, K))
    got = download(C, (M, N), np.float16).astype(np.float64)
    a, b = A.astype(np.float64), B.astype(np.float64)
    return got, a @ b, np.abs(a) @ np.abs(b)


def check(got, want, terms, K):
    bound = (K + 1) * EPS32 * terms + EPS16 / 2 * np.abs(want) + 2.0 ** -24   # 2^-24: f16 subnormal spacing
    assert np.isfinite(got).all()
    assert (np.abs(got - want) <= bound).all(), np.abs(got - want).max()


def test_hgemm_mma_shared_and_registers(driver):
    f = kernels.module("hgemm_mma").get_function("hgemm_mma")
    assert f.shared_size_bytes == 19456


@pytest.mark.parametrize("tiles", [(1, 1, 1), (2, 1, 3)])
def test_hgemm_mma_whole_tiles(driver, rng, tiles):
    M, N, K = 64 * tiles[0], 64 * tiles[1], 32 * tiles[2]
    got, want, terms = run(rng, M, N, K)
    check(got, want, terms, K)


def test_hgemm_mma_edge_tiles(driver, rng):
    M = int(rng.integers(1, 100))
    N, K = 8 * int(rng.integers(1, 12)), 8 * int(rng.integers(1, 12))
    for shape in [(M, N, K), (70, 72, 40), (1, 8, 8)]:
        got, want, terms = run(rng, *shape)
        check(got, want, terms, shape[2])


def test_hgemm_mma_k_zero(driver, rng):
    got, _, _ = run(rng, 5, 16, 0)
    np.testing.assert_array_equal(got, np.zeros((5, 16)))
