"""The address map generated code works in, and where a kernel's variables sit in it.

- global (and .const): device addresses in the arena (engine/memory.py);
- shared: an offset into the CTA's shared window: static variables in declaration order
  at their alignment, then the dynamic `.extern .shared` part, aligned to 16 or more;
- local: an offset into the thread's local window, 0 .. local_bytes;
- generic: a global address as is; shared offset + SHARED_WINDOW; local offset +
  LOCAL_WINDOW. The two windows lie at 2^48 and 2^49, far above any arena address, and
  span 2^32 each; `cvta` adds or removes these bases.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ptx.errors import PtxError
from ..ptx.ir import layout_variables

SHARED_WINDOW = 1 << 48          # generic address of shared offset 0
LOCAL_WINDOW = 1 << 49           # generic address of local offset 0
WINDOW_SPAN = 1 << 32
DYNAMIC_SHARED_ALIGN = 16


@dataclass
class Layout:
    shared: dict            # name -> offset in the shared window (dynamic ones included)
    static_shared: int      # bytes of static shared memory
    dynamic_offset: int     # where dynamic shared memory starts
    local: dict             # name -> offset in the local window
    local_bytes: int

    def shared_window(self, dynamic: int) -> int:
        return self.dynamic_offset + dynamic if dynamic else self.static_shared


MAX_STATIC_SHARED = 48 * 1024   # what ptxas allows a kernel to declare statically


def kernel_layout(k) -> Layout:
    svars = k.shared_variables
    shared, static = layout_variables(svars)
    if static > MAX_STATIC_SHARED:
        raise PtxError(k.line, f"entry function {k.name!r} uses too much shared data "
                               f"({static} bytes, {MAX_STATIC_SHARED} max)")
    externs = [v for v in svars if v.extern]
    align = max([DYNAMIC_SHARED_ALIGN] + [v.align for v in externs])
    dyn = -(-static // align) * align
    for v in externs:
        shared[v.name] = dyn
    local, lbytes = layout_variables([v for v in k.variables if v.space == "local"])
    return Layout(shared, static, dyn, local, lbytes)

