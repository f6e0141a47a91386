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
memory accesses and knows which threads are active (engine.py). Registers hold raw bits
(uint8/16/32/64, bool for predicates); an instruction views them as its type
(`.view(np.float32)`), so values round-trip bit-exactly.

A block returns the index of the next block, or `(p, taken, not_taken)` for a conditional
branch or exit on predicate array `p`; the engine decides whether the threads diverge.
EXIT (= number of blocks) is the pseudo-block of finished threads.

Anything this module cannot translate raises PtxError naming the instruction and line:
unsupported PTX is refused at load, never executed wrongly.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from ..isa import numerics
from .faults import PtxError
from ..ptx.parser import TYPES, Addr, Imm, Instruction, Kernel, PredPair, Reg, Sym, Vec

STORAGE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

# Special registers the engine provides per thread (slots filled at batch setup).
SPECIALS = {f"%{n}.{d}" for n in ("tid", "ntid", "ctaid", "nctaid") for d in "xyz"}
SPECIALS |= {"%laneid", "%warpid"}

# Modifiers of ld/st that change nothing in a sequential emulator.
_CACHE_MODS = {"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "weak", "volatile",
               "relaxed", "acquire", "release", "cta", "gpu", "sys", "cluster"}
_ROUND_F = ("rn", "rz", "rm", "rp")
_ROUND_I = ("rni", "rzi", "rmi", "rpi")


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

    @property
    def exit_pc(self) -> int:
        return len(self.blocks)

    @property
    def bytes_per_thread(self) -> int:
        return sum(np.dtype(d).itemsize for d in self.slot_dtypes)


def unsupported(ins: Instruction, why: str = "") -> PtxError:
    name = ".".join([ins.opcode] + ins.mods)
    msg = f"instruction '{name}' is not supported by the emulator"
    if why:
        msg += f" ({why})"
    return PtxError(ins.line, f"{msg}: {ins.text}")


# --- the per-block generator --------------------------------------------------------


class _BlockGen:
    """Accumulates the Python source of one block and the constants it refers to."""

    def __init__(self, ck: CompiledKernel, namespace: dict):
        self.ck = ck
        self.ns = namespace
        self.lines: list[str] = []
        self.used: dict[int, None] = {}       # slots touched, in order
        self.written: dict[int, None] = {}
        self.tmp = 0

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
                self.ck.slot_dtypes.append(np.bool_ if rtype == "pred" else STORAGE[TYPES[rtype][0]])
            elif reg.name.split(".")[0] in ("%tid", "%ntid", "%ctaid", "%nctaid", "%laneid",
                                            "%warpid") and reg.name in SPECIALS:
                s = self.ck.specials.get(reg.name)
                if s is None:
                    s = len(self.ck.slot_dtypes)
                    self.ck.specials[reg.name] = s
                    self.ck.slot_dtypes.append(np.uint32)
            elif reg.name.split(".")[0] in _SPECIAL_PREFIXES:
                raise unsupported(ins, f"special register {reg.name}")
            else:
                raise PtxError(ins.line, f"undeclared register {reg.name}: {ins.text}")
        self.used[s] = None
        return s

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
            return var if kind in ("u", "b") else f"{var}.view({_view_name(ptype)})"
        if isinstance(op, Imm):
            return self.const(_imm_value(ins, op, ptype))
        raise PtxError(ins.line, f"expected a register or immediate, found {op}: {ins.text}")

    def write(self, ins: Instruction, op, expr: str, ptype: str, guard: str | None) -> None:
        """Assign `expr` (a value of ptype's view dtype) to register operand `op`."""
        if op is None:
            return                              # the `_` sink
        if not isinstance(op, Reg) or op.negated:
            raise PtxError(ins.line, f"destination must be a register, found {op}: {ins.text}")
        if op.name in SPECIALS or op.name.split(".")[0] in _SPECIAL_PREFIXES:
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

    def guard(self, ins: Instruction) -> str | None:
        if ins.guard is None:
            return None
        return self.read(ins, ins.guard, "pred")


_SPECIAL_PREFIXES = {"%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid",
                     "%smid", "%nsmid", "%gridid", "%clock", "%clock64", "%globaltimer",
                     "%lanemask_eq", "%lanemask_lt", "%lanemask_le", "%lanemask_gt",
                     "%lanemask_ge", "%dynamic_smem_size", "%total_smem_size", "%envreg",
                     "%pm0", "%clusterid", "%nclusterid", "%cluster_ctaid", "%globaltimer_lo",
                     "%globaltimer_hi", "%aggr_smem_size", "%reserved_smem_offset_begin",
                     "%is_explicit_cluster", "%cluster_nctaid", "%cluster_ctarank",
                     "%cluster_nctarank", "%current_graph_exec"}


