"""What every CUDA kernel of the backend shares: launching a handwritten kernel of ptx/ on
the current stream, and telling the caching allocator which streams use a tensor.

Every tensor a launch uses is recorded with the allocator when its memory came from another
stream, so dropping it cannot hand that memory out before the launch has run; temporaries
made on the current stream are reused only in that stream's order, after the kernels that
read them.
"""
from ... import trace
from ...cuda import Stream, current_stream
from ...cuda.context import ensure_context
from ...frontend import dtypes as dt
from ...frontend.tensor import Tensor
from .. import ptx

BLOCK = 256
MAX_GRID = 2048          # grid-stride kernels need no more blocks than this to fill a GPU
SUFFIX = {dt.float32: "f32", dt.float16: "f16", dt.float64: "f64", dt.int32: "i32", dt.int64: "i64",
          dt.bfloat16: "bf16", dt.bool_: "bool"}


def record_uses(tensors, stream) -> None:
    """Tell the allocator that work on `stream` uses these tensors' memory, so a block made on
    another stream is not handed out again before that work is done."""
    handle = None
    for t in tensors:
        block = t.storage.block
        if block is not None and block.stream is not None:
            if handle is None:
                handle = 0 if stream is None else stream.handle
            if block.stream != handle:
                t.storage.allocator.record_stream(block, stream if stream is not None else Stream.legacy())


class Kernel:
    """A kernel of ptx/ prepared for one grid and block in one context: what a launch of
    the backend calls (`run`), and what the trace reports of it."""

    __slots__ = ("module", "name", "grid", "block", "image_kind", "run")

    def __init__(self, module: str, name: str, grid, block):
        mod = ptx.module(module)
        self.module, self.name, self.grid, self.block = module, name, grid, block
        self.image_kind = mod.image_kind
        self.run = mod.get_function(name).prepare(grid, block)


_kernels: dict = {}          # (driver, device, context generation, module, kernel, grid, block) -> Kernel
_MAX_KERNELS = 4096          # prepared launches kept (older contexts' go when it fills)


def prepared(module: str, kernel: str, grid, block) -> Kernel:
    """ptx/MODULE.ptx's `kernel` prepared for (grid, block) in the current context, made once."""
    drv, ctx = ensure_context()
    key = (id(drv), ctx.ordinal, ctx.generation, module, kernel, grid, block)
    found = _kernels.get(key)
    if found is None:
        if len(_kernels) >= _MAX_KERNELS:
            _kernels.clear()
        found = _kernels[key] = Kernel(module, kernel, grid, block)
    return found


def run(k: Kernel, tensors, values) -> None:
    """Launch the prepared kernel `k` with `values` (data pointers and numbers) on the current
    stream, after telling the allocator that the stream uses `tensors`."""
    stream = current_stream()
    record_uses(tensors, stream)
    k.run(*values, stream=stream)
    if trace.active is not None:
        trace.note_launch(kernel=k.name, module=k.module, grid=k.grid, block=k.block, image_kind=k.image_kind,
                          stream=stream)


def launch(module: str, kernel: str, grid, block, args) -> None:
    """Launch ptx/MODULE.ptx's `kernel` on the current stream; tensors among `args` pass as
    their data pointers."""
    k = prepared(module, kernel, grid, block)
    tensors = [a for a in args if isinstance(a, Tensor)]
    run(k, tensors, [a.data_ptr if isinstance(a, Tensor) else a for a in args])


class Plans(dict):
    """An op's plans by the dtypes, shapes and strides of its operands (see elementwise.py):
    computed on the first call with that key, looked up after. Bounded: a program that
    makes endless new shapes starts over rather than growing without end."""

    LIMIT = 4096

    def add(self, key, plan):
        if len(self) >= self.LIMIT:
            self.clear()
        self[key] = plan
        return plan


def grid_for(n: int) -> int:
    """Blocks of BLOCK threads for n elements, for a grid-stride kernel."""
    return max(1, min(MAX_GRID, -(-n // BLOCK)))


def rows_grid(rows: int) -> int:
    """Blocks for a row kernel that gives each row one warp."""
    warps = BLOCK // 32
    return max(1, min(65535, -(-rows // warps)))


def suffix(t: Tensor) -> str:
    """The suffix of t's dtype in kernel and file names (f32, f16, f64, i32, i64, bf16, bool)."""
    return SUFFIX[t.dtype]
