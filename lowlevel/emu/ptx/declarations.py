"""The parser's readers of declarations: variables and their initializers, parameters,
and registers (with the { } scopes that let a .reg shadow an enclosing one)."""
from __future__ import annotations

import struct

from .errors import PtxError
from .functions import FunctionRef
from .ir import TYPES, Imm, Kernel, Param, Variable
from .lexer import TokenStream
from .registers import Registers

MAX_SHADOWING_RANGE = 1 << 16
MAX_INITIALIZER_NESTING = 64      # one level per array dimension


class Scope(dict):
    """The registers declared in one { } scope: name -> storage name (a range's storage is
    its own names), and `decl`, every declaration of the scope for overlap checks."""

    def __init__(self):
        super().__init__()
        self.decl = Registers()

    def store(self, name: str):
        s = self.get(name)
        if s is None and name in self.decl:
            s = name
        return s

    def overlaps(self, prefix: str, count: int) -> bool:
        return self.decl.overlaps(prefix, count)



def needs_own_storage(name: str, rtype: str, registers: Registers, scopes: list) -> bool:
    """Whether `name`, declared in the innermost of `scopes`, needs storage of its own:
    it shadows a register of an enclosing scope, or a closed sibling scope gave the name
    another type (CUB's inline assembly declares `.reg .f32 r0;` in one `{ }` and
    `.reg .f64 r0;` in the next)."""
    if any(sc.store(name) for sc in scopes[:-1]):
        return True
    if scopes[-1].decl.get(name) is not None:
        return False
    old = registers.get(name)
    return old is not None and old != rtype


