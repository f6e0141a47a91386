"""What crosses into C is checked first: integers that a C type cannot hold, values of the
wrong kind, names with a NUL in them, read-only destinations, device ordinals that do not
exist, and objects from a context that was reset. Each one is a named Python error (or the
driver's own CUresult for what the C type holds but the device refuses), never a value
that wrapped around or an object that now stands for something else."""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, poisoned, upload

import lowlevel as ll
from lowlevel import cuda, kernels
from lowlevel.cuda import cublas

GLOBAL_PTX = """
.version 7.0
.target sm_60
.address_size 64
.visible .global .align 4 .u32 counter;
.visible .entry touch(.param .u64 p) { ret; }
"""


def vector_add_setup(rng, n=1):
    """vector_add with its inputs uploaded and a poisoned output: (function, args, out)."""
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = device_poisoned(4 * n)
    return kernels.module("vector_add").get_function("vector_add"), (upload(a), upload(b), out, n), out


def assert_untouched(out, n=1):
    """The poisoned output of a refused launch or copy: still all NaN."""
    cuda.synchronize()
    assert np.isnan(download(out, n)).all()


# ---- 1. integers that do not fit their C type ------------------------------------------------
@pytest.mark.parametrize("grid, block, shared, named", [
    (2**32 + 1, 1, 0, "grid.x"),            # would launch 1 block
    ((1, 2**32 + 1), 1, 0, "grid.y"),
    (1, (1, 1, 2**32 + 1), 0, "block.z"),
    (1, 2**33 + 1, 0, "block.x"),
    (1, 1, 2**32, "shared_mem"),           # would launch with 0 bytes
])
def test_launch_values_that_do_not_fit_an_unsigned_int_are_refused(driver, rng, grid, block, shared, named):
    f, args, out = vector_add_setup(rng)
    with pytest.raises(ValueError, match=named) as info:
        f.launch(grid, block, args, shared_mem=shared)
    assert "vector_add" in str(info.value)
    assert_untouched(out)


def test_launch_values_the_c_type_holds_go_to_the_driver(driver, rng):
    """A grid.x of 2**31 fits an unsigned int but exceeds every GPU's limit: the driver's
    CUDA_ERROR_INVALID_VALUE, as on a GPU."""
    f, args, out = vector_add_setup(rng)
    with pytest.raises(cuda.CudaError) as info:
        f.launch(2**31, 1, args)
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE"
    assert_untouched(out)


def test_sizes_that_do_not_fit_a_size_t_are_refused(driver, rng):
    with pytest.raises(ValueError, match="mem_alloc: nbytes"):
        cuda.mem_alloc(2**64 + 64)                     # would allocate 64 bytes
    with pytest.raises(ValueError, match="mem_alloc_async: nbytes"):
        cuda.mem_alloc_async(2**64 + 64, cuda.Stream())
    with pytest.raises(ValueError, match="mem_alloc: size must be positive"):
        cuda.mem_alloc(-64)
    with pytest.raises(cuda.CudaError) as info:        # fits a size_t: no GPU has it
        cuda.mem_alloc(2**64 - 512)
    assert info.value.name in ("CUDA_ERROR_OUT_OF_MEMORY", "CUDA_ERROR_INVALID_VALUE")
    n = int(rng.integers(4, 64))
    dev = device_poisoned(4 * n)
    with pytest.raises(ValueError, match="memset_d8: count"):
        cuda.memset_d8(dev.ptr, 0, 2**64 + 16)          # a raw pointer: no allocation size to check
    with pytest.raises(ValueError, match="memset_d32: count"):
        cuda.memset_d32(dev.ptr, 0, 2**64 + 4, stream=cuda.Stream())
    with pytest.raises(ValueError, match="memcpy_dtod: nbytes"):
        cuda.memcpy_dtod(dev.ptr, dev.ptr, 2**64 + 4)
    with pytest.raises(ValueError, match="memcpy_dtod_async: nbytes"):
        cuda.memcpy_dtod_async(dev.ptr, dev.ptr, 2**64 + 4)
    assert_untouched(dev, n)


