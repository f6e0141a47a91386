"""The PTX instructions, one module per family, each family declared once in registry.py.

    registry.py    the one registry: each family, its rows (opcode -> emitters by form, pipe
                   class, block role), its per-launch state and hooks; runtime helpers,
                   special registers
    operands.py    what every family reads an instruction with (Mods, operands, type sets,
                   comparison operators)
    addmul.py      add sub mul mad fma, addc subc madc: every form (integer, float, half
                   types, .cc, 16x2)
    unary.py       abs neg not cnot sqrt rcp rsqrt ex2 lg2 sin cos tanh, their half forms
    minmax.py      min max: integer, float, half types, .relu on s32/s16x2, .xorsign.abs, 16x2
    arith.py       div rem, and or xor, shl shr, copysign testp
    fma32.py       fma.rn.f32 on arrays, correctly rounded in a few numpy passes (addmul's hot path)
    compare.py     setp set selp, every form (the half types included)
    convert.py     mov (every form: a variable's or function's address too), trap, membar/fence
    cvt.py         cvt, every form: integer/float, the half types, .pack, the 8-bit floats, tf32
    cvtpack.py     cvt.pack.sat's arithmetic (two s32 saturated to u16/s16/u8/s8/u4/s4/u2/s2, packed)
    half.py        the f16/bf16 (and pair) arithmetic and rounding; what the half-type emitters share
    halfatomic.py  atom/red.add.noftz on the half types (their step functions)
    bits.py        popc clz brev bfind fns bfe bfi prmt lop3 (and lop3.{and,or} d|p) shf mul24
                   sad dp4a/dp2a slct
    warp.py        shfl vote match redux activemask nanosleep, bar.warp.sync
    warpmask.py    the member-mask rule of the *.sync warp instructions, and the waits it asks for;
                   the .aligned rule (whole converged warps) of mma, ldmatrix, wmma
    memops.py      ld ldu st (st.async too) cvta bar/barrier
    atom.py        atom red, every form: scalar, .noftz on the half types, vector, red.async
    spacep.py      isspacep
    paramaddr.py   a kernel parameter's address (mov %rd, param) and ld.param through it,
                   its generic address (cvta.param)
    barred.py      bar.red (popc/and/or)
    matrix.py      ldmatrix, mma.sync and mma.sp (decoding and checking every form of mma)
    mma_shapes.py  mma's shapes and types, the ISA fragment layouts, its arithmetic
    mma_quadpair.py mma.m8n8k4 .f16: four quad-pair products per warp, their layouts
    mma_sparse.py  mma.sp{::ordered_metadata}'s arithmetic: a 2:4 sparse A, its metadata and selector
    matrix_store.py stmatrix, movmatrix
    wmma.py        wmma.load/mma/store (f16 bf16 s8 u8 tf32 f64 s4 u4 b1 shapes)
    lowfloat.py    the 8-bit floats (.e4m3x2/.e5m2x2) and tf32: their values, their cvt arithmetic
    videoscalar.py the scalar video instructions (vadd ... vmax, vshl vshr, vset) with selectors
    simd.py        video SIMD (vadd4 vabsdiff2 ...), bmsk; the lanes of add/min/max.{s,u}16x2
    asyncopy.py    cp.async
    bulkcopy.py    cp.async.bulk to shared memory, completed on an mbarrier (sm_90); its writes
                   land through mbarrier.land_on_completion
    swizzle.py     Hopper's shared-memory swizzle (32B/64B/128B), which TMA writes and wgmma reads
    tensormap.py   the tensor map (CUtensorMap): the emulator's 128-byte encoding, decoded and checked
    tma.py         cp.async.bulk.tensor loads, stores, prefetches; cp.reduce.async.bulk.tensor; bulk
                   groups (forms of asyncopy's `cp` row); loads land through bulkcopy.complete_tx
    tmareduce.py   cp.reduce.async.bulk.tensor's arithmetic by element type
    tensormap_ops.py tensormap.replace, tensormap.cp_fenceproxy (sm_90a): the `tensormap` row
    wgmma.py       wgmma (sm_90a): fence, mma_async, commit_group, wait_group (the row, pipe TENSOR)
    wgmma_shapes.py wgmma.mma_async's shapes and types, its A and D fragments, its arithmetic
    wgmma_desc.py  wgmma's shared-memory matrix descriptors and canonical (swizzled) layouts
    wgmma_async.py wgmma's groups, waits and fences, the warpgroup-collective rule, the check
                   in front of any instruction touching a pending wgmma's registers (the
                   before_emit hook); part of the wgmma family, its per-launch state
    memhints.py    prefetch prefetchu applypriority discard createpolicy
    asyncstore.py  st.async, red.async into a cluster peer's shared memory (sm_90): run time
    setmaxnreg.py  setmaxnreg.inc/dec (sm_90a): warpgroups trade registers with the CTA's pool
    griddep.py     griddepcontrol (programmatic dependent launch): nothing to wait for here
    vecatom.py     atom/red.global.v2/.v4/.v8 (f32, f16, bf16 and pairs: add): run time
    mbarrier.py    mbarrier (init arrive arrive_drop expect_tx complete_tx test/try_wait
                   pending_count inval; arrives on another CTA's barrier), cp.async.mbarrier.arrive
    mbarstate.py   the mbarrier object's encoding, and one run of arrivals applied at once
    mbarfast.py    a CTA's converged arrive and wait on its own barrier, per CTA instead of per lane
    calls.py       `call` of a .func (inlined at load), the .param words of a call
    indirect.py    calls through function pointers (.callprototype): a choice of direct calls
    recursion.py   recursive calls: real calls of an out-of-line copy, a per-thread stack
    liveness.py    the registers live at a label (what a recursive call's frame saves)
    devassert.py   __assertfail (device assert)
    addressing.py  the generic address windows, a kernel's shared/local layout, and the address
                   operand [...] of every memory instruction
    electszext.py  elect.sync (the leader of a member mask), szext.{clamp,wrap}
    carry.py       the carry flag (a hidden predicate register) and add/sub with carry in and out
    specials.py    special registers computed on the fly (%clock, %lanemask_*, %smid ...)
    cluster.py     thread-block clusters: %cluster_* registers, mapa, barrier.cluster, %envreg
    printf.py      device printf (vprintf): the format read and formatted per thread
    heap.py        device malloc/free, from the context's heap (CU_LIMIT_MALLOC_HEAP_SIZE)
    numerics.py    the arithmetic of PTX in numpy: rounding, integer division, fma, conversions
    divsqrt.py     directed rounding of division and square root

The decoder (engine/decode.py) imports this package once, so every family has declared
itself before it reads the registry; no family imports the decoder. Modules that declare no
family (operands, numerics, addressing, fma32, divsqrt, and what the families' emitters share
or call at run time: half, carry, halfatomic, cvtpack, lowfloat, vecatom, asyncstore,
mma_sparse, tma ...) hold no launch state. Every emitter of an opcode is defined in the module
of the family that declares it.
"""
from . import (addmul, arith, asyncopy, asyncstore, atom, barred, bits, calls, carry, cluster,  # noqa: F401
               compare, convert, cvt, cvtpack, devassert, electszext, griddep, half, halfatomic,
               heap, indirect, lowfloat, matrix, matrix_store, mbarrier, memhints, memops, minmax,
               mma_sparse, paramaddr, printf, recursion, setmaxnreg, simd, spacep, specials,
               tensormap_ops, unary, vecatom, videoscalar, warp, wgmma, wmma)
