"""PTX instructions -> Python source, one function per basic block, built once per kernel.

A kernel body is split into basic blocks (leaders: the first instruction, every label,
the instruction after a branch/ret/exit). Each block becomes one Python function

    def block_3(R, C):
        v5 = R[5]; v9 = R[9]                       # registers the block touches
        v9 = (v5 + K0)                             # line 31: add.s32 %r9, %r5, 4
        ...
        R[9] = v9                                  # registers it wrote
        return 4                                   # the next block (or a branch tuple)

working on whole numpy arrays: `R` is the register file of the threads being run (one
array, or one numpy scalar when uniform, per register), `C` the launch context that does
memory accesses and knows which threads are active (scheduler.py). Registers hold raw bits
(uint8/16/32/64, bool for predicates); an instruction views them as its type
(`.view(np.float32)`), so values round-trip bit-exactly.

A block returns the index of the next block, or `(p, taken, not_taken)` for a conditional
branch or exit on predicate array `p`; the engine decides whether the threads diverge.
EXIT (= number of blocks) is the pseudo-block of finished threads.

How each instruction is written is the business of its family in isa/ (looked up in
isa/registry.py); this module makes the blocks, the register slots and the namespace the
code runs in. Anything no family can translate raises PtxError naming the instruction and
line: unsupported PTX is refused at load, never executed wrongly.

`load_ptx` is the entry point the driver calls: parse (ptx/), inline the calls of .func
bodies (isa/calls.py), decode every kernel. So a module that loads is a module that runs,
and decoding happens once.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .. import isa  # noqa: F401  (every instruction family registers itself: isa/__init__.py)
from ..isa import divsqrt, fma32, numerics
from ..isa.addressing import kernel_layout
from ..isa.operands import Mods, operands, unsupported, view_name
from ..isa.registry import HOOKS, RUNTIME, SPECIAL_READERS, block_role, lookup
from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Imm, Instruction, Kernel, PtxModule, Reg, Sym
from ..ptx.parser import parse_ptx

# Special registers the engine provides per thread (slots filled at batch setup); the others
# of SPECIAL_PREFIXES are read by the readers the ISA families register (SPECIAL_READERS).
PER_THREAD = ("%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid")
SPECIALS = {f"{n}.{d}" for n in PER_THREAD[:4] for d in "xyz"} | set(PER_THREAD[4:])


@dataclass
class Block:
    index: int
    labels: list[str]
    instructions: list[Instruction]
    source: str = ""
    fn: object = None
    reads: tuple = ()            # register slots loaded by the block
    writes: tuple = ()           # register slots stored back
    n_instructions: int = 0
    barrier: tuple | None = None     # (id, thread count or 0) when the block ends in bar.sync
    reduction: str | None = None     # "popc"/"and"/"or" when that barrier is a bar.red (barred.py)
    waits: bool = False              # the block is one mbarrier wait (engine/waits.py)
    warp_sync: str | None = None     # "bar"/"data": it starts with a *.sync warp instruction


@dataclass
class CompiledKernel:
    kernel: Kernel = field(repr=False)
    blocks: list[Block]
    slots: dict[str, int]                  # register name -> slot in the register file
    slot_dtypes: list                      # storage dtype per slot
    specials: dict[str, int]               # special register name -> slot
    instructions: list[Instruction] = field(default_factory=list)   # by id, for faults
    layout: object = None                  # spaces.Layout: shared/local variable offsets
    namespace: dict = field(default=None, repr=False)   # globals of the generated code
    global_names: dict = field(default_factory=dict)    # module variable -> namespace name
    uses_shared: bool = False              # touches shared memory (by name or address)
    uses_local: bool = False
    reductions: bool = False               # has bar.red blocks (engine calls barred.release)
    cluster_barriers: bool = False         # has barrier.cluster.wait blocks (isa/cluster.py)
    waits: bool = False                    # has mbarrier wait blocks (engine/waits.py)
    wait_blocks: object = None             # bool per block: an mbarrier wait (waits.py)
    warp_blocks: object = None             # per block: 0, 1 bar.warp.sync, 2 data (warpwait.py)
    warp_signatures: object = None         # per block: its warp instruction's opcode.mods (warpwait.py)
    exiting_blocks: object = None          # per PC: an unguarded ret/exit (isa/warpmask.py)
    target: str = "sm_80"                  # the module's .target
    independent_threads: bool = True       # sm_70+: warp instructions wait for named lanes

    @property
    def exit_pc(self) -> int:
        return len(self.blocks)

    @property
    def bytes_per_thread(self) -> int:
        return sum(np.dtype(d).itemsize for d in self.slot_dtypes)


# --- the per-block generator --------------------------------------------------------


class BlockGen:
    """Accumulates the Python source of one block and the constants it refers to."""

    def __init__(self, ck: CompiledKernel, namespace: dict):
        self.ck = ck
        self.ns = namespace
        self.lines: list[str] = []
        self.used: dict[int, None] = {}       # slots touched, in order
        self.written: dict[int, None] = {}
        self.tmp = 0
        # float64 copies of float32 registers for a run of fma.rn.f32 (arith.py): slot ->
        # name; forgotten when the slot is written and at any other instruction
        self.wide: dict[int, str] = {}
        self.fmas: list = []                  # a run of fmas not emitted yet (fma32.queue)
        self.fma_dests: set[int] = set()      # the slots they write

    # names
    def fresh(self) -> str:
        self.tmp += 1
        return f"t{self.tmp}"

    def const(self, value) -> str:
        key = (type(value).__name__, value.tobytes() if isinstance(value, np.generic) else value)
        name = self.ns["_consts"].get(key)
        if name is None:
            name = f"K{len(self.ns['_consts'])}"
            self.ns["_consts"][key] = name
            self.ns[name] = value
        return name

    def emit(self, line: str) -> None:
        self.lines.append(line)

    # registers
    def slot(self, ins: Instruction, reg: Reg) -> int:
        s = self.ck.slots.get(reg.name)
        if s is None:
            rtype = self.ck.kernel.registers.get(reg.name)
            if rtype is not None:       # storage for a declared register on its first use
                s = self.ck.slots[reg.name] = len(self.ck.slot_dtypes)
                self.ck.slot_dtypes.append(np.bool_ if rtype == "pred" else numerics.UINT[TYPES[rtype][0]])
            elif reg.name in SPECIALS:
                s = self.ck.specials.get(reg.name)
                if s is None:
                    s = len(self.ck.slot_dtypes)
                    self.ck.specials[reg.name] = s
                    self.ck.slot_dtypes.append(np.uint32)
            elif reg.name.split(".")[0] in SPECIAL_PREFIXES:
                raise unsupported(ins, f"special register {reg.name}")
            else:
                raise PtxError(ins.line, f"undeclared register {reg.name}: {ins.text}")
        self.used[s] = None
        return s

    def widened(self, ins: Instruction, op) -> str:
        """A float64 value of float32 operand `op`, converted once while it is unchanged in
        a run of fmas (sgemm's micro-tile uses every operand four times)."""
        if not isinstance(op, Reg):
            return f"_F64({self.read(ins, op, 'f32')})"
        s = self.slot(ins, op)
        name = self.wide.get(s)
        if name is None:
            name = self.wide[s] = self.fresh()
            self.emit(f"{name} = {self.read(ins, op, 'f32')}.astype(_F64)")
        return name

    def reg_type(self, reg: Reg) -> str:
        if reg.name in self.ck.specials or reg.name in SPECIALS:
            return "u32"
        return self.ck.kernel.registers[reg.name]

    def read(self, ins: Instruction, op, ptype: str) -> str:
        """An expression for operand `op` seen as PTX type `ptype` (a numpy value of
        the view dtype: uint for .u/.b, int for .s, float for .f, bool for .pred)."""
        if isinstance(op, Reg) and op.name in SPECIAL_READERS:     # %clock, %lanemask_lt...
            return SPECIAL_READERS[op.name](self, ins, ptype)
        size, kind = TYPES[ptype]
        if isinstance(op, Reg):
            s = self.slot(ins, op)
            rtype = self.reg_type(op)
            var = f"v{s}"
            if kind == "pred" or rtype == "pred":
                if (kind == "pred") != (rtype == "pred"):
                    raise PtxError(ins.line, f"{op.name} is not a .{ptype} operand: {ins.text}")
                return f"(~{var})" if op.negated else var
            if op.negated:
                raise PtxError(ins.line, f"'!' applies only to predicates: {ins.text}")
            rsize = TYPES[rtype][0]
            if rsize != size:
                var = f"{var}.astype(_U{size * 8})"
            return var if kind in ("u", "b") else f"{var}.view({view_name(ptype)})"
        if isinstance(op, Imm):
            return self.const(imm_value(ins, op, ptype))
        raise PtxError(ins.line, f"expected a register or immediate, found {op}: {ins.text}")

    def write(self, ins: Instruction, op, expr: str, ptype: str, guard: str | None) -> None:
        """Assign `expr` (a value of ptype's view dtype) to register operand `op`."""
        if op is None:
            return                              # the `_` sink
        if not isinstance(op, Reg) or op.negated:
            raise PtxError(ins.line, f"destination must be a register, found {op}: {ins.text}")
        if op.name in SPECIALS or op.name.split(".")[0] in SPECIAL_PREFIXES:
            raise PtxError(ins.line, f"cannot write special register {op.name}: {ins.text}")
        s = self.slot(ins, op)
        rtype = self.reg_type(op)
        size, kind = TYPES[ptype]
        rsize = TYPES[rtype][0]
        if (kind == "pred") != (rtype == "pred"):
            raise PtxError(ins.line, f"{op.name} is not a .{ptype} destination: {ins.text}")
        if kind == "pred":
            value = expr
        else:
            value = expr if kind in ("u", "b") else f"({expr}).view(_U{size * 8})"
            if kind == "s" and rsize != size:
                value = f"({expr}).astype(_U{rsize * 8})"     # sign-extends or truncates
            elif rsize != size:
                value = f"({value}).astype(_U{rsize * 8})"    # zero-extends or truncates
        var = f"v{s}"
        if guard is not None:
            value = f"_select({guard}, {value}, {var})"
        self.emit(f"{var} = {value}")
        self.written[s] = None
        self.wide.pop(s, None)

    def guard(self, ins: Instruction) -> str | None:
        if ins.guard is None:
            return None
        return self.read(ins, ins.guard, "pred")


SPECIAL_PREFIXES = {*PER_THREAD, "%nwarpid",
                     "%smid", "%nsmid", "%gridid", "%clock", "%clock64", "%globaltimer",
                     "%lanemask_eq", "%lanemask_lt", "%lanemask_le", "%lanemask_gt",
                     "%lanemask_ge", "%dynamic_smem_size", "%total_smem_size", "%envreg",
                     "%pm0", "%clusterid", "%nclusterid", "%cluster_ctaid", "%globaltimer_lo",
                     "%globaltimer_hi", "%aggr_smem_size", "%reserved_smem_offset_begin",
                     "%is_explicit_cluster", "%cluster_nctaid", "%cluster_ctarank",
                     "%cluster_nctarank", "%current_graph_exec"}


def imm_value(ins: Instruction, imm: Imm, ptype: str):
    size, kind = TYPES[ptype]
    if kind == "pred":
        if not imm.is_float:
            return np.bool_(imm.value != 0)     # mov.pred %p, 0 / -1 (what nvcc emits)
        raise PtxError(ins.line, f"immediate {imm} used as a predicate: {ins.text}")
    if kind == "f":
        if size not in (4, 8):
            raise unsupported(ins, f".{ptype} immediates")
        dt = numerics.FLOAT[size]
        if imm.bits is not None and imm.width == size:
            return numerics.UINT[size](imm.bits).view(dt)     # exact bits (NaN payloads)
        return dt(imm.value)
    if imm.is_float:
        if imm.bits is not None and imm.width == size:
            v = imm.bits                  # a 0f/0d literal as raw bits of a .b type
        else:
            raise PtxError(ins.line, f"floating-point immediate {imm} for .{ptype}: {ins.text}")
    else:
        v = imm.value
    bits = size * 8
    v &= (1 << bits) - 1
    u = numerics.UINT[size](v)
    return u.view(numerics.SINT[size]) if kind == "s" else u


_TERMINATORS = {"bra", "ret", "exit"}


# --- basic blocks -------------------------------------------------------------------


def split_blocks(k: Kernel) -> list[Block]:
    blocks: list[Block] = []
    cur = Block(0, [], [])
    for item in k.body:
        if isinstance(item, str):                  # a label starts a block
            if cur.instructions:
                blocks.append(cur)
                cur = Block(len(blocks), [], [])
            cur.labels.append(item)
            continue
        role = block_role(item)           # its family's declaration (isa/registry.py)
        # a wait is alone in its block; a warp instruction starts one, so that lanes can
        # wait there before the block has done anything (isa/warpmask.py), and
        # bar.warp.sync is alone, so that its waiters pass it to the next block; a barrier
        # does not end a warp instruction's block (threads parked at either would look alike)
        after_warp = role.ends_block and cur.instructions and block_role(cur.instructions[0]).warp_sync
        if (role.waits or role.warp_sync or after_warp) and cur.instructions:
            blocks.append(cur)
            cur = Block(len(blocks), [], [])
        cur.instructions.append(item)
        if item.opcode in _TERMINATORS or role.ends_block or role.waits or role.warp_sync == "bar":
            blocks.append(cur)
            cur = Block(len(blocks), [], [])
            if role.follows is not None:      # bar.red: its result starts the next block
                cur.instructions.append(role.follows)
    if cur.instructions or cur.labels or not blocks:
        blocks.append(cur)
    return blocks


def _runtime_namespace() -> dict:
    n = numerics
    return {
        "_np": np, "_U8": np.uint8, "_U16": np.uint16, "_U32": np.uint32, "_U64": np.uint64,
        "_I8": np.int8, "_I16": np.int16, "_I32": np.int32, "_I64": np.int64,
        "_F32": np.float32, "_F64": np.float64,
        "_select": n.select, "_clip": np.clip, "_abs": np.abs, "_isnan": np.isnan,
        "_sqrt": np.sqrt, "_exp2": np.exp2, "_log2": np.log2, "_sin": np.sin, "_cos": np.cos,
        "_tanh": np.tanh,
        "_udiv": n.udiv, "_sdiv": n.sdiv, "_urem": n.urem, "_srem": n.srem,
        "_mulhi_u64": n.mulhi_u64, "_mulhi_s64": n.mulhi_s64,
        "_shl": n.shift_left, "_shr": n.shift_right,
        "_flush": n.flush_f32, "_satf": n.saturate_f, "_fmin": n.fmin_ptx, "_fmax": n.fmax_ptx,
        "_f32_dir": n.f32_op_directed, "_f64_dir": n.f64_op_directed,
        "_fma_f32": n.fma_f32, "_fma_f64": n.fma_f64, "_fma_f32_wide": fma32.fma_f32_wide,
        "_fma_f32_group": fma32.fma_f32_group,
        "_div_dir": divsqrt.div_directed, "_sqrt_dir": divsqrt.sqrt_directed, "_flush64": n.flush_f64,
        "_round_f64_to_f32": n.round_f64_to_f32, "_int_to_float": n.int_to_float,
        "_float_to_int": n.float_to_int, "_round_integral": n.round_float_to_integral,
        "_consts": {},
    } | RUNTIME


def compile_kernel(k: Kernel) -> CompiledKernel:
    """Decode a kernel into executable basic blocks (once per module load)."""
    if "b128" in k.registers.types():
        raise PtxError(k.line, f"{k.name}: .b128 registers are not supported yet")
    # Slots (storage) are given to registers on first use: declared ranges cost nothing.
    ck = CompiledKernel(k, split_blocks(k), {}, [], {})
    labels = {lab: b.index for b in ck.blocks for lab in b.labels}
    exit_pc = len(ck.blocks)
    ck.layout = kernel_layout(k)

    ns = _runtime_namespace()
    ck.namespace = ns

    def register_instruction(ins: Instruction) -> int:
        ck.instructions.append(ins)
        return len(ck.instructions) - 1

    ns["_register_instruction"] = register_instruction
    before_emit = HOOKS["before_emit"]      # checks in front of an instruction (isa/wgmma_async.py)

    for block in ck.blocks:
        g = BlockGen(ck, ns)
        ret = None
        for ins in block.instructions:
            if ins.opcode != "fma":
                fma32.flush(g)          # a run of fmas ends
                g.wide.clear()          # only fmas keep widened operands (they write through g.write)
            g.emit(f"# line {ins.line}: {ins.text}")
            if ins.opcode in _TERMINATORS:
                if ins.syntax_error is not None:
                    raise ins.syntax_error
                ret = _terminator(g, ins, block, labels, exit_pc)
                continue
            emitter = lookup(ins)
            if emitter is None:
                raise unsupported(ins)
            if ins.syntax_error is not None:
                raise ins.syntax_error
            _check_float_immediates(ins)
            before_emit(g, ins)
            emitter(g, ins)
        fma32.flush(g)
        if ret is None:
            ret = str(block.index + 1 if block.index + 1 < exit_pc else exit_pc)
        block.barrier = getattr(g, "barrier", None)
        block.reduction = getattr(g, "barrier_red", None)
        role = block_role(block.instructions[0]) if block.instructions else None
        block.waits = role is not None and role.waits
        ck.waits |= block.waits
        block.warp_sync = role.warp_sync if role is not None else None
        block.reads = tuple(g.used)
        block.writes = tuple(g.written)
        block.n_instructions = len(block.instructions)
        head = [f"def block_{block.index}(R, C):"]
        head += [f"    v{s} = R[{s}]" for s in g.used]
        body = [f"    {line}" for line in g.lines]
        tail = [f"    R[{s}] = v{s}" for s in g.written] + [f"    return {ret}"]
        block.source = "\n".join(head + body + tail) + "\n"
        code = compile(block.source, f"<ptx {k.name} block {block.index}>", "exec")
        exec(code, ns)
        block.fn = ns[f"block_{block.index}"]
    return ck


def _check_float_immediates(ins: Instruction) -> None:
    """A floating-point literal needs a float or bit-size instruction type (add.s32 with
    0f3F800000 is an error, mov.b32 with it is raw bits)."""
    if any(isinstance(o, Imm) and o.is_float for o in ins.operands):
        kinds = {TYPES[m][1] for m in ins.mods if m in TYPES}
        if not kinds & {"f", "b"}:
            raise PtxError(ins.line, f"floating-point immediate for an integer "
                                     f"instruction: {ins.text}")


def _terminator(g: BlockGen, ins: Instruction, block: Block, labels, exit_pc) -> str:
    m = Mods(ins)
    fall = block.index + 1 if block.index + 1 < exit_pc else exit_pc
    if ins.opcode == "bra":
        m.take("uni")
        m.done()
        ops = operands(ins, 1)
        if not isinstance(ops[0], Sym):
            raise unsupported(ins, "indirect branch")
        target = labels.get(ops[0].name)
        if target is None:
            raise PtxError(ins.line, f"undefined label {ops[0].name}: {ins.text}")
    else:                       # ret / exit: in a kernel both end the thread
        m.take("uni")
        m.done()
        operands(ins, 0)
        target = exit_pc
    if ins.guard is None:
        return str(target)
    p = g.read(ins, Reg(ins.guard.name), "pred")
    if ins.guard.negated:
        return f"({p}, {fall}, {target})"
    return f"({p}, {target}, {fall})"


def load_ptx(text: str | bytes) -> PtxModule:
    """Parse PTX and decode every kernel for the engine.

    Raises PtxError(line, message) for syntax errors and for anything the engine cannot
    execute, so nothing is ever run wrongly.
    """
    mod = parse_ptx(text)
    for k in mod.kernels.values():
        HOOKS["load_kernel"](k, mod)       # `call` of .func bodies: inlined per call site (isa/calls.py)
        k.compiled = compile_kernel(k)
        k.compiled.target = mod.target
        k.compiled.independent_threads = int(re.match(r"sm_(\d+)", mod.target).group(1)) >= 70
    return mod


__all__ = ["BlockGen", "CompiledKernel", "compile_kernel", "load_ptx"]
