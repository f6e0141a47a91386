"""The emulated cuBLAS GEMM at process exit (issue 20, item 4). A GEMM runs on a stream's
worker thread inside BLAS; a process that reached the C library's exit while one ran hung
in OpenBLAS's own exit code (gotoblas_quit joining its threads; reproduced with sys.exit()
and OPENBLAS_NUM_THREADS=2). The GEMM now runs in row panels of bounded size, none starts
once exit began, and the exit handler waits for the one in flight: exit is prompt. The
panels give the same C, bit for bit, as one numpy matmul.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from helpers.memory import download, upload

from lowlevel import cuda
from lowlevel.cuda import cublas
from lowlevel.emu.driver import cublas as emu_cublas

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# Ten 3072^3 DGEMMs queued on a non-default stream: about 3e11 multiply-adds, far over 30 s
# on this machine; a prompt exit has to abandon them mid-GEMM.
CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from lowlevel import cuda
    from lowlevel.cuda import cublas
    cuda.use_driver("emu")
    n = 3072
    stream = cuda.Stream()
    handle = cublas.Handle(stream=stream)
    a, b, c = (cuda.mem_alloc(n * n * 8) for _ in range(3))
    for buf in (a, b, c):
        cuda.memset_d8(buf, 0x3c, n * n * 8, stream=stream)
    for _ in range(10):
        cublas.dgemm(handle, "N", "N", n, n, n, 1.0, a, n, b, n, 0.0, c, n)
    print("queued", flush=True)
    if sys.argv[1] == "interrupt":
        stream.synchronize()             # Ctrl-C arrives here
    else:
        time.sleep(1.5)
        sys.exit(3)                      # the main thread ends while a GEMM runs
""")


def run_child(how, blas_threads):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if blas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = blas_threads
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(root=ROOT), how], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "queued"
        if how == "interrupt":
            time.sleep(1.5)                                  # a GEMM is running by now
            proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        _, err = proc.communicate(timeout=20)
        return proc.returncode, err, time.monotonic() - start
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the process did not exit within 20 s of {how} during an emulated GEMM")


@pytest.mark.parametrize("blas_threads", [None, "2"])
def test_ctrl_c_during_queued_gemms_exits_promptly(blas_threads):
    code, err, took = run_child("interrupt", blas_threads)
    assert "KeyboardInterrupt" in err and "synchronize" in err, err
    assert code in (-signal.SIGINT, 1, 130), (code, err)
    assert took < 10, f"exit took {took:.1f} s"


@pytest.mark.parametrize("blas_threads", [None, "2"])
def test_sys_exit_during_a_gemm_exits_promptly(blas_threads):
    code, err, took = run_child("exit", blas_threads)
    assert code == 3, (code, err)
    assert "Traceback" not in err, err
    assert took < 10, f"exit took {took:.1f} s"          # 1.5 s of it is the child's sleep


def test_panels_cover_c_once_within_the_bound(rng):
    for _ in range(200):
        batch, m, n, k = (int(v) for v in rng.integers(1, 3000, 4))
        seen = np.zeros((batch, m), np.int64)
        for bs, rs in emu_cublas.gemm_panels(batch, m, n, k):
            seen[bs, rs] += 1
            pieces = (bs.stop - bs.start) * (rs.stop - rs.start)
            assert pieces == 1 or pieces * n * k <= emu_cublas.PANEL_MACS
        assert (seen == 1).all()


def test_batch_pieces_are_numpy_matmul_bit_for_bit(monkeypatch, rng):
    """Pieces of whole matrices of a batch: the same per-matrix products as one call."""
    cuda.use_driver("emu")
    m, n, k, batch = (int(v) for v in rng.integers(20, 60, 4))
    monkeypatch.setattr(emu_cublas, "PANEL_MACS", 3 * m * n * k)    # 3 matrices a piece
    handle = cublas.Handle()
    A = rng.standard_normal((batch, k, m)).astype(np.float32)        # column-major m x k
    B = rng.standard_normal((batch, n, k)).astype(np.float32)
    C = rng.standard_normal((batch, n, m)).astype(np.float32)
    alpha, beta = float(rng.standard_normal()), float(rng.standard_normal())
    dA, dB, dC = upload(A), upload(B), upload(C)
    cublas.sgemm_strided_batched(handle, "N", "N", m, n, k, alpha, dA, m, m * k, dB, k, k * n,
                                 beta, dC, m, m * n, batch)
    got = download(dC, (batch, n, m), np.float32)
    a64, b64, c64 = (x.astype(np.float64).transpose(0, 2, 1) for x in (A, B, C))
    want = (np.float32(alpha) * np.matmul(a64, b64) + np.float32(beta) * c64).astype(np.float32)
    assert len(list(emu_cublas.gemm_panels(batch, m, n, k))) == -(-batch // 3)
    np.testing.assert_array_equal(got, want.transpose(0, 2, 1))


@pytest.mark.parametrize("transa, transb", [("N", "N"), ("T", "N"), ("N", "T")])
def test_row_panels_agree_with_numpy_within_rounding(monkeypatch, rng, transa, transb):
    """Rows of one big matrix in pieces: BLAS may order a dot product's terms otherwise
    (OpenBLAS does for other row counts), so within the rounding of k terms, not bits."""
    cuda.use_driver("emu")
    handle = cublas.Handle()
    m, n, k = (int(v) for v in rng.integers(20, 90, 3))
    monkeypatch.setattr(emu_cublas, "PANEL_MACS", n * k * (m // 5))      # five panels of rows or more
    A = rng.standard_normal((k, m) if transa == "T" else (m, k))
    B = rng.standard_normal((n, k) if transb == "T" else (k, n))
    C = rng.standard_normal((m, n))
    alpha, beta = float(rng.standard_normal()), float(rng.standard_normal())
    dA, dB, dC = (upload(np.asfortranarray(x).ravel(order="K")) for x in (A, B, C))
    cublas.dgemm(handle, transa, transb, m, n, k, alpha, dA, A.shape[0], dB, B.shape[0],
                 beta, dC, m)
    got = download(dC, (n, m), np.float64).T
    opA = A.T if transa == "T" else A
    opB = B.T if transb == "T" else B
    want = alpha * (opA @ opB) + beta * C
    bound = (k + 2) * 2.0 ** -52 * (abs(alpha) * (np.abs(opA) @ np.abs(opB)) + abs(beta) * np.abs(C))
    assert sum(1 for _ in emu_cublas.gemm_panels(1, m, n, k)) > 3
    assert (np.abs(got - want) <= bound).all()
