"""Thread-block clusters (sm_90): the cluster special registers, mapa, barrier.cluster,
and the shared::cluster addresses of distributed shared memory; %envreg (the driver's
grid-sync workspace of a cooperative launch).

Where the CTAs are: the engine runs a clustered launch with each cluster's CTAs next to
each other in one batch, in rank order (scheduler.py), so CTA `p` of the launch (its
position in that order) is rank p % size of cluster p // size. A launch without clusters
is one of 1x1x1 clusters, as on the hardware (%is_explicit_cluster false).

Addresses: a shared::cluster address is ((rank + 1) << 24) | offset, the offset into
CTA `rank`'s shared window; an address below 2^24 is the CTA's own (a shared::cta
address is a valid shared::cluster address of the executing CTA, as the PTX ISA says).
Generic addresses of other CTAs' shared memory are SHARED_WINDOW plus that.
engine/spaces.py resolves them (`remote_shared`) for ld/st/atom on .shared::cluster and
on generic addresses.

getctarank gives the rank of the CTA a shared::cluster (or generic) address points into;
isspacep.shared::cluster is true for generic addresses of the cluster's shared memory,
isspacep.shared{::cta} only for the executing CTA's (memops.py asks `in_shared`).

Shared memory of a CTA whose threads have all exited is gone on a GPU: an access to it
faults here (CUDA_ERROR_ILLEGAL_ADDRESS).

barrier.cluster.arrive marks the thread arrived; barrier.cluster.wait ends its basic
block and parks the thread until every non-exited thread of the cluster waits there
(the scheduler's barrier release, keyed by cluster: CLUSTER_BARRIER). A wait without an
arrive, or two arrives without a wait, would hang a GPU: here it is a fault. (A thread
released here only once all threads reach their wait, not their arrive: correct for
every program that does not depend on running between the two.)
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Sym
from .addressing import OFFSET_MASK, RANK_SHIFT, SHARED_WINDOW
from .operands import Mods, operands, unsupported
from .registry import LaunchState, family, provide, special_register
from .warp import current_lanes

U32, U64, I64 = np.uint32, np.uint64, np.int64
CLUSTER_BARRIER = 16           # the barrier id barrier.cluster.wait parks at (bar.sync has 0..15)


# --- where each CTA is ----------------------------------------------------------------------

def shape(C) -> tuple[int, int, int]:
    return C.cluster or (1, 1, 1)


def size(C) -> int:
    x, y, z = shape(C)
    return x * y * z


def _unravel(index, dims):
    x, y, _ = dims
    return index % x, index // x % y, index // (x * y)


def ctaids(grid, cluster, positions) -> tuple:
    """(ctaid.x, .y, .z) of the CTAs at `positions` (int64 array) of a clustered launch."""
    cx, cy, cz = cluster
    n = cx * cy * cz
    ids = _unravel(positions // n, (grid[0] // cx, grid[1] // cy, grid[2] // cz))
    within = _unravel(positions % n, cluster)
    return tuple((i * d + w).astype(U32) for i, d, w in zip(ids, cluster, within))


def batch_ctaids(C, first: int, count: int) -> dict:
    """%ctaid.x/y/z of every lane of a batch of a clustered launch."""
    lin = np.repeat(np.arange(first, first + count, dtype=I64), C.padded)
    return dict(zip(("%ctaid.x", "%ctaid.y", "%ctaid.z"), ctaids(C.grid, C.cluster, lin)))


def cta_name(C, position: int) -> str:
    return "({},{},{})".format(*(int(i[0]) for i in ctaids(C.grid, C.cluster, np.array([position]))))


def barrier_groups(C, cta, bid, live):
    """(group, live threads of the group) of each waiting lane, for the scheduler's barrier
    release: its CTA, or for barrier.cluster.wait its cluster (named by its first CTA)."""
    if not C.ck.cluster_barriers:
        return cta, live[cta]
    n = size(C)
    in_cluster = bid == CLUSTER_BARRIER
    groups = np.where(in_cluster, cta // n * n, cta)
    return groups, np.where(in_cluster, live.reshape(-1, n).sum(axis=1)[cta // n], live[cta])


def _positions(C):
    """The launch position of the CTA of each current lane."""
    return C.first_cta + current_lanes(C) // C.padded


def _value(C, name: str):
    gx, gy, gz = C.grid
    dims = shape(C)
    n = size(C)
    fixed = {"cluster_nctarank": n, "cluster_nctaid.x": dims[0], "cluster_nctaid.y": dims[1],
             "cluster_nctaid.z": dims[2], "nclusterid.x": gx // dims[0], "nclusterid.y": gy // dims[1],
             "nclusterid.z": gz // dims[2]}
    if name in fixed:
        return U32(fixed[name])
    p = _positions(C)
    if name == "cluster_ctarank":
        return (p % n).astype(U32)
    axis = "xyz".index(name[-1])
    source = p // n if name.startswith("clusterid") else p % n
    grid_of = (gx // dims[0], gy // dims[1], gz // dims[2]) if name.startswith("clusterid") else dims
    return _unravel(source, grid_of)[axis].astype(U32)


def _reader(name: str):
    def read(g, ins, ptype):
        nbytes, kind = TYPES[ptype]
        if kind not in ("u", "b", "s") or nbytes < 4:
            raise PtxError(ins.line, f"special register %{name} read as .{ptype}: {ins.text}")
        expr = f"_cluster_value(C, {name!r})"
        if nbytes == 8:
            expr = f"({expr}).astype(_U64)"
        return expr if kind != "s" else f"({expr}).view(_I{nbytes * 8})"
    return read


def _explicit(g, ins, ptype):
    if ptype != "pred":
        raise PtxError(ins.line, f"%is_explicit_cluster is a predicate, read as .{ptype}: {ins.text}")
    return "_is_explicit_cluster(C)"


for _name in ("cluster_ctarank", "cluster_nctarank",
              *(f"{r}.{a}" for r in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid") for a in "xyz")):
    special_register(f"%{_name}", _reader(_name))
special_register("%is_explicit_cluster", _explicit)


# --- %envreg: the workspace of grid-wide synchronisation ------------------------------------

def envreg(C, n: int):
    """%envreg<n>: the driver's values for this launch (envreg1/2: the high and low words of
    a cooperative launch's grid-sync workspace, 0 otherwise: grid.sync() then traps)."""
    return U32(C.envregs.get(n, 0))


