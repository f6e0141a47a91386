"""The five-layer trace: one op, followed from Python down to the (real or emulated) GPU.

    lowlevel trace matmul --size 1024 --dtype float32
    lowlevel trace matmul --size 1024 --dtype float16 --library ptx    (handwritten hgemm_mma)

runs the op once cold (loading kernels, creating the cuBLAS handle, reserving memory),
then once traced, and reports what each layer did and what it cost:

  L1 frontend     the Python validation of shapes, devices and dtypes
  L2 ctypes       every driver and cuBLAS call that crossed into C, with arguments and time
  L3 dispatch     the keys visited and the kernel chosen
  L4 kernels      what was launched, and the device time between two events around it
  L5 hardware     the device, its architecture, SASS or PTX JIT, and on the emulated GPU
                  the thread-instructions it executed

and closes with the host's overhead against the device's time. With --requires-grad the
inputs require grad: the dispatcher's route shows Autograd above the backend key, and a
last section lists the kernels that the backward pass of the op launched. With --graph
the op is captured into a CUDA graph (lowlevel.cuda.graph) and what is traced is one
replay of it: one cuGraphLaunch instead of the op's validation, dispatch and launches.

On the emulated GPU the driver's C functions are Python too (ctypes callbacks into
lowlevel.emu): the time spent inside them is the emulator's work, "driver (emulated)",
where a real GPU's driver would take a few microseconds. The summary times the call once
more, untraced, and takes that time out (and the time the calling thread waited, off the
CPU, for the emulator's worker threads), so that its closing ratio is lowlevel's own host
overhead: its Python and the ctypes crossings.
"""
import contextlib
import io
import sys
import threading
import time
import types

import numpy as np

from .. import cuda, dispatch, trace
from ..backends.cuda import matmul_library
from ..backends.cuda.matmul_ptx import LIBRARIES
from ..capi.versions import format_driver_version
from ..frontend import ops
from ..frontend.creation import ones, tensor
from ..frontend.dtypes import as_dtype

UNARY = ("neg", "relu", "exp", "sum", "mean", "max", "softmax")
BINARY = ("add", "sub", "mul", "div", "matmul")
OPS = BINARY + UNARY


def add_parser(sub) -> None:
    parser = sub.add_parser("trace", help="run one op and show what each of the five layers did and cost")
    parser.add_argument("op", choices=OPS)
    parser.add_argument("--size", type=int, default=1024, help="square inputs of this size (default 1024)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--library", choices=LIBRARIES, default=None,
                        help="matmul only: cublas, or ptx for the handwritten kernels (sgemm_tiled, hgemm_mma)")
    parser.add_argument("--requires-grad", action="store_true",
                        help="inputs that require grad: the route through Autograd, and the backward's kernels")
    parser.add_argument("--graph", action="store_true",
                        help="capture the op in a CUDA graph and trace one replay of it")
    parser.add_argument("--timeline", metavar="PATH", default=None,
                        help="also profile the traced call and write its timeline to PATH as a Chrome trace "
                             "(open it in ui.perfetto.dev or chrome://tracing)")
    parser.set_defaults(run=command)


def command(args) -> int:
    """One op followed through the five layers, with what each cost."""
    try:
        print(run(args.op, size=args.size, dtype=args.dtype, device=args.device, requires_grad=args.requires_grad,
                  graph=args.graph, library=args.library, timeline=args.timeline))
    except (NotImplementedError, ValueError, LibraryRefused) as e:   # no kernel for the dtype or shape
        print(f"lowlevel trace: {e}", file=sys.stderr)
        return 2
    return 0


def _inputs(op: str, size: int, dtype, device: str, rng, requires_grad: bool = False):
    shape = (size, size)

    def make():
        t = tensor(rng.standard_normal(shape).astype(np.float32), device=device).to(dtype)
        return t.requires_grad_() if requires_grad else t
    return (make(), make()) if op in BINARY else (make(),)


