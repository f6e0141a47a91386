"""The sub-byte WMMA forms in the emulator: wmma.load/mma/store .m8n8k32 (.s4/.u4, s32
accumulators, .satfinite) and .m8n8k128 (.b1, .xor.popc and .and.popc), each kernel
assembled by ptxas -arch=sm_90 first, against numpy int64 references on random nibbles and
bits; a load/store round trip of the s32 accumulator; the 256-bit alignment rule; the forms
ptxas refuses (A .col, B .row, mixed .s4.u4, .b1 without its bit operation) refused at load.
"""
import numpy as np
import pytest

from helpers.memory import download, poisoned, upload
from helpers.ptxas import assemble_sm90, ptxas_refusal
from lowlevel import cuda
from lowlevel.emu.ptx.errors import PtxError
from lowlevel.emu.engine.decode import load_ptx

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"
BITS = {"s4": 4, "u4": 4, "b1": 1}
SHAPE = {"s4": "m8n8k32", "u4": "m8n8k32", "b1": "m8n8k128"}
K = {"s4": 32, "u4": 32, "b1": 128}


def kernel(kind, mma_line, c_layout="row", d_layout="row"):
    shape = SHAPE[kind]
    return HEAD + f"""
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd,
                  .param .u32 sa, .param .u32 sb, .param .u32 sc) {{
    .reg .b32 %r<12>;
    .reg .u64 %rd<5>;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pb];
    ld.param.u64 %rd3, [pc];
    ld.param.u64 %rd4, [pd];
    ld.param.u32 %r1, [sa];
    ld.param.u32 %r2, [sb];
    ld.param.u32 %r3, [sc];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    cvta.to.global.u64 %rd4, %rd4;
    wmma.load.a.sync.aligned.row.{shape}.global.{kind} {{%r4}}, [%rd1], %r1;
    wmma.load.b.sync.aligned.col.{shape}.global.{kind} {{%r5}}, [%rd2], %r2;
    wmma.load.c.sync.aligned.{c_layout}.{shape}.global.s32 {{%r6, %r7}}, [%rd3], %r3;
    {mma_line.format(shape=shape, kind=kind)}
    wmma.store.d.sync.aligned.{d_layout}.{shape}.global.s32 [%rd4], {{%r8, %r9}}, %r3;
    ret;
}}
"""


MMA = "wmma.mma.sync.aligned.row.col.{shape}.s32.{kind}.{kind}.s32 {{%r8, %r9}}, {{%r4}}, {{%r5}}, {{%r6, %r7}};"
SAT = "wmma.mma.sync.aligned.row.col.{shape}.s32.{kind}.{kind}.s32.satfinite {{%r8, %r9}}, {{%r4}}, {{%r5}}, {{%r6, %r7}};"
XOR = "wmma.mma.xor.popc.sync.aligned.row.col.{shape}.s32.{kind}.{kind}.s32 {{%r8, %r9}}, {{%r4}}, {{%r5}}, {{%r6, %r7}};"
AND = "wmma.mma.and.popc.sync.aligned.row.col.{shape}.s32.{kind}.{kind}.s32 {{%r8, %r9}}, {{%r4}}, {{%r5}}, {{%r6, %r7}};"


def pack(elements, kind) -> np.ndarray:
    """Rows of sub-byte elements, lowest bits first (element e in byte e*bits/8)."""
    if kind == "b1":
        return np.packbits(elements.astype(np.uint8), axis=-1, bitorder="little").reshape(-1)
    nib = (elements & 0xF).astype(np.uint8)
    return (nib[..., 0::2] | (nib[..., 1::2] << 4)).reshape(-1)


def values(elements, kind):
    e = elements.astype(np.int64)
    return np.where(e >= 8, e - 16, e) if kind == "s4" else e


def run(ptx, a_mem, b_mem, c, sa, sb, sc):
    assemble_sm90(ptx)
    out = upload(poisoned(c.size, np.int32))
    f = cuda.Module.from_ptx(ptx).get_function("k")
    f.launch(1, 32, (upload(a_mem), upload(b_mem), upload(c), out, np.uint32(sa), np.uint32(sb), np.uint32(sc)))
    return download(out, c.size, np.int32)


