"""The CUDA backend: the handwritten kernels of ptx/ and cuBLAS, on the current stream.

Everything is queued on `lowlevel.cuda.current_stream()` and returns at once; nothing here
waits for the GPU except `to_host`, which must hand bytes to the CPU. Every tensor a launch
uses is recorded with the caching allocator when its memory came from another stream, so
dropping it cannot hand that memory out before the launch has run; temporaries made on the
current stream are reused only in that stream's order, after the kernels that read them.

Element-wise ops take contiguous operands of the output's shape; a broadcast operand is
first materialised by the strided-copy kernel (stride 0 along broadcast dimensions).
Reductions and softmax move the reduced dimension last and work on rows.
"""
import struct

import numpy as np

from ...frontend import dtypes as dt
from ... import trace
from .. import ptx as kernels
from ...cuda import Stream, cublas, current_stream, memcpy_dtoh_async, memset_d8, memset_d32
from ...cuda.gemm import gemm_rowmajor
from ...dispatch import CUDA, register_kernel
from ...frontend.ops import broadcast_shapes
from ...frontend.tensor import Tensor, empty, from_numpy_values

allow_tf32 = False       # matmul in float32 on TF32 tensor cores: opt in, as it loses precision

BLOCK = 256
MAX_GRID = 2048          # grid-stride kernels need no more blocks than this to fill a GPU
SUFFIX = {dt.float32: "f32", dt.float16: "f16"}


def _record_uses(tensors, stream) -> None:
    """Tell the allocator that work on `stream` uses these tensors' memory, so a block made on
    another stream is not handed out again before that work is done."""
    for t in tensors:
        block = t.storage.block
        if block is not None and block.stream is not None and block.stream != (0 if stream is None else stream.handle):
            t.storage.allocator.record_stream(block, stream if stream is not None else Stream.legacy())


def _launch(module: str, kernel: str, grid, block, args) -> None:
    """Launch on the current stream; tensors among `args` pass as their data pointers."""
    mod = kernels.module(module)
    f = mod.get_function(kernel)
    stream = current_stream()
    tensors = [a for a in args if isinstance(a, Tensor)]
    _record_uses(tensors, stream)
    f.launch(grid, block, [a.data_ptr if isinstance(a, Tensor) else a for a in args], stream=stream)
    trace.note_launch(kernel=kernel, module=module, grid=grid, block=block, image_kind=mod.image_kind,
                      stream=stream)