def _call(op: str, args):
    return getattr(ops, op)(*args)


def _capture(op: str, args):
    """The op captured into a CUDA graph (after a warm-up call): (the graph, its output)."""
    with cuda.graph() as g:
        result = _call(op, args)
    return g, result


class LibraryRefused(Exception):
    """The matmul library asked for cannot run these inputs (its message says why)."""


def run(op: str, size: int = 1024, dtype: str = "float32", device: str = "cuda", requires_grad: bool = False,
        graph: bool = False, library: str | None = None, timeline: str | None = None) -> str:
    """The report of one traced call of `op` on square inputs (that require grad, if asked;
    with `graph`, of one replay of the op captured into a CUDA graph), with matmul on
    `library` ("cublas" or "ptx") when given; with `timeline`, the traced call is also
    profiled (lowlevel.profile) and its timeline written there as a Chrome trace."""
    if op not in OPS:
        raise ValueError(f"trace knows {', '.join(OPS)}; not {op!r}")
    if graph and (device != "cuda" or requires_grad):
        raise ValueError("--graph captures the op on a CUDA device (--device cuda), without --requires-grad")
    if library is None:
        return _run(op, size, dtype, device, requires_grad, graph, timeline=timeline)
    if op != "matmul":
        raise LibraryRefused(f"--library chooses the matmul library; {op} has none to choose")
    with matmul_library(library):
        try:
            return _run(op, size, dtype, device, requires_grad, graph, library, timeline)
        except (TypeError, ValueError) as e:
            raise LibraryRefused(f"matmul on the {library} library: {e}") from e


def _run(op: str, size: int, dtype: str, device: str, requires_grad: bool, graph: bool = False,
         library: str | None = None, timeline: str | None = None) -> str:
    rng = np.random.default_rng(0)
    dtype = as_dtype(dtype)
    args = _inputs(op, size, dtype, device, rng, requires_grad)
    drv = cuda.get_driver()
    m = _measure(op, args, graph, timeline, drv, requires_grad)
    on_gpu = device != "cpu"
    emulated = drv.kind == "emu" and on_gpu        # on the CPU backend no emulated GPU work runs
    out = [f"lowlevel trace: {op} on {size}x{size} {dtype.name}, device {device}, "
           + (_where(drv) if on_gpu else "the CPU backend (numpy): no GPU work")
           + ("; one replay of the op captured in a CUDA graph" if graph else ""),
           f"(a cold call first took {m.cold_ms:.1f} ms: kernel loading, cuBLAS handle, memory reservation)"]
    validation, crossing = _report_layers_1_to_4(out, m, op, args, graph, library, on_gpu, emulated, drv)
    out.append("\nL5  hardware")
    if not on_gpu:
        out.append("    the host CPU (numpy); no GPU work ran")
        out.append("\nsummary")
        out.append(f"    the traced call: {m.host_s * 1e6:.1f} us of host work on the CPU backend; no GPU work ran")
        return "\n".join(out + (_timeline(m.profiled, timeline) if timeline else []))
    _report_hardware(out, m, graph, emulated, drv)
    out.append("\nsummary")
    out.append(f"    the traced call: {m.host_s * 1e6:.1f} us from the Python call to its return (validation "
               f"{validation * 1e6:.1f} us, C calls {crossing * 1e6:.1f} us, the rest dispatch, backend Python and "
               f"the trace's own bookkeeping)")
    out.extend(_summary(m.split, queued_split(m.work, drv, m.split["drain"]), m.device_ms, emulated))
    if timeline:
        out.extend(_timeline(m.profiled, timeline))
    return "\n".join(out)


