"""The parser's reader of one instruction: guard, opcode with its modifiers, operands
(registers, immediates, symbols, addresses, vectors, argument lists, predicate pairs)."""
from __future__ import annotations

import struct

from .errors import PtxError
from .ir import Addr, ArgList, Imm, Instruction, PredPair, Reg, Sym, TensorAddr, Vec
from .lexer import TokenStream, parse_int

MAX_OPERAND_NESTING = 8           # call argument lists and vectors nest one or two deep


class Operands(TokenStream):
    """Reads `@!%p op.mod.mod a, [b+4], {c, _};` into an Instruction."""

    def instruction(self) -> Instruction:
        start = self.tok
        guard = None
        if self.accept("@"):
            neg = self.accept("!")
            g = self.expect_kind("ident", "guard predicate")
            guard = Reg(g.text, neg)
        op = self.tok
        if op.kind != "ident" or op.text.startswith("%"):
            raise PtxError(op.line, f"expected an instruction, found {op.text!r}")
        self.next()
        parts = op.text.split(".")
        operands = []
        syntax_error = None
        try:
            if not self.at(";"):
                while True:
                    operands.append(self.operand())
                    if not self.accept(","):
                        break
            end = self.expect(";", f"after {op.text}")
        except PtxError as e:
            # Operand forms this parser does not model (call argument lists, texture
            # coordinates...): keep the instruction so the code generator can refuse it
            # by name; it re-raises this error if it does know the opcode.
            syntax_error = e
            while self.tok.kind != "eof" and not self.at(";") and self.tok.line == op.line:
                self.next()
            if not self.at(";"):
                raise
            end = self.next()
        text = " ".join(self.src[start.pos:end.pos].split())
        ins = Instruction(parts[0], parts[1:], operands, op.line, text, guard)
        ins.syntax_error = syntax_error
        return ins

    def operand(self, depth: int = 0):
        t = self.tok
        if t.text in ("(", "{") and depth >= MAX_OPERAND_NESTING:
            # ptxas takes constant expressions nested thousands deep; the emulator takes
            # no constant expressions at all, and must not recurse without bound
            raise PtxError(t.line, f"operand nested more than {MAX_OPERAND_NESTING} deep in "
                                   f"( ) or {{ }} (constant expressions are not supported by "
                                   f"the emulator)")
        if t.text == "[":
            return self.address()
        if t.text == "(":                 # a `call` return/argument list: (a, b)
            self.next()
            elems = []
            while not self.accept(")"):
                elems.append(self.operand(depth + 1))
                if not self.at(")"):
                    self.expect(",", "in argument list")
            return ArgList(elems)
        if t.text == "{":
            self.next()
            elems = []
            while True:
                e = self.tok
                if e.text == "_":
                    self.next()
                    elems.append(None)
                else:
                    elems.append(self.operand(depth + 1))
                if self.accept("}"):
                    return Vec(elems)
                self.expect(",", "in vector operand")
        if t.text == "!":
            self.next()
            r = self.expect_kind("ident", "predicate")
            return Reg(r.text, negated=True)
        if t.text == "-" or t.kind in ("int", "float", "fhex", "dhex"):
            return self.immediate()
        if t.kind == "ident":
            self.next()
            if self.accept("|"):
                # `d|p` (shfl.sync, setp, match.all): CUB's inline assembly names its
                # scoped registers without a %, `r0|p`
                q = self.expect_kind("ident", "predicate").text
                return PredPair(Reg(t.text), Reg(q))
            if t.text.startswith("%"):
                return Reg(t.text)
            if t.text == "WARP_SZ":          # the predefined constant: the warp size
                return Imm(32, text="WARP_SZ")
            return Sym(t.text)
        raise PtxError(t.line, f"unexpected {t.text!r} in operand list")

    def immediate(self) -> Imm:
        neg = self.accept("-")
        t = self.next()
        sign = "-" if neg else ""
        if t.kind == "fhex":
            bits = int(t.text[2:], 16)
            if neg:
                bits ^= 0x80000000
            return Imm(float(struct.unpack("<f", struct.pack("<I", bits))[0]), bits, 4,
                       sign + t.text)
        if t.kind == "dhex":
            bits = int(t.text[2:], 16)
            if neg:
                bits ^= 1 << 63
            return Imm(float(struct.unpack("<d", struct.pack("<Q", bits))[0]), bits, 8,
                       sign + t.text)
        if t.kind == "float":
            v = float(t.text)
            return Imm(-v if neg else v, None, 0, sign + t.text)
        if t.kind == "int":
            v = parse_int(t.text)
            return Imm(-v if neg else v, None, 0, sign + t.text)
        raise PtxError(t.line, f"expected an immediate, found {t.text!r}")

    def address(self) -> Addr | TensorAddr:
        """`[base+offset]`, or cp.async.bulk.tensor's `[tensorMap, {coordinates}]`."""
        self.expect("[")
        base = None
        offset = 0
        t = self.tok
        if t.kind == "ident":
            self.next()
            base = Reg(t.text) if t.text.startswith("%") else Sym(t.text)
            if self.accept("+"):
                offset = self.int_literal("address offset")
            elif self.at("-"):
                offset = self.int_literal("address offset")
        else:
            offset = self.int_literal("address")
        if self.accept(","):
            coords = self.operand(1)
            if not isinstance(coords, Vec):
                raise PtxError(t.line, f"expected tensor coordinates {{..}} after the tensor map, found {coords}")
            self.expect("]", "to close the tensor address")
            return TensorAddr(base, offset, coords)
        self.expect("]", "to close the address")
        return Addr(base, offset)

