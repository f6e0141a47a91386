"""What every instruction family reads an instruction with: its modifiers (Mods), its
operands, the type sets and rounding modes of PTX, and the error for what is not supported."""
from __future__ import annotations

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Instruction
from . import numerics

# Modifiers of ld/st that change nothing in a sequential emulator.
CACHE_MODS = {"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "weak", "volatile",
              "relaxed", "acquire", "release", "cta", "gpu", "sys", "cluster"}
ROUND_F = ("rn", "rz", "rm", "rp")
ROUND_I = ("rni", "rzi", "rmi", "rpi")

INT_TYPES = {"u16", "u32", "u64", "s16", "s32", "s64"}
BIT_TYPES = {"b16", "b32", "b64"}
FLOAT_TYPES = {"f32", "f64"}
HALF_TYPES = {"f16", "f16x2", "bf16", "bf16x2"}


def unsupported(ins: Instruction, why: str = "") -> PtxError:
    name = ".".join([ins.opcode] + ins.mods)
    msg = f"instruction '{name}' is not supported by the emulator"
    if why:
        msg += f" ({why})"
    return PtxError(ins.line, f"{msg}: {ins.text}")


class Mods:
    """The dotted modifiers of an instruction; `take` consumes the ones an emitter
    understands and `done` refuses anything left over."""

    def __init__(self, ins: Instruction):
        self.ins = ins
        self.left = list(ins.mods)

    def take(self, *options) -> str | None:
        for m in self.left:
            if m in options:
                self.left.remove(m)
                return m
        return None

    def take_all(self, options) -> list[str]:
        got = [m for m in self.left if m in options or m.split("::")[0] in options]
        for m in got:
            self.left.remove(m)
        return got

    def types(self) -> list[str]:
        got = [m for m in self.left if m in TYPES]
        for m in got:
            self.left.remove(m)
        return got

    def one_type(self, allowed=None) -> str:
        ts = self.types()
        if len(ts) != 1:
            raise PtxError(self.ins.line, f"expected one type on {self.ins.opcode}: {self.ins.text}")
        t = ts[0]
        if allowed is not None and t not in allowed:
            raise unsupported(self.ins, f"type .{t}")
        return t

    def done(self) -> None:
        if self.left:
            raise unsupported(self.ins, "modifier " + ", ".join("." + m for m in self.left))


def needs_target(g, ins: Instruction, sm: int, ptx: int, what: str) -> None:
    """ptxas's target and version rules for the form `what`: .target sm_`sm` or higher and
    PTX ISA .version `ptx` (as tens: 78 is 7.8) or later, refused as ptxas refuses them."""
    k = g.ck.kernel
    if k.binary_version < sm:
        raise PtxError(ins.line, f"{what} requires .target sm_{sm} or higher "
                                 f"(target sm_{k.binary_version}): {ins.text}")
    if k.ptx_version < ptx:
        raise PtxError(ins.line, f"{what} requires PTX ISA .version {ptx // 10}.{ptx % 10} or "
                                 f"later: {ins.text}")


def operands(ins: Instruction, n: int) -> list:
    if len(ins.operands) != n:
        raise PtxError(ins.line, f"{ins.opcode} takes {n} operands, got "
                                 f"{len(ins.operands)}: {ins.text}")
    return ins.operands


def view_name(ptype: str) -> str:
    size, kind = TYPES[ptype]
    return {"s": f"_I{size * 8}", "f": f"_F{size * 8}"}.get(kind, f"_U{size * 8}")


def view_dtype(ptype: str):
    size, kind = TYPES[ptype]
    if kind == "s":
        return numerics.SINT[size]
    if kind == "f":
        return numerics.FLOAT[size]
    return numerics.UINT[size]


# --- comparisons (setp, set; their half-type forms too) ---------------------------------
CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
        "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
UNORDERED = {"equ": "==", "neu": "!=", "ltu": "<", "leu": "<=", "gtu": ">", "geu": ">="}


def cmp_and_bool(ins, m):
    cmp = m.take(*CMP, *UNORDERED, "num", "nan")
    if cmp is None:
        raise PtxError(ins.line, f"missing comparison operator: {ins.text}")
    boolop = m.take("and", "or", "xor")
    ftz = m.take("ftz")
    return cmp, boolop, ftz