def _measure(op: str, args, graph: bool, timeline: str | None, drv, requires_grad: bool) -> types.SimpleNamespace:
    """Run the op cold, then once traced between two events: what the report is made of."""
    m = types.SimpleNamespace()
    # Cold call: module loads and JIT, handle creation, allocator segments.
    start = time.perf_counter()
    _call(op, args)
    cuda.synchronize()
    m.cold_ms = (time.perf_counter() - start) * 1e3
    m.captured = _capture(op, args) if graph else None
    m.work = m.captured[0].replay if graph else (lambda: _call(op, args))
    m.split = _host_split(m.work, drv)

    stream = cuda.current_stream()
    begin, end = cuda.Event(), cuda.Event()
    emu_before = _thread_instructions(drv)
    begin.record(stream)
    with dispatch.profile() if timeline else contextlib.nullcontext() as profiled:
        with trace.Recorder() as rec:
            t0 = time.perf_counter()
            result = m.work()
            m.host_s = time.perf_counter() - t0     # the call returned: the work is queued
        end.record(stream)                          # before the profile's exit waits for its events
    end.synchronize()
    m.profiled, m.rec = profiled, rec
    m.device_ms = begin.elapsed_ms(end)
    m.emu_instructions = _thread_instructions(drv) - emu_before
    m.backward_lines = _backward(result) if requires_grad else []
    return m


def _report_layers_1_to_4(out: list, m, op: str, args, graph: bool, library, on_gpu: bool, emulated: bool,
                          drv) -> tuple[float, float]:
    """The lines of layers 1 to 4 (and the backward's); returns (validation s, C calls s)."""
    line, rec = out.append, m.rec
    validation = sum(s for _, s in rec.validation)
    line("\nL1  Python frontend: validation of shapes, devices, dtypes")
    for name, s in rec.validation:
        line(f"    {name}: {s * 1e6:.1f} us")
    if graph:
        line("    none in a replay: the op was validated once, when it was captured")

    line(f"\nL2  the ctypes boundary: {len(rec.calls)} call{'' if len(rec.calls) == 1 else 's'} into C"
         + ("  (time inside each: the emulator's Python, 'driver (emulated)')" if emulated else ""))
    crossing = 0.0
    for c in rec.calls:
        crossing += c["seconds"]
        line(f"    [{c['library']}] {c['symbol']}({c['args'][:90]}) -> {c['result']}  {c['seconds'] * 1e6:.1f} us")
    line(f"    total in C calls: {crossing * 1e6:.1f} us")

    line("\nL3  the dispatcher" + ("  (at capture; a replay dispatches nothing)" if graph else ""))
    for text in _explain_quietly(op, args).splitlines():
        line("    " + text)
    line(f"    keys visited: {' -> '.join(dispatch.route(op, *args))}")

    line("\nL4  kernel libraries" + (f" (matmul library: {library})" if library else ""))
    if graph:
        nodes = m.captured[0].nodes()
        line(f"    the graph's {len(nodes)} node{'' if len(nodes) == 1 else 's'}, launched as one: {', '.join(nodes)}")
    for k in rec.launches:
        where = f"grid {k['grid']} block {k['block']}" if k["grid"] is not None else "cuBLAS"
        line(f"    {k['kernel']} ({k['module']}, {where})")
    if on_gpu:
        line(f"    device time between events around the call: {m.device_ms * 1e3:.1f} us"
             + (f"  (the emulated GPU: {drv.timing})" if emulated else ""))
    else:
        line("    none: the op ran on the CPU backend, no kernel was launched")
    out.extend(m.backward_lines)
    return validation, crossing


