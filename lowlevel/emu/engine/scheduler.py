"""Runs a decoded kernel: batches of CTAs as numpy arrays, scalar PC while converged.

Threads of a batch are laid out CTA-major; each CTA's thread count is padded up to a
multiple of 32 (padding lanes start exited), so any register reshapes to (warps, 32).
A batch holds as many CTAs as keep its registers within ~256 MB.

Control flow (see decode.py for what a block is):
- Converged: one scalar PC. The block runs on every lane of the batch (results on exited
  lanes are harmless garbage; only memory accesses and traps look at the `live` mask). A
  conditional branch whose predicate agrees on all live lanes stays converged; an exit
  taken by only some lanes just shrinks `live`.
- Divergent: a per-lane PC array. Repeatedly pick the lowest PC, gather the lanes there
  (only the registers that block touches), run the block on the gathered arrays, and
  scatter what it wrote. Lowest-PC-first reconverges if/else and loops with different trip
  counts at their join points; once every live lane shares one PC we return to the
  converged path.
- Barriers: `bar.sync` ends its basic block. On the converged path a barrier is free (every
  live lane of every CTA is there). On the divergent path a lane that finishes a barrier
  block parks with pc = exit_pc + 1 + (barrier block); lanes parked that way sort after all
  runnable lanes, so lowest-PC-first runs everything else first. When no lane is runnable,
  each CTA's parked lanes are released (to the block after their barrier) where the
  barrier is complete: all non-exited lanes of the CTA wait on that barrier id (exited
  threads count as arrived), or, with a thread count, that many have arrived. If nothing
  can be released, the CTA can never proceed: a deadlock, reported as a KernelFault.
  `bar.red` is such a barrier that also reduces the arriving lanes' predicates per CTA
  (barred.py: at once on the converged path, at release on the divergent one).
- Instruction families (isa/registry.py): the scheduler makes their declared per-launch
  states (`launch.<family>_state`), renewed per batch, and calls their declared HOOKS at a
  barrier's release; it imports nothing else of them.
- Watchdog: LOWLEVEL_EMU_WATCHDOG_S (default 60 s of wall time per launch, 0 = off) turns
  a kernel that never finishes into CUDA_ERROR_LAUNCH_TIMEOUT; checked every 256 steps.
- Shared, local and generic memory and atomics: spaces.py; racecheck: tools/racecheck.py.
"""
from __future__ import annotations

import os
import time

import numpy as np

from . import waits, warpwait
from ..isa.numerics import UINT
from ..isa.registry import HOOKS, make_states
from .decode import CompiledKernel
from .faults import KernelFault, WarpWait
from .memory import AccessFault, DeviceMemory
from ..ptx.ir import PtxModule
from ..tools import enabled
from .batch_specials import batch_specials
from .spaces import SpacesMixin, allocate_globals
from .stats import LaunchStats, launch_dims

BATCH_BYTES = 256 << 20          # register-file budget for one batch
MAX_BATCH_LANES = 1 << 20        # beyond this numpy gains nothing and memory grows
WARP = 32


def run_kernel(mod: PtxModule, name: str, grid, block, params: bytes,
               memory: DeviceMemory, shared_bytes: int = 0, tools=None, *,
               cluster=None, cooperative: bool = False, envregs=None) -> LaunchStats:
    """Execute kernel `name` of `mod` over the whole grid; raises KernelFault on a bad
    access or trap. `params` is the raw parameter buffer laid out per the kernel's
    param offsets. The launch configuration is the driver's to check against the device
    limits (cuLaunchKernel does, before queueing the launch). `tools` observe the launch
    (tools/base.py); None: those the environment turns on (tools.enabled()).
    `cluster` (x, y, z): each cluster's CTAs run together in one batch (isa/cluster.py);
    `cooperative`: the whole grid is one batch (grid-wide sync); `envregs`: %envreg<n>."""
    k = mod.kernels.get(name)
    if k is None:
        raise KeyError(f"no kernel {name!r} in module (has: {', '.join(mod.kernels)})")
    ck: CompiledKernel = k.compiled
    if ck is None:
        raise ValueError(f"kernel {name!r} was parsed but not decoded; use load_ptx")
    grid, block = launch_dims(grid, "grid"), launch_dims(block, "block")
    params = bytes(params)
    if len(params) < k.param_size:
        raise ValueError(f"{name}: parameter buffer has {len(params)} bytes, "
                         f"kernel needs {k.param_size}")
    if mod.globals and getattr(mod, "symbols", None) is None:
        allocate_globals(mod, memory)           # engine used without the driver

    tools = list(enabled() if tools is None else tools)
    launch = _Launch(ck, grid, block, params, memory, int(shared_bytes), tools,
                     cluster=cluster, cooperative=cooperative, envregs=envregs)
    for tool in tools:
        tool.initialize(launch)
    with np.errstate(all="ignore"):
        launch.run()
    for tool in tools:
        tool.finish(launch.stats)
    return launch.stats


