"""The PTX instructions, one module per family, each registering into registry.py.

    registry.py    the one registry: emitters by (opcode, form), runtime helpers, special registers
    operands.py    what every family reads an instruction with (Mods, operands, type sets)
    arith.py       add sub mul mad fma div rem, the unary operations, min max, logic, shifts
    fma32.py       fma.rn.f32 on arrays, correctly rounded in a few numpy passes (arith's hot path)
    compare.py     setp set selp
    minmaxmore.py  min/max.relu on s32/s16x2, min/max.xorsign.abs on half types, lop3.{and,or} d|p
    convert.py     mov cvt, trap, membar/fence
    cvtpack.py     cvt.pack.sat (two s32 saturated to u16/s16/u8/s8/u4/s4/u2/s2 and packed)
    half.py        the f16/bf16 (and pair) forms of arithmetic, setp and cvt
    halfmore.py    atom/red.add.noftz on f16/bf16 (and pairs), set on half types
    bits.py        popc clz brev bfind fns bfe bfi prmt lop3 shf mul24 sad dp4a/dp2a slct
                   copysign testp
    warp.py        shfl vote match redux activemask nanosleep, bar.warp.sync
    warpmask.py    the member-mask rule of the *.sync warp instructions, and the waits it asks for
    memops.py      ld ldu st atom red cvta bar/barrier, mov of a variable's address
    spacep.py      isspacep
    paramaddr.py   a kernel parameter's address (mov %rd, param) and ld.param through it,
                   its generic address (cvta.param)
    barred.py      bar.red (popc/and/or)
    matrix.py      ldmatrix, mma.sync (decoding and checking its forms)
    mma_shapes.py  mma's shapes and types, the ISA fragment layouts, its arithmetic
    mma_quadpair.py mma.m8n8k4 .f16: four quad-pair products per warp, their layouts
    mma_sparse.py  mma.sp{::ordered_metadata}: a 2:4 sparse A, its metadata and selector
    matrix_store.py stmatrix, movmatrix
    wmma.py        wmma.load/mma/store (f16 bf16 s8 u8 tf32 f64 s4 u4 b1 shapes)
    lowfloat.py    the 8-bit floats (.e4m3x2/.e5m2x2 cvt, their values) and the tf32 cvt forms
    videoscalar.py the scalar video instructions (vadd ... vmax, vshl vshr, vset) with selectors
    simd.py        video SIMD (vadd4 vabsdiff2 ...), add/min/max.{s,u}16x2, bmsk
    asyncopy.py    cp.async
    bulkcopy.py    cp.async.bulk to shared memory, completed on an mbarrier (sm_90)
    swizzle.py     Hopper's shared-memory swizzle (32B/64B/128B), which TMA writes and wgmma reads
    memhints.py    prefetch prefetchu applypriority discard createpolicy
    asyncstore.py  st.async, red.async into a cluster peer's shared memory (sm_90)
    setmaxnreg.py  setmaxnreg.inc/dec (sm_90a): warpgroups trade registers with the CTA's pool
    griddep.py     griddepcontrol (programmatic dependent launch): nothing to wait for here
    vecatom.py     atom/red.global.v2/.v4/.v8 (f32, f16, bf16 and pairs: add)
    mbarrier.py    mbarrier (init arrive arrive_drop expect_tx complete_tx test/try_wait
                   pending_count inval; arrives on another CTA's barrier), cp.async.mbarrier.arrive
    mbarstate.py   the mbarrier object's encoding, and one run of arrivals applied at once
    mbarfast.py    a CTA's converged arrive and wait on its own barrier, per CTA instead of per lane
    calls.py       `call` of a .func (inlined at load), the .param words of a call
    indirect.py    calls through function pointers (.callprototype): a choice of direct calls
    recursion.py   recursive calls: real calls of an out-of-line copy, a per-thread stack
    liveness.py    the registers live at a label (what a recursive call's frame saves)
    devassert.py   __assertfail (device assert)
    addressing.py  the generic address windows and a kernel's shared/local layout
    electszext.py  elect.sync (the leader of a member mask), szext.{clamp,wrap}
    carry.py       the carry chain: add.cc addc sub.cc subc mad.cc madc
    specials.py    special registers computed on the fly (%clock, %lanemask_*, %smid ...)
    cluster.py     thread-block clusters: %cluster_* registers, mapa, barrier.cluster, %envreg
    printf.py      device printf (vprintf): the format read and formatted per thread
    heap.py        device malloc/free, from the context's heap (CU_LIMIT_MALLOC_HEAP_SIZE)
    numerics.py    the arithmetic of PTX in numpy: rounding, integer division, fma, conversions
    divsqrt.py     directed rounding of division and square root

The decoder (engine/decode.py) imports this package once, so every family has registered
before it reads the registry; no family imports the decoder.
"""
from . import (arith, asyncopy, asyncstore, barred, bits, calls, carry, cluster, compare, convert,  # noqa: F401
               cvtpack, devassert, electszext, griddep, half, halfmore, heap, indirect, lowfloat, matrix, matrix_store,
               mbarrier, memhints, memops, minmaxmore, mma_sparse, paramaddr, printf, recursion, setmaxnreg, simd, spacep,
               specials, vecatom, videoscalar, warp, wmma)
