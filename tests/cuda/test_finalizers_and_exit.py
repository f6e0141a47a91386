"""Nothing hangs: finalizers never call the driver where they run, and exit waits for nothing.

Each case runs in a child process with a time limit, so a regression shows as a failure with
the child's output, not as a hung test run.
"""
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
VECTOR_ADD = (ROOT / "ptx" / "vector_add.ptx").read_text()

# A kernel that spins `n` iterations: device work of a chosen length.
SPIN = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry spin(.param .u32 n)
{
  .reg .u32 %r<3>;
  .reg .pred %p;
  ld.param.u32 %r1, [n];
  mov.u32 %r2, 0;
LOOP:
  add.u32 %r2, %r2, 1;
  setp.lt.u32 %p, %r2, %r1;
  @%p bra LOOP;
  ret;
}
"""


def run_child(script: str, timeout: float, env_extra=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, LOWLEVEL_DRIVER="emu", PYTHONUNBUFFERED="1", **(env_extra or {}))
    header = f"VECTOR_ADD = {VECTOR_ADD!r}\nSPIN = {SPIN!r}\n"
    try:
        return subprocess.run([sys.executable, "-c", header + textwrap.dedent(script)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        hung = e
    pytest.fail(f"the child hung for {timeout} s\nstdout: {hung.stdout}\nstderr: {hung.stderr}")


def _read_until_traceback_ends(stream, limit_s: float = 10.0) -> str:
    """What `stream` says up to the last line of a KeyboardInterrupt traceback."""
    text, deadline = "", time.monotonic() + limit_s
    while time.monotonic() < deadline:
        line = stream.readline()
        text += line
        if not line or line.rstrip() == "KeyboardInterrupt":
            break
    return text


def test_the_garbage_collector_does_not_deadlock_module_release():
    """The issue's reproducer: Module and Function used to form a cycle, so the collector
    unloaded modules at any moment, inside locks the stream workers need."""
    child = run_child("""
        import gc
        import numpy as np
        from lowlevel import cuda
        gc.set_threshold(50, 1, 1)
        n = 256
        a = np.random.rand(n).astype(np.float32)
        da, db, dc = (cuda.mem_alloc(a.nbytes) for _ in range(3))
        cuda.memcpy_htod(da, a); cuda.memcpy_htod(db, a)
        out = np.full_like(a, np.nan)
        for i in range(2000):
            cuda.Module.from_ptx(VECTOR_ADD).get_function("vector_add").launch(1, n, (da, db, dc, n))
            cuda.memcpy_dtoh(out, dc)
            assert np.array_equal(out, a + a), i
        print("done")
    """, timeout=90)
    assert child.returncode == 0 and "done" in child.stdout, child.stderr


def test_objects_in_reference_cycles_are_released_safely_wherever_the_collector_runs():
    """Cycles the user makes (here a list holding itself) are only ever freed by the
    collector, which then runs in the middle of anything: an allocation holding the
    emulated memory's lock, the caching allocator's lock, a stream worker's kernel. Their
    releases wait for the next safe point, and every one of them happens."""
    child = run_child("""
        import gc
        import numpy as np
        import lowlevel as ll
        from lowlevel import cuda
        gc.set_threshold(1, 1, 1)
        stream = cuda.Stream(non_blocking=True)
        free_at_start = cuda.mem_get_info()[0]
        n = 1024
        for i in range(300):
            f = cuda.Module.from_ptx(VECTOR_ADD).get_function("vector_add")
            d = cuda.mem_alloc(4 * n)
            t = ll.ones(n, device="cuda") * 2.0
            cycle = [f, d, t]
            cycle.append(cycle)
            f.launch(n // 256, 256, (d, d, d, n), stream=stream)
            stream.add_callback(lambda: [object() for _ in range(100)])
            assert t.sum().item() == 2.0 * n
        del f, d, t, cycle
        gc.collect()
        cuda.synchronize()                     # a safe point: the queued releases run
        ll.cuda.empty_cache()
        print("leaked", free_at_start - cuda.mem_get_info()[0])
    """, timeout=90)
    assert child.returncode == 0, child.stderr
    assert "leaked 0" in child.stdout, child.stdout + child.stderr


def test_exit_with_daemon_threads_still_working_is_prompt_and_quiet():
    child_started = time.monotonic()
    child = run_child("""
        import threading, time
        import numpy as np
        import lowlevel as ll
        from lowlevel import cuda

        def work():
            s = cuda.Stream(non_blocking=True)
            f = cuda.Module.from_ptx(VECTOR_ADD).get_function("vector_add")
            h = np.ones(1 << 16, np.float32)
            while True:
                d = cuda.mem_alloc(h.nbytes)
                cuda.memcpy_htod_async(d, h, s)
                f.launch(256, 256, (d, d, d, 1 << 16), stream=s)
                with cuda.stream(s):
                    ll.ones(1000, device="cuda") + 1

        for _ in range(4):
            threading.Thread(target=work, daemon=True).start()
        time.sleep(2)
        print("main done")
    """, timeout=30)
    elapsed = time.monotonic() - child_started
    assert child.returncode == 0 and "main done" in child.stdout, child.stderr
    assert child.stderr == ""
    assert elapsed < 2 + 2 + 3, f"{elapsed:.1f} s to exit"      # the 2 s sleep, start-up, 2 s


def test_exit_abandons_queued_work_instead_of_waiting_for_it():
    child = run_child("""
        import time
        from lowlevel import cuda
        f = cuda.Module.from_ptx(SPIN).get_function("spin")
        start = time.monotonic(); f.launch(1, 32, (20000,)); cuda.synchronize()
        one = time.monotonic() - start
        for _ in range(int(40 / one) + 1):          # about 40 s of device work
            f.launch(1, 32, (20000,))
        print("queued", time.monotonic(), flush=True)
    """, timeout=60)
    assert child.returncode == 0 and child.stderr == "", child.stderr
    queued_at = float(child.stdout.split()[-1])
    assert time.monotonic() - queued_at < 2.0


@pytest.mark.parametrize("interrupts", [1, 2])
def test_ctrl_c_during_synchronize_exits_at_once(interrupts):
    """Ctrl-C in a wait for the device ends the program at once; a second one while it
    exits (after Python has printed the first one's traceback: a Ctrl-C in the middle of
    that printing is Python's own affair) ends it too, with nothing more on stderr."""
    script = textwrap.dedent(f"""
        SPIN = {SPIN!r}
        from lowlevel import cuda
        f = cuda.Module.from_ptx(SPIN).get_function("spin")
        for _ in range(3000):
            f.launch(1, 32, (20000,))
        print("syncing", flush=True)
        cuda.synchronize()
    """)
    env = dict(os.environ, LOWLEVEL_DRIVER="emu", PYTHONUNBUFFERED="1")
    child = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = ""
    try:
        assert "syncing" in child.stdout.readline()
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        if interrupts == 2:
            err = _read_until_traceback_ends(child.stderr)
            child.send_signal(signal.SIGINT)
        _, rest = child.communicate(timeout=20)
        err += rest
    finally:
        child.kill()
    took = time.monotonic() - interrupted
    assert took < 2.0, f"{took:.2f} s to exit\n{err}"
    assert child.returncode == -signal.SIGINT, err      # the status Python gives Ctrl-C
    assert err.rstrip().endswith("KeyboardInterrupt"), err
    assert "Exception ignored" not in err, err
