"""ptx/tensor_ops.ptx against numpy, on every driver present: strided copies (transposed,
sliced, broadcast and reversed views of 0..6 dimensions), row reductions, scaling, casts.

Inputs are fresh random numbers (or random bit patterns) of awkward sizes; outputs are
poisoned first, so an element a kernel forgets to write shows up."""
import struct

import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload

from lowlevel import cuda, kernels


def fn(name):
    return kernels.module("tensor_ops").get_function(name)


# --- strided copies ----------------------------------------------------------------------

WIDTHS = {"b16": np.uint16, "b32": np.uint32, "b64": np.uint64}


def layout(view: np.ndarray, base: np.ndarray) -> tuple[int, bytes]:
    """(element offset of view[0...] in base, the 104-byte layout struct) for a numpy view."""
    item = base.itemsize
    offset_bytes = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    assert offset_bytes % item == 0
    shape = list(view.shape) + [0] * (6 - view.ndim)
    strides = [s // item for s in view.strides] + [0] * (6 - view.ndim)
    assert all(s % item == 0 for s in view.strides)
    # Strides may be negative (a reversed view): packed as two's complement u64s.
    strides = [s & (2**64 - 1) for s in strides]
    return offset_bytes // item, struct.pack("<13Q", view.ndim, *shape, *strides)


def odd_shape(rng, ndim, max_elems=4000):
    shape = [int(rng.integers(1, 8)) for _ in range(ndim)]
    while np.prod(shape) > max_elems:
        shape[int(np.argmax(shape))] //= 2
    return tuple(shape)


def views(rng, base):
    """(description, view of base) pairs: every kind of view the backend makes."""
    n_base = base.size
    out = []
    for ndim in range(1, 7):
        shape = odd_shape(rng, ndim)
        k = int(np.prod(shape))
        # Transposed: a random permutation of the axes of a contiguous array.
        a = base[:k].reshape(shape)
        out.append((f"transpose{ndim}", a.transpose(rng.permutation(ndim))))
        # Sliced: start > 0 (non-zero storage offset), steps 1..3, in a bigger array.
        big = tuple(s * 3 + 2 for s in shape)
        while np.prod(big) > n_base - 7:      # the slice below starts at offset 7
            big = tuple(max(1, b // 2) for b in big)
        b = base[7:7 + int(np.prod(big))].reshape(big)
        sl = []
        for d in big:
            start = int(rng.integers(0, max(1, d // 3)))
            step = int(rng.integers(1, 4))
            sl.append(slice(start, None, step))
        out.append((f"slice{ndim}", b[tuple(sl)]))
        # Broadcast: some dimensions of size 1 stretched (stride 0), and new leading ones.
        small = tuple(1 if rng.random() < 0.5 else s for s in shape)
        c = base[3:3 + int(np.prod(small))].reshape(small)
        target = shape
        if ndim < 6:
            target = (int(rng.integers(2, 5)),) + shape
        out.append((f"broadcast{ndim}", np.broadcast_to(c, target)))
        # All at once: slice, then transpose, then broadcast a size-1 axis.
        d = b[tuple(sl)].transpose(rng.permutation(ndim))
        if ndim < 6:
            d = np.broadcast_to(d[None], (3,) + d.shape)
        out.append((f"mixed{ndim}", d))
        # Reversed (negative strides): numpy's x[::-1] along every axis.
        out.append((f"reversed{ndim}", a[(slice(None, None, -1),) * ndim]))
    out.append(("scalar", base[5:6].reshape(())))                       # ndim == 0, n == 1
    out.append(("big_transpose", base[:601 * 17].reshape(601, 17).T))    # many elements per thread
    out.append(("one_column", base[2:2 + 5 * 9].reshape(5, 9)[:, 4:5]))  # size-1 inner dim
    return out


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_strided_copy(driver, rng, width):
    dtype = WIDTHS[width]
    f = fn(f"strided_copy_{width}")
    info = np.iinfo(dtype)
    base = rng.integers(0, info.max, size=20_000, dtype=dtype, endpoint=True)
    dbase = upload(base)
    for name, view in views(rng, base):
        offset, lay = layout(view, base)
        n = view.size
        out = device_poisoned(max(1, n * base.itemsize))
        grid = int(rng.integers(1, 9))
        f.launch(grid, 128, (out, dbase.ptr + offset * base.itemsize, n, lay))
        got = download(out, view.shape, dtype)
        np.testing.assert_array_equal(got, np.ascontiguousarray(view), err_msg=f"{name} {view.shape} "
                                      f"strides {view.strides} offset {offset} grid {grid}")


def test_strided_copy_empty(driver):
    """n == 0 (a dimension of size 0): nothing is read or written, no fault."""
    f = fn("strided_copy_b32")
    src = upload(np.arange(10, dtype=np.uint32))
    out = device_poisoned(16)
    lay = struct.pack("<13Q", 2, 3, 0, 0, 0, 0, 0, 1, 3, 0, 0, 0, 0)
    f.launch(1, 64, (out, src, 0, lay))
    cuda.synchronize()
    assert (download(out, 4, np.uint32) == 0xFFFFFFFF).all()


def test_strided_copy_float_bits(driver, rng):
    """The bits move unchanged: NaN payloads, -0.0, infinities, subnormals (float32 via _b32)."""
    # quiet NaN with a payload, signalling NaN, -0.0, +inf, -inf, smallest subnormal, -3.5
    x = np.array([0x7FC00123, 0x7F800001, 0x80000000, 0x7F800000, 0xFF800000, 0x00000001,
                  0xC0600000], np.uint32).view(np.float32)
    f = fn("strided_copy_b32")
    src = upload(x)
    out = device_poisoned(x.nbytes * 2)
    lay = struct.pack("<13Q", 2, 2, x.size, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0)  # broadcast x twice
    f.launch(1, 32, (out, src, 2 * x.size, lay))
    got = download(out, (2, x.size), np.uint32)
    np.testing.assert_array_equal(got, np.broadcast_to(x.view(np.uint32), (2, x.size)))


# --- row reductions --------------------------------------------------------------------

COLS = [0, 1, 5, 31, 32, 33, 64, 100, 1000, 1057]


def reduction_input(rng, rows, cols):
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    if cols:
        # A few rows get a NaN, inf or -inf somewhere (the lane that holds it varies).
        for r in range(0, rows, 5):
            x[r, int(rng.integers(cols))] = [np.nan, np.inf, -np.inf][(r // 5) % 3]
        if rows > 3:
            x[3, :] = -np.inf                          # a row of only -inf
    return x


@pytest.mark.parametrize("cols", COLS)
def test_reduce_rows_sum(driver, rng, cols):
    f = fn("reduce_rows_sum_f32")
    for rows, warps, grid in [(1, 1, 1), (37, 4, None), (37, 4, 2), (9, 8, None)]:
        x = reduction_input(rng, rows, cols)
        y = device_poisoned(4 * rows)
        grid = grid or -(-rows // warps)
        f.launch(grid, 32 * warps, (upload(x), y, rows, cols))
        got = download(y, rows, np.float32)
        with np.errstate(invalid="ignore"):
            exact = x.astype(np.float64).sum(axis=1)
        finite = np.isfinite(exact)
        np.testing.assert_array_equal(got[~finite], exact[~finite].astype(np.float32))
        # Sequential per-lane sums then a 5-step tree: error <= (cols/32 + 6) eps * sum|x|.
        bound = (cols / 32 + 6) * 2.0**-24 * np.abs(x[finite].astype(np.float64)).sum(axis=1)
        err = np.abs(got[finite].astype(np.float64) - exact[finite])
        assert (err <= bound).all(), f"rows {rows} cols {cols}: worst excess {np.max(err - bound)}"
        if cols == 0:
            np.testing.assert_array_equal(got, np.zeros(rows, np.float32))


@pytest.mark.parametrize("cols", COLS)
def test_reduce_rows_max(driver, rng, cols):
    f = fn("reduce_rows_max_f32")
    for rows, warps, grid in [(1, 1, 1), (37, 4, None), (37, 4, 2), (9, 8, None)]:
        x = reduction_input(rng, rows, cols)
        y = device_poisoned(4 * rows)
        grid = grid or -(-rows // warps)
        f.launch(grid, 32 * warps, (upload(x), y, rows, cols))
        got = download(y, rows, np.float32)
        # numpy.max propagates NaN; an empty row gives -inf (the kernel's documented choice).
        expect = x.max(axis=1) if cols else np.full(rows, -np.inf, np.float32)
        np.testing.assert_array_equal(got, expect)


def test_reduce_rows_nan_everywhere(driver, rng):
    """A NaN in any lane of any column block reaches y, for sum and max alike."""
    cols = 70
    x = rng.standard_normal((cols, cols)).astype(np.float32)
    x[np.arange(cols), np.arange(cols)] = np.nan     # row r has its NaN in column r (every lane)
    for name in ("reduce_rows_sum_f32", "reduce_rows_max_f32"):
        y = device_poisoned(4 * cols)
        fn(name).launch(3, 64, (upload(x), y, cols, cols))
        assert np.isnan(download(y, cols, np.float32)).all()


def test_reduce_rows_no_rows(driver):
    for name in ("reduce_rows_sum_f32", "reduce_rows_max_f32"):
        y = device_poisoned(4)
        fn(name).launch(1, 32, (upload(np.ones(4, np.float32)), y, 0, 4))
        assert (download(y, 1, np.uint32) == 0xFFFFFFFF).all()


# --- scale --------------------------------------------------------------------------------


def test_scale(driver, rng):
    f = fn("scale_f32")
    for n in [0, 1, 37, int(rng.integers(1000, 50_000))]:
        x = (rng.standard_normal(n) * 10).astype(np.float32)
        x[: min(n, 5)] = np.array([0.0, -0.0, np.inf, np.nan, 3e38], np.float32)[: min(n, 5)]
        s = np.float32(rng.standard_normal() * 4)
        out = device_poisoned(max(4, 4 * n))
        f.launch(int(rng.integers(1, 9)), 256, (out, upload(x), s, n))
        with np.errstate(all="ignore"):
            expect = (x.astype(np.float64) * np.float64(s)).astype(np.float32)   # exact, then one rounding
        np.testing.assert_array_equal(download(out, n, np.float32), expect)
    # out may alias x, and a mean is sum * (1/n).
    x = rng.standard_normal(1000).astype(np.float32)
    dx = upload(x)
    f.launch(2, 128, (dx, dx, np.float32(1 / 1000), 1000))
    np.testing.assert_array_equal(download(dx, 1000, np.float32), x * np.float32(1 / 1000))


# --- casts ----------------------------------------------------------------------------------


def same_floats(got, expect):
    """Equal bit for bit (so -0.0 != 0.0), except that any NaN matches any NaN."""
    got, expect = np.asarray(got), np.asarray(expect)
    assert got.dtype == expect.dtype and got.shape == expect.shape
    nan = np.isnan(expect)
    np.testing.assert_array_equal(np.isnan(got), nan)
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.itemsize]
    bad = np.flatnonzero(got[~nan].view(u) != expect[~nan].view(u))
    assert bad.size == 0, (f"{bad.size} mismatches, e.g. input #{bad[0]}: got {got[~nan][bad[0]]!r} "
                           f"expected {expect[~nan][bad[0]]!r}")


def run_cast(rng, name, x, out_dtype):
    n = x.size
    out = device_poisoned(max(1, n * np.dtype(out_dtype).itemsize))
    fn(name).launch(int(rng.integers(1, 9)), 256, (out, upload(x), n))
    return download(out, n, out_dtype)


def test_cast_f32_f16(driver, rng):
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16)   # every finite f16 >= 0
    lo, hi = h[:-1].astype(np.float32), h[1:].astype(np.float32)
    mid = (lo + hi) / 2                                           # exact in f32: ties
    edge = np.array([65504, 65519.996, 65520, 65536, 1e10, 3e38, 2.0**-24, 2.0**-25,
                     2.0**-25 * 1.0000001, 1.5 * 2.0**-24, 2.0**-26, 1e-30, 0.0, -0.0,
                     np.inf, -np.inf, np.nan, 2049, 2051, 4097, 4099], np.float32)
    rand = (rng.standard_normal(5000) * 10.0 ** rng.integers(-8, 6, 5000)).astype(np.float32)
    x = np.concatenate([mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(0)),
                        edge, rand])
    x = np.concatenate([x, -x])
    with np.errstate(over="ignore"):
        expect = x.astype(np.float16)
    same_floats(run_cast(rng, "cast_f32_f16", x, np.float16), expect)


def test_cast_f16_f32(driver, rng):
    x = np.arange(0, 1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)  # every f16
    same_floats(run_cast(rng, "cast_f16_f32", x, np.float32), x.astype(np.float32))


def test_cast_f32_f64(driver, rng):
    x = rng.integers(0, 2**32, 20_000, dtype=np.uint64).astype(np.uint32).view(np.float32)  # any bits
    x = np.concatenate([x, np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4028235e38],
                                    np.float32)])
    with np.errstate(invalid="ignore"):                             # signalling NaNs among the bits
        expect = x.astype(np.float64)
    same_floats(run_cast(rng, "cast_f32_f64", x, np.float64), expect)


def test_cast_f64_f32(driver, rng):
    f = rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    f = f[np.isfinite(f)].astype(np.float64)
    up = np.nextafter(f.astype(np.float32), np.float32(np.inf)).astype(np.float64)
    ties = f + (up - f) / 2                                         # halfway between two floats
    fmax = float(np.finfo(np.float32).max)
    edge = np.array([fmax, fmax + 2.0**103, fmax + 2.0**103 - 2.0**60, 1e39, 1e300, np.inf, np.nan,
                     2.0**-149, 2.0**-150, 2.0**-150 * 1.5, 2.0**-151, 1e-300, 0.0, -0.0,
                     1 + 2.0**-24, 1 + 3 * 2.0**-24, 1 / 3])
    rand = rng.standard_normal(5000) * 10.0 ** rng.integers(-50, 50, 5000)
    x = np.concatenate([f, ties[np.isfinite(ties)], edge, rand])
    x = np.concatenate([x, -x])
    with np.errstate(over="ignore"):
        expect = x.astype(np.float32)
    same_floats(run_cast(rng, "cast_f64_f32", x, np.float32), expect)


def test_cast_i32_f32(driver, rng):
    edge = np.array([0, 1, -1, 2**24, 2**24 + 1, 2**24 + 3, -(2**24 + 1), 2**31 - 1, -2**31,
                     2**31 - 64, 2**31 - 65, 2**31 - 192, 123456789], np.int64).astype(np.int32)
    rand = rng.integers(-2**31, 2**31, 20_000, dtype=np.int64).astype(np.int32)
    x = np.concatenate([edge, rand])
    expect = x.astype(np.float64).astype(np.float32)               # exact, then one rounding
    same_floats(run_cast(rng, "cast_i32_f32", x, np.float32), expect)


def test_cast_f32_i32(driver, rng):
    rand = (rng.standard_normal(20_000) * 10.0 ** rng.integers(-3, 10, 20_000)).astype(np.float32)
    edge = np.array([0.0, -0.0, 0.5, -0.5, 0.9999999, -0.9999999, 1.0, -1.0, 2.5, -2.5, -2.7, 2.7,
                     2147483520.0, -2147483648.0, 2147483648.0, -2147483904.0, 3e9, -3e9, 1e30,
                     np.inf, -np.inf, np.nan, 1e-40], np.float32)
    x = np.concatenate([edge, rand])
    # C's (int)x truncates toward zero; where C is undefined PTX saturates and maps NaN to 0.
    t = np.trunc(x.astype(np.float64))
    expect = np.where(np.isnan(t), 0, np.clip(np.nan_to_num(t, nan=0.0), -2**31, 2**31 - 1))
    got = run_cast(rng, "cast_f32_i32", x, np.int32)
    np.testing.assert_array_equal(got, expect.astype(np.int64).astype(np.int32))
    inrange = np.abs(x) < 2**31
    np.testing.assert_array_equal(got[inrange], x[inrange].astype(np.int32))    # as numpy's astype


@pytest.mark.parametrize("name,src,dst", [("cast_f32_f16", np.float32, np.float16),
                                          ("cast_f16_f32", np.float16, np.float32),
                                          ("cast_f32_f64", np.float32, np.float64),
                                          ("cast_f64_f32", np.float64, np.float32),
                                          ("cast_i32_f32", np.int32, np.float32),
                                          ("cast_f32_i32", np.float32, np.int32)])
def test_cast_sizes(driver, rng, name, src, dst):
    """n == 0, 1 and odd sizes; the element past n stays poisoned."""
    for n in [0, 1, 3, 257]:
        x = (rng.standard_normal(n) * 100).astype(src)
        out = device_poisoned((n + 1) * np.dtype(dst).itemsize)
        fn(name).launch(2, 64, (out, upload(x), n))
        got = download(out, n + 1, dst)
        assert got[n:].view(np.uint8).tolist() == [0xFF] * np.dtype(dst).itemsize
        with np.errstate(all="ignore"):
            expect = x.astype(np.float64).astype(dst) if dst != np.int32 else x.astype(dst)
        np.testing.assert_array_equal(got[:n], expect)
