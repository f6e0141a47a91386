"""Device function calls (`call` of a `.func`), inlined at load.

Calls are inlined at decode time, once per call site (`inline_calls`, run by load_ptx
before a kernel is decoded): the callee's body is copied into the caller with its
registers, labels and local variables renamed (`%r1` -> `%r1@3` for inline instance 3),
its parameters renamed to the caller's argument variables and its return parameters to
the caller's result variables, and each `ret` turned into a branch to a label after the
copy (`exit` stays `exit`: it ends the thread). Recursion, direct or indirect, and indirect
calls through a register are refused by name: inlining cannot express them.

`.param` variables of a function body (the caller's `param0`, `retval0`) live in hidden
64-bit registers, one per 8 bytes (`%__pv:param0:0`), so they stay vectorized and
uniform values stay scalars; `st.param`/`ld.param` on them become the pseudo
instructions `_stpv`/`_ldpv`. An access must not straddle an 8-byte word (the compilers
align them naturally).

`vprintf(fmt, args)` becomes the pseudo instruction `_vprintf` (printf.py);
`__assertfail` (device assert()) the pseudo instruction `_assertfail` (devassert.py).
"""
from __future__ import annotations

import copy

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Addr, Imm, ArgList, Instruction, PredPair, Reg, Sym, TensorAddr, Vec
from . import indirect, recursion
from .operands import CACHE_MODS, Mods, operands, unsupported
from .registry import family

_WORD = 8


# --- inlining ----------------------------------------------------------------------------------

def param_reg(name: str, word: int) -> str:
    return f"%__pv:{name}:{word}"


class _Renamer:
    def __init__(self, regs: dict, labels: dict, syms: dict):
        self.regs, self.labels, self.syms = regs, labels, syms

    def op(self, o):
        if isinstance(o, Reg):
            return Reg(self.regs.get(o.name, o.name), o.negated)
        if isinstance(o, Sym):
            n = o.name
            if n in self.regs:                      # a register named without '%'
                return Reg(self.regs[n])
            return Sym(self.labels.get(n) or self.syms.get(n) or n)
        if isinstance(o, Addr):
            return Addr(self.op(o.base) if o.base is not None else None, o.offset)
        if isinstance(o, TensorAddr):
            return TensorAddr(self.op(o.base) if o.base is not None else None, o.offset, self.op(o.coords))
        if isinstance(o, Vec):
            return Vec([None if e is None else self.op(e) for e in o.elems])
        if isinstance(o, ArgList):
            return ArgList([self.op(e) for e in o.elems])
        if isinstance(o, PredPair):
            return PredPair(self.op(o.p), self.op(o.q) if o.q is not None else None)
        return o

    def instruction(self, ins: Instruction) -> Instruction:
        new = copy.copy(ins)
        new.operands = [self.op(o) for o in ins.operands]
        new.guard = self.op(ins.guard) if ins.guard is not None else None
        return new


def _call_parts(ins: Instruction):
    """(results, function name, arguments) of a call instruction."""
    if ins.syntax_error is not None:
        raise ins.syntax_error
    ops = list(ins.operands)
    rets = []
    if ops and isinstance(ops[0], ArgList):
        rets = ops.pop(0).elems
    if not ops:
        raise PtxError(ins.line, f"call without a function: {ins.text}")
    target = ops.pop(0)
    if isinstance(target, Reg):
        if getattr(ins, "prototype", None) is None:
            raise PtxError(ins.line, f"indirect call without a .callprototype: {ins.text}")
    elif not isinstance(target, Sym):
        raise PtxError(ins.line, f"bad call target {target}: {ins.text}")
    args = []
    if ops and isinstance(ops[0], ArgList):
        args = ops.pop(0).elems
    if ops:
        raise unsupported(ins, "call through a jump table (.calltargets)")
    for x in rets + args:
        if not isinstance(x, Sym):
            raise unsupported(ins, f"call operand {x} (expected .param variable names)")
    name = target if isinstance(target, Reg) else target.name
    return [x.name for x in rets], name, [x.name for x in args]


