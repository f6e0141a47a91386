"""cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col / cuTensorMapReplaceAddress through
lowlevel's driver binding: each requirement cuda.h documents, broken one at a time from a
valid call, is CUDA_ERROR_INVALID_VALUE; the valid calls succeed. Then lowlevel.cuda.TensorMap:
a wrong option is a ValueError naming the parameter, a map passes only to a 128-byte parameter.
"""
import ctypes

import numpy as np
import pytest

from lowlevel import cuda

F32, F16, U8, I32 = 7, 6, 0, 3
SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B = 1, 2, 3


def _aligned_map():
    """(keep-alive buffer, 64-byte aligned address of 128 bytes in it)."""
    buf = ctypes.create_string_buffer(256)
    base = ctypes.addressof(buf)
    return buf, base + (-base % 64)


def _u64(values):
    return (ctypes.c_uint64 * max(1, len(values)))(*values)


def _u32(values):
    return (ctypes.c_uint32 * max(1, len(values)))(*values)


def tiled(**change):
    """cuTensorMapEncodeTiled of a valid 2-D float32 map, with `change` applied."""
    buf, out = _aligned_map()
    a = dict(out=out, dtype=F32, rank=2, address=change.pop("base", None), dims=[128, 64],
             strides=[512], box=[32, 16], estr=[1, 1], interleave=0, swizzle=SWIZZLE_128B, l2=0, fill=0)
    a.update(change)
    drv = cuda.get_driver()
    mem = cuda.mem_alloc(1 << 16)
    address = int(mem.ptr) if a["address"] is None else a["address"]
    drv.cuTensorMapEncodeTiled(a["out"], a["dtype"], a["rank"], address, _u64(a["dims"]), _u64(a["strides"]),
                               _u32(a["box"]), _u32(a["estr"]), a["interleave"], a["swizzle"], a["l2"], a["fill"])
    return bytes(ctypes.string_at(out, 128)), mem, buf


def im2col(**change):
    """cuTensorMapEncodeIm2col of a valid NHWC (rank 4) float16 map, with `change` applied."""
    buf, out = _aligned_map()
    a = dict(dtype=F16, rank=4, dims=[64, 16, 16, 2], strides=[128, 2048, 32768], lower=[-1, -1],
             upper=[-1, -1], channels=64, pixels=128, estr=[1, 1, 1, 1], interleave=0, swizzle=SWIZZLE_128B,
             l2=0, fill=0)
    a.update(change)
    mem = cuda.mem_alloc(1 << 17)
    cuda.get_driver().cuTensorMapEncodeIm2col(
        out, a["dtype"], a["rank"], int(mem.ptr), _u64(a["dims"]), _u64(a["strides"]),
        (ctypes.c_int * 3)(*a["lower"]), (ctypes.c_int * 3)(*a["upper"]), a["channels"], a["pixels"],
        _u32(a["estr"]), a["interleave"], a["swizzle"], a["l2"], a["fill"])


TILED_RULES = {
    "map address not 64-aligned": dict(out="misaligned"),
    "data type outside the enum": dict(dtype=16),
    "rank 0": dict(rank=0, dims=[], strides=[], box=[], estr=[]),
    "rank 6": dict(rank=6, dims=[2] * 6, strides=[16] * 5, box=[4, 1, 1, 1, 1, 1], estr=[1] * 6, swizzle=0),
    "interleave needs rank 3": dict(interleave=1, swizzle=0),
    "global address not 16-aligned": dict(address="plus8"),
    "global address not 32-aligned with interleave 32B": dict(
        address="plus16", rank=3, dims=[16, 4, 4], strides=[64, 256], box=[16, 4, 4], estr=[1, 1, 1],
        interleave=2, swizzle=SWIZZLE_32B),
    "globalDim 0": dict(dims=[0, 64]),
    "globalDim above 2^32": dict(dims=[(1 << 32) + 1, 64]),
    "stride not a multiple of 16": dict(strides=[520]),
    "stride 2^40": dict(strides=[1 << 40]),
    "stride not a multiple of 32 with interleave 32B": dict(
        rank=3, dims=[16, 4, 4], strides=[80, 320], box=[16, 4, 4], estr=[1, 1, 1], interleave=2,
        swizzle=SWIZZLE_32B),
    "boxDim 0": dict(box=[32, 0]),
    "boxDim 257": dict(box=[32, 257]),
    "inner box bytes not a multiple of 16": dict(box=[6, 16], swizzle=0),
    "elementStrides 0": dict(estr=[1, 0]),
    "elementStrides 9": dict(estr=[1, 9]),
    "inner box wider than the 32B swizzle": dict(box=[16, 16], swizzle=SWIZZLE_32B),
    "inner box wider than the 64B swizzle": dict(box=[32, 16], swizzle=SWIZZLE_64B),
    "inner box wider than the 128B swizzle": dict(box=[64, 16]),
    "interleave 32B without the 32B swizzle": dict(
        rank=3, dims=[16, 4, 4], strides=[64, 256], box=[16, 4, 4], estr=[1, 1, 1], interleave=2,
        swizzle=SWIZZLE_64B),
    "interleave outside the enum": dict(rank=3, dims=[16, 4, 4], strides=[64, 256], box=[16, 4, 4],
                                        estr=[1, 1, 1], interleave=3),
    "swizzle outside what sm_90 has": dict(swizzle=4),
    "L2 promotion outside the enum": dict(l2=4),
    "OOB fill outside the enum": dict(fill=2),
    "NaN fill of an integer type": dict(dtype=I32, fill=1),
}


