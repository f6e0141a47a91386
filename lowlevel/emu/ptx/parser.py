"""PTX text -> a decoded module: kernels, their parameter layout, their instructions.

The parser is a small tokenizer plus a recursive-descent reader of the PTX grammar that
nvcc/NVRTC emit and that people write by hand. It produces plain objects (`PtxModule`,
`Kernel`, `Instruction`, operands); it knows nothing about how instructions execute.

`load_ptx` is the entry point the driver calls: it parses, then hands every kernel to the
code generator (`codegen.compile_kernel`), which decodes the body into basic blocks and
refuses, with a `PtxError` naming the instruction and its line, anything the engine cannot
execute. So a module that loads is a module that runs, and decoding happens once.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from ..engine.faults import PtxError
from .registers import Registers

# --- types --------------------------------------------------------------------------

# PTX fundamental types: name -> (size in bytes, kind). kind: u s b f pred
TYPES = {
    "u8": (1, "u"), "u16": (2, "u"), "u32": (4, "u"), "u64": (8, "u"),
    "s8": (1, "s"), "s16": (2, "s"), "s32": (4, "s"), "s64": (8, "s"),
    "b8": (1, "b"), "b16": (2, "b"), "b32": (4, "b"), "b64": (8, "b"), "b128": (16, "b"),
    "f16": (2, "f"), "f16x2": (4, "f"), "bf16": (2, "f"), "bf16x2": (4, "f"),
    "f32": (4, "f"), "f64": (8, "f"), "pred": (1, "pred"),
}

SPECIAL_REGISTERS = {
    "%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%smid",
    "%nsmid", "%gridid", "%clock", "%clock64", "%globaltimer", "%lanemask_eq",
    "%lanemask_lt", "%lanemask_le", "%lanemask_gt", "%lanemask_ge", "%dynamic_smem_size",
    "%total_smem_size", "%envreg", "%pm", "%clusterid", "%nclusterid", "%cluster_ctaid",
}

# --- operands -----------------------------------------------------------------------


@dataclass
class Reg:
    """A register (or special register like %tid.x), read as written."""
    name: str
    negated: bool = False          # `!%p` as a setp/selp predicate source

    def __str__(self):
        return ("!" if self.negated else "") + self.name


@dataclass
class Imm:
    """An immediate. `value` is a Python int, or a float; `bits` is set for 0f/0d literals
    (the exact bit pattern, so NaN payloads survive) with `width` 4 or 8."""
    value: int | float
    bits: int | None = None
    width: int = 0
    text: str = ""

    @property
    def is_float(self):
        return isinstance(self.value, float)

    def __str__(self):
        return self.text or str(self.value)


@dataclass
class Sym:
    """A bare name: a label (branch target), a parameter or variable name."""
    name: str

    def __str__(self):
        return self.name


@dataclass
class Vec:
    """`{a, b, c, d}`: elements are Reg, Imm, or None for the `_` sink."""
    elems: list

    def __str__(self):
        return "{" + ", ".join("_" if e is None else str(e) for e in self.elems) + "}"


@dataclass
class Addr:
    """`[base+offset]`; base is a Reg or a Sym (parameter / variable name) or None
    (absolute immediate address)."""
    base: Reg | Sym | None
    offset: int = 0

    def __str__(self):
        b = str(self.base) if self.base is not None else ""
        if self.offset and b:
            return f"[{b}+{self.offset}]"
        return f"[{b or self.offset}]"


@dataclass
class ArgList:
    """`(a, b)`: the return or argument list of a `call`."""
    elems: list

    def __str__(self):
        return "(" + ", ".join(str(e) for e in self.elems) + ")"


@dataclass
class PredPair:
    """`%p|%q` destination of setp: q receives the complement."""
    p: Reg
    q: Reg | None

    def __str__(self):
        return f"{self.p}|{self.q}" if self.q else str(self.p)


# --- module objects -----------------------------------------------------------------


@dataclass
class Instruction:
    opcode: str                    # "ld"
    mods: list[str]                # ["global", "v4", "f32"] in source order
    operands: list
    line: int
    text: str                      # source text (for messages)
    guard: Reg | None = None       # @%p / @!%p
    syntax_error: Exception | None = None   # operands the parser could not read

    def __str__(self):
        return self.text


@dataclass
class Param:
    name: str
    type: str                      # PTX type, e.g. "u64", "b8" for byte arrays
    size: int
    align: int
    offset: int = 0
    count: int = 1                 # array length for `name[16]`
    is_ptr: bool = False


@dataclass
class Variable:
    """A variable: module scope (.global/.const/.shared) or function scope."""
    name: str
    space: str
    type: str
    size: int
    align: int
    init: bytes | None = None
    line: int = 0
    extern: bool = False           # `.extern .shared ... name[]`: dynamic shared memory


@dataclass
class Kernel:
    name: str
    line: int
    params: list[Param]
    param_size: int
    is_entry: bool
    registers: Registers           # register name -> PTX type (ranges kept whole)
    body: list                     # Instruction and Label (str) items in order
    variables: list[Variable] = field(default_factory=list)
    maxntid: tuple | None = None
    reqntid: tuple | None = None
    minnctapersm: int | None = None
    maxnreg: int | None = None
    ptx_version: int = 0
    binary_version: int = 0
    compiled: object = field(default=None, repr=False)   # codegen.CompiledKernel (load_ptx)
    module_shared: list = field(default_factory=list)    # module-scope .shared it may use
    module_variables: dict = field(default_factory=dict, repr=False)  # name -> Variable

    @property
    def num_regs(self) -> int:
        # Honest estimate: declared registers in 32-bit units (predicates live in their
        # own register file on real hardware), capped at the architectural 255.
        words = 0
        for t, count in self.registers.count_by_type().items():
            if t != "pred":
                words += max(1, TYPES[t][0] // 4) * count
        return min(255, max(words, 1))

    @property
    def shared_bytes(self) -> int:
        """Static shared memory per CTA (function- and module-scope variables it uses)."""
        return layout_variables(self.shared_variables)[1]

    @property
    def shared_variables(self) -> list:
        return self.module_shared + [v for v in self.variables if v.space == "shared"]

    @property
    def local_bytes(self) -> int:
        return layout_variables([v for v in self.variables if v.space == "local"])[1]

    @property
    def max_threads_per_block(self) -> int:
        for dims in (self.reqntid, self.maxntid):
            if dims:
                n = 1
                for d in dims:
                    n *= d
                return min(n, 1024)
        return 1024

    @property
    def instruction_count(self) -> int:
        return sum(1 for item in self.body if isinstance(item, Instruction))


def layout_variables(variables) -> tuple[dict, int]:
    """Offsets of variables placed in declaration order, each at its alignment, and the
    total size. `.extern` (dynamic shared) arrays take no room here: they all start at
    the end of the static part (see spaces.py)."""
    offsets, end = {}, 0
    for v in variables:
        if v.extern:
            continue
        end = -(-end // v.align) * v.align
        offsets[v.name] = end
        end += v.size
    return offsets, end


@dataclass
class PtxModule:
    version: tuple
    target: str
    address_size: int
    kernels: dict[str, Kernel]
    functions: dict[str, Kernel]
    globals: list[Variable]

    def info_log(self) -> str:
        lines = [f"ptx {self.version[0]}.{self.version[1]} for {self.target} "
                 f"(emulated: decoded to numpy basic blocks)"]
        for k in self.kernels.values():
            nblocks = len(k.compiled.blocks) if k.compiled else 0
            lines.append(
                f"Function properties for {k.name}: {k.num_regs} registers, "
                f"{k.shared_bytes} bytes smem, {k.local_bytes} bytes lmem, "
                f"{k.param_size} bytes params, {k.instruction_count} instructions "
                f"decoded in {nblocks} basic blocks")
        return "\n".join(lines)


# --- tokenizer ----------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<fhex>0[fF][0-9a-fA-F]{8}(?![\w$]))
  | (?P<dhex>0[dD][0-9a-fA-F]{16}(?![\w$]))
  | (?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>0[xX][0-9a-fA-F]+U?|0[bB][01]+U?|\d+U?)
  | (?P<ident>[%A-Za-z_$][\w$]*(?:\.[\w$]+(?:::[\w$]+)*)*)
  | (?P<directive>\.[A-Za-z_][\w$]*(?:::[\w$]+)*)
  | (?P<punct>[{}()\[\],;:@!|+\-<>=])
""", re.VERBOSE)