class Declarations(TokenStream):
    """Reads `.global/.shared/.local/... name[n] = {...};`, `(.param ... , ...)` and `.reg`."""

    def variable(self, space: str) -> Variable:
        line = self.tok.line
        self.next()                                     # the state space
        align = None
        vtype = None
        vec = 1
        while self.tok.kind == "directive":
            d = self.next().text
            if d == ".align":
                align = self.int_literal("alignment")
            elif d in (".v2", ".v4", ".v8"):
                vec = int(d[2:])
            elif d[1:] in TYPES:
                vtype = d[1:]
            elif d == ".ptr":
                pass
            else:
                raise PtxError(line, f"unsupported variable attribute {d}")
        if vtype is None:
            raise PtxError(line, "variable declaration without a type")
        name = self.expect_kind("ident", "variable name").text
        count = 1
        unsized = False
        while self.accept("["):
            if self.at("]"):
                unsized = True          # `name[]`: sized by its initializer, or dynamic shared
            else:
                count *= self.int_literal("array size")
            self.expect("]")
        elem = TYPES[vtype][0] * vec
        init = None
        refs = []
        if self.accept("="):
            values = self.initializer(line, name)
            if unsized:
                count = -(-len(values) // vec)
            elif len(values) > count * vec:
                raise PtxError(line, f"initializer of {name!r} has {len(values)} values "
                                     f"for {count * vec} elements")
            refs = [(i * TYPES[vtype][0], v) for i, v in enumerate(values)
                    if isinstance(v, FunctionRef)]
            if refs and TYPES[vtype][0] != 8:
                raise PtxError(line, f"initializer of {name!r}: a function address needs "
                                     f"64-bit elements, not .{vtype}")
            init = pack_values(line, name, vtype,
                               [Imm(0) if isinstance(v, FunctionRef) else v for v in values])
        elif unsized:
            if space != "shared":
                raise PtxError(line, f"array {name!r} needs a size")
            count = 0                   # dynamic shared memory: sized at launch
        self.expect(";", "after variable declaration")
        var = Variable(name, space, vtype, elem * count, align or elem, init, line)
        var.extern = unsized and init is None
        if init is not None and refs:
            var.function_refs = refs          # patched by functions.assign_addresses
        return var

    def initializer(self, line: int, name: str, depth: int = 0) -> list:
        """The flattened scalar values of `= 1`, `= {1, 2}`, `= {{1, 2}, {3, 4}}`."""
        values = []
        if self.at("{") and depth >= MAX_INITIALIZER_NESTING:
            raise PtxError(self.tok.line, f"initializer of {name!r} nested more than "
                                          f"{MAX_INITIALIZER_NESTING} deep in {{ }}")
        if self.accept("{"):
            if not self.at("}"):
                while True:
                    values += self.initializer(line, name, depth + 1)
                    if not self.accept(","):
                        break
            self.expect("}", f"to close the initializer of {name!r}")
            return values
        t = self.tok
        if t.text == "-" or t.kind in ("int", "float", "fhex", "dhex"):
            return [self.immediate()]
        if t.kind == "ident":               # a function's address (tables, vtables)
            self.next()
            return [FunctionRef(t.text, t.line)]
        raise PtxError(line, f"initializer of {name!r}: only numeric constants are supported "
                             f"by the emulator, found {t.text!r}")


    def param_list(self) -> list[Param]:
        self.expect("(")
        params = []
        if self.accept(")"):
            return params
        while True:
            params.append(self.param())
            if self.accept(")"):
                return params
            self.expect(",", "between parameters")

    def param(self) -> Param:
        t = self.tok
        if not self.accept(".param") and not self.accept(".reg"):
            raise PtxError(t.line, f"expected .param, found {t.text!r}")
        ptype = None
        align = None
        is_ptr = False
        while self.tok.kind == "directive":
            d = self.next().text
            if d == ".align":
                align = self.int_literal("alignment")
            elif d == ".ptr":
                is_ptr = True
            elif d in (".global", ".shared", ".const", ".local"):
                pass                      # the pointee's space (after .ptr)
            elif d[1:] in TYPES:
                ptype = d[1:]
            else:
                raise PtxError(t.line, f"unsupported parameter attribute {d}")
        if ptype is None:
            raise PtxError(t.line, "parameter without a type")
        name = self.expect_kind("ident", "parameter name").text
        count = 1
        if self.accept("["):
            count = self.int_literal("array size")
            self.expect("]")
        size = TYPES[ptype][0] * count
        natural = TYPES[ptype][0]
        # With .ptr, .align describes the pointed-to memory, not the parameter itself.
        layout_align = natural if is_ptr else max(natural, align or natural)
        return Param(name, ptype, size, layout_align, 0, count, is_ptr)


    def reg_decl(self, k: Kernel, scopes=None) -> dict:
        """Declare the registers of a .reg line; returns {name: storage name} (a name that
        shadows one of an enclosing scope in `scopes` gets storage of its own)."""
        declared = {}
        line = self.next().line
        rtype = None
        while self.tok.kind == "directive":
            d = self.next().text
            if d[1:] in TYPES:
                rtype = d[1:]
            else:
                raise PtxError(line, f"unsupported register attribute {d} "
                                     "(vector registers are not supported)")
        if rtype is None:
            raise PtxError(line, ".reg without a type")
        while True:
            name = self.expect_kind("ident", "register name").text
            names = [name]
            if self.accept("<"):
                n = self.int_literal("register count")
                self.expect(">")
                outer = scopes[:-1] if scopes else []
                if not any(sc.overlaps(name, n) for sc in outer):
                    # a range costs nothing until used (its storage is its own names)
                    k.registers.declare_range(name, n, rtype, line)
                    if scopes:
                        scopes[-1].decl.declare_range(name, n, rtype, line)
                    if not self.accept(","):
                        break
                    continue
                if n > MAX_SHADOWING_RANGE:
                    raise PtxError(line, f"{name}<{n}> shadows registers of an enclosing "
                                         f"scope; the emulator supports that for ranges of "
                                         f"at most {MAX_SHADOWING_RANGE} registers")
                names = [f"{name}{j}" for j in range(n)]
            for nm in names:
                store = (scopes[-1].store(nm) if scopes else None) or nm
                if scopes and len(scopes) > 1 and store == nm and needs_own_storage(
                        nm, rtype, k.registers, scopes):
                    store = f"{nm}${len(k.registers.named)}"
                    while store in k.registers:
                        store += "$"
                old = k.registers.get(store)
                if old is not None and old != rtype:
                    raise PtxError(line, f"register {nm} redeclared as .{rtype} (was .{old})")
                k.registers[store] = rtype
                if scopes:
                    scopes[-1][nm] = store
                    scopes[-1].decl[nm] = rtype
                declared[nm] = store
            if not self.accept(","):
                break
        self.expect(";", "after register declaration")
        return declared



def pack_values(line: int, name: str, vtype: str, values: list) -> bytes:
    """Initializer values (Imm) as the little-endian bytes of `vtype` elements."""
    size, kind = TYPES[vtype]
    out = bytearray()
    for v in values:
        if kind == "f" and size in (4, 8):
            if v.bits is not None and v.width == size:
                out += v.bits.to_bytes(size, "little")
            elif v.bits is not None:       # 0f literal for .f64 or 0d for .f32: by value
                out += struct.pack("<f" if size == 4 else "<d", v.value)
            else:
                out += struct.pack("<f" if size == 4 else "<d", float(v.value))
        elif kind in ("u", "s", "b") and size <= 8:
            if v.is_float:
                if v.bits is None:
                    raise PtxError(line, f"initializer of {name!r}: float {v} for .{vtype}")
                iv = v.bits
            else:
                iv = v.value
            out += (iv & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
        else:
            raise PtxError(line, f"initializer of {name!r}: .{vtype} values are not supported")
    return bytes(out)