for _n in range(32):
    special_register(f"%envreg{_n}", lambda g, ins, ptype, n=_n: f"_envreg(C, {n})")


# --- mapa: an address in another CTA of the cluster -----------------------------------------

def _fault(C, iid: int, why: str):
    ins = C.ck.instructions[iid]
    raise KernelFault("CUDA_ERROR_ILLEGAL_ADDRESS", f"{C.name}: {why}, PTX line {ins.line}: {ins.text}")


def mapa_generic(C, a, rank, iid: int):
    """mapa.u64 (generic): the generic address of the same shared variable in CTA `rank`."""
    a = np.asarray(a, U64)
    inside = (a >= U64(SHARED_WINDOW)) & (a < U64(SHARED_WINDOW + (1 << 32)))
    if np.ndim(inside) and C.active is not None:
        inside = inside[C.active]           # exited lanes' registers hold anything
    if not np.all(inside):
        _fault(C, iid, "mapa of a generic address outside shared memory")
    offset = (a - U64(SHARED_WINDOW)) & U64(OFFSET_MASK)
    return U64(SHARED_WINDOW) + ((np.asarray(rank, U64) + U64(1)) << U64(RANK_SHIFT)) + offset


def _take_shared_cluster(m, ins, opcode: str, prefix: str) -> str | None:
    """Take the state-space modifier (those starting with `prefix`) off `m`:
    "shared::cluster", the one these instructions take, or None when there is none;
    any other is refused by name."""
    space = None
    for x in list(m.left):
        if x.startswith(prefix):
            if x != "shared::cluster":
                raise unsupported(ins, f"{opcode}.{x}")
            m.left.remove(x)
            space = x
    return space


