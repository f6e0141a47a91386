"""LOWLEVEL_EMU_RACECHECK=1: shared-memory hazards between barriers, like compute-sanitizer's
racecheck (which reports and does not abort).

For every byte of shared memory of the batch it remembers, since the CTA's last barrier,
the last thread that wrote it (and the instruction), and a thread that read it (and
whether several distinct threads did). An access by thread t races when
- it reads a byte written by another thread      (read-after-write),
- it writes a byte read by another thread        (write-after-read),
- it writes a byte written by another thread     (write-after-write),
with no barrier in between; threads of one instruction writing the same byte race too.
A barrier release clears the CTA's records. Each hazard (pair of PTX lines and kind) is
reported once per launch: printed to stderr and kept in LaunchStats.races. Atomics are not
tracked (they never race with each other). Off by default: then none of this runs.
"""
from __future__ import annotations

import sys

import numpy as np

from .base import Tool


class RaceCheck(Tool):
    events = frozenset({"batch", "barrier", "shared_access"})

    def __init__(self):
        self.launch = None
        self.reported: set = set()

    def initialize(self, launch) -> None:
        self.launch = launch
        self.reported = set()

    def event(self, kind: str, *args) -> None:
        {"batch": self.new_batch, "barrier": self.barrier, "shared_access": self.access}[kind](*args)

    def new_batch(self, smem, stride) -> None:
        n = 0 if smem is None else smem.size
        self.stride = stride
        self.writer = np.full(n, -1, np.int64)
        self.writer_iid = np.zeros(n, np.int32)
        self.reader = np.full(n, -1, np.int64)
        self.reader_iid = np.zeros(n, np.int32)
        self.multi = np.zeros(n, bool)

    def barrier(self, ctas=None) -> None:
        """A barrier completed in these batch CTAs (None: all)."""
        if ctas is None:
            self.writer[:] = -1
            self.reader[:] = -1
            self.multi[:] = False
            return
        for c in np.asarray(ctas).tolist():
            s = slice(c * self.stride, (c + 1) * self.stride)
            self.writer[s] = -1
            self.reader[s] = -1
            self.multi[s] = False

    def access(self, is_write: bool, idx, size: int, lanes, iid: int) -> None:
        """idx: element indices (size-byte units) per lane (or lanes x vec)."""
        idx = np.asarray(idx)
        if idx.ndim == 2:
            lanes = np.repeat(lanes, idx.shape[1])
            idx = idx.reshape(-1)
        b = (idx.astype(np.int64) * size)[:, None] + np.arange(size)
        b = b.reshape(-1)
        t = np.repeat(np.asarray(lanes, np.int64), size)
        if b.size == 0:
            return
        w = self.writer[b]
        raw = (w >= 0) & (w != t)
        if is_write:
            if raw.any():
                i = int(np.argmax(raw))
                self._report("write-after-write", b[i], w[i], self.writer_iid[b[i]], t[i], iid)
            r = self.reader[b]
            war = ((r >= 0) & (r != t)) | self.multi[b]
            if war.any():
                i = int(np.argmax(war))
                other = r[i] if r[i] != t[i] else -1
                self._report("write-after-read", b[i], other, self.reader_iid[b[i]], t[i], iid)
            # several threads of this instruction writing one byte
            order = np.argsort(b, kind="stable")
            sb, st = b[order], t[order]
            same = (sb[1:] == sb[:-1]) & (st[1:] != st[:-1])
            if same.any():
                i = int(np.argmax(same))
                self._report("write-after-write", sb[i], st[i], iid, st[i + 1], iid)
            self.writer[b] = t
            self.writer_iid[b] = iid
        else:
            if raw.any():
                i = int(np.argmax(raw))
                self._report("read-after-write", b[i], w[i], self.writer_iid[b[i]], t[i], iid)
            r = self.reader[b]
            fresh = r < 0
            self.reader[b[fresh]] = t[fresh]
            self.reader_iid[b[fresh]] = iid
            r = self.reader[b]
            other = r != t
            if other.any():
                self.multi[b[other]] = True

    def _report(self, kind, byte, t1, iid1, t2, iid2) -> None:
        L = self.launch
        key = (kind, int(iid1), int(iid2))
        if key in self.reported:
            return
        self.reported.add(key)
        ins1, ins2 = L.ck.instructions[int(iid1)], L.ck.instructions[int(iid2)]
        cta = int(byte) // self.stride
        offset = int(byte) % self.stride
        who1 = L.who_batch(int(t1)) if t1 >= 0 else "another thread"
        who2 = L.who_batch(int(t2))
        msg = (f"racecheck: {kind} hazard on shared memory of {L.name} at offset "
               f"{offset:#x} (block {L.block_name(cta)}): {who1} at PTX line {ins1.line} "
               f"({ins1.text}) and {who2} at PTX line {ins2.line} ({ins2.text}), "
               f"with no barrier between them")
        L.stats.races.append(msg)
        sys.stderr.write("========= " + msg + "\n")
        sys.stderr.flush()


__all__ = ["RaceCheck"]