def _grid(n: int) -> int:
    return max(1, min(MAX_GRID, -(-n // BLOCK)))


def _suffix(t: Tensor) -> str:
    """"f32" or "f16": the kernels are registered for those two dtypes only."""
    return SUFFIX[t.dtype]


# ---- layout ---------------------------------------------------------------------------------------
_COPY_KERNEL = {2: "strided_copy_b16", 4: "strided_copy_b32", 8: "strided_copy_b64"}
MAX_DIMS = 6


@register_kernel("contiguous", CUDA)
def contiguous(x: Tensor) -> Tensor:
    """A contiguous copy of any strided view (the strided-copy kernel of ptx/tensor_ops.ptx)."""
    out = empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return out
    if x.dtype.itemsize not in _COPY_KERNEL:
        raise NotImplementedError(f"contiguous() on CUDA copies 2, 4 and 8-byte elements, not {x.dtype.name}")
    # Drop size-1 dimensions (their stride does not matter) so more views fit MAX_DIMS.
    dims = [(s, st) for s, st in zip(x.shape, x.strides) if s != 1] or [(1, 0)]
    if len(dims) > MAX_DIMS:
        raise NotImplementedError(f"contiguous() on CUDA handles up to {MAX_DIMS} dimensions, got {x.shape}")
    shape = [s for s, _ in dims] + [1] * (MAX_DIMS - len(dims))
    strides = [st for _, st in dims] + [0] * (MAX_DIMS - len(dims))
    layout = struct.pack("<13Q", len(dims), *shape, *strides)
    _launch("tensor_ops", _COPY_KERNEL[x.dtype.itemsize], _grid(n), BLOCK, (out, x, n, layout))
    return out


def _materialize(t: Tensor, shape: tuple) -> Tensor:
    """`t` broadcast to `shape`, contiguous (a copy only when needed)."""
    if t.shape == tuple(shape) and t.is_contiguous():
        return t
    return contiguous(t.expand(shape))


def _rows_last(x: Tensor, dim: int) -> tuple[Tensor, list]:
    """x with `dim` moved last, contiguous, and the permutation used."""
    order = [d for d in range(x.ndim) if d != dim] + [dim]
    return _materialize(x.permute(order), tuple(x.shape[d] for d in order)), order


# ---- element-wise ---------------------------------------------------------------------------------
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max"}
_UNARY = {"neg": "neg", "relu": "relu", "exp": "exp"}


def _binary_kernel(op: str, name: str):
    def kernel(a: Tensor, b: Tensor) -> Tensor:
        sfx = _suffix(a)
        shape = broadcast_shapes(op, a.shape, b.shape)
        out = empty(shape, dtype=a.dtype, device=a.device)
        n = out.numel()
        if n:
            a2, b2 = _materialize(a, shape), _materialize(b, shape)
            _launch(f"elementwise_{sfx}", f"{name}_{sfx}", _grid(n), BLOCK, (out, a2, b2, n))
        return out
    kernel.__qualname__ = f"{op}"
    return kernel


def _unary_kernel(op: str, name: str):
    def kernel(x: Tensor) -> Tensor:
        sfx = _suffix(x)
        out = empty(x.shape, dtype=x.dtype, device=x.device)
        n = out.numel()
        if n:
            x2 = _materialize(x, x.shape)
            _launch(f"elementwise_{sfx}", f"{name}_{sfx}", _grid(n), BLOCK, (out, x2, n))
        return out
    kernel.__qualname__ = f"{op}"
    return kernel


for _op, _name in _BINARY.items():
    register_kernel(_op, CUDA, _binary_kernel(_op, _name), dtypes=[dt.float32, dt.float16])
for _op, _name in _UNARY.items():
    register_kernel(_op, CUDA, _unary_kernel(_op, _name), dtypes=[dt.float32, dt.float16])


# ---- reductions and softmax (float32) --------------------------------------------------------------
def _zeros_f32(shape, device) -> Tensor:
    out = empty(shape, dtype=dt.float32, device=device)
    if out.numel():
        memset_d32(out.data_ptr, 0, out.numel(), stream=current_stream())
    return out


def _reduce_rows(kind: str, x: Tensor, dim: int | None, keepdim: bool) -> Tensor:
    """sum or max of float32 x over `dim` (or everything), by rows of a contiguous matrix."""
    if dim is None:
        rows_view, cols, out_shape = _materialize(x, x.shape), x.numel(), ()
    else:
        rows_view, _ = _rows_last(x, dim)
        cols = x.shape[dim]
        out_shape = tuple(s for i, s in enumerate(x.shape) if i != dim)
    rows = rows_view.numel() // max(1, cols) if cols else int(np.prod(out_shape, dtype=np.int64))
    if dim is None and kind == "sum":
        out = _zeros_f32((), x.device)                 # reduce_sum adds into its output
        if cols:
            _launch("reduce_sum", "reduce_sum_f32", _grid(cols), BLOCK, (rows_view, out, cols))
    else:
        out = empty(out_shape, dtype=dt.float32, device=x.device)
        if rows:
            warps = BLOCK // 32
            _launch("tensor_ops", f"reduce_rows_{kind}_f32", max(1, min(65535, -(-rows // warps))), BLOCK,
                    (rows_view, out, rows, cols))
    if keepdim:
        out = out.reshape([1 if dim is None or i == dim else s for i, s in enumerate(x.shape)])
    return out


@register_kernel("sum", CUDA, dtypes=[dt.float32])
def sum_(x, dim, keepdim):
    return _reduce_rows("sum", x, dim, keepdim)


@register_kernel("max", CUDA, dtypes=[dt.float32])
def max_(x, dim, keepdim):
    return _reduce_rows("max", x, dim, keepdim)


@register_kernel("mean", CUDA, dtypes=[dt.float32])
def mean(x, dim, keepdim):
    total = _reduce_rows("sum", x, dim, keepdim)
    count = x.numel() if dim is None else x.shape[dim]
    out = empty(total.shape, dtype=dt.float32, device=x.device)
    n = out.numel()
    scale = np.float32(1.0 / count) if count else np.float32(np.nan)
    _launch("tensor_ops", "scale_f32", _grid(n), BLOCK, (out, total, scale, n))
    return out


@register_kernel("softmax", CUDA, dtypes=[dt.float32])
def softmax(x, dim):
    rows_view, order = _rows_last(x, dim)
    cols = x.shape[dim]
    rows = rows_view.numel() // max(1, cols)
    out = empty(rows_view.shape, dtype=dt.float32, device=x.device)
    if rows and cols:
        warps = BLOCK // 32
        _launch("softmax", "softmax_rows_f32", max(1, min(65535, -(-rows // warps))), BLOCK,
                (rows_view, out, rows, cols))
    inverse = [order.index(d) for d in range(x.ndim)]
    return out.permute(inverse)


# ---- matmul on cuBLAS --------------------------------------------------------------------------------
def _as_matrix(t: Tensor):
    """(tensor, transposed, ld) for a 2-D view cuBLAS can read in place, copying otherwise."""
    rows, cols = t.shape[-2], t.shape[-1]
    rs, cs = t.strides[-2], t.strides[-1]
    if cs == 1 and rs >= max(1, cols):
        return t, False, rs
    if rs == 1 and cs >= max(1, rows):
        return t, True, cs                       # a transposed view: stored cols x rows
    t = contiguous(t)
    return t, False, max(1, cols)


@register_kernel("matmul", CUDA, dtypes=[dt.float32, dt.float64, dt.float16, dt.bfloat16])
def matmul(a: Tensor, b: Tensor) -> Tensor:
    a_vector, b_vector = a.ndim == 1, b.ndim == 1
    if a_vector:
        a = a[None, :]
    if b_vector:
        b = b[:, None]
    batch = a.shape[0] if a.ndim == 3 else b.shape[0] if b.ndim == 3 else 1
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    out_shape = ((batch,) if max(a.ndim, b.ndim) == 3 else ()) + (m, n)
    out = empty(out_shape, dtype=a.dtype, device=a.device)
    if out.numel():
        if k == 0:
            memset_d8(out.data_ptr, 0, out.numel() * out.dtype.itemsize, stream=current_stream())
        else:
            a2, ta, lda = _as_matrix(a)
            b2, tb, ldb = _as_matrix(b)
            handle = cublas.get_handle(current_stream())
            _record_uses((a2, b2, out), current_stream())
            dtype = "bfloat16" if a.dtype is dt.bfloat16 else a.dtype.storage
            gemm_rowmajor(handle, a2.data_ptr, b2.data_ptr, out.data_ptr, m, n, k, dtype=dtype, lda=lda, ldb=ldb,
                          ldc=n, trans_a=ta, trans_b=tb, batch=batch,
                          stride_a=a2.strides[0] if a2.ndim == 3 else 0,
                          stride_b=b2.strides[0] if b2.ndim == 3 else 0, stride_c=m * n,
                          tf32=allow_tf32 and a.dtype is dt.float32)
            trace.note_launch(kernel=f"cuBLAS gemm ({a.dtype.name})", module="cublas", grid=None, block=None,
                              image_kind="sass" if handle.lib.kind == "cuda" else "emulated", stream=current_stream())
    if a_vector:
        out = out[..., 0, :]
    if b_vector:
        out = out[..., 0]
    return out


# ---- casts and copies ----------------------------------------------------------------------------------
_CASTS = {(dt.float32, dt.float16): "cast_f32_f16", (dt.float16, dt.float32): "cast_f16_f32",
          (dt.float32, dt.float64): "cast_f32_f64", (dt.float64, dt.float32): "cast_f64_f32",
          (dt.int32, dt.float32): "cast_i32_f32", (dt.float32, dt.int32): "cast_f32_i32"}


@register_kernel("cast", CUDA)
def cast(x: Tensor, dtype) -> Tensor:
    name = _CASTS.get((x.dtype, dtype))
    if name is None:
        known = ", ".join(f"{a.name}->{b.name}" for a, b in _CASTS)
        raise NotImplementedError(f"no CUDA cast from {x.dtype.name} to {dtype.name} (there are: {known})")
    out = empty(x.shape, dtype=dtype, device=x.device)
    n = out.numel()
    if n:
        _launch("tensor_ops", name, _grid(n), BLOCK, (out, _materialize(x, x.shape), n))
    return out


@register_kernel("to_device", CUDA)
def to_device(x: Tensor, device) -> Tensor:
    """Host tensor -> CUDA: an async copy on the current stream (staged from pageable memory)."""
    return from_numpy_values(x.dtype.to_numpy_values(x._host_view()), x.dtype, device)


@register_kernel("to_host", CUDA)
def to_host(x: Tensor) -> Tensor:
    """CUDA -> host: queued on the current stream, so it follows the work that made x; a copy
    into pageable memory returns only when the bytes have arrived."""
    src = _materialize(x, x.shape)
    out = empty(x.shape, dtype=x.dtype, device="cpu")
    nbytes = out.numel() * x.dtype.itemsize
    if nbytes:
        stream = current_stream()
        _record_uses((src,), stream)
        memcpy_dtoh_async(out.storage.host[:nbytes], src.data_ptr, stream)
    return out
