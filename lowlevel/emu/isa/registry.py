"""The one registry the instruction families fill and the decoder reads.

    EMITTERS         (opcode, form) -> emitter(gen, ins): writes the Python of one instruction
    RUNTIME          name -> helper that generated code calls (`_popc`, `_shfl`, ...)
    SPECIAL_READERS  special register -> reader(gen, ins, ptype): an expression computed on
                     the fly (%clock, %lanemask_lt, ...)
    WATCHERS         watcher(gen, ins), called before every instruction's emitter: may emit
                     a check in front of it (wgmma_async.py: registers of a pending wgmma)

An emitter registers for an opcode and a form: ANY takes every instruction of that opcode;
a type family ("f16", "bf16": the half types and their pairs) takes the instructions of
that type; CARRY (`.cc`), SYMBOL (`mov d, variable`), SPARSE (`mma.sp`), ASYNC
(`st.async`, `red.async`), PACK (`cvt.pack`), XORSIGN/INT_RELU/BOOLOP (modifiers that
minmaxmore.py takes, tried before the type families) and VECTOR (.v2/.v4/.v8 of an opcode
that has such an emitter: vector atomics) take those forms. `lookup` tries the instruction's own forms first, then
ANY. Every key is registered once (a second registration is an error), so nothing depends on
the order the families are imported in and no emitter wraps another.
"""
from __future__ import annotations

from collections.abc import Callable

from ..ptx.ir import Instruction, Sym

ANY = ""
CARRY = "cc"
SYMBOL = "symbol"
SPARSE = "sp"          # mma.sp{::ordered_metadata}
ASYNC = "async"
VECTOR = "vector"
PACK = "pack"          # cvt.pack.sat (cvtpack.py)
# modifier forms tried before the type families (minmaxmore.py): an opcode that registers
# none of them is not affected
XORSIGN = "xorsign"    # min/max.xorsign.abs on half types
INT_RELU = "int_relu"  # min/max.relu.{s32,s16x2}
BOOLOP = "boolop"      # lop3.{and,or} d|p, ..., q (only lop3 registers it)
_VECTORS = {"v2", "v4", "v8"}
TYPE_FAMILIES = {"f16": "f16", "f16x2": "f16", "bf16": "bf16", "bf16x2": "bf16",
                 "s16x2": "i16x2", "u16x2": "i16x2", "tf32": "tf32",
                 "e4m3x2": "f8", "e5m2x2": "f8"}

EMITTERS: dict[tuple[str, str], Callable] = {}
RUNTIME: dict[str, object] = {}
SPECIAL_READERS: dict[str, Callable] = {}
WATCHERS: list[Callable] = []


def register(emitter: Callable, *opcodes: str, forms=(ANY,)) -> Callable:
    """Make `emitter` the one for each of `opcodes` in each of `forms`."""
    for opcode in opcodes:
        for form in forms:
            key = (opcode, form)
            if key in EMITTERS:
                raise RuntimeError(f"two emitters for {key}: {EMITTERS[key].__qualname__} "
                                   f"and {emitter.__qualname__}")
            EMITTERS[key] = emitter
    return emitter


def provide(**helpers) -> None:
    """Runtime helpers for generated code, by the name it calls them with."""
    for name, helper in helpers.items():
        if name in RUNTIME:
            raise RuntimeError(f"runtime helper {name} provided twice")
        RUNTIME[name] = helper


def special_register(name: str, reader: Callable) -> None:
    if name in SPECIAL_READERS:
        raise RuntimeError(f"special register {name} registered twice")
    SPECIAL_READERS[name] = reader


def watch(watcher: Callable) -> None:
    """Call `watcher(gen, ins)` before each instruction is emitted, in every kernel."""
    if watcher in WATCHERS:
        raise RuntimeError(f"watcher {watcher.__qualname__} registered twice")
    WATCHERS.append(watcher)


def forms_of(ins: Instruction) -> list[str]:
    """The forms `ins` has, most specific first, ANY last."""
    families = [TYPE_FAMILIES[m] for m in ins.mods if m in TYPE_FAMILIES]
    # an 8-bit float pair decides wherever it stands (cvt.rn.f16x2.e4m3x2 is lowfloat.py's)
    forms = _modifier_forms(ins.mods) + (["f8"] if "f8" in families else families[:1])
    if "cc" in ins.mods:
        forms.append(CARRY)
    if "async" in ins.mods:
        forms.append(ASYNC)
    if _VECTORS.intersection(ins.mods):
        forms.append(VECTOR)
    if len(ins.operands) == 2 and isinstance(ins.operands[1], Sym):
        forms.append(SYMBOL)
    if ins.mods and ins.mods[0] in ("sp", "sp::ordered_metadata"):
        forms.append(SPARSE)
    if ins.mods and ins.mods[0] == "pack":
        forms.append(PACK)
    return [*forms, ANY]


def _modifier_forms(mods: list[str]) -> list[str]:
    forms = []
    if "xorsign" in mods:
        forms.append(XORSIGN)
    if "relu" in mods and ("s32" in mods or "s16x2" in mods):
        forms.append(INT_RELU)
    if "and" in mods or "or" in mods:
        forms.append(BOOLOP)
    return forms


def lookup(ins: Instruction) -> Callable | None:
    """The emitter for `ins`, or None when no family knows its opcode in any of its forms."""
    for form in forms_of(ins):
        emitter = EMITTERS.get((ins.opcode, form))
        if emitter is not None:
            return emitter
    return None
