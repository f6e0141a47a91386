"""Speed of the emulated GPU's PTX engine: vector add of 2^20 float32.

Two kernels, as NVRTC emits them for `c[i] = a[i] + b[i]`: one element per thread
(4096 blocks of 256) and a grid-stride loop (64 blocks of 256, 64 iterations each).
Prints the time per launch (best of several) and thread-instructions per second.

    python tools/bench_engine.py [--n 1048576] [--repeat 5]
"""
import argparse
import struct
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lowlevel.emu.engine.scheduler import run_kernel  # noqa: E402
from lowlevel.emu.engine.memory import DeviceMemory  # noqa: E402
from lowlevel.emu.engine.decode import load_ptx  # noqa: E402

PTX = """
.version 8.0
.target sm_80
.address_size 64

.visible .entry vadd_one(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u32 n)
{
    .reg .pred  %p<2>;
    .reg .f32   %f<4>;
    .reg .b32   %r<6>;
    .reg .b64   %rd<11>;
    ld.param.u64        %rd1, [pa];
    ld.param.u64        %rd2, [pb];
    ld.param.u64        %rd3, [pc];
    ld.param.u32        %r2, [n];
    mov.u32             %r3, %ctaid.x;
    mov.u32             %r4, %ntid.x;
    mov.u32             %r5, %tid.x;
    mad.lo.s32          %r1, %r3, %r4, %r5;
    setp.ge.s32         %p1, %r1, %r2;
    @%p1 bra            DONE;
    cvta.to.global.u64  %rd4, %rd1;
    mul.wide.s32        %rd5, %r1, 4;
    add.s64             %rd6, %rd4, %rd5;
    cvta.to.global.u64  %rd7, %rd2;
    add.s64             %rd8, %rd7, %rd5;
    ld.global.f32       %f1, [%rd8];
    ld.global.f32       %f2, [%rd6];
    add.f32             %f3, %f2, %f1;
    cvta.to.global.u64  %rd9, %rd3;
    add.s64             %rd10, %rd9, %rd5;
    st.global.f32       [%rd10], %f3;
DONE:
    ret;
}

.visible .entry vadd_stride(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u32 n)
{
    .reg .pred  %p<3>;
    .reg .f32   %f<4>;
    .reg .b32   %r<11>;
    .reg .b64   %rd<11>;
    ld.param.u64        %rd4, [pa];
    ld.param.u64        %rd5, [pb];
    ld.param.u64        %rd6, [pc];
    ld.param.u32        %r6, [n];
    mov.u32             %r1, %ntid.x;
    mov.u32             %r7, %ctaid.x;
    mov.u32             %r8, %tid.x;
    mad.lo.s32          %r10, %r7, %r1, %r8;
    setp.ge.s32         %p1, %r10, %r6;
    @%p1 bra            DONE;
    mov.u32             %r9, %nctaid.x;
    mul.lo.s32          %r3, %r9, %r1;
    cvta.to.global.u64  %rd1, %rd4;
    cvta.to.global.u64  %rd2, %rd5;
    cvta.to.global.u64  %rd3, %rd6;
LOOP:
    mul.wide.s32        %rd7, %r10, 4;
    add.s64             %rd8, %rd1, %rd7;
    add.s64             %rd9, %rd2, %rd7;
    ld.global.f32       %f1, [%rd9];
    ld.global.f32       %f2, [%rd8];
    add.f32             %f3, %f2, %f1;
    add.s64             %rd10, %rd3, %rd7;
    st.global.f32       [%rd10], %f3;
    add.s32             %r10, %r10, %r3;
    setp.lt.s32         %p2, %r10, %r6;
    @%p2 bra            LOOP;
DONE:
    ret;
}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n = args.n

    t = time.perf_counter()
    mod = load_ptx(PTX)
    print(f"load_ptx (parse + decode 2 kernels): {(time.perf_counter() - t) * 1e3:.1f} ms")

    mem = DeviceMemory(max(1 << 26, 4 * 4 * n))
    rng = np.random.default_rng()
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    pa, pb, pc = mem.alloc(4 * n), mem.alloc(4 * n), mem.alloc(4 * n)
    f32 = mem.view(np.float32)
    f32[(pa + mem.shift) // 4:(pa + mem.shift) // 4 + n] = a
    f32[(pb + mem.shift) // 4:(pb + mem.shift) // 4 + n] = b
    params = struct.pack("<QQQI", pa, pb, pc, n)
    ref = a + b

    for name, grid in (("vadd_one", -(-n // 256)), ("vadd_stride", 64)):
        times = []
        for _ in range(args.repeat):
            f32[(pc + mem.shift) // 4:(pc + mem.shift) // 4 + n] = np.nan
            t = time.perf_counter()
            stats = run_kernel(mod, name, (grid, 1, 1), (256, 1, 1), params, mem)
            times.append(time.perf_counter() - t)
            assert np.array_equal(f32[(pc + mem.shift) // 4:(pc + mem.shift) // 4 + n], ref), name
        best = min(times)
        print(f"{name:12s} grid {grid:5d} x 256: best {best * 1e3:7.1f} ms, "
              f"median {sorted(times)[len(times) // 2] * 1e3:7.1f} ms, "
              f"{stats.thread_instructions / best / 1e6:7.1f} M thread-instr/s, "
              f"{stats.batches} batch(es), {stats.block_steps} block steps")


if __name__ == "__main__":
    main()
