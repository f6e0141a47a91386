"""The registers a PTX function declares: name -> PTX type, with ranges kept whole.

`.reg .b64 %rd<100000000>;` declares %rd0 ... %rd99999999. ptxas accepts any count below
2^32 (it refuses 2^32 and more: "Constant overflow"), and compilers declare generous
ranges, so a range is one entry here, costing nothing however large: a name is looked up
by splitting it into a declared prefix and a decimal index. Only the registers a kernel
uses get storage (codegen assigns slots on first use).
"""
from __future__ import annotations

from .errors import PtxError

MAX_RANGE = 1 << 32          # ptxas: a count of 2^32 or more is a constant overflow


class Registers:
    def __init__(self):
        self.named: dict[str, str] = {}                    # name -> type
        self.ranges: dict[str, tuple[int, str]] = {}       # prefix -> (count, type)

    # -- lookups -----------------------------------------------------------------------
    def get(self, name: str, default=None):
        t = self.named.get(name)
        if t is not None:
            return t
        for prefix, index in _splits(name):
            r = self.ranges.get(prefix)
            if r is not None and index < r[0]:
                return r[1]
        return default

    def __getitem__(self, name: str) -> str:
        t = self.get(name)
        if t is None:
            raise KeyError(name)
        return t

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __bool__(self) -> bool:
        return bool(self.named) or any(count for count, _ in self.ranges.values())

    def types(self) -> set:
        return set(self.named.values()) | {t for count, t in self.ranges.values() if count}

    def count_by_type(self) -> dict:
        """How many registers of each type are declared."""
        out: dict = {}
        for t in self.named.values():
            out[t] = out.get(t, 0) + 1
        for count, t in self.ranges.values():
            out[t] = out.get(t, 0) + count
        return out

    # -- declarations ------------------------------------------------------------------
    def __setitem__(self, name: str, rtype: str) -> None:
        self.named[name] = rtype

    def declare_range(self, prefix: str, count: int, rtype: str, line: int) -> None:
        """Declare prefix0 ... prefix{count-1} of type rtype (again: the larger count)."""
        if not 0 <= count < MAX_RANGE:
            raise PtxError(line, f"register count {count} of {prefix}<{count}> is out of "
                                 f"range (constant overflow: it must be below 2^32)")
        for other, (n, t) in self.ranges.items():
            if t != rtype and _ranges_overlap(prefix, count, other, n):
                raise PtxError(line, f"register {prefix}<{count}> redeclares registers of "
                                     f"{other}<{n}> as .{rtype} (they are .{t})")
        for name, t in self.named.items():
            if t != rtype and any(p == prefix and i < count for p, i in _splits(name)):
                raise PtxError(line, f"register {name} redeclared as .{rtype} (was .{t})")
        old = self.ranges.get(prefix)
        self.ranges[prefix] = (max(count, old[0] if old else 0), rtype)

    def overlaps(self, prefix: str, count: int) -> bool:
        """Whether prefix<count> names any register declared here."""
        if any(_ranges_overlap(prefix, count, p, n) for p, (n, _) in self.ranges.items()):
            return True
        return any(p == prefix and i < count for name in self.named for p, i in _splits(name))


def _splits(name: str):
    """(prefix, index) for every way `name` ends in a decimal index as a range names it
    (no leading zeros: %r<11> declares %r10, never %r010)."""
    k = len(name)
    while k > 1 and name[k - 1] in "0123456789":
        k -= 1
        digits = name[k:]
        if digits == "0" or digits[0] != "0":
            yield name[:k], int(digits)


def _ranges_overlap(p1: str, n1: int, p2: str, n2: int) -> bool:
    """Whether p1<n1> and p2<n2> share a name: same prefix, or one prefix is the other
    plus digits d, and some p1 index starts with d (%r<100> and %r1<3> share %r10)."""
    if not (n1 and n2):
        return False
    if len(p2) < len(p1):
        p1, n1, p2, n2 = p2, n2, p1, n1
    if p1 == p2:
        return True
    d = p2[len(p1):]
    if not (p2.startswith(p1) and d.strip("0123456789") == "") or d[0] == "0":
        return False
    return int(d) * 10 < n1          # p2 + "0" is the smallest shared candidate