def _used_names(body) -> set:
    """Every register or bare name the instructions of `body` mention."""
    names: set = set()

    def visit(o):
        if isinstance(o, (Reg, Sym)):
            names.add(o.name)
        elif isinstance(o, (Addr, TensorAddr)) and o.base is not None:
            visit(o.base)
            if isinstance(o, TensorAddr):
                visit(o.coords)
        elif isinstance(o, (Vec, ArgList)):
            for e in o.elems:
                if e is not None:
                    visit(e)
        elif isinstance(o, PredPair):
            visit(o.p)
            if o.q is not None:
                visit(o.q)
    for ins in body:
        if isinstance(ins, Instruction):
            for o in ins.operands:
                visit(o)
            if ins.guard is not None:
                visit(ins.guard)
    return names


def _bare_registers(k) -> None:
    """Registers declared without '%' (`.reg .pred __$temp3;`) parse as names: make the
    operands that name a declared register Reg operands."""
    bare = {r: r for r in _used_names(k.body) if not r.startswith("%") and r in k.registers}
    if not bare:
        return
    ren = _Renamer(bare, {}, {})
    k.body = [ren.instruction(it) if isinstance(it, Instruction) else it for it in k.body]


def inline_calls(k, mod) -> None:
    """Replace every `call` in kernel k by the callee's body (see module docstring)."""
    _bare_registers(k)
    if not any(isinstance(it, Instruction) and it.opcode == "call" for it in k.body):
        _rewrite_params(k)
        return
    ctx = _Context([0])
    k.body = _expand(k, k.body, mod, (k.name,), ctx)
    _subroutines(k, mod, ctx)
    _rewrite_params(k)


class _Context(list):
    """What one kernel's expansion keeps: [instance counter], the out-of-line copies of
    recursive functions (recursion.py) and the one whose body is being expanded."""

    def __init__(self, items):
        super().__init__(items)
        self.subs: dict = {}
        self.frame = None


def _subroutines(k, mod, ctx) -> None:
    """Expand the bodies of the recursive functions' copies (which may call for more) and
    put them after the kernel's code."""
    done: list = []
    while len(done) < len(ctx.subs):
        sub = next(s for s in ctx.subs.values() if s not in done)
        f = mod.functions[sub.name]
        body = recursion.body_of(k, f, sub, _Renamer, _used_names)
        outer, ctx.frame = ctx.frame, sub
        sub.body = _expand(k, body, mod, (k.name, sub.name), ctx)
        ctx.frame = outer
        done.append(sub)
    if not done:
        return
    tail = [Instruction("exit", [], [], k.line, "end of the kernel's own code")]
    for sub in done:
        recursion.finish_frame(k, sub, sub.body)
        tail += sub.body + recursion.tail(sub, k.line)
    k.body = k.body + tail


def _expand(k, body, mod, stack, counter) -> list:
    out = []
    for item in body:
        if not (isinstance(item, Instruction) and item.opcode == "call"):
            out.append(item)
            continue
        ins = item
        mods = [m for m in ins.mods if m != "uni"]
        if mods:
            raise unsupported(ins, "modifier " + ", ".join("." + m for m in mods))
        rets, name, args = _call_parts(ins)
        if isinstance(name, Reg):                   # through a function pointer: indirect.py
            out.extend(_expand(k, indirect.choose(k, ins, rets, name, args, mod, stack, counter),
                               mod, stack, counter))
            continue
        provided = _provided_call(ins, name, rets, args, mod)
        if provided is not None:
            out.append(provided)
            continue
        f = mod.functions.get(name)
        if f is None:
            raise PtxError(ins.line, f"call of undefined function {name!r}: {ins.text}")
        if not f.body and not f.registers:
            raise unsupported(ins, f"call of external function {name!r} (no body in "
                                      "this module; only vprintf, __assertfail, malloc and free are provided)")
        ret_params = getattr(f, "return_params", [])
        if len(args) != len(f.params) or len(rets) > len(ret_params):
            raise PtxError(ins.line, f"call of {name!r} with {len(args)} arguments and "
                                     f"{len(rets)} results; it takes {len(f.params)} and "
                                     f"returns {len(ret_params)}: {ins.text}")
        if name in stack:                   # recursion: a real call (recursion.py)
            out.extend(recursion.call_site(k, ins, f, rets, args, counter))
            continue
        out.extend(_expand(k, _inlined(k, ins, f, rets, args, counter), mod, stack + (name,), counter))
    return out