def _view_name(ptype: str) -> str:
    size, kind = TYPES[ptype]
    return {"s": f"_I{size * 8}", "f": f"_F{size * 8}"}.get(kind, f"_U{size * 8}")


def _view_dtype(ptype: str):
    size, kind = TYPES[ptype]
    if kind == "s":
        return numerics.SINT[size]
    if kind == "f":
        return numerics.FLOAT[size]
    return numerics.UINT[size]


def _imm_value(ins: Instruction, imm: Imm, ptype: str):
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


# --- modifier parsing ---------------------------------------------------------------


class _Mods:
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


def _operands(ins: Instruction, n: int) -> list:
    if len(ins.operands) != n:
        raise PtxError(ins.line, f"{ins.opcode} takes {n} operands, got "
                                 f"{len(ins.operands)}: {ins.text}")
    return ins.operands


_INT_TYPES = {"u16", "u32", "u64", "s16", "s32", "s64"}
_BIT_TYPES = {"b16", "b32", "b64"}
_FLOAT_TYPES = {"f32", "f64"}
_HALF_TYPES = {"f16", "f16x2", "bf16", "bf16x2"}


def _check_no_half(ins: Instruction) -> None:
    for m in ins.mods:
        if m in _HALF_TYPES or m in ("e4m3x2", "e5m2x2", "tf32"):
            raise unsupported(ins, f".{m} (half/low-precision floats are not supported yet)")


# --- instruction emitters -----------------------------------------------------------

def emit_int_or_float_binary(g: _BlockGen, ins: Instruction) -> None:
    """add, sub, mul (lo/hi/wide for integers; rounding/ftz/sat for floats)."""
    m = _Mods(ins)
    op = ins.opcode
    d, a, b = _operands(ins, 3)
    guard = g.guard(ins)
    t = m.one_type(_INT_TYPES | _FLOAT_TYPES | ({"b16", "b32", "b64"} if op != "mul" else set()))
    size, kind = TYPES[t]
    if kind == "f":
        rnd = m.take(*_ROUND_F) or "rn"
        ftz = m.take("ftz")
        sat = m.take("sat")
        m.done()
        if t == "f64" and (ftz or sat):
            raise unsupported(ins, ".ftz/.sat on f64")
        x, y = g.read(ins, a, t), g.read(ins, b, t)
        if ftz:
            x, y = f"_flush({x})", f"_flush({y})"
        sym = {"add": "+", "sub": "-", "mul": "*"}[op]
        if rnd == "rn":
            expr = f"({x} {sym} {y})"
        elif t == "f32":
            expr = f"_f32_dir({op!r}, {x}, {y}, {rnd!r})"
        else:
            expr = f"_f64_dir({op!r}, {x}, {y}, {rnd!r})"
        if ftz:
            expr = f"_flush({expr})"
        if sat:
            expr = f"_satf({expr})"
        g.write(ins, d, expr, t, guard)
        return
    # integers: two's complement add/sub/mul.lo are the same on raw unsigned bits
    if op == "mul":
        mode = m.take("lo", "hi", "wide")
        if mode is None:
            raise PtxError(ins.line, f"mul on integers needs .lo, .hi or .wide: {ins.text}")
        m.done()
        _emit_mul(g, ins, mode, t, d, a, b, None, guard)
        return
    sat = m.take("sat")
    if m.take("cc"):
        raise unsupported(ins, "carry (.cc)")
    m.done()
    sym = "+" if op == "add" else "-"
    if sat:
        if t != "s32":
            raise PtxError(ins.line, f".sat is only for .s32: {ins.text}")
        x, y = g.read(ins, a, "s32"), g.read(ins, b, "s32")
        expr = f"_clip({x}.astype(_I64) {sym} {y}.astype(_I64), -2147483648, 2147483647).astype(_I32)"
        g.write(ins, d, expr, "s32", guard)
        return
    ut = f"u{size * 8}"
    g.write(ins, d, f"({g.read(ins, a, ut)} {sym} {g.read(ins, b, ut)})", ut, guard)