@dataclass
class Tok:
    kind: str
    text: str
    line: int
    pos: int


_MAX_SHADOWING_RANGE = 1 << 16
_MAX_OPERAND_NESTING = 8           # call argument lists and vectors nest one or two deep
_MAX_INITIALIZER_NESTING = 64      # one level per array dimension


class _Scope(dict):
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


def _rename_registers(ins: Instruction, renames: dict) -> None:
    """Point the register operands of `ins` at the storage `renames` gives their names."""
    def op(o):
        if isinstance(o, Reg):
            return Reg(renames[o.name], o.negated) if o.name in renames else o
        if isinstance(o, Sym):
            return Sym(renames[o.name]) if o.name in renames else o
        if isinstance(o, Addr) and o.base is not None:
            return Addr(op(o.base), o.offset)
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


def _strip_comments(src: str) -> str:
    """Blank out // and /* */ comments, keeping newlines so line numbers stay right."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == '"':
            j = src.find('"', i + 1)
            j = n - 1 if j < 0 else j
            out.append(src[i:j + 1])
            i = j + 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            if j < 0:
                raise PtxError(src.count("\n", 0, i) + 1, "unterminated /* comment")
            out.append(re.sub(r"[^\n]", " ", src[i:j + 2]))
            i = j + 2
        else:
            j = i
            while j < n and src[j] not in '"/':
                j += 1
            if j == i:          # a lone '/'
                j = i + 1
            out.append(src[i:j])
            i = j
    return "".join(out)


def tokenize(src: str) -> list[Tok]:
    src = _strip_comments(src)
    _refuse_non_ascii(src)
    toks = []
    pos, line = 0, 1
    n = len(src)
    while pos < n:
        m = _TOKEN.match(src, pos)
        if not m:
            raise PtxError(line, f"unexpected character {src[pos]!r}")
        kind = m.lastgroup
        text = m.group()
        if kind == "ws":
            line += text.count("\n")
        else:
            toks.append(Tok(kind, text, line, pos))
        pos = m.end()
    toks.append(Tok("eof", "", line, n))
    return toks


def _refuse_non_ascii(src: str) -> None:
    """ptxas takes any bytes inside comments (invalid UTF-8 too) and refuses anything but
    ASCII elsewhere, string literals included ("Unexpected non-ASCII character"). `src`
    has its comments blanked; bytes that were not UTF-8 arrive as U+FFFD or as lone
    surrogates, both non-ASCII."""
    if src.isascii():
        return
    pos = next(i for i, c in enumerate(src) if ord(c) > 127)
    raise PtxError(src.count("\n", 0, pos) + 1,
                   f"unexpected non-ASCII character {src[pos]!r} (outside comments PTX is ASCII)")


# --- parser -------------------------------------------------------------------------

_PERF_DIRECTIVES = {".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg",
                    ".maxclusterrank", ".reqnctapercluster", ".explicitcluster",
                    ".noreturn", ".blocksareclusters"}


class _Parser:
    def __init__(self, src: str):
        self.src = _strip_comments(src)
        self.toks = tokenize(src)
        self.i = 0
        self.version = None
        self.target = None
        self.address_size = 64
        self.kernels: dict[str, Kernel] = {}
        self.functions: dict[str, Kernel] = {}
        self.globals: list[Variable] = []

    # token helpers
    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def next(self) -> Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def at(self, text: str) -> bool:
        return self.tok.text == text

    def accept(self, text: str) -> bool:
        if self.tok.text == text:
            self.i += 1
            return True
        return False

    def expect(self, text: str, what: str = "") -> Tok:
        t = self.tok
        if t.text != text:
            found = repr(t.text) if t.kind != "eof" else "end of file"
            raise PtxError(t.line, f"expected {text!r}{' ' + what if what else ''}, found {found}")
        self.i += 1
        return t

    def expect_kind(self, kind: str, what: str) -> Tok:
        t = self.tok
        if t.kind != kind:
            found = repr(t.text) if t.kind != "eof" else "end of file"
            raise PtxError(t.line, f"expected {what}, found {found}")
        self.i += 1
        return t

    def int_literal(self, what: str = "integer") -> int:
        neg = self.accept("-")
        t = self.expect_kind("int", what)
        v = _parse_int(t.text)
        return -v if neg else v

    def skip_line(self, line: int) -> None:
        """Skip the remaining tokens of a line-oriented directive (.loc, .file)."""
        while self.tok.kind != "eof" and self.tok.line == line and self.tok.text not in ";":
            self.i += 1
        self.accept(";")

    # module level
    def parse(self) -> PtxModule:
        while self.tok.kind != "eof":
            self.module_statement()
        if self.version is None:
            raise PtxError(1, "missing .version directive")
        if self.target is None:
            raise PtxError(1, "missing .target directive")
        return PtxModule(self.version, self.target, self.address_size, self.kernels,
                         self.functions, self.globals)

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
            if not 6 <= major <= 9:
                raise PtxError(v.line, f"unsupported PTX ISA version {v.text} (accepted: 6.x to 9.x)")
            self.version = (major, minor)
        elif d == ".target":
            self.next()
            targets = [self.expect_kind("ident", "target name").text]
            while self.accept(","):
                targets.append(self.expect_kind("ident", "target option").text)
            arch = targets[0]
            if not re.fullmatch(r"sm_\d+[af]?", arch):
                raise PtxError(t.line, f"unsupported target {arch!r}")
            for opt in targets[1:]:
                if opt not in ("texmode_unified", "texmode_independent", "debug",
                               "map_f64_to_f32"):
                    raise PtxError(t.line, f"unsupported .target option {opt!r}")
                if opt == "map_f64_to_f32":
                    raise PtxError(t.line, ".target map_f64_to_f32 is not supported")
            self.target = arch
        elif d == ".address_size":
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
        if self.accept("="):
            values = self.initializer(line, name)
            if unsized:
                count = -(-len(values) // vec)
            elif len(values) > count * vec:
                raise PtxError(line, f"initializer of {name!r} has {len(values)} values "
                                     f"for {count * vec} elements")
            init = _pack_values(line, name, vtype, values)
        elif unsized:
            if space != "shared":
                raise PtxError(line, f"array {name!r} needs a size")
            count = 0                   # dynamic shared memory: sized at launch
        self.expect(";", "after variable declaration")
        var = Variable(name, space, vtype, elem * count, align or elem, init, line)
        var.extern = unsized and init is None
        return var

    def initializer(self, line: int, name: str, depth: int = 0) -> list:
        """The flattened scalar values of `= 1`, `= {1, 2}`, `= {{1, 2}, {3, 4}}`."""
        values = []
        if self.at("{") and depth >= _MAX_INITIALIZER_NESTING:
            raise PtxError(self.tok.line, f"initializer of {name!r} nested more than "
                                          f"{_MAX_INITIALIZER_NESTING} deep in {{ }}")
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
        raise PtxError(line, f"initializer of {name!r}: only numeric constants are supported "
                             f"by the emulator, found {t.text!r}")

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
            if d.text not in _PERF_DIRECTIVES:
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

    def body(self, k: Kernel) -> None:
        self.expect("{", "to open the function body")
        depth = 1
        # Nested { } blocks are register scopes (NVRTC's __syncthreads_count declares its
        # own %p1 inside one): a .reg that shadows a register of an enclosing scope gets
        # storage of its own, `%p1$2`, and the instructions of its block use that name.
        scopes: list[_Scope] = [_Scope()]
        renames: dict = {}
        while True:
            t = self.tok
            if t.kind == "eof":
                raise PtxError(t.line, f"unterminated body of {k.name!r}")
            if t.text == "{":
                self.next()
                depth += 1
                scopes.append(_Scope())
            elif t.text == "}":
                self.next()
                depth -= 1
                scopes.pop()
                renames = {n: m for sc in scopes for n, m in sc.items() if n != m}
                if depth == 0:
                    return
            elif t.text == ".reg":
                for name, storage in self.reg_decl(k, scopes).items():
                    if name != storage:
                        renames[name] = storage
            elif t.text in (".local", ".shared", ".const", ".global", ".param"):
                var = self.variable(t.text[1:])
                k.variables.append(var)
                if var.space == "param" and var.init is None and not var.extern:
                    pass                  # call arguments/results (calls.py inlines calls)
                elif var.space not in ("local", "shared") or var.init is not None or var.extern:
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
                k.body.append(t.text)                  # a label
            else:
                ins = self.instruction()
                if renames:
                    _rename_registers(ins, renames)
                k.body.append(ins)

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
                if n > _MAX_SHADOWING_RANGE:
                    raise PtxError(line, f"{name}<{n}> shadows registers of an enclosing "
                                         f"scope; the emulator supports that for ranges of "
                                         f"at most {_MAX_SHADOWING_RANGE} registers")
                names = [f"{name}{j}" for j in range(n)]
            for nm in names:
                store = nm
                if scopes and len(scopes) > 1 and any(sc.store(nm) for sc in scopes[:-1]):
                    store = f"{nm}${len(k.registers.named)}"
                    while store in k.registers:
                        store += "$"
                elif scopes:
                    store = next((sc.store(nm) for sc in reversed(scopes) if sc.store(nm)), nm)
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
        if t.text in ("(", "{") and depth >= _MAX_OPERAND_NESTING:
            # ptxas takes constant expressions nested thousands deep; the emulator takes
            # no constant expressions at all, and must not recurse without bound
            raise PtxError(t.line, f"operand nested more than {_MAX_OPERAND_NESTING} deep in "
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
            if t.text.startswith("%"):
                if self.accept("|"):
                    q = self.expect_kind("ident", "predicate").text
                    return PredPair(Reg(t.text), Reg(q))
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
            v = _parse_int(t.text)
            return Imm(-v if neg else v, None, 0, sign + t.text)
        raise PtxError(t.line, f"expected an immediate, found {t.text!r}")

    def address(self) -> Addr:
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
        self.expect("]", "to close the address")
        return Addr(base, offset)


def _pack_values(line: int, name: str, vtype: str, values: list) -> bytes:
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


def _parse_int(text: str) -> int:
    t = text.rstrip("U")
    if t[:2] in ("0x", "0X"):
        return int(t[2:], 16)
    if t[:2] in ("0b", "0B"):
        return int(t[2:], 2)
    if len(t) > 1 and t[0] == "0":
        return int(t, 8)
    return int(t)


# --- entry point --------------------------------------------------------------------


def parse_ptx(text: str) -> PtxModule:
    """Parse only (no decoding into executable form)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).split(b"\0", 1)[0].decode("utf-8", errors="replace")
    mod = _Parser(text).parse()
    ptx_version = mod.version[0] * 10 + mod.version[1]
    binary_version = int(re.match(r"sm_(\d+)", mod.target).group(1))
    for k in list(mod.kernels.values()) + list(mod.functions.values()):
        k.ptx_version = ptx_version
        k.binary_version = binary_version
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
        used = _referenced_names(k) | in_functions
        k.module_shared = [v for v in mod.globals if v.space == "shared" and v.name in used]


def load_ptx(text: str | bytes) -> PtxModule:
    """Parse PTX and decode every kernel for the engine.

    Raises PtxError(line, message) for syntax errors and for anything the engine cannot
    execute, so nothing is ever run wrongly.
    """
    from ..engine.decode import compile_kernel     # codegen imports this module's types

    from ..isa.calls import inline_calls

    mod = parse_ptx(text)
    for k in mod.kernels.values():
        inline_calls(k, mod)                # `call` of .func bodies: inlined per call site
        k.compiled = compile_kernel(k)
    return mod


__all__ = ["load_ptx", "parse_ptx", "PtxModule", "Kernel", "Param", "Instruction",
           "Reg", "Imm", "Sym", "Vec", "Addr", "PredPair", "Variable", "TYPES", "PtxError"]
