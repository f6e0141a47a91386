"""Generate ptx/masked.ptx: boolean-mask compaction (t[mask]) and its inverse, the scatter
of t[mask]'s gradient back into zeros, for 1-, 2-, 4- and 8-byte elements:

    masked_select_b8 .. _b64   out[k] = x[i] for the k-th i with mask[i] true
    masked_scatter_b8 .. _b64  out[i] = mask[i] ? src[k] : 0, k = how many true before i

Both need each true element's rank among the true ones (an exclusive prefix count). One
warp does it: 32 elements at a time, a ballot of their mask bits, each lane's rank = the
popcount of the ballot's bits below it plus the count so far. Simple and order-preserving,
but one warp: O(n / 32) steps (PyTorch runs a device-wide scan; this is the teaching form).

    python tools/gen_mask_ptx.py            # rewrites ptx/masked.ptx

tests/backends/test_generated_ptx.py checks the committed file is what this writes.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from ptx_template import VERSION, banner, element_address, lines  # noqa: E402

PTX = pathlib.Path(__file__).resolve().parents[1] / "ptx"
WIDTHS = {"b8": (1, "u8", "%rs"), "b16": (2, "b16", "%h"), "b32": (4, "b32", "%r"), "b64": (8, "b64", "%rd")}


def _prologue(params) -> list:
    out = [("ld.param.u64    %rd2, [n];", "rd2 = n"),
           ("mov.u32         %r1, %laneid;", "r1 = my lane (the kernel runs as ONE warp)"),
           ("cvt.u64.u32     %rd0, %r1;", "rd0 = i = lane: my first element"),
           ("mov.u32         %r2, %lanemask_lt;", "r2 = the bits of the lanes below mine"),
           ("mov.u64         %rd1, 0;", "rd1 = how many true elements came before this chunk")]
    for k, p in enumerate(params):
        out += [(f"ld.param.u64    %rd{10 + k}, [{p}];", f"rd{10 + k} = {p} (generic address)"),
                (f"cvta.to.global.u64 %rd{10 + k}, %rd{10 + k};", f"rd{10 + k} = {p} as a global address")]
    return out


def _chunk_rank() -> list:
    """p2 = mask[i] (false past n); rd3 = its rank among the true ones; r3 = this chunk's count."""
    return [("setp.lt.u64     %p1, %rd0, %rd2;", "p1 = (i < n): lanes past the end hold false"),
            ("mov.u16         %rs0, 0;", "rs0 = false"),
            ("add.u64         %rd20, %rd12, %rd0;", "rd20 = &mask[i] (one byte per element)"),
            ("@%p1 ld.global.u8 %rs0, [%rd20];", "rs0 = mask[i] where i < n"),
            ("setp.ne.u16     %p2, %rs0, 0;", "p2 = mask[i] is true"),
            ("vote.sync.ballot.b32 %r4, %p2, 0xffffffff;", "r4 = the true lanes of this chunk, one bit each"),
            ("and.b32         %r5, %r4, %r2;", "r5 = the true lanes below mine"),
            ("popc.b32        %r5, %r5;", "r5 = how many of them"),
            ("cvt.u64.u32     %rd3, %r5;", "rd3 = (64-bit)"),
            ("add.u64         %rd3, %rd3, %rd1;", "rd3 = my rank: true elements before element i"),
            ("popc.b32        %r3, %r4;", "r3 = true elements in this chunk")]