def _watchdog_limit() -> float:
    try:
        return float(os.environ.get("LOWLEVEL_EMU_WATCHDOG_S", "60"))
    except ValueError:
        return 60.0


class _Launch(SpacesMixin):
    """One kernel launch: the batch loop, the scheduler, and the context `C` that the
    generated blocks call for parameters, memory accesses and traps."""

    def __init__(self, ck: CompiledKernel, grid, block, params: bytes, memory: DeviceMemory,
                 shared_bytes: int = 0, tools=(), *, cluster=None, cooperative: bool = False, envregs=None):
        self.ck = ck
        # the tools that want events (the rest only see initialize/finish): while there are
        # none, the engine checks one empty tuple and reports nothing
        self.observers = tuple(t for t in tools if t.events)
        self.name = ck.kernel.name
        self.grid, self.block = grid, block
        self.params = params
        self.memory = memory
        self.threads_per_cta = block[0] * block[1] * block[2]
        self.padded = -(-self.threads_per_cta // WARP) * WARP
        self.n_ctas = grid[0] * grid[1] * grid[2]
        self.init_spaces(shared_bytes)
        per_lane = 2 * ck.bytes_per_thread + 48 + self.spaces_bytes_per_lane()
        lanes = min(MAX_BATCH_LANES, BATCH_BYTES // per_lane)
        self.ctas_per_batch = max(1, lanes // self.padded)
        self.stats = LaunchStats(ctas=self.n_ctas, threads=self.n_ctas * self.threads_per_cta)
        self.stats.block_lanes = [0] * len(ck.blocks)      # the time model's instruction mix
        self.param_cache: dict = {}      # spaces.param
        # what the generated code reads from C
        self.active = None          # bool mask over the current lanes, None = all
        self.lanes = None           # batch lane of each current lane (gathered), or None
        self.pcs = None             # per-lane PCs on the divergent path
        self.n = 0                  # number of current lanes
        self.first_cta = 0
        self.cluster = tuple(cluster) if cluster else None      # isa/cluster.py
        self.envregs = dict(envregs or {})
        self._group_ctas(cooperative)
        # what the driver hands a launch (driver/limits.py); None: the engine without one
        self.printf_fifo = self.heap = self.stack_bytes = None
        waits.init_state(self)      # mbarrier waits, yields
        warpwait.init_state(self)   # lanes waiting at warp instructions
        self.batch_states = make_states(self)     # each family's (isa/registry.py)
        limit = _watchdog_limit()
        self.watchdog_s = limit
        self.deadline = time.monotonic() + limit if limit > 0 else None

    def _group_ctas(self, cooperative: bool) -> None:
        """CTAs resident together run in one batch: a cluster's (for barrier.cluster and
        distributed shared memory), or a cooperative grid's."""
        n = self.cluster[0] * self.cluster[1] * self.cluster[2] if self.cluster else 1
        self.ctas_per_batch = self.n_ctas if cooperative else max(n, self.ctas_per_batch // n * n)

    def notify(self, kind: str, *args) -> None:
        """Report an event to the tools that want it (tools/base.py)."""
        for tool in self.observers:
            if kind in tool.events:
                tool.event(kind, *args)

    # -- batches ----------------------------------------------------------------------
    def run(self) -> None:
        for first in range(0, self.n_ctas, self.ctas_per_batch):
            count = min(self.ctas_per_batch, self.n_ctas - first)
            self.first_cta = first
            self._run_batch(first, count)
            self.stats.batches += 1

    def _run_batch(self, first: int, count: int) -> None:
        ck = self.ck
        n_lanes = count * self.padded
        R = [np.dtype(dt).type(0) for dt in ck.slot_dtypes]
        specials = batch_specials(self, first, count)
        for name, slot in ck.specials.items():
            R[slot] = specials[name]
        live = None
        nlive = n_lanes
        if self.padded != self.threads_per_cta:
            live = np.tile(np.arange(self.padded) < self.threads_per_cta, count)
            nlive = count * self.threads_per_cta
        self.n_lanes = n_lanes
        self.setup_spaces(count)
        for state in self.batch_states:
            state.new_batch(self)
        pc, pcs = 0, None
        while True:             # alternate between the two paths until every lane exits
            if pcs is None:
                pcs = self._run_converged(R, pc, live, nlive)
                if pcs is None:
                    return
            else:
                back = self._run_divergent(R, pcs)
                if back is None:
                    return
                pc, live, nlive = back
                pcs = None

    # -- converged fast path ------------------------------------------------------------
    def _run_converged(self, R, pc, live, nlive):
        """Run from `pc` until all lanes exit (returns None) or diverge (returns the
        per-lane PC array)."""
        blocks = self.ck.blocks
        exit_pc = self.ck.exit_pc
        stats = self.stats
        block_lanes = stats.block_lanes
        n_lanes = self.n_lanes
        self.lanes = None
        self.n = n_lanes
        self.active = live
        observers = self.observers
        while pc != exit_pc:
            blk = blocks[pc]
            res = blk.fn(R, self)
            self.shared_seen = None       # what shared_words learnt holds for one block
            stats.thread_instructions += blk.n_instructions * nlive
            block_lanes[pc] += nlive
            stats.block_steps += 1
            if not stats.block_steps & 255:
                self._watchdog(pc)
            if observers and blk.barrier is not None:
                self.notify("barrier", None)
            if blk.waits and self.wait_failed is not None:    # warpgroups blocked: setmaxnreg.inc
                return waits.split_blocked(self, pc, res, live)
            if type(res) is int:
                pc = res
                continue
            p, taken, fallen = res
            if not isinstance(p, np.ndarray):
                pc = taken if p else fallen
                continue
            go = p if live is None else p & live
            n_go = int(np.count_nonzero(go))
            if n_go == 0:
                pc = fallen
            elif n_go == nlive:
                pc = taken
            elif taken == exit_pc or fallen == exit_pc:
                # Some lanes exit, the rest stay together: still converged.
                stay = ~p if taken == exit_pc else p
                live = stay if live is None else stay & live
                nlive = nlive - n_go if taken == exit_pc else n_go
                pc = fallen if taken == exit_pc else taken
                self.active = live
            else:
                pcs = np.full(n_lanes, exit_pc, dtype=np.int32)
                if live is None:
                    pcs[:] = fallen
                    pcs[p] = taken
                else:
                    pcs[live] = fallen
                    pcs[go] = taken
                return pcs
        return None

    # -- divergent path -----------------------------------------------------------------
    def _run_divergent(self, R, pcs):
        """Run lowest-PC-first until all lanes exit (returns None) or every live lane
        shares one PC again (returns (pc, live, nlive) for the converged path)."""
        blocks = self.ck.blocks
        exit_pc = self.ck.exit_pc
        dtypes = self.ck.slot_dtypes
        stats = self.stats
        block_lanes = stats.block_lanes
        n_lanes = self.n_lanes
        owned: set[int] = set()       # slots whose array only this scheduler references
        self.active = None
        self.pcs = pcs                # which lanes have exited (warp.py's member-mask rule)
        previous = -1
        while True:
            lowest = int(pcs.min())
            if lowest >= exit_pc:
                if int(pcs.max()) == exit_pc:
                    return None
                self._release_barriers(pcs)         # every live lane waits at a barrier
                continue
            if not stats.block_steps & 255:
                self._watchdog(lowest)
            if lowest <= previous and waits.back_edge(self, pcs, lowest):
                previous = -1                       # a loop yielded (maybe polling memory)
                continue
            previous = lowest
            blk = blocks[lowest]
            if blk.warp_sync is not None:           # lanes parked here rejoin (warpwait.py)
                warpwait.merge(self, pcs, lowest)
            at = pcs == lowest
            lanes = np.flatnonzero(at)
            nlive = int(np.count_nonzero(pcs != exit_pc))
            if lanes.size == nlive:                     # everyone left is here: reconverge
                live = None if nlive == n_lanes else at
                return lowest, live, nlive
            S = list(R)
            for s in blk.reads:
                v = R[s]
                if isinstance(v, np.ndarray):
                    S[s] = v[lanes]
            self.lanes = lanes
            self.n = lanes.size
            try:
                res = blk.fn(S, self)
            except WarpWait as w:                   # named lanes are elsewhere: wait for them
                warpwait.park(self, pcs, w, lowest)
                previous = -1
                continue
            stats.thread_instructions += blk.n_instructions * lanes.size
            block_lanes[lowest] += lanes.size
            stats.block_steps += 1
            stats.divergent_steps += 1
            for s in blk.writes:
                full = R[s]
                if s not in owned or not isinstance(full, np.ndarray):
                    full = np.array(np.broadcast_to(full, (n_lanes,)), dtype=dtypes[s])
                    owned.add(s)
                full[lanes] = S[s]
                R[s] = full
            if blk.waits:                             # an mbarrier wait: failed lanes yield
                waits.park_failed(self, pcs, lanes, lowest, res)
                continue
            self.wait_progress = True
            if blk.barrier is not None:
                pcs[lanes] = exit_pc + 1 + lowest     # parked at the barrier
            elif type(res) is int:
                pcs[lanes] = res
            else:
                p, taken, fallen = res
                if isinstance(p, np.ndarray):
                    pcs[lanes] = np.where(p, taken, fallen)
                else:
                    pcs[lanes] = taken if p else fallen

    def _release_barriers(self, pcs) -> None:
        """No lane can run: release the CTAs' completed barriers, or report a deadlock."""
        exit_pc = self.ck.exit_pc
        blocks = self.ck.blocks
        if waits.release_yielded(self, pcs):
            return
        waiting = np.flatnonzero(pcs > exit_pc)
        bblk = pcs[waiting] - (exit_pc + 1)
        released, warp = warpwait.release(self, pcs, waiting, bblk)
        if released:                    # lanes at *.sync warp instructions (warpwait.py)
            return
        warp_waiters = waiting[warp]
        waiting, bblk = waiting[~warp], bblk[~warp]
        if self.ck.waits:               # lanes parked at failed mbarrier waits (waits.py)
            if waits.retry_waiters(self, pcs, waiting, bblk):
                return
            barrier = ~waits.waiter_mask(self, bblk)
            waiting, bblk = waiting[barrier], bblk[barrier]
            if waiting.size == 0 and warp_waiters.size == 0:
                waits.deadlock(self, pcs)
        if waiting.size == 0:
            warpwait.deadlock(self, pcs, warp_waiters)
        cta = waiting // self.padded
        tables = getattr(self, "_bar_tables", None)
        if tables is None:
            tables = self._bar_tables = (
                np.array([b.barrier[0] if b.barrier else 0 for b in blocks], np.int64),
                np.array([b.barrier[1] if b.barrier else 0 for b in blocks], np.int64))
        ids, counts = tables
        bid, bcount = HOOKS["barrier_ids"](self, ids[bblk]), counts[bblk]
        live = (pcs.reshape(-1, self.padded) != exit_pc).sum(axis=1)
        group, live_of = HOOKS["barrier_groups"](self, cta, bid, live)   # a cluster's CTAs for barrier.cluster
        key = group * 32 + bid
        uniq, inverse, arrived = np.unique(key, return_inverse=True, return_counts=True)
        need = np.where(bcount > 0, bcount, live_of)
        release = arrived[inverse] >= need
        if not release.any() and warp_waiters.size:
            warpwait.deadlock(self, pcs, warp_waiters)
        if not release.any():
            c = int(cta[0])
            mine = cta == c
            where = sorted({(int(bb), int(b_id)) for bb, b_id in zip(bblk[mine], bid[mine])})
            lines = ", ".join(
                f"barrier {b_id} at PTX line {blocks[bb].instructions[-1].line} "
                f"({int(np.count_nonzero(mine & (bblk == bb)))} threads)" for bb, b_id in where)
            n_live = int(live[c])
            raise KernelFault(
                "CUDA_ERROR_LAUNCH_FAILED",
                f"{self.name}: barrier deadlock in block {self.block_name(c)}: its "
                f"{n_live} remaining threads wait at {lines}{waits.parked_note(self, pcs, c)}; none of these "
                f"barriers can complete (exited threads count as arrived)")
        pcs[waiting[release]] = bblk[release] + 1
        if self.ck.reductions:          # bar.red: each CTA's reduction to its lanes (barred.py)
            HOOKS["barrier_release"](self, waiting[release], bblk[release], key[release])
        if self.observers:
            self.notify("barrier", np.unique(cta[release]))

    def _watchdog(self, pc) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            blk = self.ck.blocks[pc] if pc < len(self.ck.blocks) else None
            where = f", threads at PTX line {blk.instructions[0].line}" \
                if blk is not None and blk.instructions else ""
            raise KernelFault(
                "CUDA_ERROR_LAUNCH_TIMEOUT",
                f"{self.name}: the launch ran longer than the watchdog limit of "
                f"{self.watchdog_s:g} s (LOWLEVEL_EMU_WATCHDOG_S){where}; "
                f"grid {self.grid}, block {self.block}")

    # -- the context the generated code calls --------------------------------------------
    def active_with(self, guard):
        active = self.active
        if guard is None:
            return active, True
        if not isinstance(guard, np.ndarray):
            return active, bool(guard)
        return (guard if active is None else guard & active), True

    def load(self, addr, size: int, vec: int, iid: int, guard):
        active, any_active = self.active_with(guard)
        dtype = UINT[size]
        shape = (self.n,) if vec == 1 else (self.n, vec)
        if not any_active:
            return np.zeros(shape, dtype)
        nbytes = size * vec
        uniform = not isinstance(addr, np.ndarray)
        if uniform and active is None:
            # one address for every lane: one access, result stays a scalar
            off = self._offsets(np.array([addr], np.uint64), nbytes, iid, None, "load")
            vals = self.memory.view(dtype)[off // size + np.arange(vec)]
            return vals[0] if vec == 1 else np.broadcast_to(vals, shape)
        if uniform:
            addr = np.full(self.n, addr, np.uint64)
        a = addr if active is None else addr[active]
        off = self._offsets(a, nbytes, iid, active, "load")
        idx = off // size
        if vec > 1:
            idx = idx[:, None] + np.arange(vec)
        vals = self.memory.view(dtype)[idx]
        if active is None:
            return vals
        out = np.zeros(shape, dtype)
        out[active] = vals
        return out

    def store(self, addr, size: int, vec: int, value, iid: int, guard) -> None:
        active, any_active = self.active_with(guard)
        if not any_active:
            return
        dtype = UINT[size]
        nbytes = size * vec
        if not isinstance(addr, np.ndarray):
            addr = np.full(self.n, addr, np.uint64)
        a = addr if active is None else addr[active]
        off = self._offsets(a, nbytes, iid, active, "store")
        idx = off // size
        view = self.memory.view(dtype)
        if vec == 1:
            v = value if isinstance(value, np.ndarray) else np.full(self.n, value, dtype)
            view[idx] = v if active is None else v[active]
            return
        cols = [v if isinstance(v, np.ndarray) else np.full(self.n, v, dtype) for v in value]
        v = np.stack(cols, axis=1)
        view[idx[:, None] + np.arange(vec)] = v if active is None else v[active]

    def trap(self, iid: int, guard) -> None:
        active, any_active = self.active_with(guard)
        if not any_active:
            return
        if active is not None:
            hits = np.flatnonzero(active)
            if hits.size == 0:
                return
            lane = int(hits[0])
        else:
            lane = 0
        ins = self.ck.instructions[iid]
        raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                          f"{self.name}: trap by {self._who(lane)}, "
                          f"PTX line {ins.line}: {ins.text}")

    def _offsets(self, addrs, nbytes, iid, active, kind):
        try:
            return self.memory.offsets(addrs, nbytes)
        except AccessFault as f:
            lane = f.index if active is None else int(np.flatnonzero(active)[f.index])
            ins = self.ck.instructions[iid]
            space = "global" if "global" in ins.mods else "generic"
            what = "misaligned" if f.code_name == "CUDA_ERROR_MISALIGNED_ADDRESS" \
                else "out-of-bounds"
            raise KernelFault(
                f.code_name,
                f"{self.name}: {what} {nbytes}-byte {space} {kind} at {f.address:#x} "
                f"by {self._who(lane)}, PTX line {ins.line}: {ins.text}") from None

    def block_name(self, batch_cta: int) -> str:
        cta = self.first_cta + batch_cta
        if self.cluster:
            return HOOKS["cta_name"](self, cta)
        gx, gy, _ = self.grid
        return f"({cta % gx},{cta // gx % gy},{cta // (gx * gy)})"

    def _who(self, lane: int) -> str:
        """'block (x,y,z) thread (x,y,z)' of a current lane."""
        if self.lanes is not None:
            lane = int(self.lanes[lane])
        return self.who_batch(lane)

    def who_batch(self, lane: int) -> str:
        """'block (x,y,z) thread (x,y,z)' of a lane of the batch."""
        t = lane % self.padded
        bx, by, _ = self.block
        return f"block {self.block_name(lane // self.padded)} thread ({t % bx},{t // bx % by},{t // (bx * by)})"


__all__ = ["run_kernel", "LaunchStats"]