def _provided_call(ins, name: str, rets, args, mod) -> Instruction | None:
    """The instruction a call of a function the emulated GPU provides becomes (vprintf,
    __assertfail, and malloc/free where the module does not define them), or None."""
    if name == "vprintf":
        if len(args) != 2 or len(rets) > 1:
            raise PtxError(ins.line, f"vprintf takes (format, arguments): {ins.text}")
        return Instruction("_vprintf", [], [Sym(rets[0]) if rets else None, Sym(args[0]), Sym(args[1])],
                           ins.line, ins.text, ins.guard)
    if name == "__assertfail":              # device assert(): devassert.py
        if len(args) != 5 or rets:
            raise PtxError(ins.line, f"__assertfail takes (message, file, line, function, "
                                     f"charSize): {ins.text}")
        return Instruction("_assertfail", [], [Sym(a) for a in args], ins.line, ins.text, ins.guard)
    defined = mod.functions.get(name)
    if name in ("malloc", "free") and not (defined and defined.body):      # the device heap: heap.py
        if len(args) != 1 or len(rets) != (name == "malloc"):
            raise PtxError(ins.line, f"{name} takes one argument: {ins.text}")
        return Instruction("_" + name, [], [Sym(rets[0]) if rets else None, Sym(args[0])],
                           ins.line, ins.text, ins.guard)
    return None


def _inlined(k, ins, f, rets, args, counter) -> list:
    """The body of .func `f` copied for one call site: its registers, labels and local
    variables renamed apart, parameters bound to the call's operands, ret a branch to the end."""
    counter[0] += 1
    sfx = f"@{counter[0]}"
    regs = {}
    for r in _used_names(f.body):              # only these need storage in k
        t = f.registers.get(r)
        if t is not None:
            regs[r] = r + sfx
            k.registers[r + sfx] = t
    labels = {it: it + sfx for it in f.body if isinstance(it, str)}
    syms = {p.name: a for p, a in zip(f.params, args)}
    syms.update({p.name: r for p, r in zip(getattr(f, "return_params", []), rets)})
    for v in f.variables:
        if v.space == "shared":
            if not any(x.name == v.name and x.space == "shared" for x in k.variables):
                k.variables.append(v)          # one per CTA, not per call site
            continue
        syms[v.name] = v.name + sfx
        nv = copy.copy(v)
        nv.name = v.name + sfx
        k.variables.append(nv)
    end = f"__return{sfx}"
    ren = _Renamer(regs, labels, syms)
    copied = []
    guard_skip = None
    if ins.guard is not None:                  # @p call: branch around the body
        guard_skip = f"__skip{sfx}"
        copied.append(Instruction("bra", [], [Sym(guard_skip)], ins.line, ins.text,
                                  Reg(ins.guard.name, not ins.guard.negated)))
    for it in f.body:
        if isinstance(it, str):
            copied.append(labels[it])
            continue
        new = ren.instruction(it)
        if new.opcode == "ret":
            new = Instruction("bra", [], [Sym(end)], it.line, it.text, new.guard)
        copied.append(new)
    copied.append(end)
    if guard_skip:
        copied.append(guard_skip)
    return copied


def _param_vars(k) -> dict:
    sizes: dict = {}
    for v in k.variables:
        if v.space == "param":
            sizes[v.name] = max(sizes.get(v.name, 0), v.size)
    return sizes


