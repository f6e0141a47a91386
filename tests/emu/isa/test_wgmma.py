"""wgmma.mma_async from handwritten sm_90a kernels (tests/helpers/wgmma_kernels.py, assembled
by ptxas -arch=sm_90a where it is installed): operands laid out in shared memory as the PTX
ISA's canonical layouts say (K- and MN-major, no swizzle and the 32B/64B/128B swizzles,
chosen LBO/SBO), A from a descriptor or from registers, every type family, the scale
immediates and scale-d, several k-blocks chained on one accumulator, two CTAs and two
warpgroups per CTA with products of their own. Compared with a float64 / int64 matmul:
floats within a bound proportionate to K, integers exactly. Inputs random, outputs poisoned.
"""
import numpy as np
import pytest

from lowlevel import cuda
from helpers import wgmma_kernels as wk
from helpers.memory import download, poisoned, upload
from helpers.ptxas import ptxas_refusal

EPS = {"f32": np.finfo(np.float32).eps, "f16": np.finfo(np.float16).eps}
K_MAJOR = wk.Operand()
O = wk.Operand

CASES = {
    "m64n8k16.f32.f16 interleave": wk.Case("f32", "f16", "f16", 8, a=O(lbo=128, sbo=256), b=O(lbo=128, sbo=256)),
    "m64n64k16.f32.bf16 128B x4 k-blocks": wk.Case("f32", "bf16", "bf16", 64, blocks=4, a=O(swizzle=128, sbo=1024),
                                                   b=O(swizzle=128, sbo=1024)),
    "m64n256k16.f16.f16 64B, A in registers": wk.Case("f16", "f16", "f16", 256, b=O(swizzle=64, sbo=512)),
    "m64n64k8.f32.tf32 64B x2": wk.Case("f32", "tf32", "tf32", 64, blocks=2, a=O(swizzle=64, sbo=512),
                                        b=O(swizzle=64, sbo=1024)),
    "m64n64k32.f32.e4m3.e5m2 128B": wk.Case("f32", "e4m3", "e5m2", 64, blocks=2, a=O(swizzle=128, sbo=1024),
                                            b=O(swizzle=128, sbo=1024)),
    "m64n24k32.f16.e5m2.e5m2 interleave": wk.Case("f16", "e5m2", "e5m2", 24, a=O(lbo=1024, sbo=128),
                                                  b=O(lbo=512, sbo=128)),
    "m64n32k32.s32.s8 satfinite 64B": wk.Case("s32", "s8", "s8", 32, a=O(swizzle=64, sbo=512),
                                              b=O(swizzle=64, sbo=512), satfinite=True),
    "m64n48k32.s32.u8 wraps, A in registers": wk.Case("s32", "u8", "u8", 48, b=O(lbo=1024, sbo=128)),
    "m64n16k256.s32.b1 and.popc": wk.Case("s32", "b1", "b1", 16, a=O(swizzle=32, sbo=256), b=O(swizzle=32, sbo=256)),
    "m64n8k256.s32.b1, A in registers": wk.Case("s32", "b1", "b1", 8, b=O(lbo=128, sbo=256)),
    "m64n64k16 MN-major A and B, 128B x2": wk.Case("f32", "f16", "f16", 64, blocks=2,
                                                   a=O(mn_major=True, swizzle=128, lbo=2048, sbo=1024),
                                                   b=O(mn_major=True, swizzle=128, lbo=2048, sbo=1024)),
    "m64n32k16 MN-major interleave": wk.Case("f32", "bf16", "bf16", 32, a=O(mn_major=True, lbo=128, sbo=256),
                                             b=O(mn_major=True, lbo=128, sbo=256)),
    "m64n32k16 MN-major B 32B, A in registers": wk.Case("f32", "f16", "f16", 32,
                                                        b=O(mn_major=True, swizzle=32, lbo=512, sbo=256)),
    "scale-d 0, imm-scale-a -1": wk.Case("f32", "f16", "f16", 16, a=K_MAJOR, scale_d=0, scale_a=-1),
    "imm-scale-b -1, e4m3 in registers": wk.Case("f32", "e4m3", "e4m3", 16, scale_b=-1),
    "tf32 in registers": wk.Case("f32", "tf32", "tf32", 8),
    "two warpgroups per CTA, 64B MN-major B": wk.Case("f32", "bf16", "bf16", 64, warpgroups=2,
                                                      a=O(swizzle=64, sbo=512),
                                                      b=O(mn_major=True, swizzle=64, lbo=1024, sbo=512)),
}


