"""The emulated driver's JIT accepts exactly what ptxas accepts.

Valid kernels (the handwritten ptx/*.ptx and two NVRTC-compiled ones) are mutated
automatically, with a fixed seed: a line deleted, operands swapped, a type suffix changed,
a label or a declaration given twice, `.version`/`.target` changed, an immediate made
huge, the text cut short. Each mutant is loaded on the emulated GPU and, independently,
assembled by the standalone ptxas of the nvidia-cuda-nvcc wheel (`-arch=sm_90`, the
emulated device's architecture): accept/refuse must agree on every one. The only refusals
allowed of PTX that ptxas accepts are those that say so ("valid PTX that the emulated GPU
cannot run"); they are counted and printed.
"""
import concurrent.futures
import pathlib
import random
import re
import subprocess
import tempfile

import pytest

from lowlevel import cuda
from lowlevel.emu.driver import device

SEED = 20250917
PER_KIND = 3                        # mutants of each kind per source kernel
PTX_DIR = pathlib.Path(__file__).resolve().parents[3] / "ptx"
CANNOT_RUN = "valid PTX that the emulated GPU cannot run"

NVRTC_KERNELS = {
    "block_sum.cu": r'''
extern "C" __global__ void block_sum(const float* x, float* out, int n) {
    __shared__ float part[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    part[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, part[0]);
}''',
    "clamp_div.cu": r'''
extern "C" __global__ void clamp_div(const long long* a, const int* b, double* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int d = b[i] == 0 ? 1 : b[i];
    double q = (double)(a[i] / d) + (a[i] % d) * 0.5;
    out[i] = q < -1e6 ? -1e6 : (q > 1e6 ? 1e6 : q);
}''',
}


# ---- the kernels to mutate -----------------------------------------------------------------
def _sources() -> list[tuple[str, str]]:
    from lowlevel import compiler
    found = [(p.name, p.read_text()) for p in sorted(PTX_DIR.glob("*.ptx"))]
    for name, src in NVRTC_KERNELS.items():
        found.append((name, compiler.compile(src, "ptx", "sm_90", name=name)))
    return found


# ---- mutations: each takes (text, rng) and returns a changed text, or None ------------------
_INSTRUCTION = re.compile(r"^(\s*(?:@!?%\w+\s+)?)([a-z][\w.:]*)(\s+)([^;]*);(.*)$")
_LABEL = re.compile(r"^\s*[$\w]+:\s*(//.*)?$")
_DECLARATION = re.compile(r"^\s*\.(reg|shared|local|param|global|const)\b")
_TYPE = re.compile(r"\.(u8|u16|u32|u64|s8|s16|s32|s64|b16|b32|b64|f16|f32|f64)\b")
_TYPES = ["u16", "u32", "u64", "s32", "s64", "b32", "b64", "f32", "f64", "f16"]
_IMMEDIATE = re.compile(r"(?<![\w.%$])(-?\d+)(?![\w.])")


def _lines_matching(lines, pattern):
    return [i for i, line in enumerate(lines) if pattern.match(line)]


def _instruction_lines(lines):
    """Lines holding one instruction (not a directive, a label or a brace)."""
    return [i for i in _lines_matching(lines, _INSTRUCTION) if not lines[i].lstrip().startswith(".")]


def delete_line(text, rng):
    lines = text.split("\n")
    candidates = _instruction_lines(lines) + _lines_matching(lines, _DECLARATION)
    if not candidates:
        return None
    del lines[rng.choice(candidates)]
    return "\n".join(lines)


def swap_operands(text, rng):
    lines = text.split("\n")
    candidates = [i for i in _instruction_lines(lines) if "," in _INSTRUCTION.match(lines[i]).group(4)]
    if not candidates:
        return None
    i = rng.choice(candidates)
    lead, op, gap, operands, rest = _INSTRUCTION.match(lines[i]).groups()
    parts = [p.strip() for p in operands.split(",")]
    a, b = rng.sample(range(len(parts)), 2)
    if parts[a] == parts[b]:
        return None
    parts[a], parts[b] = parts[b], parts[a]
    lines[i] = f"{lead}{op}{gap}{', '.join(parts)};{rest}"
    return "\n".join(lines)


def change_type(text, rng):
    lines = text.split("\n")
    candidates = [i for i in _instruction_lines(lines) + _lines_matching(lines, _DECLARATION)
                  if _TYPE.search(lines[i].split("//")[0])]
    if not candidates:
        return None
    i = rng.choice(candidates)
    code, sep, comment = lines[i].partition("//")
    found = list(_TYPE.finditer(code))
    m = rng.choice(found)
    new = rng.choice([t for t in _TYPES if t != m.group(1)])
    lines[i] = code[:m.start()] + "." + new + code[m.end():] + sep + comment
    return "\n".join(lines)


def duplicate_label(text, rng):
    lines = text.split("\n")
    candidates = _lines_matching(lines, _LABEL)
    if not candidates:
        return None
    i = rng.choice(candidates)
    lines.insert(i + 1, lines[i])
    return "\n".join(lines)


def duplicate_declaration(text, rng):
    lines = text.split("\n")
    candidates = [i for i in _lines_matching(lines, _DECLARATION) if lines[i].rstrip().endswith(";")]
    if not candidates:
        return None
    i = rng.choice(candidates)
    lines.insert(i + 1, lines[i])
    return "\n".join(lines)


