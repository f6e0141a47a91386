"""The handwritten kernels that use shared memory and barriers (transpose, sgemm_tiled) and
sgemm_naive, against numpy on every driver present, at sizes that are not multiples of
the tiles. Outputs are poisoned first."""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload

from lowlevel import kernels


def test_transpose(driver, rng):
    f = kernels.module("transpose").get_function("transpose_f32")
    assert f.shared_size_bytes == 32 * 33 * 4
    for rows, cols in [(1, 1), (33, 70), (int(rng.integers(40, 200)), int(rng.integers(1, 100)))]:
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        out = device_poisoned(x.nbytes)
        f.launch(((cols + 31) // 32, (rows + 31) // 32), (32, 8, 1), (upload(x), out, rows, cols))
        np.testing.assert_array_equal(download(out, (cols, rows)), x.T)
    # a smaller grid also works: blocks loop over the tiles
    rows, cols = 100, 75
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = device_poisoned(x.nbytes)
    f.launch((2, 1), (32, 8, 1), (upload(x), out, rows, cols))
    np.testing.assert_array_equal(download(out, (cols, rows)), x.T)


@pytest.mark.parametrize("name", ["sgemm_naive", "sgemm_tiled"])
def test_sgemm(driver, rng, name):
    f = kernels.module(name).get_function(name)
    if name == "sgemm_tiled":
        assert f.shared_size_bytes == 8192
    for M, N, K in [(1, 1, 1), (67, 45, 33), (int(rng.integers(65, 140)), int(rng.integers(1, 80)),
                                              int(rng.integers(17, 60))), (5, 7, 0)]:
        A = rng.standard_normal((M, K)).astype(np.float32)
        B = rng.standard_normal((K, N)).astype(np.float32)
        C = device_poisoned(M * N * 4)
        if name == "sgemm_tiled":
            grid, block = ((N + 63) // 64, (M + 63) // 64), (256, 1, 1)
        else:
            grid, block = ((N + 15) // 16, (M + 7) // 8), (16, 8, 1)
        f.launch(grid, block, (upload(A), upload(B), C, M, N, K))
        got = download(C, (M, N))
        ref = A.astype(np.float64) @ B.astype(np.float64)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * max(1, K))


def test_sgemm_naive_and_tiled_agree_bit_for_bit(driver, rng):
    M, N, K = 70, 90, 37
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    outs = []
    for name, grid, block in [("sgemm_naive", ((N + 15) // 16, (M + 15) // 16), (16, 16, 1)),
                              ("sgemm_tiled", ((N + 63) // 64, (M + 63) // 64), (256, 1, 1))]:
        C = device_poisoned(M * N * 4)
        kernels.module(name).get_function(name).launch(grid, block, (upload(A), upload(B), C, M, N, K))
        outs.append(download(C, (M, N)))
    np.testing.assert_array_equal(outs[0], outs[1])