def accumulator(rng, case, shape):
    if case.dtype == "s32":
        if case.satfinite:           # near the limits, so that some sums leave the int32 range
            return rng.choice([-2**31 + 5, 2**31 - 5, 7], shape).astype(np.int64)
        return rng.integers(-2**31, 2**31, shape).astype(np.int64)
    v = rng.standard_normal(shape)
    return v.astype(np.float16 if case.dtype == "f16" else np.float32).astype(np.float64)


def registers_of(values, dtype):
    """Accumulator elements (threads, n/2) as the d registers' words (threads, nreg)."""
    if dtype == "f16":
        h = values.astype(np.float16).view(np.uint16).astype(np.uint32)
        return h[:, 0::2] | (h[:, 1::2] << 16)
    return values.astype(np.float32 if dtype == "f32" else np.int32).view(np.uint32)


def elements_of(words, dtype):
    if dtype == "f16":
        pairs = np.stack([words & 0xFFFF, words >> 16], axis=2).reshape(words.shape[0], -1)
        return pairs.astype(np.uint16).view(np.float16).astype(np.float64)
    return words.view(np.float32 if dtype == "f32" else np.int32).astype(np.float64)


def images(case, codes, op, wide):
    """Every (cta, warpgroup) image of `codes` (.., rows, K), each padded to `wide` bytes."""
    flat = codes.reshape(-1, *codes.shape[-2:])
    imgs = [wk.image(c, op, wk.BITS[case.atype if wide else case.btype]) for c in flat]
    size = -(-max(i.size for i in imgs) // 1024) * 1024
    out = np.zeros((len(imgs), size), np.uint8)
    for j, i in enumerate(imgs):
        out[j, :i.size] = i
    return out, size


def run_case(rng, case):
    (a, acodes), (b, bcodes) = wk.operands(rng, case)
    bimg, b_bytes = images(case, np.swapaxes(bcodes, 1, 2), case.b, False)
    if case.a is not None:
        ainput, a_bytes = images(case, acodes, case.a, True)
    else:
        assert case.blocks == 1, "A in registers holds one k-block"
        ainput = np.stack([wk.a_fragments(acodes[c, w], case.atype)
                           for c in range(case.ctas) for w in range(case.warpgroups)])
        a_bytes = 0
    c = accumulator(rng, case, (case.ctas, case.warpgroups, 64, case.n))
    cwords = np.stack([registers_of(wk.d_elements(c[i, w], case.n), case.dtype)
                       for i in range(case.ctas) for w in range(case.warpgroups)])
    text = wk.ptx(case, a_bytes, b_bytes)
    log = ptxas_refusal(text, "sm_90a")
    assert not log, f"ptxas -arch=sm_90a refuses the kernel:\n{log}"
    out = upload(poisoned(cwords.shape, np.uint32))
    desc_a = wk.descriptor_bits(case.a) if case.a is not None else 0
    args = (upload(ainput), upload(bimg), upload(cwords), out, np.uint64(desc_a),
            np.uint64(wk.descriptor_bits(case.b)), np.uint32(case.scale_d))
    cuda.Module.from_ptx(text).get_function("wg").launch(case.ctas, 128 * case.warpgroups, args)
    words = download(out, cwords.shape, np.uint32)
    got = np.stack([wk.d_matrix(elements_of(words[j], case.dtype), case.n) for j in range(len(words))])
    return a.reshape(-1, 64, a.shape[-1]), np.repeat(b, case.warpgroups, axis=0), \
        c.reshape(-1, 64, case.n), got


@pytest.mark.parametrize("name", CASES)
def test_wgmma_product(driver, rng, name):
    if cuda.GPU(0).compute_capability != (9, 0):
        pytest.skip("sm_90a kernels run on compute capability 9.0 only (H100, H200)")
    case = CASES[name]
    a, b, c, got = run_case(rng, case)
    a, b = case.scale_a * a, case.scale_b * b
    want = a @ b + (c if case.scale_d else 0)
    if case.dtype == "s32":
        if case.satfinite:
            want = np.clip(want, -2**31, 2**31 - 1)
        want = ((want.astype(np.int64) + 2**31) % 2**32 - 2**31).astype(np.float64)
        np.testing.assert_array_equal(got, want)
        return
    k = a.shape[-1]
    bound = (k + 1) * EPS[case.dtype] * (np.abs(a) @ np.abs(b) + (np.abs(c) if case.scale_d else 0))
    assert np.isfinite(got).all()
    assert (np.abs(got - want) <= bound).all(), np.abs(got - want).max()