def _rewrite_params(k) -> None:
    sizes = _param_vars(k)
    if not sizes:
        return
    for name, size in sizes.items():
        for w in range(-(-size // _WORD)):
            k.registers[param_reg(name, w)] = "b64"
    k.param_vars = sizes
    for item in k.body:
        if not isinstance(item, Instruction) or item.opcode not in ("ld", "st"):
            continue
        if "param" not in item.mods:
            continue
        addr = item.operands[1] if item.opcode == "ld" else item.operands[0] \
            if item.operands else None
        if isinstance(addr, Addr) and isinstance(addr.base, Sym) and addr.base.name in sizes:
            item.opcode = "_ldpv" if item.opcode == "ld" else "_stpv"


# --- emitters for the pseudo instructions --------------------------------------------------------

def _pv_access(g, ins, addr, size, n):
    """(word register, bit shift) of each of n elements of `size` bytes at addr."""
    sizes = getattr(g.ck.kernel, "param_vars", {})
    name = addr.base.name
    total = sizes[name]
    out = []
    for i in range(n):
        off = addr.offset + i * size
        if off < 0 or off + size > total:
            raise PtxError(ins.line, f"access past .param variable {name} ({total} bytes): {ins.text}")
        if off % _WORD + size > _WORD:
            raise unsupported(ins, f"a .param access straddling 8-byte words of {name}")
        out.append((Reg(param_reg(name, off // _WORD)), (off % _WORD) * 8))
    return out


def _pv_mods(ins):
    m = Mods(ins)
    m.take("param")
    m.take_all(CACHE_MODS)
    vec = m.take("v2", "v4")
    t = m.one_type()
    m.done()
    if t == "pred" or t == "b128":
        raise unsupported(ins, f".{t} parameters")
    return (int(vec[1:]) if vec else 1), t


def emit_ldpv(g, ins):
    vec, t = _pv_mods(ins)
    d, addr = operands(ins, 2)
    guard = g.guard(ins)
    size, kind = TYPES[t]
    dests = d.elems if isinstance(d, Vec) else [d]
    if len(dests) != vec:
        raise PtxError(ins.line, f"ld.v{vec} needs {vec} destinations: {ins.text}")
    bits = size * 8
    raw_t = t if kind == "s" else f"u{bits}"
    for e, (w, shift) in zip(dests, _pv_access(g, ins, addr, size, vec)):
        word = g.read(ins, w, "u64")
        expr = f"({word} >> _U64({shift}))" if shift else word
        expr = f"({expr}).astype(_U{bits})" if bits < 64 else expr
        if kind == "s":
            expr = f"({expr}).view(_I{bits})"
        g.write(ins, e, expr, raw_t, guard)


def emit_stpv(g, ins):
    vec, t = _pv_mods(ins)
    addr, src = operands(ins, 2)
    guard = g.guard(ins)
    size, kind = TYPES[t]
    srcs = src.elems if isinstance(src, Vec) else [src]
    if len(srcs) != vec or None in srcs:
        raise PtxError(ins.line, f"st.v{vec} needs {vec} sources: {ins.text}")
    bits = size * 8
    for s, (w, shift) in zip(srcs, _pv_access(g, ins, addr, size, vec)):
        if isinstance(s, Imm) and kind == "f":
            val = f"{g.read(ins, s, t)}.view(_U{bits})"
        else:
            val = g.read(ins, s, f"u{bits}")
        if bits == 64:
            g.write(ins, w, val, "u64", guard)
            continue
        mask = g.const(np.uint64(((1 << bits) - 1) << shift))
        word = g.read(ins, w, "u64")
        expr = f"(({word} & ~{mask}) | ({val}.astype(_U64) << _U64({shift})))"
        g.write(ins, w, expr, "u64", guard)


FAMILY = family("calls", __name__, hooks={"load_kernel": inline_calls})
FAMILY.declare("_ldpv", emit=emit_ldpv)
FAMILY.declare("_stpv", emit=emit_stpv)
