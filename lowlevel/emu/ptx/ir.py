"""What the parser produces: PTX types, operands, instructions, kernels and modules.

Plain objects that say what the PTX text says; nothing here knows how an instruction
executes (the decoder, engine/decode.py, gives kernels their `compiled` form).
"""
from __future__ import annotations

from dataclasses import dataclass, field

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
class TensorAddr:
    """`[tensorMap, {c0, c1, ...}]`: cp.async.bulk.tensor's tensor-map address (a register or
    a parameter's name, with an optional offset) and its tensor coordinates."""
    base: Reg | Sym | None
    offset: int
    coords: Vec

    def __str__(self):
        return f"[{Addr(self.base, self.offset).__str__()[1:-1]}, {self.coords}]"


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
    reqnctapercluster: tuple | None = None   # __cluster_dims__: the cluster shape it needs
    explicitcluster: bool = False            # launched only with a cluster shape given
    maxclusterrank: int | None = None
    ptx_version: int = 0
    binary_version: int = 0
    target: str = ""               # the module's .target, suffix kept (sm_90a)
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

