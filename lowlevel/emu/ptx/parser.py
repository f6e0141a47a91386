"""PTX text -> a PtxModule: kernels, their parameter layout, their instructions.

A small tokenizer (lexer.py) plus a recursive-descent reader of the PTX grammar that
nvcc/NVRTC emit and that people write by hand, in three readers: module statements and
function bodies (here), declarations (declarations.py), instructions and their operands
(operands.py). It produces plain objects (ir.py); it knows nothing about how instructions
execute: decoding them for the engine is engine/decode.py's `load_ptx`.
"""
from __future__ import annotations

import re

from .declarations import Declarations, Scope
from .errors import PtxError
from .functions import assign_addresses, attach_prototypes, parse_prototype
from .ir import Addr, ArgList, Instruction, Kernel, PredPair, PtxModule, Reg, Sym, TensorAddr, Vec
from .operands import Operands
from .registers import Registers

PERF_DIRECTIVES = {".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg",
                    ".maxclusterrank", ".reqnctapercluster", ".explicitcluster",
                    ".noreturn", ".blocksareclusters"}



def rename_registers(ins: Instruction, renames: dict) -> None:
    """Point the register operands of `ins` at the storage `renames` gives their names."""
    def op(o):
        if isinstance(o, Reg):
            return Reg(renames[o.name], o.negated) if o.name in renames else o
        if isinstance(o, Sym):
            return Sym(renames[o.name]) if o.name in renames else o
        if isinstance(o, Addr) and o.base is not None:
            return Addr(op(o.base), o.offset)
        if isinstance(o, TensorAddr):
            return TensorAddr(op(o.base) if o.base is not None else None, o.offset, op(o.coords))
        if isinstance(o, Vec):
            return Vec([None if e is None else op(e) for e in o.elems])
        if isinstance(o, ArgList):
            return ArgList([op(e) for e in o.elems])
        if isinstance(o, PredPair):
            return PredPair(op(o.p), op(o.q) if o.q is not None else None)
        return o
    ins.operands = [op(o) for o in ins.operands]
    if ins.guard is not None:
        ins.guard = op(ins.guard)



# The oldest PTX ISA that knows each target, as ptxas checks it (newer targets: ptxas alone).
OLDEST_ISA_FOR_TARGET = {
    "sm_20": (2, 0), "sm_30": (3, 0), "sm_32": (4, 0), "sm_35": (3, 1), "sm_37": (4, 1),
    "sm_50": (4, 0), "sm_52": (4, 1), "sm_53": (4, 2), "sm_60": (5, 0), "sm_61": (5, 0),
    "sm_62": (5, 0), "sm_70": (6, 0), "sm_72": (6, 1), "sm_75": (6, 3), "sm_80": (7, 0),
    "sm_86": (7, 1), "sm_87": (7, 4), "sm_89": (7, 8), "sm_90": (7, 8), "sm_90a": (8, 0),
}