def operands(rng, kind, sa, sb):
    top = 2 if kind == "b1" else 16
    A = rng.integers(0, top, (8, sa))                 # row i of A: elements 0..sa-1, K used
    B = rng.integers(0, top, (8, sb))                 # column j of B (.col): likewise
    return A, B


@pytest.mark.parametrize("kind, mma, op", [("s4", MMA, None), ("u4", MMA, None), ("s4", SAT, None),
                                            ("b1", XOR, "xor"), ("b1", AND, "and")])
@pytest.mark.parametrize("c_layout, d_layout", [("row", "row"), ("col", "row"), ("row", "col")])
def test_wmma_subbyte_against_numpy(driver, rng, kind, mma, op, c_layout, d_layout):
    k = K[kind]
    sa, sb, sc = 2 * k, k, 12                          # strides wider than the matrix: in elements
    A, B = operands(rng, kind, sa, sb)
    C = rng.integers(-2**20, 2**20, (8, sc)).astype(np.int32)
    got = run(kernel(kind, mma, c_layout, d_layout), pack(A, kind), pack(B, kind),
              C.reshape(-1), sa, sb, sc).reshape(8, sc)
    a, b = values(A[:, :k], kind), values(B[:, :k], kind).T          # (8, k), (k, 8)
    c = (C[:, :8] if c_layout == "row" else C.reshape(-1)[:8 * sc].reshape(8, sc)[:, :8].T).astype(np.int64)
    if op == "xor":
        want = c + (a[:, :, None] ^ b[None, :, :]).sum(axis=1)
    elif op == "and":
        want = c + (a[:, :, None] & b[None, :, :]).sum(axis=1)
    else:
        want = c + a @ b
    got8 = got[:, :8] if d_layout == "row" else got[:, :8].T
    np.testing.assert_array_equal(got8, want.astype(np.int32))
    np.testing.assert_array_equal(got[:, 8:], poisoned((8, sc - 8), np.int32))    # the gaps untouched


@pytest.mark.parametrize("mma, want", [(MMA, "wrap"), (SAT, "clamp")])
def test_wmma_s4_satfinite_saturates(driver, mma, want):
    A = np.full((8, 32), 7)                            # 7 * 7 * 32 = 1568 onto C near the edge
    B = np.full((8, 32), 7)
    C = np.full(64, 2**31 - 100, np.int32)
    C[1::2] = -2**31 + 100                             # these move up: no clamp
    got = run(kernel("s4", mma), pack(A, "s4"), pack(B, "s4"), C, 32, 32, 8)
    exact = C.astype(np.int64) + 1568
    ref = np.clip(exact, -2**31, 2**31 - 1) if want == "clamp" else (exact + 2**31) % 2**32 - 2**31
    np.testing.assert_array_equal(got, ref.astype(np.int32))


def test_wmma_subbyte_accumulator_round_trip(driver, rng):
    """load.c then store.d (mma with zero A): every element back where it was, either layout."""
    C = rng.integers(-2**31, 2**31, 64).astype(np.int32)
    zero = np.zeros((8, 32), np.int64)
    got = run(kernel("u4", MMA, "col", "col"), pack(zero, "u4"), pack(zero, "u4"), C, 32, 32, 8)
    np.testing.assert_array_equal(got, C)


@pytest.mark.parametrize("kind, offset, stride", [("s4", 16, 32), ("s4", 0, 16), ("b1", 16, 128), ("b1", 0, 64)])
def test_wmma_subbyte_misaligned_faults(driver, kind, offset, stride):
    """A's address not 256-bit aligned, or its stride (in elements) not a multiple of 16
    bytes: CUDA_ERROR_MISALIGNED_ADDRESS, as the other wmma forms."""
    ptx = kernel(kind, {"s4": MMA, "b1": XOR}[kind])
    assemble_sm90(ptx)
    a = upload(np.zeros(1024, np.uint8))
    f = cuda.Module.from_ptx(ptx).get_function("k")
    c = upload(np.zeros(64, np.int32))
    f.launch(1, 32, (np.uint64(int(a) + offset), a, c, c, np.uint32(stride), np.uint32(K[kind]), np.uint32(8)))
    with pytest.raises(cuda.CudaError) as e:
        cuda.synchronize()
    assert e.value.name == "CUDA_ERROR_MISALIGNED_ADDRESS"