def emit_mapa(g, ins) -> None:
    m = Mods(ins)
    space = _take_shared_cluster(m, ins, "mapa", "shared::")
    t = m.one_type({"u32", "u64"})
    m.done()
    d, a, b = operands(ins, 3)
    guard = g.guard(ins)
    rank = g.read(ins, b, "u32")
    iid = g.ns["_register_instruction"](ins)
    g.ck.uses_shared = True
    if space is None:
        src = _variable(g, ins, a, SHARED_WINDOW) if isinstance(a, Sym) else g.read(ins, a, "u64")
        g.write(ins, d, f"_mapa_generic(C, {src}, {rank}, {iid})", "u64", guard)
        return
    src = _variable(g, ins, a, 0) if isinstance(a, Sym) else g.read(ins, a, t)
    shift, mask, one = g.const(U64(RANK_SHIFT)), g.const(U64(OFFSET_MASK)), g.const(U64(1))
    expr = f"((({rank}).astype(_U64) + {one}) << {shift}) | (({src}).astype(_U64) & {mask})"
    if t == "u32":
        expr = f"({expr}).astype(_U32)"
    g.write(ins, d, expr, t, guard)


def _variable(g, ins, a, base: int):
    """The address of shared variable `a` (its offset, plus `base` for a generic one)."""
    offset = g.ck.layout.shared.get(a.name)
    if offset is None:
        raise PtxError(ins.line, f"mapa of {a.name}, which is not a .shared variable: {ins.text}")
    return g.const(U64(base + offset))


# --- getctarank, and which CTA's shared memory a generic address is in ---------------------

def _rank_plus(C, a, generic: bool, iid: int):
    """The rank + 1 encoded in shared::cluster addresses `a` (0: the executing CTA's);
    a generic address must lie in the shared window."""
    a = np.asarray(a, U64)
    if generic:
        inside = (a >= U64(SHARED_WINDOW)) & (a < U64(SHARED_WINDOW + (1 << 32)))
        if np.ndim(inside) and C.active is not None:
            inside = inside[C.active]
        if not np.all(inside):
            _fault(C, iid, "getctarank of a generic address outside shared memory")
        a = a - U64(SHARED_WINDOW)
    return (a >> U64(RANK_SHIFT)).astype(I64)


def ctarank(C, a, generic: bool, iid: int):
    """getctarank: the cluster rank of the CTA whose shared memory `a` points into."""
    rank_plus = _rank_plus(C, a, generic, iid)
    n = size(C)
    if np.any(rank_plus > n):
        _fault(C, iid, f"getctarank of an address naming CTA rank {int(np.max(rank_plus)) - 1}, "
                       f"the cluster has {n} CTAs")
    own = _value(C, "cluster_ctarank").astype(I64)
    return np.where(rank_plus == 0, own, rank_plus - 1).astype(U32)


def in_shared(C, a, cluster_wide: bool):
    """isspacep.shared::cluster (cluster_wide) / .shared::cta of generic addresses `a`."""
    a = np.asarray(a, U64)
    inside = (a >= U64(SHARED_WINDOW)) & (a < U64(SHARED_WINDOW + (1 << 32)))
    rank_plus = ((a - U64(SHARED_WINDOW)) >> U64(RANK_SHIFT)).astype(I64)
    if cluster_wide:
        return inside & (rank_plus <= size(C))
    own = _value(C, "cluster_ctarank").astype(I64)
    return inside & ((rank_plus == 0) | (rank_plus - 1 == own))


def emit_getctarank(g, ins) -> None:
    """getctarank{.shared::cluster}.{u32,u64} d, a: the type is the address's size."""
    m = Mods(ins)
    space = _take_shared_cluster(m, ins, "getctarank", "shared")
    t = m.one_type({"u32", "u64"})
    m.done()
    d, a = operands(ins, 2)
    g.ck.uses_shared = True
    if isinstance(a, Sym):                   # a variable of the executing CTA
        a = None
    elif space is None and t != "u64":
        raise PtxError(ins.line, f"getctarank of a generic address takes .u64: {ins.text}")
    addr = g.const(U64(0)) if a is None else g.read(ins, a, t)
    iid = g.ns["_register_instruction"](ins)
    g.write(ins, d, f"_ctarank(C, {addr}, {space is None and a is not None}, {iid})", "u32",
            g.guard(ins))


# --- distributed shared memory: spaces.py asks where an address is --------------------------