def test_the_binding_boundary_refuses_what_the_api_did_not_check(driver, rng):
    """Every integer argument of every driver function is range-checked where it becomes
    a C value, so a raw call cannot wrap around either."""
    n = int(rng.integers(4, 64))
    dev = device_poisoned(4 * n)
    drv = cuda.get_driver()
    with pytest.raises(ValueError, match=r"cuMemsetD8_v2: argument 3 = 18446744073709551632"):
        drv.cuMemsetD8(dev.ptr, 0, 2**64 + 16)          # would set 16 bytes
    with pytest.raises(ValueError, match=r"cuMemsetD8_v2: argument 2"):
        drv.cuMemsetD8(dev.ptr, 256, 4)                 # would set 0
    with pytest.raises(TypeError, match=r"cuMemsetD32_v2: argument 3 must be an integer"):
        drv.cuMemsetD32(dev.ptr, 0, 1.5)
    with pytest.raises(ValueError, match=r"cuMemsetD32_v2: argument 1"):
        drv.cuMemsetD32(dev.ptr + 2**64, 0, 1)          # a pointer past 64 bits
    assert_untouched(dev, n)


def test_cublas_sizes_that_do_not_fit_an_int_are_refused(driver, rng):
    try:
        handle = cublas.Handle()
    except RuntimeError as e:
        pytest.skip(str(e))
    n = int(rng.integers(4, 64))
    x, y = upload(rng.random(n, dtype=np.float32)), device_poisoned(4 * n)
    with pytest.raises(ValueError, match=r"cublasSaxpy_v2: argument 2 = 4294967300"):
        cublas.saxpy(handle, 2**32 + 4, 1.0, x, 1, y, 1)     # would be n = 4
    assert_untouched(y, n)


def test_tensor_sizes_past_64_bits_and_past_the_device(driver):
    with pytest.raises(ValueError, match="73786976294838206464 bytes"):
        ll.empty(2**62, 4, device="cuda")               # 2**66 bytes, not "0 bytes"
    with pytest.raises(cuda.CudaError) as info:
        ll.empty(2**40, device="cuda")                  # 4 TiB
    assert info.value.name == "CUDA_ERROR_OUT_OF_MEMORY"


# ---- 7. the wrong kind of value: a TypeError naming the parameter ----------------------------
def test_values_of_the_wrong_kind_are_type_errors(driver, rng):
    f, args, out = vector_add_setup(rng)
    with pytest.raises(TypeError, match="mem_alloc: nbytes must be an integer, got float"):
        cuda.mem_alloc(1.5)
    with pytest.raises(TypeError, match="shared_mem must be an integer, got float"):
        f.launch(1, 1, args, shared_mem=1.5)
    with pytest.raises(TypeError, match="grid must be an int or a tuple"):
        f.launch(1.0, 1, args)
    with pytest.raises(TypeError, match="stream must be a Stream or None, got int"):
        f.launch(1, 1, args, stream=5)
    with pytest.raises(TypeError, match="stream must be a Stream or None"):
        cuda.memcpy_htod_async(out, np.zeros(1, np.float32), stream=5)
    with pytest.raises(TypeError, match="memset_d32: value must be an integer"):
        cuda.memset_d32(out, 1.5, 1)                    # int(1.5) would set the pattern 1
    with pytest.raises(TypeError, match="expected PTX as str or bytes, got NoneType"):
        cuda.Module.from_ptx(None)
    with pytest.raises(TypeError, match="expected PTX as str or bytes, got int"):
        cuda.Module.from_ptx(123)
    with pytest.raises(TypeError, match="expected the image as bytes"):
        cuda.Module.from_cubin(64)                      # bytes(64) would be 64 zero bytes
    with pytest.raises(TypeError, match="Stream.wait: expected an Event"):
        cuda.Stream().wait(5)
    assert_untouched(out)


