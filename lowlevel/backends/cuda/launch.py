"""What every CUDA kernel of the backend shares: launching a handwritten kernel of ptx/ on
the current stream, and telling the caching allocator which streams use a tensor.

Every tensor a launch uses is recorded with the allocator when its memory came from another
stream, so dropping it cannot hand that memory out before the launch has run; temporaries
made on the current stream are reused only in that stream's order, after the kernels that
read them.
"""
from ... import trace
from ...cuda import Stream, current_stream
from ...cuda.allocator import allocator_of
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


def record_uses_on(tensors, stream, handle: int) -> None:
    """record_uses for a caller that has read the stream's handle already."""
    for t in tensors:
        block = t.storage.block
        if block is not None and block.stream is not None and block.stream != handle:
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


class Binding:
    """What an op's plan resolved in one context: the caching allocator its outputs come
    from and what runs it there (a prepared Kernel, a prepared cuBLAS call, or None).
    Made whole and then put in the plan in one assignment, so that a thread reading the
    plan's binding never sees one context's allocator with another context's kernel."""

    __slots__ = ("ctx", "generation", "allocator", "runner")

    def __init__(self, ctx, allocator, runner):
        self.ctx, self.generation, self.allocator, self.runner = ctx, ctx.generation, allocator, runner


class OpPlan:
    """An op's plan for operands of given dtypes, shapes and strides: the output's shape,
    strides and size, the kernel (module, name, grid, block; None: nothing to launch), and
    its binding to the context it last ran in. The binding is valid while that context is
    current and in the same generation (cuda.reset_device() bumps it), which new_output
    checks with the op's one context lookup; another context or a new generation binds again."""

    __slots__ = ("shape", "strides", "nbytes", "kernel", "binding")

    def __init__(self, shape: tuple, strides: tuple, nbytes: int, kernel):
        self.shape, self.strides, self.nbytes = shape, strides, nbytes
        self.kernel = kernel
        self.binding = None

    def runner_for(self, drv, ctx):
        """What runs the plan in the context current now (a subclass may run something else)."""
        return None if self.kernel is None else prepared(*self.kernel)

    def bind(self, drv, ctx) -> Binding:
        binding = self.binding = Binding(ctx, allocator_of(drv, ctx), self.runner_for(drv, ctx))
        return binding


def new_output(plan: OpPlan, dtype, device):
    """(a new contiguous tensor of the plan's shape on `device`, its address, the current
    stream, that stream's handle, the plan's Binding): the op's one context lookup and its
    allocation, on the current stream, from the allocator of the current context (as
    Storage() does)."""
    drv, ctx = ensure_context()
    binding = plan.binding
    if binding is None or binding.ctx is not ctx or binding.generation != ctx.generation:
        binding = plan.bind(drv, ctx)
    stream = current_stream()
    handle = 0 if stream is None else stream.handle         # refused if the stream's context was reset
    allocator = binding.allocator
    block = allocator.allocate_on(plan.nbytes or 1, handle)
    out = Tensor.new_on_block(block, plan.nbytes, device, allocator, plan.shape, plan.strides, dtype)
    return out, block.ptr, stream, handle, binding


def launch_new(plan: OpPlan, dtype, device, inputs: tuple, extra: tuple) -> Tensor:
    """new_output and launch_plan in one frame, for a plan whose kernel takes (out, the
    inputs' addresses..., *extra): the op's new contiguous output, with the kernel queued
    on the current stream (nothing to launch where the plan has no kernel: no elements).
    Its first steps are new_output's, written out here rather than called: this is the
    element-wise ops' path, where a frame is a tenth of a microsecond of every op."""
    drv, ctx = ensure_context()
    binding = plan.binding
    if binding is None or binding.ctx is not ctx or binding.generation != ctx.generation:
        binding = plan.bind(drv, ctx)
    stream = current_stream()
    handle = 0 if stream is None else stream.handle         # refused if the stream's context was reset
    allocator = binding.allocator
    nbytes = plan.nbytes
    block = allocator.allocate_on(nbytes or 1, handle)
    out = Tensor.new_on_block(block, nbytes, device, allocator, plan.shape, plan.strides, dtype)
    k = binding.runner
    if k is None:
        return out
    values = [block.ptr]
    for t in inputs:
        storage = t.storage
        used = storage.block
        # Memory of the output's allocator is this context's, in this generation (there is
        # an allocator per generation): its address needs no check of Storage.ptr's kind.
        values.append(used.ptr if storage.allocator is allocator and not t.offset else t.data_ptr)
        if used.stream != handle and used.stream is not None:            # record_uses_on
            storage.allocator.record_stream(used, stream if stream is not None else Stream.legacy())
    k.run.run_own(handle, (*values, *extra))
    if trace.active is not None:
        trace.note_launch(kernel=k.name, module=k.module, grid=k.grid, block=k.block, image_kind=k.image_kind,
                          stream=stream)
    return out


def launch_plan(binding: Binding, inputs, values, stream, handle: int) -> None:
    """Launch the bound kernel with `values` (the backend's own: addresses, counts, and
    numbers for float parameters; PreparedLaunch.run_own) on the stream new_output
    returned, after telling the allocator that the stream uses the `inputs` (the output
    was made on it)."""
    record_uses_on(inputs, stream, handle)
    k = binding.runner
    k.run.run_own(handle, values)
    if trace.active is not None:
        trace.note_launch(kernel=k.name, module=k.module, grid=k.grid, block=k.block, image_kind=k.image_kind,
                          stream=stream)


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
