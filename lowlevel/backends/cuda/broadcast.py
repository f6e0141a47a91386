"""Binary element-wise ops that read their operands through strides (ptx/binary_strided.ptx):
a broadcast operand (a bias row, a number's 0-d tensor) or a strided view (a transpose, a
slice) is read in place, so the op is one kernel and allocates only its output.

The kernel walks a 4-d row-major output; the layout here gets there by dropping the
dimensions of size 1 and merging neighbours that are contiguous in both operands, so most
broadcasts reach it with one or two dimensions. A layout that still needs more than four
dimensions has none (the op materialises its operands instead, as before).
"""
from ...frontend import dtypes as dt

MODULE = "binary_strided"
KERNELS = {dt.float32: "binary_strided_f32", dt.float16: "binary_strided_f16"}
# the kernel's `op` parameter, by the name of the contiguous kernel (elementwise.py's _BINARY)
OP_CODES = {"add": 0, "sub": 1, "mul": 2, "div": 3, "max": 4, "min": 5}
DIMS = 4


def strides_in(shape: tuple, t) -> tuple:
    """t's strides (in elements) as an operand broadcast to `shape`: 0 along the dimensions
    it is broadcast over (the leading ones it lacks, and its size-1 ones)."""
    lead = len(shape) - t.ndim
    own = [0] * lead + [0 if size == 1 else st for size, st in zip(t.shape, t.strides)]
    return tuple(own)


def merged_dims(shape: tuple, a_strides: tuple, b_strides: tuple) -> list:
    """[(size, a's stride, b's stride)] of the output's dimensions, outermost first, without
    the size-1 ones, and with each dimension merged into the one before it when both operands
    step over the pair as over one dimension (outer stride = inner stride * inner size)."""
    dims: list = []
    for size, sa, sb in zip(shape, a_strides, b_strides):
        if size == 1:
            continue
        if dims:
            outer, osa, osb = dims[-1]
            if osa == sa * size and osb == sb * size:
                dims[-1] = (outer * size, sa, sb)
                continue
        dims.append((size, sa, sb))
    return dims


def strided_args(op: str, shape: tuple, a, b) -> tuple | None:
    """The kernel's arguments after (out, a, b, n): (op, shape1, shape2, shape3, a0..a3,
    b0..b3), or None where the layout needs more than DIMS dimensions."""
    dims = merged_dims(shape, strides_in(shape, a), strides_in(shape, b))
    if len(dims) > DIMS:
        return None
    dims = [(1, 0, 0)] * (DIMS - len(dims)) + dims
    sizes = [size for size, _, _ in dims]
    return (OP_CODES[op], *sizes[1:], *(sa for _, sa, _ in dims), *(sb for _, _, sb in dims))