@pytest.mark.parametrize("line, match", [
    ("wmma.load.a.sync.aligned.col.m8n8k32.global.s4 {%r4}, [%rd1], %r1;", "must be .row"),
    ("wmma.load.b.sync.aligned.row.m8n8k128.global.b1 {%r4}, [%rd1], %r1;", "must be .col"),
    ("wmma.load.a.sync.aligned.row.m8n8k32.global.b1 {%r4}, [%rd1], %r1;", "shape or type"),
    ("wmma.mma.sync.aligned.row.col.m8n8k32.s32.s4.u4.s32 {%r8, %r9}, {%r4}, {%r5}, {%r6, %r7};", "types"),
    ("wmma.mma.sync.aligned.row.row.m8n8k32.s32.s4.s4.s32 {%r8, %r9}, {%r4}, {%r5}, {%r6, %r7};", ".row.col"),
    ("wmma.mma.sync.aligned.row.col.m8n8k128.s32.b1.b1.s32 {%r8, %r9}, {%r4}, {%r5}, {%r6, %r7};", "popc"),
    ("wmma.mma.xor.popc.sync.aligned.row.col.m8n8k128.s32.b1.b1.s32.satfinite {%r8, %r9}, {%r4}, {%r5}, {%r6, %r7};",
     "satfinite"),
    ("wmma.mma.xor.popc.sync.aligned.row.col.m8n8k32.s32.s4.s4.s32 {%r8, %r9}, {%r4}, {%r5}, {%r6, %r7};", "popc"),
])
def test_wmma_subbyte_invalid_forms_refused(line, match):
    ptx = kernel("s4", MMA).replace(MMA.format(shape="m8n8k32", kind="s4").replace("{{", "{").replace("}}", "}"), line)
    assert line in ptx
    log = ptxas_refusal(ptx)
    assert log != "", "ptxas takes it: the emulator must too"
    with pytest.raises(PtxError, match=match):
        load_ptx(ptx)


SHARED = HEAD + """
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pd) {
    .shared .align 32 .b32 tile[32];
    .reg .b32 %r<12>;
    .reg .u64 %rd<6>;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pb];
    ld.param.u64 %rd3, [pd];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.u64 %rd5, %rd1, %rd4;
    ld.b32 %r2, [%rd5];                              // lane l copies word l of A to shared
    mov.u64 %rd5, tile;
    add.u64 %rd5, %rd5, %rd4;
    st.shared.b32 [%rd5], %r2;
    bar.sync 0;
    mov.u64 %rd5, tile;
    mov.b32 %r6, 0;
    wmma.load.a.sync.aligned.row.m8n8k128.shared.b1 {%r4}, [%rd5];
    wmma.load.b.sync.aligned.col.m8n8k128.b1 {%r5}, [%rd2];
    wmma.mma.and.popc.sync.aligned.row.col.m8n8k128.s32.b1.b1.s32 {%r8, %r9}, {%r4}, {%r5}, {%r6, %r6};
    wmma.store.d.sync.aligned.row.m8n8k128.s32 [%rd3], {%r8, %r9};
    ret;
}
"""


def test_wmma_b1_from_shared_and_generic(driver, rng):
    """A through .shared, B through a generic address, default strides (128 elements)."""
    assemble_sm90(SHARED)
    A = rng.integers(0, 2, (8, 128))
    B = rng.integers(0, 2, (8, 128))
    out = upload(poisoned(64, np.int32))
    cuda.Module.from_ptx(SHARED).get_function("k").launch(1, 32, (upload(pack(A, "b1")), upload(pack(B, "b1")), out))
    np.testing.assert_array_equal(download(out, 64, np.int32).reshape(8, 8), A @ B.T)