def _emit_mul(g, ins, mode, t, d, a, b, c, guard):
    """mul/mad .lo .hi .wide; c is the addend operand for mad (or None)."""
    size, kind = TYPES[t]
    bits = size * 8
    if mode == "lo":
        ut = f"u{bits}"
        expr = f"({g.read(ins, a, ut)} * {g.read(ins, b, ut)})"
        if c is not None:
            expr = f"({expr} + {g.read(ins, c, ut)})"
        g.write(ins, d, expr, ut, guard)
    elif mode == "wide":
        if size == 8:
            raise PtxError(ins.line, f".wide is not defined for 64-bit types: {ins.text}")
        wt = f"{kind}{bits * 2}"
        wview = _view_name(wt)
        expr = f"({g.read(ins, a, t)}.astype({wview}) * {g.read(ins, b, t)}.astype({wview}))"
        if c is not None:
            expr = f"({expr} + {g.read(ins, c, wt)})"
        g.write(ins, d, expr, wt, guard)
    else:  # hi
        x, y = g.read(ins, a, t), g.read(ins, b, t)
        if size == 8:
            expr = f"_mulhi_s64({x}, {y})" if kind == "s" else f"_mulhi_u64({x}, {y})"
        else:
            wide = "_I64" if kind == "s" else "_U64"
            expr = (f"(({x}.astype({wide}) * {y}.astype({wide})) >> {wide}({bits}))"
                    f".astype({_view_name(t)})")
        if c is not None:
            expr = f"({expr} + {g.read(ins, c, t)})"
        g.write(ins, d, expr, t, guard)


def emit_mad(g: _BlockGen, ins: Instruction) -> None:
    m = _Mods(ins)
    t = m.one_type(_INT_TYPES | _FLOAT_TYPES)
    d, a, b, c = _operands(ins, 4)
    guard = g.guard(ins)
    if TYPES[t][1] == "f":
        _emit_fma(g, ins, m, t, d, a, b, c, guard)
        return
    mode = m.take("lo", "hi", "wide")
    if mode is None:
        raise PtxError(ins.line, f"mad on integers needs .lo, .hi or .wide: {ins.text}")
    if m.take("sat"):
        raise unsupported(ins, ".sat")
    if m.take("cc"):
        raise unsupported(ins, "carry (.cc)")
    m.done()
    _emit_mul(g, ins, mode, t, d, a, b, c, guard)


def emit_fma(g: _BlockGen, ins: Instruction) -> None:
    m = _Mods(ins)
    t = m.one_type(_FLOAT_TYPES)
    d, a, b, c = _operands(ins, 4)
    _emit_fma(g, ins, m, t, d, a, b, c, g.guard(ins))


def _emit_fma(g, ins, m, t, d, a, b, c, guard):
    rnd = m.take(*_ROUND_F) or "rn"
    ftz = m.take("ftz")
    sat = m.take("sat")
    m.done()
    if t == "f64" and (ftz or sat):
        raise unsupported(ins, ".ftz/.sat on f64")
    x, y, z = (g.read(ins, o, t) for o in (a, b, c))
    if ftz:
        x, y, z = f"_flush({x})", f"_flush({y})", f"_flush({z})"
    expr = f"_fma_f32({x}, {y}, {z}, {rnd!r})" if t == "f32" else f"_fma_f64({x}, {y}, {z}, {rnd!r})"
    if ftz:
        expr = f"_flush({expr})"
    if sat:
        expr = f"_satf({expr})"
    g.write(ins, d, expr, t, guard)


def emit_div_rem(g: _BlockGen, ins: Instruction) -> None:
    m = _Mods(ins)
    t = m.one_type(_INT_TYPES | _FLOAT_TYPES)
    d, a, b = _operands(ins, 3)
    guard = g.guard(ins)
    size, kind = TYPES[t]
    if kind == "f":
        if ins.opcode == "rem":
            raise unsupported(ins, "rem on floats")
        mode = m.take("approx", "full", "rn", "rz", "rm", "rp")
        ftz = m.take("ftz")
        m.done()
        if mode is None and t == "f64":
            raise PtxError(ins.line, f"div.f64 needs a rounding modifier: {ins.text}")
        if t == "f64" and ftz:
            raise unsupported(ins, ".ftz on f64")
        x, y = g.read(ins, a, t), g.read(ins, b, t)
        if ftz:
            x, y = f"_flush({x})", f"_flush({y})"
        # .approx and .full are within 2 ulp; the correctly rounded quotient satisfies that.
        expr = f"_div_dir({x}, {y}, {mode!r})" if mode in ("rz", "rm", "rp") else f"({x} / {y})"
        if ftz:
            expr = f"_flush({expr})"
        g.write(ins, d, expr, t, guard)
        return
    m.done()
    x, y = g.read(ins, a, t), g.read(ins, b, t)
    fn = {("div", "u"): "_udiv", ("div", "s"): "_sdiv",
          ("rem", "u"): "_urem", ("rem", "s"): "_srem"}[(ins.opcode, kind)]
    g.write(ins, d, f"{fn}({x}, {y})", t, guard)