class Parser(Declarations, Operands):
    """The whole module: directives, linkage, functions and their bodies."""

    def __init__(self, src: str):
        super().__init__(src)
        self.version = None
        self.target = None
        self.address_size = 64
        self.kernels: dict[str, Kernel] = {}
        self.functions: dict[str, Kernel] = {}
        self.globals: list = []

    def parse(self) -> PtxModule:
        while self.tok.kind != "eof":
            self.module_statement()
        if self.version is None:
            raise PtxError(1, "missing .version directive")
        if self.target is None:
            raise PtxError(1, "missing .target directive")
        mod = PtxModule(self.version, self.target, self.address_size, self.kernels,
                        self.functions, self.globals)
        assign_addresses(mod, [(v, off, ref) for v in self.globals
                               for off, ref in getattr(v, "function_refs", ())])
        return mod

    def module_statement(self) -> None:
        t = self.tok
        d = t.text
        if d == ".version":
            self.next()
            v = self.next()
            m = re.fullmatch(r"(\d+)\.(\d+)", v.text)
            if not m:
                raise PtxError(v.line, f"bad .version {v.text!r}")
            major, minor = int(m.group(1)), int(m.group(2))
            if not 1 <= major <= 9:
                raise PtxError(v.line, f"unsupported PTX ISA version {v.text} (accepted: 1.x to 9.x)")
            self.version = (major, minor)
        elif d == ".target":
            self.next()
            targets = [self.expect_kind("ident", "target name").text]
            while self.accept(","):
                targets.append(self.expect_kind("ident", "target option").text)
            arch = targets[0]
            if not re.fullmatch(r"(sm|compute)_\d+[af]?", arch):
                raise PtxError(t.line, f"unsupported target {arch!r}")
            arch = "sm_" + arch.split("_", 1)[1]     # ptxas reads compute_XY as sm_XY
            need = OLDEST_ISA_FOR_TARGET.get(arch)
            if need and self.version and self.version < need:
                raise PtxError(t.line, f"PTX .version {self.version[0]}.{self.version[1]} does not "
                                       f"support .target {arch}")
            for opt in targets[1:]:
                if opt not in ("texmode_unified", "texmode_independent", "debug",
                               "map_f64_to_f32"):
                    raise PtxError(t.line, f"unsupported .target option {opt!r}")
                if opt == "map_f64_to_f32":
                    raise PtxError(t.line, ".target map_f64_to_f32 is not supported")
            self.target = arch
        elif d == ".address_size":
            if self.version and self.version < (2, 3):
                raise PtxError(t.line, "Feature '.address_size directive' requires PTX ISA .version 2.3 or later")
            self.next()
            n = self.int_literal("address size")
            if n != 64:
                raise PtxError(t.line, f".address_size {n} is not supported (only 64)")
            self.address_size = n
        elif d in (".file", ".loc"):
            self.next()
            self.skip_line(t.line)
        elif d == ".section":
            # DWARF debug sections (nvcc -G / -lineinfo): data for debuggers, skipped
            self.next()
            while self.tok.kind != "eof" and not self.at("{"):
                self.next()
            self.expect("{", "to open the .section")
            depth = 1
            while depth:
                if self.tok.kind == "eof":
                    raise PtxError(t.line, "unterminated .section")
                depth += {"{": 1, "}": -1}.get(self.next().text, 0)
        elif d in (".visible", ".extern", ".weak", ".common"):
            self.next()
            self.module_statement_after_linkage(d)
        else:
            self.module_statement_after_linkage(None)

    def module_statement_after_linkage(self, linkage) -> None:
        t = self.tok
        if t.text == ".entry":
            self.next()
            self.function(is_entry=True, linkage=linkage)
        elif t.text == ".func":
            self.next()
            self.function(is_entry=False, linkage=linkage)
        elif t.text in (".global", ".const", ".shared", ".tex", ".surfref", ".texref",
                        ".samplerref", ".local"):
            var = self.variable(t.text[1:])
            if var.space not in ("global", "const", "shared"):
                raise PtxError(var.line, f"module-scope .{var.space} variable {var.name!r} "
                                         "is not supported by the emulator")
            if var.extern and var.space != "shared":
                raise PtxError(var.line, f"variable {var.name!r} needs a size")
            if var.space == "shared" and var.init is not None:
                raise PtxError(var.line, f".shared variable {var.name!r} cannot be initialized")
            if any(v.name == var.name for v in self.globals):
                raise PtxError(var.line, f"duplicate definition of {var.name!r}")
            self.globals.append(var)
        elif t.kind == "eof":
            raise PtxError(t.line, "unexpected end of file")
        else:
            raise PtxError(t.line, f"unexpected {t.text!r} at module scope")


    def function(self, is_entry: bool, linkage) -> None:
        start = self.tok
        ret_params = []
        if not is_entry and self.at("("):
            ret_params = self.param_list()
        name_tok = self.expect_kind("ident", "function name")
        name = name_tok.text
        params = self.param_list() if self.at("(") else []
        k = Kernel(name, name_tok.line, params, 0, is_entry, Registers(), [])
        k.return_params = ret_params     # meaningful only to `call` (not supported yet)
        offset = 0
        for p in params:
            offset = -(-offset // p.align) * p.align
            p.offset = offset
            offset += p.size
        k.param_size = offset
        # performance-tuning directives between the signature and the body
        while self.tok.kind == "directive":
            d = self.tok
            if d.text == ".pragma":
                self.next()
                self.expect_kind("string", "pragma string")
                self.expect(";")
                continue
            if d.text not in PERF_DIRECTIVES:
                break
            self.next()
            values = []
            if self.tok.kind == "int":
                values.append(self.int_literal())
                while self.accept(","):
                    values.append(self.int_literal())
            if d.text == ".maxntid":
                k.maxntid = tuple(values)
            elif d.text == ".reqntid":
                k.reqntid = tuple(values)
            elif d.text == ".minnctapersm":
                k.minnctapersm = values[0] if values else None
            elif d.text == ".maxnreg":
                k.maxnreg = values[0] if values else None
            elif d.text == ".reqnctapercluster":
                k.reqnctapercluster = tuple(values)
            elif d.text == ".explicitcluster":
                k.explicitcluster = True
            elif d.text == ".maxclusterrank":
                k.maxclusterrank = values[0] if values else None
        if self.accept(";"):            # a prototype (e.g. `.extern .func vprintf(...)`)
            if linkage != ".extern" and is_entry:
                raise PtxError(start.line, f"entry {name!r} has no body")
            self.functions.setdefault(name, k)
            return
        self.body(k)
        table = self.kernels if is_entry else self.functions
        if name in self.kernels or (name in self.functions and self.functions[name].body):
            raise PtxError(name_tok.line, f"duplicate definition of {name!r}")
        table[name] = k


    def body(self, k: Kernel) -> None:
        self.expect("{", "to open the function body")
        depth = 1
        # Nested { } blocks are register scopes (NVRTC's __syncthreads_count declares its
        # own %p1 inside one): a .reg that shadows a register of an enclosing scope gets
        # storage of its own, `%p1$2`, and the instructions of its block use that name.
        scopes: list[Scope] = [Scope()]
        renames: dict = {}
        prototypes: dict = {}           # label -> functions.Prototype (indirect calls)
        while True:
            t = self.tok
            if t.kind == "eof":
                raise PtxError(t.line, f"unterminated body of {k.name!r}")
            if t.text == "{":
                self.next()
                depth += 1
                scopes.append(Scope())
            elif t.text == "}":
                self.next()
                depth -= 1
                scopes.pop()
                renames = {n: m for sc in scopes for n, m in sc.items() if n != m}
                if depth == 0:
                    attach_prototypes(k, prototypes)
                    return
            elif t.text == ".reg":
                for name, storage in self.reg_decl(k, scopes).items():
                    if name != storage:
                        renames[name] = storage
            elif t.text in (".local", ".shared", ".const", ".global", ".param"):
                var = self.variable(t.text[1:])
                k.variables.append(var)
                # a plain .param holds call arguments/results (isa/calls.py inlines calls)
                call_param = var.space == "param" and var.init is None and not var.extern
                if not call_param and (var.space not in ("local", "shared") or var.init is not None
                                       or var.extern):
                    raise PtxError(var.line, f".{var.space} variable {var.name!r} in "
                                             f"{k.name!r} is not supported yet by the emulator")
            elif t.text in (".loc", ".file"):
                self.next()
                self.skip_line(t.line)
            elif t.text == ".pragma":
                self.next()
                self.expect_kind("string", "pragma string")
                self.expect(";")
            elif t.kind == "directive":
                raise PtxError(t.line, f"unsupported directive {t.text} in function body")
            elif t.kind == "ident" and self.toks[self.i + 1].text == ":":
                self.next()
                self.next()
                if self.tok.text == ".callprototype":
                    self.next()
                    prototypes[t.text] = parse_prototype(self, t.line)
                    continue
                k.body.append(t.text)                  # a label
            else:
                ins = self.instruction()
                if renames:
                    rename_registers(ins, renames)
                k.body.append(ins)



def parse_ptx(text: str) -> PtxModule:
    """Parse only (no decoding into executable form)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).split(b"\0", 1)[0].decode("utf-8", errors="replace")
    mod = Parser(text).parse()
    ptx_version = mod.version[0] * 10 + mod.version[1]
    binary_version = int(re.match(r"sm_(\d+)", mod.target).group(1))
    for k in list(mod.kernels.values()) + list(mod.functions.values()):
        k.ptx_version = ptx_version
        k.binary_version = binary_version
        k.target = mod.target
    _attach_module_variables(mod)
    return mod


def _referenced_names(k: Kernel) -> set:
    names = set()
    for ins in k.body:
        if isinstance(ins, Instruction):
            for op in ins.operands:
                if isinstance(op, Addr):
                    op = op.base
                if isinstance(op, Sym):
                    names.add(op.name)
    return names


def _attach_module_variables(mod: PtxModule) -> None:
    """Give each kernel the module-scope variables by name, and the module-scope .shared
    variables it (or any .func, which may be inlined into it) refers to."""
    table = {v.name: v for v in mod.globals}
    in_functions = set()
    for f in mod.functions.values():
        in_functions |= _referenced_names(f)
    for k in list(mod.kernels.values()) + list(mod.functions.values()):
        k.module_variables = table
        k.function_addresses = mod.function_addresses
        used = _referenced_names(k) | in_functions
        k.module_shared = [v for v in mod.globals if v.space == "shared" and v.name in used]

