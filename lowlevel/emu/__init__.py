"""Layer 5 without a GPU: the emulated GPU, behind the same C function table as libcuda.

    driver/   the C functions: device and context, memory, modules, launch, streams and
              events; cuBLAS
    ptx/      the front end: lexer, parser, IR; knows nothing of execution
    isa/      one module per instruction family, each registering into isa/registry.py
    engine/   decode (PTX -> Python basic blocks), the scheduler, memory spaces, faults
    libcuda/  the emulated GPU as a drop-in libcuda.so.1 for other people's clients (built on demand)
    tools/    racecheck, instruction counters, printf output: observers of a launch; the H200
              time model (LOWLEVEL_EMU_TIMING=model) and its timeline

Modules import each other in no cycle: driver -> engine -> isa -> ptx (the families' runtime
helpers also raise engine/faults.py's KernelFault and read engine/memory.py, two leaf
modules); tools/ imports none of them. Everything may use lowlevel.capi, and nothing else
of lowlevel (tests/emu/test_emu_layout.py checks both).

What the layers above use (lowlevel/cuda binds the driver and cuBLAS tables, the CLI
reports on it); nothing else of the emulator is imported from outside it:

    functions()              the driver's C functions, by public name (ctypes callbacks wrap them)
    cublas_functions()       cuBLAS's C functions, by name
    error_details(code)      what the emulator knows about the last failure (kernel, thread, line)
    pending_interrupt()      a Ctrl-C that arrived inside an emulated call, to raise again
    thread_instructions()    thread-instructions executed so far (for the trace)
    count_call_time(on)      measure the time calling threads spend inside emulated calls (trace)
    call_time()              (wall, CPU) seconds this thread spent inside them while measured
    last_launch_stats()      the engine's figures for the last kernel completed (tools/bench_emu.py):
                             its CPU seconds (cpu_s) and, under the time model, modelled_us
    timing()                 what device times mean: "emulator CPU time" or "modelled (H200 time
                             model)" (LOWLEVEL_EMU_TIMING=model, read as each context is made)
    assembler_description()  which checks the emulated JIT runs: ptxas, or its own
    check_ptx(text)          the emulator's parse of PTX (raises PtxError when it refuses)
"""
from .driver.assembler import description as assembler_description
from .driver import (call_time, count_call_time, error_details, functions, last_launch_stats, pending_interrupt,
                     thread_instructions, timing)
from .driver.cublas import functions as cublas_functions
from .ptx.errors import PtxError
from .engine.decode import load_ptx as check_ptx

__all__ = ["PtxError", "assembler_description", "call_time", "check_ptx", "count_call_time", "cublas_functions",
           "error_details", "functions", "last_launch_stats", "pending_interrupt", "thread_instructions",
           "timing"]