def test_numpy_integers_are_integers(driver, rng):
    f, (a, b, out, _), _ = vector_add_setup(rng, 4)
    f.launch(np.int64(1), (np.uint32(4),), (a, b, out, 4), shared_mem=np.int32(0))
    expect = download(a, 4) + download(b, 4)
    np.testing.assert_array_equal(download(out, 4), expect)


def test_pinned_memory_beyond_the_host_is_out_of_memory(driver):
    with pytest.raises(cuda.CudaError) as info:
        cuda.pinned_empty((2**40,))                     # 4 TiB of float32
    assert info.value.name == "CUDA_ERROR_OUT_OF_MEMORY"
    with pytest.raises(ValueError, match="pinned_empty: nbytes"):
        cuda.pinned_empty((2**40, 2**40))               # np.prod would wrap around in int64


def _available_memory() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def test_an_async_copy_from_pageable_memory_above_2_gib(driver, rng):
    """The staged copy of a pageable source holds more than a C int of bytes."""
    nbytes = 2**31 + 4096
    if _available_memory() < 3 * nbytes:
        pytest.skip("needs about 6.5 GB of free host memory")
    host = np.zeros(nbytes, np.uint8)                   # untouched pages cost nothing
    head, tail = rng.integers(1, 255, 64, dtype=np.uint8), rng.integers(1, 255, 64, dtype=np.uint8)
    host[:64], host[-64:] = head, tail
    dev = cuda.mem_alloc(nbytes)
    try:
        cuda.memcpy_htod_async(dev, host, cuda.Stream())
        del host
        cuda.synchronize()
        for offset, expect in ((0, head), (nbytes - 64, tail), (2**31 - 32, np.zeros(64, np.uint8))):
            back = poisoned(64, np.uint8)
            cuda.memcpy_dtoh(back, dev.ptr + offset)
            np.testing.assert_array_equal(back, expect)
    finally:
        dev.free()


# ---- 2. a read-only destination --------------------------------------------------------------
def test_async_copy_into_a_read_only_array_is_refused(driver, rng):
    dev = upload(rng.random(16, dtype=np.float32))
    dst = poisoned(16)
    dst.flags.writeable = False
    with pytest.raises(ValueError, match="memcpy_dtoh_async: the destination array is read-only"):
        cuda.memcpy_dtoh_async(dst, dev, cuda.Stream())
    cuda.synchronize()
    assert np.isnan(dst).all()


# ---- 3. objects from a context that was reset ------------------------------------------------
def test_an_allocation_from_before_a_reset_is_refused(driver, rng):
    n = 64
    old = cuda.mem_alloc(4 * n)
    cuda.reset_device()
    new = device_poisoned(4 * n)                        # may well get the old address
    ones = np.ones(n, np.float32)
    with pytest.raises(cuda.ContextResetError, match="DeviceAllocation belongs to a context that was reset"):
        cuda.memcpy_htod(old, ones)
    with pytest.raises(cuda.ContextResetError):
        cuda.memcpy_dtoh(poisoned(n), old)
    with pytest.raises(cuda.ContextResetError):
        cuda.memset_d8(old, 0, 4 * n)
    with pytest.raises(cuda.ContextResetError):
        cuda.memcpy_dtod(new, old, 4 * n)
    with pytest.raises(cuda.ContextResetError):
        int(old)
    f = kernels.module("vector_add").get_function("vector_add")
    with pytest.raises(cuda.ContextResetError):
        f.launch(1, n, (new, new, old, n))
    old.free()                                          # nothing to free: it went with the context
    assert_untouched(new, n)
    cuda.memcpy_htod(new, ones)                         # and the new one was not freed
    np.testing.assert_array_equal(download(new, n), ones)


