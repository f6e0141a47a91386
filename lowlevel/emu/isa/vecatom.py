"""Vector atomics on global memory (sm_90, PTX 8.1): each element's atomic at run time
(atom.py's emit_vector_atom writes the instructions):

    atom{.sem}{.scope}{.global}.add{.L2::cache_hint}.{v2,v4}.f32          d, [a], b{, policy};
    atom{.sem}{.scope}{.global}.add.noftz{.L2::cache_hint}.{v2,v4,v8}.{f16,bf16}   d, [a], b;
    atom{.sem}{.scope}{.global}.add.noftz{.L2::cache_hint}.{v2,v4}.{f16x2,bf16x2}  d, [a], b;
    atom{.sem}{.scope}{.global}.{min,max}.noftz{.L2::cache_hint}.{v2,v4,v8}.{f16,bf16}  d, [a], b;
    atom{.sem}{.scope}{.global}.{min,max}.noftz{.L2::cache_hint}.{v2,v4}.{f16x2,bf16x2} d, [a], b;
    red ... the same without d

d and b are vectors ({...}) of the element type. The ISA makes each element its own atomic
operation (the vector as a whole is not one), on consecutive elements from `a`, which is
aligned to the whole vector's size (CUDA_ERROR_MISALIGNED_ADDRESS). Each element goes
through the engine's atomics, so threads hitting the same element serialize in lane order
as for scalar atomics; .f32 add rounds and flushes as the scalar atom.add.f32 on global
memory does, the half types add as atom.add.noftz does (halfatomic.py) and take the min/max as min/max
on half types do (a NaN loses to a number; sm_90 has no scalar form of those).
"""
from __future__ import annotations

import numpy as np

from .registry import provide



def vec_atom(C, space: str, addr, op, ptype: str, values, size: int, iid: int, guard, want_old):
    """Each element's atomic in turn; the old values (one array per element) or None."""
    active, any_active = C.active_with(guard)
    nbytes = size * len(values)
    if any_active:
        a = np.broadcast_to(np.asarray(addr, np.uint64), (C.n,))
        a = a if active is None else a[active]
        bad = (a & np.uint64(nbytes - 1)) != 0
        if bad.any():
            i = int(np.argmax(bad))
            C.fault("CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned", nbytes, space, "atomic",
                    int(a[i]), i, active, None, iid)
    olds = [C.atom(space, addr + np.uint64(i * size), op, ptype, v, None, iid, guard, want_old)
            for i, v in enumerate(values)]
    return olds if want_old else None


provide(_vec_atom=vec_atom)

__all__ = ["vec_atom"]
