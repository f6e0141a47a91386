"""The one registry: every instruction family declares itself here once, and the decoder,
the scheduler and the time model read the declarations.

The model is GPGPU-Sim's opcodes.def (one row per opcode: its function, its name, its pipe),
kept with the emulator's own strength: the rows are read once per kernel, at decode time,
when each basic block becomes one Python function; nothing here runs per instruction.

A family is one `Family` object, made in its module with `family(...)`:

    FAMILY = family("mbarrier", __name__, state=MbarrierState, parts=("mbarfast",))
    FAMILY.declare("mbarrier", emit=emit_mbarrier, waits=is_wait)

`declare` is one row per opcode (several opcodes may share a row's fields):

    emit        the emitter, emitter(gen, ins) writes the Python of one instruction; or a dict
                {form: emitter} when the opcode's forms are written by different functions
                (the half-type forms of `add` by emit_half, `.cc` by emit_carry)
    forms       the forms `emit` takes when it is one function (default: ANY, every form)
    pipe        its class for the time model (tools/timemodel.py): TENSOR, MEMORY, SFU,
                INTEGER, or TYPED (FP64, FP32 or integer by the instruction's type); or a
                function of the instruction that returns one of them
    ends_block  ins -> bool: the block ends after it (bar.sync: lanes park between blocks)
    follows     ins -> Instruction or None: what the next block starts with (bar.red's result)
    waits       ins -> bool: it is a wait that may fail and yield, alone in its block
    stalls      what such a wait waits for, for the deadlock report (engine/waits.py):
                "a phase that no thread can complete"
    warp_sync   ins -> "bar"/"data"/None: a *.sync warp instruction (engine/warpwait.py)

Every opcode is declared by exactly one family, once (a second declaration is an error), so
all the emitters of an opcode are found in one row (and defined in its family's module), and nothing depends on the order the
families are imported in. The forms: ANY takes every instruction of the opcode; a type
family ("f16", "bf16": the half types and their pairs; "i16x2", "tf32", "f8") takes the
instructions of that type; CARRY (`.cc`), SYMBOL (`mov d, variable`), SPARSE (`mma.sp`),
ASYNC (`st.async`, `red.async`), PACK (`cvt.pack`), XORSIGN/INT_RELU/BOOLOP (modifiers
tried before the type families) and VECTOR (.v2/.v4/.v8 of an opcode that has such an
emitter: vector atomics) take those forms. `lookup` tries the instruction's own forms
first, then ANY.

A family's per-launch state: `state` is a class (LaunchState) whose declared fields
(`__slots__`) are the family's memory across the instructions of one launch; the scheduler
makes one per launch, as the launch's attribute `<family>_state` (`C.mbarrier_state` in
generated code and runtime helpers), and calls its `new_batch` before each batch of CTAs. Only the family's own modules
(its module and its `parts`) touch it; another family calls a public function of it
(tests/emu/isa/test_families.py checks this). `hooks` are the few named functions the
decoder calls at load and in front of each instruction it emits, and the scheduler at a
barrier's release and for the address windows families define (ENGINE_HOOKS), each
provided by one family: the engine imports no family.

Besides the rows: `provide` names the runtime helpers the generated code calls (`_popc`,
`_shfl`, ...), and `special_register` the readers of special registers computed on the fly
(%clock, %lanemask_lt, ...).

Converting a module written against the old `register(emitter, *opcodes, forms=...)`:
- make `FAMILY = family("<name>", __name__)` once, and write each `register(fn, "a", "b",
  forms=F)` as `FAMILY.declare("a", "b", emit=fn, forms=F, pipe=...)` (pipe: TENSOR for a
  tensor-core opcode such as wgmma, MEMORY for loads, stores and copies, SFU, INTEGER, or the
  default TYPED); a form of an opcode that another family declares goes into that family's
  row as `emit={..., F: fn}`, its emitter written in that family's module (every emitter
  of an opcode is defined in one module: tests/emu/isa/test_families.py), what it shares
  with other opcodes kept in a helper module that declares no rows;
- state kept on the launch (`C.__dict__["x"]`, `getattr(C, "x", None)`, `C.x = ...` made
  lazily) becomes a field of the family's LaunchState (`state=` of `family`), read as
  `C.<name>_state.x`; renew per-batch fields in `new_batch` instead of comparing
  `C.first_cta`; state another family needs stays with its owner behind a public function;
- a predicate the decoder imported from the module (ends a block, a wait, a warp sync)
  becomes `ends_block=`/`waits=`/`warp_sync=` of the row; a function the scheduler called,
  or a watcher the decoder called before every emitter (the old `watch`), becomes a hook
  (ENGINE_HOOKS: `before_emit`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..ptx.ir import Instruction, Sym

ANY = ""
CARRY = "cc"
SYMBOL = "symbol"
SPARSE = "sp"          # mma.sp{::ordered_metadata}
ASYNC = "async"
VECTOR = "vector"
PACK = "pack"          # cvt.pack.sat (cvt.py)
# modifier forms tried before the type families: an opcode whose row has none of them is
# not affected
XORSIGN = "xorsign"    # min/max.xorsign.abs on half types
INT_RELU = "int_relu"  # min/max.relu.{s32,s16x2}
BOOLOP = "boolop"      # lop3.{and,or} d|p, ..., q
_VECTORS = {"v2", "v4", "v8"}
TYPE_FAMILIES = {"f16": "f16", "f16x2": "f16", "bf16": "bf16", "bf16x2": "bf16",
                 "s16x2": "i16x2", "u16x2": "i16x2", "tf32": "tf32",
                 "e4m3x2": "f8", "e5m2x2": "f8"}
HALF_FORMS = ("f16", "bf16")

# pipe classes for the time model
TENSOR = "tensor"      # tensor-core FLOPs from the shape (mma, wmma, wgmma)
MEMORY = "memory"      # global bytes (global or generic), else the load/store unit
SFU = "sfu"            # special functions
INTEGER = "integer"    # the integer pipe whatever the type (mov)
TYPED = "typed"        # FP64, FP32 (f32 and the half types) or integer, by the type
PIPES = (TENSOR, MEMORY, SFU, INTEGER, TYPED)

# the functions a family may give the decoder and the scheduler (at most one family each)
ENGINE_HOOKS = (
    "load_kernel",       # (kernel, module): rewrite a kernel's body before it is decoded
                         # (calls.py inlines the `call`s of .func bodies)
    "before_emit",       # (gen, ins): called before every instruction's emitter, may emit
                         # a check in front of it (wgmma_async.py: an instruction naming a
                         # register of a pending wgmma.mma_async)
    "barrier_ids",       # (C, ids) -> the barrier ids lanes parked at (barrier.sync %r)
    "barrier_groups",    # (C, cta, bid, live) -> (group, live of group): CTAs a barrier spans
    "barrier_release",   # (C, lanes, blocks, keys): the lanes a barrier releases (bar.red)
    "cta_name",          # (C, position) -> "(x,y,z)" of a CTA of a cluster launch
    "cluster_ctaids",    # (C, first, count) -> %ctaid.x/y/z of a batch of a cluster launch
    "remote_shared",     # (C, addresses, bases, iid) -> (offsets, bases): .shared::cluster
                         # addresses that name another CTA of the cluster
    "param_window",      # (C, offsets, nbytes, size, iid, kind, active, sub) -> (array,
                         # indices): generic accesses in the kernel parameter window
)


class LaunchState:
    """A family's state for one launch. The scheduler makes it (`State(launch)`) when the
    launch starts, and calls `new_batch(launch)` before each batch of CTAs. A state names
    its fields in `__slots__` (and sets each in __init__), so a field it did not declare
    cannot appear on it."""

    __slots__ = ()

    def __init__(self, launch) -> None:
        pass

    def new_batch(self, launch) -> None:
        pass


@dataclass
class Row:
    """One opcode's declaration."""
    opcode: str
    family: Family
    emitters: dict[str, Callable]
    pipe: str | Callable
    ends_block: Callable | None = None
    follows: Callable | None = None
    waits: Callable | None = None
    warp_sync: Callable | None = None
    stalls: str = "what no thread will provide"


