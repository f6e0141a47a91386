"""What every CUDA kernel of the backend shares: launching a handwritten kernel of ptx/ on
the current stream, and telling the caching allocator which streams use a tensor.

Every tensor a launch uses is recorded with the allocator when its memory came from another
stream, so dropping it cannot hand that memory out before the launch has run; temporaries
made on the current stream are reused only in that stream's order, after the kernels that
read them.
"""
from ... import trace
from ...cuda import Stream, current_stream
from ...frontend import dtypes as dt
from ...frontend.tensor import Tensor
from .. import ptx

BLOCK = 256
MAX_GRID = 2048          # grid-stride kernels need no more blocks than this to fill a GPU
SUFFIX = {dt.float32: "f32", dt.float16: "f16"}


def record_uses(tensors, stream) -> None:
    """Tell the allocator that work on `stream` uses these tensors' memory, so a block made on
    another stream is not handed out again before that work is done."""
    for t in tensors:
        block = t.storage.block
        if block is not None and block.stream is not None and block.stream != (0 if stream is None else stream.handle):
            t.storage.allocator.record_stream(block, stream if stream is not None else Stream.legacy())


def launch(module: str, kernel: str, grid, block, args) -> None:
    """Launch ptx/MODULE.ptx's `kernel` on the current stream; tensors among `args` pass as
    their data pointers."""
    mod = ptx.module(module)
    f = mod.get_function(kernel)
    stream = current_stream()
    tensors = [a for a in args if isinstance(a, Tensor)]
    record_uses(tensors, stream)
    f.launch(grid, block, [a.data_ptr if isinstance(a, Tensor) else a for a in args], stream=stream)
    trace.note_launch(kernel=kernel, module=module, grid=grid, block=block, image_kind=mod.image_kind,
                      stream=stream)


def grid_for(n: int) -> int:
    """Blocks of BLOCK threads for n elements, for a grid-stride kernel."""
    return max(1, min(MAX_GRID, -(-n // BLOCK)))


def rows_grid(rows: int) -> int:
    """Blocks for a row kernel that gives each row one warp."""
    warps = BLOCK // 32
    return max(1, min(65535, -(-rows // warps)))


def suffix(t: Tensor) -> str:
    """"f32" or "f16": the element-wise kernels exist for those two dtypes only."""
    return SUFFIX[t.dtype]