def _report_hardware(out: list, m, graph: bool, emulated: bool, drv) -> None:
    """Layer 5's lines: the device, the code that ran, the emulator's instruction count."""
    line = out.append
    dev = cuda.GPU(0)
    major, minor = dev.compute_capability
    line(f"    {dev.name}: sm_{major}{minor}, {dev.multiprocessor_count} SMs, "
         f"{dev.total_memory / 2**30:.1f} GiB, CUDA driver API {format_driver_version(drv.version())}")
    kinds = sorted({k["image_kind"] for k in m.rec.launches})
    meaning = {"sass": "SASS, machine code for this GPU", "ptx-jit": "PTX the driver compiled at load",
               "emulated": "cuBLAS emulated with numpy on the CPU"}
    line(f"    code that ran: {'; '.join(meaning.get(k, k) for k in kinds) or ('the graph' if graph else 'none')}")
    if emulated:
        # a rate of the emulator's own: not over a modelled device time
        rate = (m.emu_instructions / (m.device_ms / 1e3)
                if m.device_ms > 0 and "modelled" not in drv.timing else 0)
        line(f"    thread-instructions executed by the emulated GPU's PTX engine: {m.emu_instructions:,}"
             + (f" ({rate / 1e6:.0f} M/s)" if m.emu_instructions and rate else ""))
        line("    (on the emulated GPU the 'device' shares the CPU and Python's lock with the host, so host")
        line("     times include waiting for the emulator's worker threads)")


def _where(drv) -> str:
    """The driver that ran the GPU work, for the report's first line."""
    return f"{'the real driver' if drv.kind != 'emu' else 'the EMULATED GPU'} ({drv.description})"


def _timeline(profiled, path: str) -> list[str]:
    """The traced call's timeline, drawn and written to `path` (the Chrome trace format)."""
    profiled.export_chrome_trace(path)
    return ["\ntimeline  (the traced call, profiled: its host times include the profiler's own recording)",
            profiled.report(), f"    written to {path}: open it in ui.perfetto.dev or chrome://tracing"]


def _timed_calls(work, emu, calls: int) -> dict:
    """`work` called `calls` times: the wall and CPU time on this thread and, on the emulated
    GPU (`emu`), the part of each spent inside the emulator's C functions, in seconds."""
    if emu is not None:
        emu.count_call_time(True)
        inside_wall, inside_cpu = emu.call_time()
    try:
        wall, cpu = time.perf_counter(), time.thread_time()
        for _ in range(calls):
            work()
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    finally:
        if emu is not None:
            emu.count_call_time(False)
    split = {"wall": wall, "cpu": cpu, "driver_wall": 0.0, "driver_cpu": 0.0}
    if emu is not None:
        after_wall, after_cpu = emu.call_time()
        split["driver_wall"], split["driver_cpu"] = after_wall - inside_wall, after_cpu - inside_cpu
    return split


