"""Speed of the emulated GPU on the handwritten kernels, through the driver API, with
numba's CUDA simulator beside it for scale.

For each kernel: the time per launch (CUDA events around the launch, and the wall clock
around launch + synchronize; best of --repeat after one warm-up launch that also loads the
module), the process's CPU time over the same span (steadier than the wall clock on a
shared machine; the targets are wall clock), and thread-instructions per second (the engine's LaunchStats.thread_instructions
of that launch, over the event time). Every result is checked against numpy, so the
figures are for launches that computed the right thing.

    python tools/bench_emu.py [--repeat 3] [--no-numba] [--numba-n 8192] [--only sgemm_tiled ...]

Kernels: vector_add over 2^20 floats, sgemm_tiled 256x256x256, reduce_sum_f32 over 2^22,
softmax_rows_f32 over 1024x1024, hgemm_mma 512x512x512 (float16 on the tensor cores) and beside it
hgemm_wgmma_tma 512^3 (Hopper: TMA and wgmma, tools/bench_hopper.py), libdevice's
double exp and erfc (CUDA C by NVRTC) over 60,000 threads. Then numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, in a
subprocess so the variable is set before numba is imported) runs the same vector add on
2^13 elements, and the per-element times are compared. numba is a tool dependency only:
`pip install numba`.

Targets (PASS/MISS): vector add 2^20 <= 100 ms, sgemm_tiled 256^3 <= 80 ms, hgemm_mma 512^3 <= 1 s,
libdevice double exp and erfc over 60,000 threads <= 2 s each, emulator >= 1000x numba's simulator
per element, and the barrier kernels of tools/bench_barriers.py (per-thread memcpy_async on a
cuda::barrier for sm_90 beside sm_80, 512 blocks of 256; an arrive_and_wait loop beside the
same loop with __syncthreads, 32 blocks of 256, 128 barriers) each within 3x of its fast twin.
Rows without a target (tools/bench_small.py): a --use_fast_math elementwise kernel (.ftz on
every float add, mul and fma) beside its precise build, and that kernel on 64 threads
beside 16k threads (the G thr-instr/s column: the fixed cost of each numpy call per lane).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

os.environ["LOWLEVEL_DRIVER"] = "emu"        # before lowlevel is imported: the emulated GPU
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from lowlevel import cuda, emu, kernels  # noqa: E402

import bench_barriers  # noqa: E402  (tools/, beside this file)
import bench_hopper  # noqa: E402
import bench_small  # noqa: E402

TARGETS = {"vector_add": 0.100, "sgemm_tiled": 0.080}   # seconds per launch
TARGETS.update(hgemm_mma=1.0, f64_exp=2.0, f64_erfc=2.0)
SPEEDUP_TARGET = 1000.0


def first_line(exc: BaseException) -> str:
    """The error's first line, and the first line of a JIT log (it names the instruction)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    log = getattr(exc, "log", None)
    if log:
        for line in log.strip().splitlines():
            if line.strip():
                return f"{text} | {line.strip()}"
    details = getattr(exc, "details", None)
    if details:
        return f"{text} | {str(details).strip().splitlines()[0]}"
    return text


def last_stats():
    """The emulator's LaunchStats of the last completed launch, or None."""
    return emu.last_launch_stats()


def upload(host):
    dev = cuda.mem_alloc(max(4, host.nbytes))
    cuda.memcpy_htod(dev, np.ascontiguousarray(host))
    return dev


def download(dev, shape, dtype=np.float32):
    out = np.full(shape, np.nan, dtype)
    cuda.memcpy_dtoh(out, dev)
    return out