@dataclass
class Family:
    name: str
    module: str
    state: type | None = None
    parts: tuple = ()                    # other modules whose code is this family's
    rows: dict[str, Row] = field(default_factory=dict)

    @property
    def state_attr(self) -> str | None:
        """The launch attribute that holds this family's state."""
        return f"{self.name}_state" if self.state is not None else None

    def declare(self, *opcodes: str, emit, forms=(ANY,), pipe=TYPED, ends_block=None,
                follows=None, waits=None, warp_sync=None, stalls=None) -> None:
        """The row of each of `opcodes` (see the module's docstring)."""
        emitters = dict(emit) if isinstance(emit, dict) else dict.fromkeys(forms, emit)
        if not callable(pipe) and pipe not in PIPES:
            raise ValueError(f"{self.name}: unknown pipe class {pipe!r} (one of {PIPES})")
        for opcode in opcodes:
            other = OPCODES.get(opcode)
            if other is not None:
                raise RuntimeError(f"opcode {opcode} declared twice: by family {other.family.name} "
                                   f"and family {self.name}")
            row = Row(opcode, self, emitters, pipe, ends_block, follows, waits, warp_sync)
            if stalls is not None:
                row.stalls = stalls
            OPCODES[opcode] = self.rows[opcode] = row
            for form, emitter in emitters.items():
                EMITTERS[opcode, form] = emitter


