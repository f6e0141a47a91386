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
last section lists the kernels that the backward pass of the op launched.
"""
import contextlib
import io
import sys
import time

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
    parser.set_defaults(run=command)


def command(args) -> int:
    """One op followed through the five layers, with what each cost."""
    try:
        print(run(args.op, size=args.size, dtype=args.dtype, device=args.device, requires_grad=args.requires_grad,
                  library=args.library))
    except (NotImplementedError, LibraryRefused) as e:   # no kernel for the dtype, or for the shape
        print(f"lowlevel trace: {e}", file=sys.stderr)
        return 2
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


class LibraryRefused(Exception):
    """The matmul library asked for cannot run these inputs (its message says why)."""


def run(op: str, size: int = 1024, dtype: str = "float32", device: str = "cuda", requires_grad: bool = False,
        library: str | None = None) -> str:
    """The report of one traced call of `op` on square inputs (that require grad, if asked),
    with matmul on `library` ("cublas" or "ptx") when given."""
    if op not in OPS:
        raise ValueError(f"trace knows {', '.join(OPS)}; not {op!r}")
    if library is None:
        return _run(op, size, dtype, device, requires_grad)
    if op != "matmul":
        raise LibraryRefused(f"--library chooses the matmul library; {op} has none to choose")
    with matmul_library(library):
        try:
            return _run(op, size, dtype, device, requires_grad, library)
        except (TypeError, ValueError) as e:
            raise LibraryRefused(f"matmul on the {library} library: {e}") from e


def _run(op: str, size: int, dtype: str, device: str, requires_grad: bool, library: str | None = None) -> str:
    rng = np.random.default_rng(0)
    dtype = as_dtype(dtype)
    args = _inputs(op, size, dtype, device, rng, requires_grad)
    drv = cuda.get_driver()
    dev = cuda.Device(0)

    # Cold call: module loads and JIT, handle creation, allocator segments.
    start = time.perf_counter()
    _call(op, args)
    cuda.synchronize()
    cold_ms = (time.perf_counter() - start) * 1e3

    stream = cuda.current_stream()
    begin, end = cuda.Event(), cuda.Event()
    emu_before = _thread_instructions(drv)
    begin.record(stream)
    with trace.Recorder() as rec:
        t0 = time.perf_counter()
        result = _call(op, args)
        host_s = time.perf_counter() - t0           # the call returned: the work is queued
    end.record(stream)
    end.synchronize()
    device_ms = begin.elapsed_ms(end)
    emu_instructions = _thread_instructions(drv) - emu_before
    backward_lines = _backward(result) if requires_grad else []
    del result

    out = []
    line = out.append
    major, minor = dev.compute_capability
    line(f"lowlevel trace: {op} on {size}x{size} {dtype.name}, device {device}, "
         f"{'the real driver' if drv.kind == 'cuda' else 'the EMULATED GPU'} ({drv.description})")
    line(f"(a cold call first took {cold_ms:.1f} ms: kernel loading, cuBLAS handle, memory reservation)")

    validation = sum(s for _, s in rec.validation)
    line("\nL1  Python frontend: validation of shapes, devices, dtypes")
    for name, s in rec.validation:
        line(f"    {name}: {s * 1e6:.1f} us")

    line(f"\nL2  the ctypes boundary: {len(rec.calls)} call{'' if len(rec.calls) == 1 else 's'} into C")
    crossing = 0.0
    for c in rec.calls:
        crossing += c["seconds"]
        line(f"    [{c['library']}] {c['symbol']}({c['args'][:90]}) -> {c['result']}  {c['seconds'] * 1e6:.1f} us")
    line(f"    total in C calls: {crossing * 1e6:.1f} us")

    line("\nL3  the dispatcher")
    for text in _explain_quietly(op, args).splitlines():
        line("    " + text)
    line(f"    keys visited: {' -> '.join(dispatch.route(op, *args))}")

    line("\nL4  kernel libraries" + (f" (matmul library: {library})" if library else ""))
    for k in rec.launches:
        where = f"grid {k['grid']} block {k['block']}" if k["grid"] is not None else "cuBLAS"
        line(f"    {k['kernel']} ({k['module']}, {where})")
    line(f"    device time between events around the call: {device_ms * 1e3:.1f} us"
         + ("  (the emulated GPU: CPU time of the emulator)" if drv.kind == "emu" else ""))

    out.extend(backward_lines)

    line("\nL5  hardware")
    line(f"    {dev.name}: sm_{major}{minor}, {dev.multiprocessor_count} SMs, "
         f"{dev.total_memory / 2**30:.1f} GiB, CUDA driver API {format_driver_version(drv.version())}")
    kinds = sorted({k["image_kind"] for k in rec.launches})
    meaning = {"sass": "SASS, machine code for this GPU", "ptx-jit": "PTX the driver compiled at load",
               "emulated": "cuBLAS emulated with numpy on the CPU"}
    line(f"    code that ran: {'; '.join(meaning.get(k, k) for k in kinds) or 'none'}")
    if drv.kind == "emu":
        rate = emu_instructions / (device_ms / 1e3) if device_ms > 0 else 0
        line(f"    thread-instructions executed by the emulated GPU's PTX engine: {emu_instructions:,}"
             + (f" ({rate / 1e6:.0f} M/s)" if emu_instructions else ""))
        line("    (on the emulated GPU the 'device' shares the CPU and Python's lock with the host, so host")
        line("     times include waiting for the emulator's worker threads)")

    host_us = host_s * 1e6
    line("\nsummary")
    line(f"    host: {host_us:.1f} us from the Python call to its return (validation {validation * 1e6:.1f} us, "
         f"C calls {crossing * 1e6:.1f} us, the rest dispatch and backend Python)")
    line(f"    device: {device_ms * 1e3:.1f} us of work")
    share = host_us / (host_us + device_ms * 1e3) * 100 if host_us + device_ms else 0
    line(f"    about {host_us:.0f} us of Python for about {device_ms * 1e3:.0f} us of "
         f"{'GPU' if drv.kind == 'cuda' else 'emulated GPU'} work ({share:.0f}% of the total is host overhead)")
    return "\n".join(out)


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


def _thread_instructions(drv) -> int:
    if drv.kind != "emu":
        return 0
    # Imported here, not at the top: on a real GPU the emulator is never loaded.
    from .. import emu  # noqa: PLC0415
    return emu.thread_instructions()