def _host_split(work, drv, repeats: int = 3) -> dict:
    """`work` called `repeats` more times, untraced, each on an idle device: the call with
    the median own time (_timed_calls' split), and in "drain" the seconds the device then
    took to finish it."""
    emu = _emulator(drv)
    splits = []
    for _ in range(repeats):
        cuda.synchronize()                  # nothing of earlier work competes with the call
        split = _timed_calls(work, emu, 1)
        start = time.perf_counter()
        cuda.synchronize()
        split["drain"] = time.perf_counter() - start
        splits.append(split)
    return sorted(splits, key=lambda sp: sp["cpu"] - sp["driver_cpu"])[len(splits) // 2]


QUEUED_CALLS = 20            # at most; fewer where the device would take long to drain them
GATE_S = 10.0               # the host function holding the stream lets go by itself after this


def queued_split(work, drv, drain_s: float) -> dict:
    """`work` called several times in a row (QUEUED_CALLS, or fewer where the device takes
    `drain_s` per call: about a second of device work in all) while the stream waits for
    the host: a host function holds it until the calls are made, so that the GPU runs none
    of them meanwhile (the emulator's Python does not share the CPU with them) and the CPU
    fills the queue ahead of it. The first call, after the synchronize, is not timed. The
    time per timed call, split as _timed_calls splits it, and their number in "calls"."""
    calls = max(2, min(QUEUED_CALLS, int(1.0 / max(drain_s, 1e-6))))
    stream = cuda.current_stream() or cuda.Stream.legacy()
    gate = threading.Event()
    cuda.synchronize()
    stream.add_callback(lambda: gate.wait(GATE_S))     # a call that waits for the GPU cannot hang
    try:
        work()
        split = _timed_calls(work, _emulator(drv), calls)
    finally:
        gate.set()
    cuda.synchronize()
    return {**{k: v / calls for k, v in split.items()}, "calls": calls}


def _summary(split: dict, queued: dict, device_ms: float, emulated: bool) -> list[str]:
    """The closing lines: the host's time split, one call after a synchronize and per call
    of a queue (`queued`), and lowlevel's own share of a queued call against the device's."""
    us = {k: v * 1e6 for k, v in split.items()}
    per = {k: v * 1e6 for k, v in queued.items() if k != "calls"}
    device_us = device_ms * 1e3
    if emulated:
        own = max(0.0, us["cpu"] - us["driver_cpu"])         # lowlevel's Python and the ctypes crossings
        waited = max(0.0, us["wall"] - us["cpu"] - (us["driver_wall"] - us["driver_cpu"]))
        queued_own = max(0.0, per["cpu"] - per["driver_cpu"])
        lines = [f"    untraced, one call after a synchronize (median of 3 calls): {us['wall']:.1f} us, of which",
                 f"      lowlevel (own Python and ctypes crossings): {own:.1f} us",
                 f"      driver (emulated): {us['driver_wall']:.1f} us inside the emulated driver's and cuBLAS's "
                 f"C functions (the emulator's Python; a real driver takes microseconds)",
                 f"      waiting for the emulator's worker threads (Python's lock): {waited:.1f} us",
                 f"    untraced, {queued['calls']} calls queued in a row (the GPU held until they are made), per call: "
                 f"lowlevel {queued_own:.1f} us, driver (emulated) {per['driver_wall']:.1f} us",
                 "      (lowlevel's figure includes ctypes' conversion of the arguments for the emulator's Python, and",
                 "       lowlevel's code runs slower between the emulator's long stretches of Python on the same CPU:",
                 "       tools/bench_host.py times lowlevel alone, with the launch a C no-op)"]
        where = "emulated GPU"
    else:
        own, queued_own = us["wall"], per["wall"]
        lines = [f"    untraced, one call after a synchronize (median of 3 calls): {us['wall']:.1f} us (lowlevel's "
                 f"Python, the ctypes crossings and the driver's own time in its calls)",
                 f"    untraced, {queued['calls']} calls queued in a row (the GPU held until they are made): "
                 f"{queued_own:.1f} us per call"]
        where = "GPU"
    lines.append(f"    device: {device_us:.1f} us of work")
    share = queued_own / (queued_own + device_us) * 100 if queued_own + device_us else 0
    lines.append(f"    about {queued_own:.0f} us of lowlevel's host work per queued call for about {device_us:.0f} us "
                 f"of {where} work ({share:.0f}% of the total is host overhead; {own:.0f} us for one call after a "
                 f"synchronize)")
    return lines


def _backward(result) -> list[str]:
    """Run result.backward(ones) and list the kernels its formulas launched."""
    with trace.Recorder() as rec:
        result.backward(ones(result.shape, dtype=result.dtype, device=result.device))
    cuda.synchronize()
    count = len(rec.launches)
    lines = [f"\nbackward  result.backward(ones) from {result.grad_fn.name}: {count} kernel launch"
             + ("" if count == 1 else "es")]
    for k in rec.launches:
        where = f"grid {k['grid']} block {k['block']}" if k["grid"] is not None else "cuBLAS"
        lines.append(f"    {k['kernel']} ({k['module']}, {where})")
    return lines


def _explain_quietly(op, args) -> str:
    with contextlib.redirect_stdout(io.StringIO()):
        return dispatch.explain(op, *args)


def _emulator(drv):
    """lowlevel.emu when `drv` is the emulated driver, else None."""
    if drv.kind != "emu":
        return None
    # Imported here, not at the top: on a real GPU the emulator is never loaded.
    from .. import emu  # noqa: PLC0415
    return emu


def _thread_instructions(drv) -> int:
    emu = _emulator(drv)
    return 0 if emu is None else emu.thread_instructions()
