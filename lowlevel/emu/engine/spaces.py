"""State spaces of the emulated GPU: shared, local, generic addresses, module variables.

Addresses, as the generated code sees them: isa/addressing.py (the windows, and where a
kernel's variables sit in them). Module-scope .global/.const variables are allocated in
the arena (at or above memory.BASE, 2^36) when the module loads; every CTA has its own
copy of shared memory.

Storage: per batch of CTAs, one uint8 array (CTAs x shared stride) for shared memory and
one (lanes x local stride) for local memory, both filled with POISON bytes (0xFF) as
never-written memory; an access gathers/scatters at `base_of_lane + offset` with numpy,
after a bounds and alignment check that raises KernelFault naming the space
(CUDA_ERROR_ILLEGAL_ADDRESS / _MISALIGNED_ADDRESS). ld/st.shared [reg + offset] on the
converged path first try to prove the access good from the register alone (shared_words);
whatever that proof does not cover goes through the full check.
"""
from __future__ import annotations

import numpy as np

from ..isa.addressing import LOCAL_WINDOW, OFFSET_MASK, PARAM_WINDOW, SHARED_WINDOW, WINDOW_SPAN
from ..isa.registry import HOOKS
from ..isa.numerics import UINT
from ..ptx.ir import TYPES
from .atomics import atomic_rmw
from .faults import KernelFault
from .memory import AccessFault, OutOfMemory

POISON = 0xFF                    # every byte of fresh shared and local memory
_U64 = np.uint64
_SHIFT = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4}   # element index = byte offset >> log2(size)
_U64_MASK = (1 << 64) - 1


# --- module-scope .global / .const variables ---------------------------------------------


def allocate_globals(mod, memory) -> dict:
    """Allocate and initialize the module's .global/.const variables in `memory` (once);
    sets and returns mod.symbols = {name: (address, size)}. Raises OutOfMemory."""
    symbols = getattr(mod, "symbols", None)
    if symbols is not None:
        return symbols
    symbols = {}
    try:
        for v in mod.globals:
            if v.space not in ("global", "const"):
                continue
            addr = memory.alloc(max(v.size, 1))
            symbols[v.name] = (addr, v.size)
            start = memory.check_range(addr, max(v.size, 1))
            memory.u8[start:start + v.size] = 0
            if v.init:
                memory.u8[start:start + len(v.init)] = np.frombuffer(v.init, np.uint8)
    except OutOfMemory:
        for addr, _ in symbols.values():
            memory.free(addr)
        raise
    mod.symbols = symbols
    for k in mod.kernels.values():
        ck = k.compiled
        if ck is not None:
            bind_symbols(ck, symbols)
    return symbols


def bind_symbols(ck, symbols: dict) -> None:
    """Give the generated code of a kernel the addresses of the module variables."""
    ns = getattr(ck, "namespace", None)
    if ns is None:
        return
    for name, var in ck.global_names.items():
        ns[var] = _U64(symbols[name][0])


def free_globals(mod, memory) -> None:
    for addr, _ in (getattr(mod, "symbols", None) or {}).values():
        if memory.is_allocation(addr):
            memory.free(addr)
    mod.symbols = {}


# --- the launch side: accesses ---------------------------------------------------------