def emit_unary(g: _BlockGen, ins: Instruction) -> None:
    """abs, neg, not, cnot, and the float unary functions."""
    m = _Mods(ins)
    op = ins.opcode
    d, a = _operands(ins, 2)
    guard = g.guard(ins)
    if op in ("not", "cnot"):
        t = m.one_type(_BIT_TYPES | {"pred"} | (_INT_TYPES if op == "cnot" else set()))
        m.done()
        if t == "pred":
            if op == "cnot":
                raise PtxError(ins.line, f"cnot has no .pred form: {ins.text}")
            g.write(ins, d, f"(~{g.read(ins, a, 'pred')})", "pred", guard)
            return
        ut = f"u{TYPES[t][0] * 8}"
        x = g.read(ins, a, ut)
        if op == "not":
            g.write(ins, d, f"(~{x})", ut, guard)
        else:
            g.write(ins, d, f"({x} == 0).astype({_view_name(ut)})", ut, guard)
        return
    t = m.one_type(_INT_TYPES | _FLOAT_TYPES if op in ("abs", "neg") else _FLOAT_TYPES)
    size, kind = TYPES[t]
    bits = size * 8
    if kind != "f":
        m.done()
        if op == "abs":
            g.write(ins, d, f"_abs({g.read(ins, a, t)})", t, guard)
        else:
            ut = f"u{bits}"
            g.write(ins, d, f"({g.const(numerics.UINT[size](0))} - {g.read(ins, a, ut)})", ut, guard)
        return
    ftz = m.take("ftz")
    if t == "f64" and ftz and not (op in ("rcp", "rsqrt") and "approx" in ins.mods):
        raise unsupported(ins, ".ftz on f64")
    x = g.read(ins, a, t)
    flush = "_flush64" if t == "f64" else "_flush"
    if ftz:
        x = f"{flush}({x})"
    ut = f"u{bits}"
    sign = g.const(numerics.UINT[size](1 << (bits - 1)))
    if op in ("abs", "neg"):
        m.done()
        raw = f"({x}).view(_U{bits})"
        expr = f"({raw} & ~{sign})" if op == "abs" else f"({raw} ^ {sign})"
        g.write(ins, d, expr, ut, guard)
        return
    approx = m.take("approx")
    rnd = m.take(*_ROUND_F)
    m.done()
    if rnd in ("rz", "rm", "rp") and op not in ("sqrt", "rcp"):
        raise PtxError(ins.line, f"{op} takes no rounding modifier: {ins.text}")
    if op in ("sqrt", "rcp") and not (approx or rnd):
        raise PtxError(ins.line, f"{op} needs .approx or a rounding modifier: {ins.text}")
    if op in ("rsqrt", "ex2", "lg2", "sin", "cos", "tanh") and not approx:
        raise PtxError(ins.line, f"{op} needs .approx: {ins.text}")
    if op in ("ex2", "lg2", "sin", "cos", "tanh") and t != "f32":
        raise unsupported(ins, f"{op} on .{t}")
    fdt = f"_F{bits}"
    # The approximations are computed in f64 and rounded once: within 0.5 ulp of f32
    # (f64 for rcp/rsqrt.approx.f64), inside every bound the ISA documents for them (e.g.
    # ex2 2 ulp, lg2/sin/cos 2^-22.x absolute, rsqrt 2^-22.9 relative, tanh 2^-11).
    if op == "sqrt":
        expr = f"_sqrt_dir({x}, {rnd!r})" if rnd in ("rz", "rm", "rp") else f"_sqrt({x})"
    elif op == "rcp":
        one = g.const(numerics.FLOAT[size](1))
        expr = f"_div_dir({one}, {x}, {rnd!r})" if rnd in ("rz", "rm", "rp") else f"({one} / {x})"
    elif op == "rsqrt":
        expr = f"(1.0 / _sqrt({x}.astype(_F64))).astype({fdt})" if t == "f32" else \
            f"({g.const(np.float64(1))} / _sqrt({x}))"
    else:
        fn = {"ex2": "_exp2", "lg2": "_log2", "sin": "_sin", "cos": "_cos", "tanh": "_tanh"}[op]
        expr = f"{fn}({x}.astype(_F64)).astype(_F32)"
    if ftz:
        expr = f"{flush}({expr})"
    g.write(ins, d, expr, t, guard)