# the argument each rule's refusal names (in CudaError.details)
NAMED = {"map address not 64-aligned": "tensorMap", "data type outside the enum": "tensorDataType",
         "rank 0": "tensorRank", "rank 6": "tensorRank", "interleave needs rank 3": "tensorRank",
         "global address not 16-aligned": "globalAddress", "globalDim 0": "globalDim",
         "global address not 32-aligned with interleave 32B": "globalAddress",
         "globalDim above 2^32": "globalDim", "stride not a multiple of 16": "globalStrides",
         "stride 2^40": "globalStrides", "stride not a multiple of 32 with interleave 32B": "globalStrides",
         "boxDim 0": "boxDim", "boxDim 257": "boxDim", "inner box bytes not a multiple of 16": "boxDim[0]",
         "elementStrides 0": "elementStrides", "elementStrides 9": "elementStrides",
         "inner box wider than the 32B swizzle": "swizzle's 32", "inner box wider than the 64B swizzle": "swizzle's 64",
         "inner box wider than the 128B swizzle": "swizzle's 128", "interleave outside the enum": "interleave",
         "interleave 32B without the 32B swizzle": "needs swizzle 32B",
         "swizzle outside what sm_90 has": "swizzle", "L2 promotion outside the enum": "l2Promotion",
         "OOB fill outside the enum": "oobFill", "NaN fill of an integer type": "floating-point",
         "rank 2": "tensorRank", "corner outside -128..127 at rank 4": "pixelBoxLowerCorner",
         "corner outside -32768..32767 at rank 3": "pixelBoxLowerCorner",
         "corner outside -16..15 at rank 5": "pixelBoxLowerCorner", "pixel box with no area": "no area",
         "channelsPerPixel 0": "channelsPerPixel", "channelsPerPixel 257": "channelsPerPixel",
         "pixelsPerColumn 1025": "pixelsPerColumn", "inner channels wider than the swizzle": "channelsPerPixel"}


def _refused(e, rule: str) -> None:
    assert e.value.name == "CUDA_ERROR_INVALID_VALUE", rule
    if e.value.details:             # the emulated driver says which argument (libcuda says nothing)
        assert NAMED[rule] in e.value.details, (rule, e.value.details)


@pytest.mark.parametrize("rule", sorted(TILED_RULES))
def test_encode_tiled_refuses_each_documented_violation(driver, rule):
    change = dict(TILED_RULES[rule])
    if change.get("out") == "misaligned":
        buf, out = _aligned_map()
        change["out"] = out + 16
    base = cuda.mem_alloc(1 << 16)
    if change.get("address") in ("plus8", "plus16"):
        change["address"] = int(base.ptr) + (8 if change["address"] == "plus8" else 16)
    with pytest.raises(cuda.CudaError) as e:
        tiled(**change)
    _refused(e, rule)


def test_valid_maps_encode(driver):
    tiled()
    tiled(dtype=U8, box=[16, 16], swizzle=0, fill=0)
    tiled(dtype=F16, box=[16, 8], swizzle=SWIZZLE_32B, fill=1, l2=3)
    tiled(rank=3, dims=[16, 4, 4], strides=[64, 256], box=[16, 4, 4], estr=[1, 1, 1], interleave=2,
          swizzle=SWIZZLE_32B)
    im2col()