def test_handles_from_before_a_reset_are_refused(driver, rng):
    module = kernels.module("vector_add")
    f = module.get_function("vector_add")
    stream, event = cuda.Stream(), cuda.Event()
    cuda.reset_device()
    f2, args, out = vector_add_setup(rng)              # a fresh module, which may reuse the handles
    fresh_stream = cuda.Stream()
    with pytest.raises(cuda.ContextResetError, match="Module"):
        module.get_function("vector_add")
    with pytest.raises(cuda.ContextResetError, match="Module"):
        f.launch(1, 1, args)
    with pytest.raises(cuda.ContextResetError, match="Stream"):
        f2.launch(1, 1, args, stream=stream)
    with pytest.raises(cuda.ContextResetError, match="Stream"):
        stream.synchronize()
    with pytest.raises(cuda.ContextResetError, match="Stream"):
        cuda.memcpy_htod_async(out, np.ones(1, np.float32), stream)
    with pytest.raises(cuda.ContextResetError, match="Event"):
        event.record(fresh_stream)
    with pytest.raises(cuda.ContextResetError, match="Stream"):
        cuda.Event().record(stream)
    with pytest.raises(cuda.ContextResetError, match="Event"):
        fresh_stream.wait(event)
    assert_untouched(out)
    f2.launch(1, 1, args, stream=fresh_stream)          # the new objects work
    fresh_stream.synchronize()
    assert not np.isnan(download(out, 1)).any()


def test_a_cublas_handle_from_before_a_reset_is_refused(driver, rng):
    try:
        handle = cublas.Handle()
    except RuntimeError as e:
        pytest.skip(str(e))
    cuda.reset_device()
    n = 8
    x, y = upload(rng.random(n, dtype=np.float32)), device_poisoned(4 * n)
    with pytest.raises(cuda.ContextResetError, match="Handle"):
        cublas.saxpy(handle, n, 1.0, x, 1, y, 1)
    assert_untouched(y, n)


def test_a_tensor_from_before_a_reset_is_refused(driver, rng):
    t = ll.tensor(rng.random(8, dtype=np.float32), device="cuda")
    cuda.reset_device()
    fresh = ll.full(8, np.nan, device="cuda")
    with pytest.raises(cuda.ContextResetError):
        t.numpy()
    with pytest.raises(cuda.ContextResetError):
        fresh + t
    assert np.isnan(fresh.numpy()).all()


# ---- 4. device ordinals ------------------------------------------------------------------------
def test_a_device_ordinal_that_does_not_exist_is_refused(driver):
    count = cuda.device_count()
    for ordinal in (count, count + 6, -1):
        with pytest.raises(ValueError, match=f"invalid device ordinal: cuda:{ordinal}"):
            ll.ones(2, device=f"cuda:{ordinal}")
    assert ll.ones(2, device="cuda:0").numpy().tolist() == [1.0, 1.0]


# ---- 5. names with a NUL -----------------------------------------------------------------------
def test_names_with_a_nul_are_refused(driver):
    module = kernels.module("vector_add")
    with pytest.raises(ValueError, match="NUL"):
        module.get_function("vector_add\0junk")         # the driver would find vector_add
    with pytest.raises(TypeError, match="must be a str"):
        module.get_function(b"vector_add")
    with_global = cuda.Module.from_ptx(GLOBAL_PTX)
    address, size = with_global.get_global("counter")
    assert address and size == 4
    with pytest.raises(ValueError, match="NUL"):
        with_global.get_global("counter\0junk")
    with pytest.raises(ValueError, match="NUL character at offset"):
        cuda.Module.from_ptx(GLOBAL_PTX + "\0.visible .entry hidden() { ret; }\n")
    assert cuda.Module.from_ptx(GLOBAL_PTX + "\0").get_function("touch")   # a trailing NUL is the end


def test_jit_option_values_are_checked(driver):
    with pytest.raises(ValueError, match="JIT option MAX_REGISTERS"):
        cuda.Module.from_ptx(GLOBAL_PTX, options={"MAX_REGISTERS": 2**32 + 32})
    with pytest.raises(TypeError, match="JIT option MAX_REGISTERS"):
        cuda.Module.from_ptx(GLOBAL_PTX, options={"MAX_REGISTERS": 32.5})