def remote_shared(C, a, base, iid: int):
    """(offsets, bases) of shared::cluster addresses `a` whose lanes have CTA shared bases
    `base`: an address naming a rank reaches that CTA of the lane's own cluster."""
    if a.size == 0 or int(a.max()) <= OFFSET_MASK:
        return a, base
    rank_plus = (a >> U64(RANK_SHIFT)).astype(I64)
    remote = rank_plus > 0
    n = size(C)
    if (rank_plus[remote] > n).any():
        bad = int(rank_plus[remote].max()) - 1
        _fault(C, iid, f"a shared::cluster address names CTA rank {bad}, the cluster has {n} CTAs")
    own_rank = (base // C.smem_stride) % n
    base = np.where(remote, base + (rank_plus - 1 - own_rank) * C.smem_stride, base)
    exited = _exited_ctas(C)
    if exited is not None and exited[base[remote] // C.smem_stride].any():
        target = int((base[remote] // C.smem_stride)[exited[base[remote] // C.smem_stride]][0])
        _fault(C, iid, f"an access to the shared memory of block {C.block_name(target)} of the cluster, "
                       f"whose threads have all exited (its shared memory is gone: a barrier.cluster "
                       f"before exiting keeps it)")
    return a & U64(OFFSET_MASK), base


def _exited_ctas(C):
    """Per CTA of the batch, whether all its threads have exited (None: none has)."""
    if C.lanes is None:
        if C.active is None or np.ndim(C.active) == 0:
            return None
        live = C.active
    else:
        live = C.pcs != C.ck.exit_pc
    return ~live.reshape(-1, C.padded).any(axis=1)


# --- barrier.cluster --------------------------------------------------------------------------

class ClusterArrivals(LaunchState):
    """barrier.cluster in the batch running: which lanes have arrived and not waited yet
    (made on the first arrive of the batch)."""
    __slots__ = ("arrived",)

    def __init__(self, launch) -> None:
        self.arrived = None

    def new_batch(self, launch) -> None:
        self.arrived = None


def _arrivals(C):
    state = C.cluster_state
    if state.arrived is None:
        state.arrived = np.zeros(C.n_lanes, bool)
    return state.arrived


def _running(C):
    lanes = current_lanes(C)
    return lanes if C.active is None else lanes[C.active]


def cluster_arrive(C, iid: int) -> None:
    arrived, lanes = _arrivals(C), _running(C)
    if arrived[lanes].any():
        _deadlock(C, iid, lanes[arrived[lanes]], "arrives a second time before its barrier.cluster.wait")
    arrived[lanes] = True


def cluster_wait(C, iid: int) -> None:
    arrived, lanes = _arrivals(C), _running(C)
    if not arrived[lanes].all():
        _deadlock(C, iid, lanes[~arrived[lanes]], "waits without having arrived (barrier.cluster.arrive)")
    arrived[lanes] = False


def _deadlock(C, iid: int, lanes, what: str):
    ins = C.ck.instructions[iid]
    raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                      f"{C.name}: {C.who_batch(int(lanes[0]))} {what}: the cluster barrier can never "
                      f"complete, PTX line {ins.line}: {ins.text}")


def emit_barrier_cluster(g, ins, m: Mods) -> None:
    kind = m.take("arrive", "wait")
    m.take("aligned")
    m.take("release", "relaxed", "acquire")
    m.done()
    if kind is None:
        raise unsupported(ins, "barrier.cluster form")
    if ins.guard is not None:
        raise unsupported(ins, "a predicated barrier.cluster")
    if ins.operands:
        raise PtxError(ins.line, f"barrier.cluster.{kind} takes no operands: {ins.text}")
    iid = g.ns["_register_instruction"](ins)
    g.emit(f"_cluster_{kind}(C, {iid})")
    if kind == "wait":
        g.barrier = (CLUSTER_BARRIER, 0)
        g.ck.cluster_barriers = True      # the scheduler groups this barrier by cluster


def ends_block(ins) -> bool:
    return ins.opcode == "barrier" and "cluster" in ins.mods and "wait" in ins.mods


provide(_cluster_value=_value, _is_explicit_cluster=lambda C: np.bool_(C.cluster is not None),
        _envreg=envreg, _mapa_generic=mapa_generic, _cluster_arrive=cluster_arrive, _cluster_wait=cluster_wait,
        _ctarank=ctarank, _in_shared=in_shared)
FAMILY = family("cluster", __name__, state=ClusterArrivals,
                hooks={"barrier_groups": barrier_groups, "cta_name": cta_name,
                       "cluster_ctaids": batch_ctaids, "remote_shared": remote_shared})
FAMILY.declare("mapa", emit=emit_mapa)
FAMILY.declare("getctarank", emit=emit_getctarank)