IM2COL_RULES = {
    "rank 2": dict(rank=2, dims=[64, 16], strides=[128], lower=[], upper=[], estr=[1, 1]),
    "corner outside -128..127 at rank 4": dict(lower=[-129, 0]),
    "corner outside -32768..32767 at rank 3": dict(rank=3, dims=[64, 16, 2], strides=[128, 2048],
                                                    lower=[40000], upper=[0], estr=[1, 1, 1]),
    "corner outside -16..15 at rank 5": dict(rank=5, dims=[64, 8, 8, 8, 2], strides=[128, 1024, 8192, 65536],
                                             lower=[0, 0, 16], upper=[0, 0, 0], estr=[1] * 5),
    "pixel box with no area": dict(lower=[8, 0], upper=[-8, 0]),
    "channelsPerPixel 0": dict(channels=0),
    "channelsPerPixel 257": dict(channels=257, swizzle=0),
    "pixelsPerColumn 1025": dict(pixels=1025),
    "inner channels wider than the swizzle": dict(channels=128),
}


@pytest.mark.parametrize("rule", sorted(IM2COL_RULES))
def test_encode_im2col_refuses_each_documented_violation(driver, rule):
    with pytest.raises(cuda.CudaError) as e:
        im2col(**IM2COL_RULES[rule])
    _refused(e, rule)


def test_replace_address_keeps_alignment(driver):
    buf, out = _aligned_map()
    mem = cuda.mem_alloc(1 << 16)
    drv = cuda.get_driver()
    drv.cuTensorMapEncodeTiled(out, F32, 2, int(mem.ptr), _u64([128, 64]), _u64([512]), _u32([32, 16]),
                               _u32([1, 1]), 0, SWIZZLE_128B, 0, 0)
    other = cuda.mem_alloc(1 << 16)
    drv.cuTensorMapReplaceAddress(out, int(other.ptr))
    with pytest.raises(cuda.CudaError) as e:
        drv.cuTensorMapReplaceAddress(out, int(other.ptr) + 8)
    assert e.value.name == "CUDA_ERROR_INVALID_VALUE"
    with pytest.raises(cuda.CudaError) as e:
        drv.cuTensorMapReplaceAddress(out + 16, int(other.ptr))
    assert e.value.name == "CUDA_ERROR_INVALID_VALUE"


def test_tensor_map_wrapper_names_bad_parameters(driver):
    mem = cuda.mem_alloc(1 << 16)
    with pytest.raises(ValueError, match="dtype"):
        cuda.TensorMap.tiled(mem, np.complex64, (64, 128), (16, 32))
    with pytest.raises(ValueError, match="swizzle"):
        cuda.TensorMap.tiled(mem, np.float32, (64, 128), (16, 32), swizzle=96)
    with pytest.raises(ValueError, match="box has 1 dimensions"):
        cuda.TensorMap.tiled(mem, np.float32, (64, 128), (16,))
    with pytest.raises(ValueError, match="strides"):
        cuda.TensorMap.tiled(mem, np.float32, (64, 128), (16, 32), strides=(512, 8))
    with pytest.raises(cuda.CudaError) as e:           # the driver's rule: box rows of 256 bytes
        cuda.TensorMap.tiled(mem, np.float32, (64, 128), (16, 64), swizzle=128)
    assert e.value.name == "CUDA_ERROR_INVALID_VALUE"


def test_tensor_map_passes_only_to_a_128_byte_parameter(driver):
    text = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .align 64 .b8 tmap[128], .param .u64 p)
{
    ret;
}
"""
    k = cuda.Module.from_ptx(text).get_function("k")
    mem = cuda.mem_alloc(1 << 16)
    tmap = cuda.TensorMap.tiled(mem, np.float32, (64, 128), (16, 32))
    k.launch(1, 1, (tmap, mem))
    with pytest.raises(TypeError, match=r"parameter 1 .*TensorMap"):
        k.launch(1, 1, (tmap, tmap))
    cuda.synchronize()


def test_tensor_map_of_a_cuda_tensor_takes_its_dtype_and_shape(driver):
    import lowlevel as ll
    t = ll.randn(64, 128, device="cuda")
    tmap = cuda.TensorMap.tiled(t, box=(16, 32), swizzle=128)
    assert tmap.base is t and len(bytes(tmap)) == 128
    with pytest.raises(ValueError, match="dtype and shape are required"):
        cuda.TensorMap.tiled(cuda.mem_alloc(1024), box=(4, 4))
