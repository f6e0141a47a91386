"""Device function pointers in the parsed module: addresses of functions, `.callprototype`.

A function whose name is used as a value (`mov.u64 %rd, f`, or in a .global initializer
such as a table of function pointers or a C++ vtable) gets an address: FUNCTION_BASE +
16 * (1 + its index among such functions), far above the arena and the generic windows
(isa/addressing.py), so a function pointer used as a data pointer faults as an
out-of-bounds access. `mod.function_addresses` maps names to addresses; isa/calls.py
inlines an indirect call as a choice among the functions of its prototype's signature
that have an address.

    label: .callprototype (.param .b32 _) _ (.param .b64 _, .param .b32 _);
    call (retval0), %rd4, (param0, param1), label;

The prototype (Prototype: the return and argument parameters) is attached to each call
that names it (`ins.prototype`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import PtxError
from .ir import Instruction, Sym

FUNCTION_BASE = 3 << 48
FUNCTION_STRIDE = 16


@dataclass
class Prototype:
    returns: list          # Param
    params: list           # Param
    line: int = 0


@dataclass
class FunctionRef:
    """A function name in an initializer, patched to its address once all are known."""
    name: str
    line: int


def parse_prototype(parser, line: int) -> Prototype:
    """After `label :` and the `.callprototype` token: `(rets)? _ (params)? ;`."""
    returns = parser.param_list() if parser.at("(") else []
    underscore = parser.expect_kind("ident", "'_' of .callprototype")
    if underscore.text != "_":
        raise PtxError(line, f".callprototype names no function, expected '_', found "
                             f"{underscore.text!r}")
    params = parser.param_list() if parser.at("(") else []
    parser.expect(";", "after .callprototype")
    return Prototype(returns, params, line)


def attach_prototypes(k, prototypes: dict) -> None:
    """Give each `call ..., label` of k's body the prototype `label` declares."""
    if not prototypes:
        return
    for ins in k.body:
        if isinstance(ins, Instruction) and ins.opcode == "call" and ins.operands:
            last = ins.operands[-1]
            if isinstance(last, Sym) and last.name in prototypes:
                ins.prototype = prototypes[last.name]
                ins.operands = ins.operands[:-1]


def assign_addresses(mod, fixups: list) -> None:
    """mod.function_addresses for the functions used as values; patch initializers."""
    used = []
    for f in list(mod.kernels.values()) + list(mod.functions.values()):
        for ins in f.body:
            if not isinstance(ins, Instruction) or ins.opcode == "call":
                continue
            for op in ins.operands:
                if isinstance(op, Sym) and op.name in mod.functions and op.name not in used:
                    used.append(op.name)
    for var, offset, ref in fixups:
        if ref.name not in mod.functions:
            raise PtxError(ref.line, f"initializer of {var.name!r}: {ref.name!r} is no function "
                                     f"of this module (only function addresses and numbers "
                                     f"are supported by the emulator)")
        if ref.name not in used:
            used.append(ref.name)
    mod.function_addresses = {name: FUNCTION_BASE + FUNCTION_STRIDE * (i + 1)
                              for i, name in enumerate(used)}
    for var, offset, ref in fixups:
        init = bytearray(var.init)
        init[offset:offset + 8] = mod.function_addresses[ref.name].to_bytes(8, "little")
        var.init = bytes(init)


__all__ = ["FUNCTION_BASE", "Prototype", "FunctionRef", "parse_prototype", "attach_prototypes",
           "assign_addresses"]