def emit_minmax(g: _BlockGen, ins: Instruction) -> None:
    m = _Mods(ins)
    t = m.one_type(_INT_TYPES | _FLOAT_TYPES)
    d, a, b = _operands(ins, 3)
    guard = g.guard(ins)
    kind = TYPES[t][1]
    if kind == "f":
        ftz = m.take("ftz")
        nan = m.take("NaN")
        m.done()
        if t == "f64" and ftz:
            raise unsupported(ins, ".ftz on f64")
        x, y = g.read(ins, a, t), g.read(ins, b, t)
        if ftz:
            x, y = f"_flush({x})", f"_flush({y})"
        if nan:
            fn = "_np.minimum" if ins.opcode == "min" else "_np.maximum"
        else:
            fn = "_fmin" if ins.opcode == "min" else "_fmax"
        g.write(ins, d, f"{fn}({x}, {y})", t, guard)
        return
    if m.take("relu"):
        raise unsupported(ins, ".relu")
    m.done()
    fn = "_np.minimum" if ins.opcode == "min" else "_np.maximum"
    g.write(ins, d, f"{fn}({g.read(ins, a, t)}, {g.read(ins, b, t)})", t, guard)


def emit_logic(g: _BlockGen, ins: Instruction) -> None:
    m = _Mods(ins)
    t = m.one_type(_BIT_TYPES | {"pred"})
    m.done()
    d, a, b = _operands(ins, 3)
    guard = g.guard(ins)
    sym = {"and": "&", "or": "|", "xor": "^"}[ins.opcode]
    ut = "pred" if t == "pred" else f"u{TYPES[t][0] * 8}"
    g.write(ins, d, f"({g.read(ins, a, ut)} {sym} {g.read(ins, b, ut)})", ut, guard)


def emit_shift(g: _BlockGen, ins: Instruction) -> None:
    m = _Mods(ins)
    t = m.one_type(_BIT_TYPES | _INT_TYPES)
    m.done()
    d, a, b = _operands(ins, 3)
    guard = g.guard(ins)
    size, kind = TYPES[t]
    bits = size * 8
    if ins.opcode == "shl" or kind != "s":
        t = f"u{bits}"            # shl and unsigned/bit shr: logical on raw bits
    x = g.read(ins, a, t)
    n = g.read(ins, b, "u32")
    fn = "_shl" if ins.opcode == "shl" else "_shr"
    g.write(ins, d, f"{fn}({x}, {n}, {bits})", t, guard)


_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
        "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
_UNORDERED = {"equ": "==", "neu": "!=", "ltu": "<", "leu": "<=", "gtu": ">", "geu": ">="}


def _compare(g, ins, cmp, t, a, b, ftz) -> str:
    size, kind = TYPES[t]
    if kind == "b" and cmp not in ("eq", "ne"):
        raise PtxError(ins.line, f"setp.{cmp} needs a typed (not .b) comparison: {ins.text}")
    if cmp in ("lo", "ls", "hi", "hs") and kind == "s":
        raise PtxError(ins.line, f".{cmp} is an unsigned comparison: {ins.text}")
    if cmp in ("lo", "ls", "hi", "hs") and kind == "b":
        t = f"u{size * 8}"
    x, y = g.read(ins, a, t), g.read(ins, b, t)
    if kind != "f":
        if cmp not in _CMP:
            raise PtxError(ins.line, f"comparison .{cmp} is only for floats: {ins.text}")
        return f"({x} {_CMP[cmp]} {y})"
    if ftz:
        x, y = f"_flush({x})", f"_flush({y})"
    if cmp == "num":
        return f"~(_isnan({x}) | _isnan({y}))"
    if cmp == "nan":
        return f"(_isnan({x}) | _isnan({y}))"
    if cmp == "ne":             # ordered: false when either is NaN (numpy's != says true)
        return f"(({x} != {y}) & ~(_isnan({x}) | _isnan({y})))"
    if cmp in _CMP and cmp not in ("lo", "ls", "hi", "hs"):
        return f"({x} {_CMP[cmp]} {y})"
    if cmp in _UNORDERED:
        return f"(({x} {_UNORDERED[cmp]} {y}) | _isnan({x}) | _isnan({y}))"
    raise PtxError(ins.line, f"unknown comparison .{cmp}: {ins.text}")


def _cmp_and_bool(ins, m):
    cmp = m.take(*_CMP, *_UNORDERED, "num", "nan")
    if cmp is None:
        raise PtxError(ins.line, f"missing comparison operator: {ins.text}")
    boolop = m.take("and", "or", "xor")
    ftz = m.take("ftz")
    return cmp, boolop, ftz