class SpacesMixin:
    """Methods of engine._Launch for shared/local/generic accesses and atomics.

    Needs from the launch: ck, name, memory, padded, n, lanes, active, _active_with,
    _who, n_lanes; set up per batch by `setup_spaces(count)`."""

    def init_spaces(self, shared_bytes: int) -> None:
        lay = self.ck.layout
        self.layout = lay
        self.dynamic_shared = shared_bytes
        self.smem_window = lay.shared_window(shared_bytes)
        self.smem_stride = -(-max(self.smem_window, 1) // 16) * 16
        self.local_window = lay.local_bytes
        self.local_stride = -(-max(self.local_window, 1) // 16) * 16
        self.uses_shared = self.ck.uses_shared or bool(self.smem_window)
        self.uses_local = self.ck.uses_local or bool(self.local_window)
        self.smem = self.lmem = None

    def spaces_bytes_per_lane(self) -> int:
        per = 0
        if self.uses_local:
            per += self.local_stride
        if self.uses_shared:
            per += -(-self.smem_stride // self.padded)
        return per

    def setup_spaces(self, count: int) -> None:
        # Fresh shared and local memory hold garbage on a GPU, never reliably zeros: fill
        # them with POISON (0xFF bytes read as NaN for floats, -1 for integers) so that a
        # kernel reading them before writing gets a wrong answer here too.
        n_lanes = count * self.padded
        if self.uses_shared:
            self.smem = np.full(count * self.smem_stride, POISON, np.uint8)
            self.cta_base = np.repeat(np.arange(count, dtype=np.int64) * self.smem_stride,
                                      self.padded)
        self._shared_bases = {}     # size -> element index of each lane's CTA base
        self.shared_seen = None     # shared_words' knowledge of one register, within a block
        if self.uses_local:
            self.lmem = np.full(n_lanes * self.local_stride, POISON, np.uint8)
            self.lane_base = np.arange(n_lanes, dtype=np.int64) * self.local_stride
        if self.observers:
            self.notify("batch", self.smem, self.smem_stride)

    # -- helpers ----------------------------------------------------------------------
    def param(self, offset: int, dtype):
        """The parameter buffer's bytes at `offset` as one `dtype` value. Past the end of
        the buffer (an ld.param wider than the last parameter) the bytes are undefined on
        a GPU: 0xFF here, as fresh memory reads."""
        key = (offset, dtype)
        v = self.param_cache.get(key)
        if v is None:
            size = np.dtype(dtype).itemsize
            raw = bytes(self.params[offset:offset + size])
            raw += b"\xff" * (size - len(raw))
            v = self.param_cache[key] = np.frombuffer(raw, dtype, 1)[0]
        return v

    def fault(self, code, what, nbytes, space, kind, address, i, active, sub, iid, note=""):
        j = i
        if sub is not None:
            j = int(np.flatnonzero(sub)[j])
        if active is not None:
            j = int(np.flatnonzero(active)[j])
        ins = self.ck.instructions[iid]
        raise KernelFault(
            code, f"{self.name}: {what} {nbytes}-byte {space} {kind} at {address:#x}{note} "
                  f"by {self._who(j)}, PTX line {ins.line}: {ins.text}")

    def window_index(self, space, a, nbytes, size, iid, kind, active, sub, generic=0, remote=False):
        """Element indices (of a `size`-byte view) of window offsets `a` (uint64 array of
        the accessing lanes); faults on misalignment or a window overrun. `generic`: the
        window base when the instruction used generic addresses (for the message).
        `remote`: shared addresses may name another CTA of the cluster (isa/cluster.py)."""
        full = a
        if remote and a.size and int(a.max()) > OFFSET_MASK:
            a = a & _U64(OFFSET_MASK)
        else:
            remote = False
        if space == "shared":
            limit, base_full = self.smem_window, getattr(self, "cta_base", None)
            note = f"the block's shared window is {limit} bytes"
        else:
            limit, base_full = self.local_window, getattr(self, "lane_base", None)
            note = f"each thread's local window is {limit} bytes"
        shown = space
        if generic:
            shown = "generic"
        if nbytes > 1 and (a & _U64(nbytes - 1)).any():     # the common case: one reduction
            bad = (a & _U64(nbytes - 1)) != 0
            if bad.any():
                i = int(np.argmax(bad))
                where = f" ({space} offset {int(a[i]):#x})" if generic else ""
                self.fault("CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned", nbytes, shown, kind,
                            int(a[i]) + generic, i, active, sub, iid, where)
        if limit < nbytes or base_full is None:
            bad = np.ones(a.shape, bool)
        elif a.size and int(a.max()) > limit - nbytes:
            bad = a > _U64(limit - nbytes)
        else:
            bad = None
        if bad is not None and bad.any():
            i = int(np.argmax(bad))
            where = f"{space} offset {int(a[i]):#x}; " if generic else ""
            self.fault("CUDA_ERROR_ILLEGAL_ADDRESS", "out-of-bounds", nbytes, shown, kind,
                        int(a[i]) + generic, i, active, sub, iid, f" ({where}{note})")
        base = base_full if self.lanes is None else base_full[self.lanes]
        if active is not None:
            base = base[active]
        if sub is not None:
            base = base[sub]
        if remote:
            _, base = HOOKS["remote_shared"](self, full, base, iid)     # isa/cluster.py
        return (base + a.astype(np.int64)) >> _SHIFT[size]

    def batch_lanes(self, active, sub):
        """Batch lane numbers of the accessing lanes (for racecheck)."""
        lanes = np.arange(self.n) if self.lanes is None else self.lanes
        if active is not None:
            lanes = lanes[active]
        if sub is not None:
            lanes = lanes[sub]
        return lanes

    def global_index(self, a, nbytes, size, iid, kind, active, sub, space):
        try:
            off = self.memory.offsets(a, nbytes)
        except AccessFault as f:
            what = "misaligned" if f.code_name == "CUDA_ERROR_MISALIGNED_ADDRESS" \
                else "out-of-bounds"
            self.fault(f.code_name, what, nbytes, space, kind, f.address, f.index,
                        active, sub, iid)
        return off // size

    def _split_generic(self, a):
        """Masks (shared, local, kernel parameters) over generic addresses, or None when
        all are global."""
        if a.size == 0 or int(a.max()) < SHARED_WINDOW:
            return None
        sh = (a >= _U64(SHARED_WINDOW)) & (a < _U64(SHARED_WINDOW + WINDOW_SPAN))
        lo = (a >= _U64(LOCAL_WINDOW)) & (a < _U64(LOCAL_WINDOW + WINDOW_SPAN))
        pa = (a >= _U64(PARAM_WINDOW)) & (a < _U64(PARAM_WINDOW + WINDOW_SPAN))
        return sh, lo, pa

    def _parts(self, space, a, nbytes, size, iid, kind, active):
        """[(sub mask or None, view array, element indices, space name)] for the accessing
        lanes' addresses `a`."""
        if space in ("shared", "shared::cluster"):
            self.require_space("shared")
            return [(None, self.smem, self.window_index("shared", a, nbytes, size, iid, kind,
                                                         active, None, remote=space != "shared"), "shared")]
        if space == "local":
            self.require_space("local")
            return [(None, self.lmem, self.window_index("local", a, nbytes, size, iid, kind,
                                                         active, None), "local")]
        if space == "generic":
            split = self._split_generic(a)
            if split is not None:
                sh, lo, pa = split
                parts = []
                gl = ~(sh | lo | pa)
                if gl.any():
                    parts.append((gl, self.memory.u8,
                                  self.global_index(a[gl], nbytes, size, iid, kind, active, gl,
                                                     "generic"), "global"))
                if sh.any():
                    self.require_space("shared")
                    parts.append((sh, self.smem, self.window_index(
                        "shared", a[sh] - _U64(SHARED_WINDOW), nbytes, size, iid, kind,
                        active, sh, SHARED_WINDOW, remote=True), "shared"))
                if lo.any():
                    self.require_space("local")
                    parts.append((lo, self.lmem, self.window_index(
                        "local", a[lo] - _U64(LOCAL_WINDOW), nbytes, size, iid, kind,
                        active, lo, LOCAL_WINDOW), "local"))
                if pa.any():            # cvta.param addresses (isa/paramaddr.py)
                    parts.append((pa, *HOOKS["param_window"](
                        self, a[pa] - _U64(PARAM_WINDOW), nbytes, size, iid, kind, active, pa), "param"))
                return parts
        return [(None, self.memory.u8,
                 self.global_index(a, nbytes, size, iid, kind, active, None, space), "global")]

    def require_space(self, space):
        if space == "shared" and self.smem is None:
            self.smem = np.zeros(0, np.uint8)
        if space == "local" and self.lmem is None:
            self.lmem = np.zeros(0, np.uint8)

    # -- loads and stores (space: "shared", "local", "generic", or "global"/"const") -----
    def load_space(self, space, addr, size: int, vec: int, iid: int, guard):
        active, any_active = self.active_with(guard)
        dtype = UINT[size]
        shape = (self.n,) if vec == 1 else (self.n, vec)
        if not any_active:
            return np.zeros(shape, dtype)
        if not isinstance(addr, np.ndarray):
            addr = np.full(self.n, addr, np.uint64)
        a = addr if active is None else addr[active]
        nbytes = size * vec
        parts = self._parts(space, a, nbytes, size, iid, "load", active)
        if len(parts) == 1 and parts[0][0] is None and active is None:
            sub, arr, idx, sp = parts[0]
            if vec > 1:
                idx = idx[:, None] + np.arange(vec)
            if self.observers and sp == "shared":
                self.notify("shared_access", False, idx, size, self.batch_lanes(active, None), iid)
            return arr.view(dtype)[idx]
        vals = np.zeros((a.size,) if vec == 1 else (a.size, vec), dtype)
        for sub, arr, idx, sp in parts:
            if vec > 1:
                idx = idx[:, None] + np.arange(vec)
            if self.observers and sp == "shared":
                self.notify("shared_access", False, idx, size, self.batch_lanes(active, sub), iid)
            if sub is None:
                vals = arr.view(dtype)[idx]
            else:
                vals[sub] = arr.view(dtype)[idx]
        if active is None:
            return vals
        out = np.zeros(shape, dtype)
        out[active] = vals
        return out

    def store_space(self, space, addr, size: int, vec: int, value, iid: int, guard) -> None:
        active, any_active = self.active_with(guard)
        if not any_active:
            return
        dtype = UINT[size]
        if not isinstance(addr, np.ndarray):
            addr = np.full(self.n, addr, np.uint64)
        a = addr if active is None else addr[active]
        parts = self._parts(space, a, size * vec, size, iid, "store", active)
        if vec == 1:
            v = value if isinstance(value, np.ndarray) else np.full(self.n, value, dtype)
        else:
            v = np.stack([x if isinstance(x, np.ndarray) else np.full(self.n, x, dtype)
                          for x in value], axis=1)
        if active is not None:
            v = v[active]
        for sub, arr, idx, sp in parts:
            if vec > 1:
                idx = idx[:, None] + np.arange(vec)
            if self.observers and sp == "shared":
                self.notify("shared_access", True, idx, size, self.batch_lanes(active, sub), iid)
            arr.view(dtype)[idx] = v if sub is None else v[sub]

    # -- ld/st.shared [reg + offset] (isa/memops.py): a fast path, else the exact one --------
    def shared_words(self, reg, off: int, nbytes: int, size: int):
        """Element indices (of a `size`-byte view of smem) of the shared addresses
        reg + off of every current lane, where one bitwise OR over `reg` proves them all
        aligned (it has a low bit set iff some value has) and inside the window (the OR of
        unsigned values is at least the largest; the largest itself where the OR is too
        coarse a bound); None where that proof fails or the access is not the plain
        converged one (a mask, gathered lanes, observers): then window_index decides, and
        names the faulting lane. What it learns of a register (its OR, largest value and
        word indices) serves the block's next accesses through the same register (sgemm:
        four offsets each); the engine forgets it after every block."""
        if (self.active is not None or self.lanes is not None or self.observers
                or self.smem is None or not isinstance(reg, np.ndarray) or off < 0
                or off % nbytes or reg.size != self.n):
            return None
        seen = self.shared_seen
        if seen is None or seen[0] is not reg or seen[1] != size:
            base = self._shared_bases.get(size)
            if base is None:              # cta_base is a multiple of 16: an exact shift
                base = self._shared_bases[size] = self.cta_base >> _SHIFT[size]
            wide = reg.view(np.int64) if reg.dtype.itemsize == 8 else reg
            bits = int(np.bitwise_or.reduce(reg)) if reg.size else 0
            # (a 64-bit value past 2^63 reads negative here, but then the bound fails)
            seen = self.shared_seen = [reg, size, bits, None, (wide >> wide.dtype.type(_SHIFT[size])) + base]
        bits = seen[2]
        top = self.smem_window - nbytes - off       # the highest good register value
        if bits & (nbytes - 1) or bits > top and (top < 0 or self._largest(seen) > top):
            return None
        return seen[4] + (off >> _SHIFT[size]) if off else seen[4]

    @staticmethod
    def _largest(seen) -> int:
        if seen[3] is None:
            seen[3] = int(seen[0].max())
        return seen[3]

    def load_shared(self, reg, off: int, size: int, vec: int, iid: int, guard):
        """ld.shared [reg + off] (reg: a 32- or 64-bit register's raw bits)."""
        if guard is None:
            idx = self.shared_words(reg, off, size * vec, size)
            if idx is not None:
                if vec > 1:
                    idx = idx[:, None] + np.arange(vec)
                return self.smem.view(UINT[size]).take(idx)
        return self.load_space("shared", _shared_address(reg, off), size, vec, iid, guard)

    def store_shared(self, reg, off: int, size: int, vec: int, value, iid: int, guard) -> None:
        """st.shared [reg + off], value (a register value or a tuple of vec of them)."""
        if guard is None:
            idx = self.shared_words(reg, off, size * vec, size)
            if idx is not None:
                dtype = UINT[size]
                view = self.smem.view(dtype)
                if vec == 1:
                    view[idx] = value if isinstance(value, np.ndarray) else np.full(self.n, value, dtype)
                    return
                view[idx[:, None] + np.arange(vec)] = np.stack(
                    [x if isinstance(x, np.ndarray) else np.full(self.n, x, dtype) for x in value], axis=1)
                return
        self.store_space("shared", _shared_address(reg, off), size, vec, value, iid, guard)

    # -- atomics ------------------------------------------------------------------------
    def atom(self, space, addr, op: str, ptype: str, b, c, iid: int, guard, want_old=True):
        """atom/red: returns the old raw bits (uint array over the current lanes)."""
        active, any_active = self.active_with(guard)
        size, kind = TYPES[ptype]
        udt = UINT[size]
        if not any_active:
            return np.zeros(self.n, udt) if want_old else None
        vdt = {"s": np.dtype(f"i{size}"), "f": np.dtype(f"f{size}")}.get(kind, np.dtype(udt))
        if not isinstance(addr, np.ndarray):
            addr = np.full(self.n, addr, np.uint64)
        a = addr if active is None else addr[active]
        parts = self._parts(space, a, size, size, iid, "atomic", active)

        def operand(x):
            if x is None:
                return None
            x = np.asarray(x)
            if x.ndim == 0:
                return x.astype(udt).view(vdt)
            x = x.astype(udt, copy=False).view(vdt)
            return x if active is None else x[active]

        bv, cv = operand(b), operand(c)
        old = np.zeros(a.size, vdt)
        for sub, arr, idx, sp in parts:
            ftz = ptype == "f32" and op == "add" and sp == "global"
            pb = bv if (sub is None or bv.ndim == 0) else bv[sub]
            pc = cv if (cv is None or sub is None or cv.ndim == 0) else cv[sub]
            o = atomic_rmw(arr.view(vdt), idx, op, pb, pc, ftz)
            if sub is None:
                old = o
            else:
                old[sub] = o
        if not want_old:
            return None
        old = old.view(udt)
        if active is None:
            return old
        out = np.zeros(self.n, udt)
        out[active] = old
        return out


def _shared_address(reg, off: int):
    """The 64-bit address reg + off, as the generic path computes it (wrapping)."""
    return reg.astype(_U64) + _U64(off & _U64_MASK)


__all__ = ["allocate_globals", "free_globals", "bind_symbols", "SpacesMixin"]