# ---- the four kernels: each returns (launch, check, elements) ----------------------------------
def setup_vector_add(rng):
    n = 1 << 20
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    da, db, dc = upload(a), upload(b), cuda.mem_alloc(4 * n)
    f = kernels.module("vector_add").get_function("vector_add")

    def launch():
        cuda.memset_d8(dc, 0xFF, 4 * n)
        return lambda: f.launch((n + 255) // 256, 256, (da, db, dc, n))

    def check():
        ok = np.array_equal(download(dc, n), a + b)
        return ok, "exact" if ok else "MISMATCH"
    return "vector_add 2^20", "vector_add", launch, check, n


def setup_sgemm(rng):
    M = N = K = 256
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    dA, dB, dC = upload(A), upload(B), cuda.mem_alloc(4 * M * N)
    f = kernels.module("sgemm_tiled").get_function("sgemm_tiled")

    def launch():
        cuda.memset_d8(dC, 0xFF, 4 * M * N)
        return lambda: f.launch((-(-N // 64), -(-M // 64)), 256, (dA, dB, dC, M, N, K))

    # the references once, here: a matmul between timed launches would leave OpenBLAS's
    # threads spinning through the next launch, taking the CPU from the emulator's worker
    ref = A.astype(np.float64) @ B.astype(np.float64)
    bound = K * 2.0 ** -24 * (np.abs(A).astype(np.float64) @ np.abs(B).astype(np.float64))

    def check():
        got = download(dC, (M, N)).astype(np.float64)
        worst = float(np.nanmax(np.abs(got - ref) / bound)) if not np.isnan(got).any() else math.inf
        return worst <= 1.0, f"err <= {worst:.3f} x K*u*|A||B|"
    return "sgemm_tiled 256^3", "sgemm_tiled", launch, check, M * N


def setup_hgemm(rng):
    """ptx/hgemm_mma.ptx, 512^3 float16 on the (emulated) tensor cores, float32 accumulation."""
    M = N = K = 512
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    dA, dB, dC = upload(A), upload(B), cuda.mem_alloc(2 * M * N)
    f = kernels.module("hgemm_mma").get_function("hgemm_mma")

    def launch():
        cuda.memset_d8(dC, 0xFF, 2 * M * N)
        return lambda: f.launch((-(-N // 64), -(-M // 64)), 128, (dA, dB, dC, M, N, K))

    a, b = A.astype(np.float64), B.astype(np.float64)
    ref = a @ b                               # once, as in setup_sgemm
    bound = (K + 1) * 2.0 ** -23 * (np.abs(a) @ np.abs(b)) + 2.0 ** -11 * np.abs(ref) + 2.0 ** -24

    def check():
        got = download(dC, (M, N), np.float16).astype(np.float64)
        worst = float(np.nanmax(np.abs(got - ref) / bound)) if not np.isnan(got).any() else math.inf
        return worst <= 1.0, f"err <= {worst:.3f} x bound"
    return "hgemm_mma 512^3", "hgemm_mma", launch, check, M * N


def setup_reduce(rng, sm_count):
    n = 1 << 22
    x = rng.standard_normal(n).astype(np.float32)
    dx, out = upload(x), cuda.mem_alloc(4)
    grid, block = 4 * sm_count, 256           # "a few blocks per SM" (ptx/README.md)
    f = kernels.module("reduce_sum").get_function("reduce_sum_f32")

    def launch():
        cuda.memset_d8(out, 0, 4)             # the caller zeroes *out
        return lambda: f.launch(grid, block, (dx, out, n))

    def check():
        got = float(download(out, 1)[0])
        exact = math.fsum(x.astype(np.float64))
        # Worst case for a float32 summation tree of depth L: L u sum|x| (see
        # tests/test_ptx_kernels_sync.py); L counts the grid-stride loop, 2 x 5 shuffles and
        # up to grid + 1 atomic additions onto *out.
        depth = math.ceil(n / (grid * block)) + 11 + grid
        total = math.fsum(np.abs(x.astype(np.float64)))
        err = abs(got - exact)
        return err <= depth * 2.0 ** -24 * total, (f"|err| = {err / total:.1e} sum|x| "
                                                     f"<= {depth * 2.0 ** -24:.1e} sum|x|")
    return f"reduce_sum 2^22 (grid {grid})", "reduce_sum", launch, check, n


def setup_softmax(rng):
    rows = cols = 1024
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    dx, dy = upload(x), cuda.mem_alloc(x.nbytes)
    f = kernels.module("softmax").get_function("softmax_rows_f32")
    wpb = 4

    def launch():
        cuda.memset_d8(dy, 0xFF, x.nbytes)
        return lambda: f.launch(-(-rows // wpb), 32 * wpb, (dx, dy, rows, cols))

    def check():
        got = download(dy, (rows, cols)).astype(np.float64)
        d = (x - x.max(axis=1, keepdims=True)).astype(np.float64)
        e = np.exp(d)
        ref = e / e.sum(axis=1, keepdims=True)
        # ex2.approx: (2 + 1.2|d|) ulp for the numerator and the sum, plus the sum's roundings.
        ulps = 4 + 1.2 * (np.abs(d) + np.abs(d).max(axis=1, keepdims=True)) + cols / 32 + 8
        tol = ulps * 2.0 ** -23 * ref + 2 * np.finfo(np.float32).tiny
        worst = float(np.nanmax(np.abs(got - ref) / tol)) if not np.isnan(got).any() else math.inf
        return worst <= 1.0, f"err <= {worst:.3f} x tolerance"
    return "softmax 1024x1024", "softmax", launch, check, rows * cols


LIBDEVICE_F64 = r"""
extern "C" __global__ void f64_exp(const double* x, double* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = exp(x[i]);
}
extern "C" __global__ void f64_erfc(const double* x, double* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = erfc(x[i]);
}
"""
LIBDEVICE_ULPS = {"exp": 1, "erfc": 5}      # CUDA Programming Guide, double-precision table


def setup_libdevice_f64(rng, fn):
    """libdevice's double exp or erfc (NVRTC) over 60,000 threads: fma.rn.f64 bound."""
    n = 60000
    x = rng.uniform(-20, 20, n) if fn == "exp" else rng.uniform(-4, 10, n)
    dx, dy = upload(x), cuda.mem_alloc(x.nbytes)
    f = cuda.Module.from_cuda(LIBDEVICE_F64).get_function(f"f64_{fn}")

    def launch():
        cuda.memset_d8(dy, 0xFF, x.nbytes)
        return lambda: f.launch(-(-n // 256), 256, (dx, dy, n))

    def check():
        got = download(dy, n, np.float64)
        ref = np.exp(x) if fn == "exp" else np.array([math.erfc(v) for v in x])
        # the reference's own error (numpy's exp, math.erfc: within 1 ulp) counts too
        ulps = np.abs(got - ref) / np.spacing(np.abs(ref))
        worst = float(np.nanmax(ulps)) if not np.isnan(got).any() else math.inf
        return worst <= LIBDEVICE_ULPS[fn] + 1, f"err <= {worst:.2f} ulp"
    return f"libdevice f64 {fn} 60000", f"f64_{fn}", launch, check, n


def bench(label, key, setup, repeat):
    """Row for one kernel: a dict, or one with 'error' when the emulator refused it."""
    t0 = time.perf_counter()
    try:
        label, key, launch, check, elements = setup()
    except Exception as exc:                  # refused at load (CUDA_ERROR_INVALID_PTX), ...
        return {"label": label, "key": key, "error": first_line(exc)}
    row = {"label": label, "key": key, "elements": elements}
    try:
        go = launch()
        go()
        cuda.synchronize()                    # warm-up launch
        row["first_s"] = time.perf_counter() - t0
        ok, note = check()
        if not ok:
            row["error"] = f"wrong result: {note}"
            return row
        walls, events, cpus, stats = [], [], [], None
        for _ in range(repeat):
            go = launch()
            cuda.synchronize()
            start, end = cuda.Event(), cuda.Event()
            t, c = time.perf_counter(), time.process_time()
            start.record()
            go()
            end.record()
            cuda.synchronize()
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
            events.append(start.elapsed_ms(end) / 1e3)
            stats = last_stats()
            ok, note = check()
            if not ok:
                row["error"] = f"wrong result on a timed launch: {note}"
                return row
        row.update(wall_s=min(walls), event_s=min(events), cpu_s=min(cpus), check=note,
                   thread_instructions=getattr(stats, "thread_instructions", None))
    except Exception as exc:                  # a fault, or a refusal at launch
        row["error"] = first_line(exc)
        try:
            cuda.reset_device()
        except Exception:
            pass
    return row


NUMBA_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from numba import cuda

    @cuda.jit
    def vector_add(a, b, c, n):
        i = cuda.grid(1)
        if i < n:
            c[i] = a[i] + b[i]

    n, repeat = int(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng()
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    da, db = cuda.to_device(a), cuda.to_device(b)
    dc = cuda.device_array_like(a)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        vector_add[(n + 255) // 256, 256](da, db, dc, n)
        cuda.synchronize()
        best = min(best, time.perf_counter() - t)
        assert np.array_equal(dc.copy_to_host(), a + b)
    import numba
    print(json.dumps({"n": n, "best_s": best, "numba": numba.__version__}))
""")


def run_numba(n, repeat):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    try:
        proc = subprocess.run([sys.executable, "-c", NUMBA_SCRIPT, str(n), str(repeat)], env=env,
                              capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return {"error": "numba's simulator took more than 15 minutes"}
    if proc.returncode != 0:
        if "No module named 'numba" in proc.stderr:
            return {"error": "numba is not installed: pip install numba (a tool dependency only)"}
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return {"error": f"numba's simulator failed: {lines[-1] if lines else proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fmt_time(s):
    if s is None:
        return "-"
    return f"{s * 1e3:9.2f} ms" if s < 10 else f"{s:9.2f} s "


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="timed launches per kernel (best is kept)")
    ap.add_argument("--no-numba", action="store_true", help="skip numba's CUDA simulator")
    ap.add_argument("--numba-n", type=int, default=1 << 13, help="vector add size for numba's simulator")
    ap.add_argument("--numba-repeat", type=int, default=2)
    ap.add_argument("--only", action="append", metavar="KEY",
                    help="run only this kernel (repeatable): vector_add, sgemm_tiled, reduce_sum, "
                         "softmax, hgemm_mma, hgemm_wgmma_tma, f64_exp, f64_erfc, copy_barrier_sm90, copy_barrier_sm80, "
                         "loop_arrive_wait, loop_syncthreads, fast_math, precise_math, small_grid_64, "
                         "large_grid_64; implies --no-numba")
    args = ap.parse_args()
    if args.only:
        args.no_numba = True

    info = cuda.driver_info()
    dev = cuda.GPU(0)
    sm_count = dev.multiprocessor_count
    print(f"driver: {info['kind']} ({info['description']}, CUDA {info['version']}); device: {dev.name}, "
          f"{sm_count} SMs")
    if info["kind"] != "emu":
        print("warning: not the emulated GPU; LOWLEVEL_DRIVER=emu was overridden?")
    rng = np.random.default_rng()

    setups = [lambda: setup_vector_add(rng), lambda: setup_sgemm(rng),
              lambda: setup_reduce(rng, sm_count), lambda: setup_softmax(rng), lambda: setup_hgemm(rng)]
    names = [("vector_add 2^20", "vector_add"), ("sgemm_tiled 256^3", "sgemm_tiled"),
             ("reduce_sum 2^22", "reduce_sum"), ("softmax 1024x1024", "softmax"), ("hgemm_mma 512^3", "hgemm_mma")]
    for setup, name in bench_hopper.setups(rng):     # hgemm_wgmma_tma 512^3 beside hgemm_mma
        setups.append(setup)
        names.append(name)
    for fn in ("exp", "erfc"):                  # libdevice double math (fma.rn.f64 heavy)
        setups.append(lambda fn=fn: setup_libdevice_f64(rng, fn))
        names.append((f"libdevice f64 {fn} 60000", f"f64_{fn}"))
    for setup, name in bench_barriers.setups(rng):   # barrier kernels beside their fast twins
        setups.append(setup)
        names.append(name)
    for setup, name in bench_small.setups(rng):      # .ftz flushes; a small grid beside a large one
        setups.append(setup)
        names.append(name)
    chosen = [(setup, name) for setup, name in zip(setups, names) if not args.only or name[1] in args.only]
    if args.only and len(chosen) != len(set(args.only)):
        ap.error(f"--only: unknown kernel in {args.only}; choose from {', '.join(k for _, k in names)}")
    rows = [bench(label, key, setup, args.repeat) for setup, (label, key) in chosen]

    print()
    head = (f"{'kernel':28s} {'wall/launch':>12s} {'event/launch':>12s} {'cpu/launch':>12s} {'thread-instr':>13s} "
            f"{'G thr-instr/s':>13s} {'ns/elem':>8s}  check")
    print(head)
    print("-" * len(head))
    for r in rows:
        if "wall_s" not in r:
            print(f"{r['label']:28s} REFUSED/FAILED: {r['error']}")
            continue
        ti = r["thread_instructions"]
        rate = f"{ti / r['event_s'] / 1e9:13.3f}" if ti and r["event_s"] > 0 else f"{'n/a':>13s}"
        print(f"{r['label']:28s} {fmt_time(r['wall_s']):>12s} {fmt_time(r['event_s']):>12s} {fmt_time(r['cpu_s']):>12s} "
              f"{ti if ti is not None else 'n/a':>13} {rate} {r['wall_s'] / r['elements'] * 1e9:8.1f}  {r['check']}")

    numba_row = None
    if not args.no_numba:
        print(f"\nnumba CUDA simulator, vector add of {args.numba_n} elements (subprocess, "
              f"NUMBA_ENABLE_CUDASIM=1, best of {args.numba_repeat}) ...", flush=True)
        numba_row = run_numba(args.numba_n, args.numba_repeat)
        if "error" in numba_row:
            print(f"  {numba_row['error']}")
        else:
            print(f"  numba {numba_row['numba']}: {fmt_time(numba_row['best_s']).strip()} per launch, "
                  f"{numba_row['best_s'] / numba_row['n'] * 1e9:,.0f} ns per element")

    print("\ntargets:")
    by_key = {r.get("key"): r for r in rows}
    for key, label in (("vector_add", "vector add 2^20 <= 100 ms"), ("sgemm_tiled", "sgemm_tiled 256^3 <= 80 ms"),
                       ("f64_exp", "libdevice f64 exp over 60000 threads <= 2 s"),
                       ("f64_erfc", "libdevice f64 erfc over 60000 threads <= 2 s")):
        r = by_key.get(key)
        if args.only and key not in args.only:
            continue
        if r is None or "wall_s" not in r:
            print(f"  MISS  {label}: did not run ({(r or {}).get('error', '?')})")
        else:
            verdict = "PASS" if r["wall_s"] <= TARGETS[key] else "MISS"
            print(f"  {verdict}  {label}: {fmt_time(r['wall_s']).strip()} (wall, best of {args.repeat})")
    r = by_key.get("hgemm_mma")
    label = "hgemm_mma 512^3 <= 1 s"
    if args.only and "hgemm_mma" not in args.only:
        pass
    elif r is None or "wall_s" not in r:
        print(f"  MISS  {label}: did not run ({(r or {}).get('error', '?')})")
    else:
        verdict = "PASS" if r["wall_s"] <= TARGETS["hgemm_mma"] else "MISS"
        print(f"  {verdict}  {label}: {fmt_time(r['wall_s']).strip()} (wall, best of {args.repeat})")
    bench_barriers.print_targets(by_key, args.only)
    va = by_key.get("vector_add")
    label = f"emulator >= {SPEEDUP_TARGET:.0f}x numba's simulator per element (vector add)"
    if args.only:
        pass
    elif numba_row is None:
        print(f"  ----  {label}: numba not run (--no-numba)")
    elif "error" in numba_row:
        print(f"  ----  {label}: {numba_row['error']}")
    elif va is None or "wall_s" not in va:
        print(f"  MISS  {label}: the emulator's vector add did not run")
    else:
        emu_per = va["wall_s"] / va["elements"]
        sim_per = numba_row["best_s"] / numba_row["n"]
        ratio = sim_per / emu_per
        print(f"  {'PASS' if ratio >= SPEEDUP_TARGET else 'MISS'}  {label}: {ratio:,.0f}x "
              f"({emu_per * 1e9:.1f} ns vs {sim_per * 1e9:,.0f} ns per element)")


if __name__ == "__main__":
    main()