def emit_setp(g: _BlockGen, ins: Instruction) -> None:
    m = _Mods(ins)
    cmp, boolop, ftz = _cmp_and_bool(ins, m)
    t = m.one_type(_INT_TYPES | _BIT_TYPES | _FLOAT_TYPES)
    m.done()
    ops = ins.operands
    if len(ops) != (4 if boolop else 3):
        raise PtxError(ins.line, f"setp takes {4 if boolop else 3} operands: {ins.text}")
    guard = g.guard(ins)
    dest = ops[0]
    p, q = (dest.p, dest.q) if isinstance(dest, PredPair) else (dest, None)
    r = g.fresh()
    g.emit(f"{r} = {_compare(g, ins, cmp, t, ops[1], ops[2], ftz)}")
    if boolop:
        c = g.read(ins, ops[3], "pred")
        sym = {"and": "&", "or": "|", "xor": "^"}[boolop]
        g.write(ins, p, f"({r} {sym} {c})", "pred", guard)
        if q is not None:
            g.write(ins, q, f"((~{r}) {sym} {c})", "pred", guard)
    else:
        g.write(ins, p, r, "pred", guard)
        if q is not None:
            g.write(ins, q, f"(~{r})", "pred", guard)


def emit_set(g: _BlockGen, ins: Instruction) -> None:
    m = _Mods(ins)
    cmp, boolop, ftz = _cmp_and_bool(ins, m)
    ts = m.types()
    m.done()
    if len(ts) != 2 or ts[0] not in ("u32", "s32", "f32") or \
            ts[1] not in _INT_TYPES | _BIT_TYPES | _FLOAT_TYPES:
        raise unsupported(ins, "types")
    dtype, stype = ts
    ops = ins.operands
    if len(ops) != (4 if boolop else 3):
        raise PtxError(ins.line, f"set takes {4 if boolop else 3} operands: {ins.text}")
    guard = g.guard(ins)
    r = _compare(g, ins, cmp, stype, ops[1], ops[2], ftz)
    if boolop:
        sym = {"and": "&", "or": "|", "xor": "^"}[boolop]
        r = f"({r} {sym} {g.read(ins, ops[3], 'pred')})"
    true = g.const(np.uint32(0x3F800000 if dtype == "f32" else 0xFFFFFFFF))
    g.write(ins, ops[0], f"_select({r}, {true}, {g.const(np.uint32(0))})", "u32", guard)


def emit_selp(g: _BlockGen, ins: Instruction) -> None:
    m = _Mods(ins)
    t = m.one_type(_INT_TYPES | _BIT_TYPES | _FLOAT_TYPES)
    m.done()
    d, a, b, c = _operands(ins, 4)
    guard = g.guard(ins)
    ut = f"u{TYPES[t][0] * 8}"
    expr = f"_select({g.read(ins, c, 'pred')}, {g.read(ins, a, ut)}, {g.read(ins, b, ut)})"
    g.write(ins, d, expr, ut, guard)


def emit_mov(g: _BlockGen, ins: Instruction) -> None:
    m = _Mods(ins)
    t = m.one_type(_INT_TYPES | _BIT_TYPES | _FLOAT_TYPES | {"pred"})
    m.done()
    d, a = _operands(ins, 2)
    guard = g.guard(ins)
    size, kind = TYPES[t]
    if isinstance(a, Sym):
        raise unsupported(ins, f"taking the address of {a.name}")
    if isinstance(a, Vec):                       # pack {lo, ..., hi} into one register
        n = len(a.elems)
        if n not in (2, 4) or size % n or None in a.elems:
            raise PtxError(ins.line, f"bad vector operand for mov: {ins.text}")
        part = f"u{size * 8 // n}"
        wide = f"_U{size * 8}"
        terms = [f"({g.read(ins, e, part)}.astype({wide}) << {wide}({i * size * 8 // n}))"
                 for i, e in enumerate(a.elems)]
        g.write(ins, d, "(" + " | ".join(terms) + ")", f"u{size * 8}", guard)
        return
    if isinstance(d, Vec):                       # unpack one register into parts
        n = len(d.elems)
        if n not in (2, 4) or size % n:
            raise PtxError(ins.line, f"bad vector operand for mov: {ins.text}")
        src = g.fresh()
        g.emit(f"{src} = {g.read(ins, a, f'u{size * 8}')}")
        pbits = size * 8 // n
        wide = f"_U{size * 8}"
        for i, e in enumerate(d.elems):
            g.write(ins, e, f"({src} >> {wide}({i * pbits})).astype(_U{pbits})", f"u{pbits}", guard)
        return
    if kind == "pred":
        g.write(ins, d, g.read(ins, a, "pred"), "pred", guard)
        return
    ut = f"u{size * 8}"
    if isinstance(a, Imm) and kind == "f":
        g.write(ins, d, f"{g.read(ins, a, t)}.view(_U{size * 8})", ut, guard)
        return
    g.write(ins, d, g.read(ins, a, ut), ut, guard)


