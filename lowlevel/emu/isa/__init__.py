"""The PTX instructions, one module per family, each registering into registry.py.

    registry.py    the one registry: emitters by (opcode, form), runtime helpers, special registers
    operands.py    what every family reads an instruction with (Mods, operands, type sets)
    arith.py       add sub mul mad fma div rem, the unary operations, min max, logic, shifts
    compare.py     setp set selp
    convert.py     mov cvt, trap, membar/fence
    half.py        the f16/bf16 (and pair) forms of arithmetic, setp and cvt
    bits.py        popc clz brev bfind fns bfe bfi prmt lop3 shf mul24 sad dp4a/dp2a slct
                   copysign testp, and the carry chain (add.cc addc ...)
    warp.py        shfl vote match redux activemask nanosleep, and the special registers
                   computed on the fly (%clock, %lanemask_*, %smid ...)
    memops.py      ld st atom red cvta isspacep bar/barrier, mov of a variable's address
    barred.py      bar.red (popc/and/or)
    asyncopy.py    cp.async
    calls.py       `call` of a .func (inlined at load) and device printf (vprintf)
    devassert.py   __assertfail (device assert)
    addressing.py  the generic address windows and a kernel's shared/local layout
    numerics.py    the arithmetic of PTX in numpy: rounding, division, fma, conversions

The decoder (engine/decode.py) imports this package once, so every family has registered
before it reads the registry; no family imports the decoder.
"""
from . import arith, asyncopy, barred, bits, calls, compare, convert, devassert, half, memops, warp  # noqa: F401