def change_header(text, rng):
    choice = rng.randrange(4)
    if choice == 0:         # another ISA version (newer than 9.5 is newer than the driver)
        version = rng.choice(["6.0", "7.0", "7.8", "8.0", "8.3", "8.7", "9.0", "9.5", "9.9", "10.0"])
        return re.sub(r"\.version\s+\d+\.\d+", f".version {version}", text, count=1)
    if choice == 1:         # another target: too old for what the body uses, or too new
        target = rng.choice(["sm_10", "sm_20", "sm_50", "sm_60", "sm_75", "sm_80", "sm_89",
                             "sm_90", "sm_90a", "sm_100", "sm_120"])
        return re.sub(r"\.target\s+sm_\w+", f".target {target}", text, count=1)
    directive = rng.choice([r"\.version[^\n]*", r"\.target[^\n]*", r"\.address_size[^\n]*"])
    m = re.search(directive, text)
    if m is None:
        return None
    if choice == 2:         # given twice
        return text[:m.end()] + "\n" + m.group() + text[m.end():]
    return text[:m.start()] + text[m.end():]        # left out


def huge_immediate(text, rng):
    lines = text.split("\n")
    candidates = [i for i in _instruction_lines(lines) if _IMMEDIATE.search(_INSTRUCTION.match(lines[i]).group(4))]
    if not candidates:
        return None
    i = rng.choice(candidates)
    lead, op, gap, operands, rest = _INSTRUCTION.match(lines[i]).groups()
    found = list(_IMMEDIATE.finditer(operands))
    m = rng.choice(found)
    new = rng.choice(["99999999999999999999999", "4294967296", "-1", "65536", "18446744073709551615"])
    lines[i] = f"{lead}{op}{gap}{operands[:m.start()]}{new}{operands[m.end():]};{rest}"
    return "\n".join(lines)


def truncate(text, rng):
    start = text.find(".entry")
    if start < 0:
        return None
    return text[:rng.randrange(start, len(text) - 1)]


MUTATIONS = [delete_line, swap_operands, change_type, duplicate_label, duplicate_declaration,
             change_header, huge_immediate, truncate]


def mutants() -> list[tuple[str, str]]:
    """(description, PTX) of every mutant, the same on every run."""
    rng = random.Random(SEED)
    seen, out = set(), []
    for name, text in _sources():
        for mutate in MUTATIONS:
            for k in range(PER_KIND * 3):           # a few tries for PER_KIND distinct mutants
                if sum(1 for d, _ in out if d.startswith(f"{name}: {mutate.__name__} ")) >= PER_KIND:
                    break
                changed = mutate(text, rng)
                if changed is None or changed == text or changed in seen:
                    continue
                seen.add(changed)
                out.append((f"{name}: {mutate.__name__} #{k}", changed))
    return out


# ---- the two judges ------------------------------------------------------------------------
def ptxas_accepts(ptxas: str, folder: str, index: int, text: str) -> tuple[bool, str]:
    path = pathlib.Path(folder) / f"mutant{index}.ptx"
    path.write_text(text)
    # The emulated device's architecture (sm_90 unless LOWLEVEL_EMU_CC says); PTX for its
    # architecture-specific variant (sm_90a) is JIT-compiled as that variant by a driver.
    arch = f"-arch=sm_{device.arch()}"
    target = re.search(r"^\s*\.target\s+(sm_\w+)", text, re.M)
    if target and re.fullmatch(rf"sm_{device.arch()}[af]", target.group(1)):
        arch = f"-arch={target.group(1)}"
    out = subprocess.run([ptxas, arch, str(path), "-o", str(path.with_suffix(".cubin"))],
                         capture_output=True, text=True, timeout=120)
    return out.returncode == 0, out.stderr.strip()


def emulator_loads(text: str) -> tuple[bool, str]:
    try:
        module = cuda.Module.from_ptx(text)
    except cuda.CudaError as e:
        return False, f"{e.name}: {e.log.strip()}"
    module.unload()
    return True, ""


@pytest.fixture(scope="module")
def ptxas():
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
        path = find_nvidia_binary_utility("ptxas")
    except ImportError:
        path = None
    if path is None:
        pytest.skip("no standalone ptxas to judge by: pip install nvidia-cuda-nvcc")
    return path


def test_the_mutants_are_many_and_of_every_kind():
    found = mutants()
    assert len(found) >= 250, len(found)
    for mutate in MUTATIONS:
        assert any(f" {mutate.__name__} " in d for d, _ in found), mutate.__name__


def test_emulated_jit_accepts_exactly_what_ptxas_accepts(ptxas):
    cuda.use_driver("emu")
    cases = mutants()
    with tempfile.TemporaryDirectory() as folder, concurrent.futures.ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(lambda ic: ptxas_accepts(ptxas, folder, *ic), enumerate(t for _, t in cases)))
    too_forgiving, wrongly_refused, cannot_run = [], [], []
    for (what, text), (oracle_ok, oracle_log) in zip(cases, verdicts):
        ok, log = emulator_loads(text)
        if ok and not oracle_ok:
            too_forgiving.append(f"{what}: ptxas says {oracle_log.splitlines()[0] if oracle_log else '?'}")
        elif oracle_ok and not ok:
            (cannot_run if CANNOT_RUN in log else wrongly_refused).append(f"{what}: {log.splitlines()[0]}")
    refused = sum(1 for ok, _ in verdicts if not ok)
    print(f"{len(cases)} mutants: ptxas refuses {refused}; the emulated GPU refuses {len(cannot_run)} "
          f"valid ones it cannot run:")
    for line in cannot_run:
        print("  " + line)
    assert not too_forgiving, "loaded on the emulated GPU, refused by ptxas:\n" + "\n".join(too_forgiving)
    assert not wrongly_refused, "accepted by ptxas, refused as invalid by the emulator:\n" + "\n".join(wrongly_refused)
    assert refused >= len(cases) // 4          # the mutants are not all harmless