def emit_cvt(g: _BlockGen, ins: Instruction) -> None:
    _check_no_half(ins)
    m = _Mods(ins)
    irnd = m.take(*_ROUND_I)
    frnd = m.take(*_ROUND_F)
    ftz = m.take("ftz")
    sat = m.take("sat")
    ts = m.types()
    m.done()
    if len(ts) != 2:
        raise PtxError(ins.line, f"cvt needs a destination and a source type: {ins.text}")
    dt, st = ts
    d, a = _operands(ins, 2)
    guard = g.guard(ins)
    dsize, dkind = TYPES[dt]
    ssize, skind = TYPES[st]
    if "pred" in (dkind, skind):
        raise PtxError(ins.line, f"cvt does not take predicates: {ins.text}")
    x = g.read(ins, a, st)
    if ftz and not (st == "f32" or dt == "f32"):
        raise PtxError(ins.line, f".ftz applies to .f32 only: {ins.text}")
    if ftz and st == "f32":
        x = f"_flush({x})"
    if skind != "f" and dkind != "f":                       # integer <-> integer
        if irnd or frnd:
            raise PtxError(ins.line, f"no rounding modifier for integer cvt: {ins.text}")
        if sat:
            info = np.iinfo(_view_dtype(dt) if dkind != "b" else numerics.UINT[dsize])
            lo, hi = g.const(np.int64(info.min)), g.const(np.int64(info.max))
            if ssize == 8 and skind != "s":
                # a u64 source beyond int64: clamp in unsigned space first
                x = f"_np.minimum({x}, _U64({info.max})).astype(_I64)"
            else:
                x = f"{x}.astype(_I64)"
            expr = f"_clip({x}, {lo}, {hi}).astype({_view_name(dt)})"
        else:
            expr = f"{x}.astype({_view_name(dt)})"        # C casts: truncate / extend
        g.write(ins, d, expr, dt, guard)
        return
    if skind != "f":                                        # integer -> float
        if irnd:
            raise PtxError(ins.line, f"integer rounding modifier on int->float cvt: {ins.text}")
        mode = frnd or "rn"
        if ssize == 8 and mode != "rn" and not numerics.LONG_DOUBLE_EXACT_64:
            raise unsupported(ins, "directed rounding from 64-bit integers on this platform")
        expr = f"_int_to_float({x}, {mode!r}, {_view_name(dt)})"
    elif dkind != "f":                                      # float -> integer
        if not irnd:
            raise PtxError(ins.line, f"float->integer cvt needs .rni/.rzi/.rmi/.rpi: {ins.text}")
        target = _view_dtype(dt) if dkind != "b" else numerics.UINT[dsize]
        expr = f"_float_to_int({x}, {irnd!r}, {g.const(target)})"
        if dkind == "b":
            dt = f"u{dsize * 8}"
    else:                                                   # float -> float
        if dsize < ssize:                                   # f64 -> f32
            if irnd:
                raise PtxError(ins.line, f"f64->f32 cvt takes a float rounding mode: {ins.text}")
            if not frnd:
                raise PtxError(ins.line, f"f64->f32 cvt needs a rounding modifier: {ins.text}")
            expr = f"_round_f64_to_f32({x}, {frnd!r})"
        elif dsize > ssize:                                 # f32 -> f64: exact
            if irnd or frnd:
                raise PtxError(ins.line, f"f32->f64 cvt takes no rounding modifier: {ins.text}")
            expr = f"{x}.astype(_F64)"
        else:                                               # same size: round to integral
            if frnd:
                raise PtxError(ins.line, f"same-size float cvt takes .rni/.rzi/.rmi/.rpi: {ins.text}")
            expr = f"_round_integral({x}, {irnd!r})" if irnd else x
    if ftz and dt == "f32":
        expr = f"_flush({expr})"
    if sat and dkind == "f":
        expr = f"_satf({expr})"
    g.write(ins, d, expr, dt, guard)


# ld, st, cvta (every state space), atom, red, bar/barrier and `mov` of a variable's
# address: memops.py (imported at the end of this file).