def kernel(what: str, width: str) -> str:
    size, mtype, r = WIDTHS[width]
    if what == "select":
        params = ["out", "x", "mask"]
        move = [*element_address("%rd21", "%rd11", "%rd0", size, "x[i]"),
                *element_address("%rd22", "%rd10", "%rd3", size, "out[rank]"),
                (f"@%p2 ld.global.{mtype} {r}8, [%rd21];", "a true element: load x[i]"),
                (f"@%p2 st.global.{mtype} [%rd22], {r}8;", "and store it at out[rank]")]
        summary = "out[k] = x[i] for the k-th i with mask[i] true"
        decl = [("out", "void* out (as many elements as mask has true)"), ("x", "const void* x (n elements)")]
    else:
        params = ["out", "src", "mask"]
        move = [*element_address("%rd21", "%rd11", "%rd3", size, "src[rank]"),
                *element_address("%rd22", "%rd10", "%rd0", size, "out[i]"),
                (f"mov.{'u16' if width == 'b8' else mtype:<11} {r}8, 0;", "zero, for a false element"),
                (f"@%p2 ld.global.{mtype} {r}8, [%rd21];", "a true element: src[rank]"),
                (f"@%p1 st.global.{mtype} [%rd22], {r}8;", "out[i] = that (or zero), for i < n")]
        summary = "out[i] = mask[i] ? src[rank of i] : 0"
        decl = [("out", "void* out (n elements)"), ("src", "const void* src (one per true mask element)")]
    name = f"masked_{what}_{width}"
    body = [*_prologue(params),
            ("LOOP:", ""),
            *_chunk_rank(),
            *move,
            ("cvt.u64.u32     %rd4, %r3;", "rd4 = this chunk's count (64-bit)"),
            ("add.u64         %rd1, %rd1, %rd4;", "the count so far: the same in every lane"),
            ("sub.u64         %rd5, %rd0, %rd6;", "rd5 = i - lane = the chunk's first element (the same in all lanes)"),
            ("add.u64         %rd5, %rd5, 32;", "rd5 = the next chunk's first element"),
            ("add.u64         %rd0, %rd0, 32;", "i += 32"),
            ("setp.lt.u64     %p3, %rd5, %rd2;", "p3 = another chunk starts below n: the whole warp alike"),
            ("@%p3 bra        LOOP;", "the ballot needs every lane: all loop together"),
            ("ret;", "finished")]
    # rd6 = lane (64-bit), kept for the uniform loop test
    body.insert(2, ("cvt.u64.u32     %rd6, %r1;", "rd6 = lane (64-bit)"))
    regs = "    .reg .b16   %h<9>;          // 16-bit elements\n" if width == "b16" else ""
    params_text = "\n".join(f"    .param .u64 {p},{' ' * max(1, 14 - len(p))}// {c}" for p, c in decl)
    return (banner(name, summary)
            + f".visible .entry {name}(" + " " * max(1, 14 - len(name)) + f"// kernel {name}\n"
            + params_text + "\n    .param .u64 mask,           // const bool* mask (n bytes)\n"
            + "    .param .u64 n               // unsigned long long n\n)\n{\n"
            + "    .reg .pred  %p<4>;          // predicates\n"
            + "    .reg .b16   %rs<9>;         // the mask byte; 1-byte elements\n"
            + "    .reg .b32   %r<9>;          // lane, ballots, counts; 4-byte elements\n"
            + "    .reg .b64   %rd<23>;        // indices, ranks, addresses; 8-byte elements\n"
            + regs + "\n" + lines(body) + "\n}\n")


def generate() -> str:
    header = f"""\
// masked.ptx -- t[mask] on the GPU: compaction of the elements whose mask byte is
// true, and the inverse scatter (the gradient of t[mask], into zeros).
// GENERATED by tools/gen_mask_ptx.py from one template: edit that, not this.
//
//   C: extern "C" __global__ void masked_select_b32(void* out, const void* x,
//                                     const bool* mask, unsigned long long n)
//      extern "C" __global__ void masked_scatter_b32(void* out, const void* src,
//                                     const bool* mask, unsigned long long n)
//   _b8 _b16 _b32 _b64: the element width; elements move as raw bits. x, mask and
//   (scatter) out are contiguous with n elements; a mask byte other than 0 is true.
//   The caller sizes select's out by the count of true elements, counted on the
//   device first (and read back once: the output's size depends on it).
//
// Launch: EXACTLY one warp: grid 1, block 32. Each step takes 32 elements: lane L
//   reads mask[i] (i = step * 32 + L), vote.ballot gathers the 32 bits, and
//   popc(ballot & %lanemask_lt) is L's rank within the chunk; the ranks of earlier
//   chunks are a running count every lane keeps alike. Order-preserving and exact.
//   O(n / 32) steps on one warp: simple, not fast (a device-wide scan is).

{VERSION}"""
    return header + "".join(kernel(w, b) for w in ("select", "scatter") for b in WIDTHS)


PATH = PTX / "masked.ptx"

if __name__ == "__main__":
    PATH.write_text(generate())
    sys.stdout.write(f"wrote {PATH}\n")