FAMILIES: dict[str, Family] = {}
OPCODES: dict[str, Row] = {}
EMITTERS: dict[tuple[str, str], Callable] = {}        # (opcode, form) -> emitter, from the rows
HOOKS: dict[str, Callable] = {}
RUNTIME: dict[str, object] = {}
SPECIAL_READERS: dict[str, Callable] = {}


def family(name: str, module: str, *, state: type | None = None, parts=(), hooks=None) -> Family:
    """Make family `name`, declared in `module` (its __name__)."""
    if name in FAMILIES:
        raise RuntimeError(f"family {name} declared twice")
    fam = FAMILIES[name] = Family(name, module.rsplit(".", 1)[-1], state, tuple(parts))
    for hook, fn in (hooks or {}).items():
        if hook not in ENGINE_HOOKS:
            raise ValueError(f"{name}: unknown engine hook {hook!r} (one of {ENGINE_HOOKS})")
        if hook in HOOKS:
            raise RuntimeError(f"engine hook {hook} provided twice")
        HOOKS[hook] = fn
    return fam


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


def forms_of(ins: Instruction) -> list[str]:
    """The forms `ins` has, most specific first, ANY last."""
    families = [TYPE_FAMILIES[m] for m in ins.mods if m in TYPE_FAMILIES]
    # an 8-bit float pair decides wherever it stands (cvt.rn.f16x2.e4m3x2 is emit_cvt_f8's)
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
    row = OPCODES.get(ins.opcode)
    if row is None:
        return None
    for form in forms_of(ins):
        emitter = row.emitters.get(form)
        if emitter is not None:
            return emitter
    return None


@dataclass(frozen=True)
class BlockRole:
    """What an instruction means for the basic blocks around it (decode.split_blocks)."""
    ends_block: bool = False
    follows: Instruction | None = None
    waits: bool = False
    warp_sync: str | None = None


_PLAIN = BlockRole()


def block_role(ins: Instruction) -> BlockRole:
    """`ins`'s role from its row's declarations (decode time only)."""
    row = OPCODES.get(ins.opcode)
    if row is None or not (row.ends_block or row.follows or row.waits or row.warp_sync):
        return _PLAIN
    return BlockRole(bool(row.ends_block and row.ends_block(ins)),
                     row.follows(ins) if row.follows else None,
                     bool(row.waits and row.waits(ins)),
                     row.warp_sync(ins) if row.warp_sync else None)


def stalls_on(ins: Instruction) -> str:
    """What a wait `ins` that cannot succeed waits for (its row's `stalls`)."""
    row = OPCODES.get(ins.opcode)
    return row.stalls if row is not None else Row.stalls


def pipe_of(ins: Instruction) -> str:
    """The time model's pipe class of `ins` (TYPED for opcodes no family declares: bra,
    ret, exit)."""
    row = OPCODES.get(ins.opcode)
    if row is None:
        return TYPED
    return row.pipe(ins) if callable(row.pipe) else row.pipe


def make_states(launch) -> list[LaunchState]:
    """Make each family's state for `launch` (as its attribute `<family>_state`); returns
    those that renew themselves per batch (the scheduler calls their new_batch)."""
    renewed = []
    for fam in FAMILIES.values():
        if fam.state is not None:
            state = fam.state(launch)
            setattr(launch, fam.state_attr, state)
            if type(state).new_batch is not LaunchState.new_batch:
                renewed.append(state)
    return renewed