def emit_trap(g: _BlockGen, ins: Instruction) -> None:
    _operands(ins, 0)
    _Mods(ins).done()
    iid = g.ns["_register_instruction"](ins)
    guard = g.guard(ins)
    g.emit(f"C.trap({iid}, {guard if guard is not None else 'None'})")


def emit_nop(g: _BlockGen, ins: Instruction) -> None:
    """membar/fence: every access here is already sequentially consistent."""
    g.guard(ins)


EMITTERS = {
    "add": emit_int_or_float_binary, "sub": emit_int_or_float_binary,
    "mul": emit_int_or_float_binary, "mad": emit_mad, "fma": emit_fma,
    "div": emit_div_rem, "rem": emit_div_rem,
    "abs": emit_unary, "neg": emit_unary, "not": emit_unary, "cnot": emit_unary,
    "sqrt": emit_unary, "rcp": emit_unary, "rsqrt": emit_unary, "ex2": emit_unary,
    "lg2": emit_unary, "sin": emit_unary, "cos": emit_unary, "tanh": emit_unary,
    "min": emit_minmax, "max": emit_minmax,
    "and": emit_logic, "or": emit_logic, "xor": emit_logic,
    "shl": emit_shift, "shr": emit_shift,
    "setp": emit_setp, "set": emit_set, "selp": emit_selp,
    "mov": emit_mov, "cvt": emit_cvt, "trap": emit_trap,
    "membar": emit_nop, "fence": emit_nop,
}

# Extension modules (bits.py, warp.py, halfprec.py, calls.py; imported at the end of this
# file) add emitters to EMITTERS, runtime helpers to EXTRA_NAMESPACE, and special registers
# computed on the fly to SPECIAL_READERS (name -> fn(gen, ins, ptype) -> expression).
EXTRA_NAMESPACE: dict = {}
SPECIAL_READERS: dict = {}

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
        cur.instructions.append(item)
        if item.opcode in _TERMINATORS or ends_block(item):
            blocks.append(cur)
            cur = Block(len(blocks), [], [])
            follow = after_barrier(item)       # bar.red: its result starts the next block
            if follow is not None:
                cur.instructions.append(follow)
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
        "_fma_f32": n.fma_f32, "_fma_f64": n.fma_f64,
        "_div_dir": n.div_directed, "_sqrt_dir": n.sqrt_directed, "_flush64": n.flush_f64,
        "_round_f64_to_f32": n.round_f64_to_f32, "_int_to_float": n.int_to_float,
        "_float_to_int": n.float_to_int, "_round_integral": n.round_float_to_integral,
        "_consts": {},
    } | EXTRA_NAMESPACE


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

    for block in ck.blocks:
        g = _BlockGen(ck, ns)
        ret = None
        for ins in block.instructions:
            g.emit(f"# line {ins.line}: {ins.text}")
            if ins.opcode in _TERMINATORS:
                if ins.syntax_error is not None:
                    raise ins.syntax_error
                ret = _terminator(g, ins, block, labels, exit_pc)
                continue
            emitter = EMITTERS.get(ins.opcode)
            if emitter is None:
                raise unsupported(ins)
            if ins.syntax_error is not None:
                raise ins.syntax_error
            _check_float_immediates(ins)
            emitter(g, ins)
        if ret is None:
            ret = str(block.index + 1 if block.index + 1 < exit_pc else exit_pc)
        block.barrier = getattr(g, "barrier", None)
        block.reduction = getattr(g, "barrier_red", None)
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


def _terminator(g: _BlockGen, ins: Instruction, block: Block, labels, exit_pc) -> str:
    m = _Mods(ins)
    fall = block.index + 1 if block.index + 1 < exit_pc else exit_pc
    if ins.opcode == "bra":
        m.take("uni")
        m.done()
        ops = _operands(ins, 1)
        if not isinstance(ops[0], Sym):
            raise unsupported(ins, "indirect branch")
        target = labels.get(ops[0].name)
        if target is None:
            raise PtxError(ins.line, f"undefined label {ops[0].name}: {ins.text}")
    else:                       # ret / exit: in a kernel both end the thread
        m.take("uni")
        m.done()
        _operands(ins, 0)
        target = exit_pc
    if ins.guard is None:
        return str(target)
    p = g.read(ins, Reg(ins.guard.name), "pred")
    if ins.guard.negated:
        return f"({p}, {fall}, {target})"
    return f"({p}, {target}, {fall})"


from ..isa import bits, warp, half as halfprec, calls  # noqa: E402,F401  (they register themselves)
from ..isa.memops import after_barrier, ends_block, kernel_layout  # noqa: E402  (ld/st/atom/red/bar/cvta spaces)
