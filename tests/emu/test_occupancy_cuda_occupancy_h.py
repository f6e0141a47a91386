"""The emulated driver's occupancy (its device's limits for LOWLEVEL_EMU_CC, its calculator's
rules) against cuda_occupancy.h itself, compiled with g++ (tests/helpers/cuda_occupancy_oracle.cpp)
and given the documented per-CC properties, over random (registers, block, static and dynamic
shared memory, carveout) cases for sm_80, sm_86, sm_89 and sm_90."""
import pathlib
import random
import shutil
import subprocess

import pytest

from lowlevel import cuda
from lowlevel.emu.driver import occupancy, occupancy_rules as rules

KB = 1024
ORACLE = pathlib.Path(__file__).parent.parent / "helpers" / "cuda_occupancy_oracle.cpp"
# cudaOccDeviceProp per CC: threads per SM, shared memory per SM, opt-in per block, SMs
PROPS = {"8.0": (2048, 164 * KB, 163 * KB, 108), "8.6": (1536, 100 * KB, 99 * KB, 84),
         "8.9": (1536, 100 * KB, 99 * KB, 128), "9.0": (2048, 228 * KB, 227 * KB, 132)}
CASES = 300


def _header():
    import nvidia  # noqa: PLC0415
    for root in nvidia.__path__:
        found = sorted(pathlib.Path(root).glob("*/include/cuda_occupancy.h"))
        if found:
            return found[0]
    return None


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler (g++) to build the cuda_occupancy.h oracle")
    try:
        header = _header()
    except ImportError:
        header = None
    if header is None:
        pytest.skip("cuda_occupancy.h not found (the nvidia-cuda-runtime wheel is not installed)")
    exe = tmp_path_factory.mktemp("occ") / "occ"
    subprocess.run([compiler, "-O1", "-I", str(header.parent), str(ORACLE), "-o", str(exe)], check=True)
    return exe


def _ask(exe, lines):
    out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    return out.stdout.split("\n")[:len(lines)]


@pytest.mark.parametrize("cc", list(PROPS))
def test_active_blocks_agree_with_cuda_occupancy_h(oracle, monkeypatch, cc):
    monkeypatch.setenv("LOWLEVEL_EMU_CC", cc)
    sm = occupancy.device_properties()
    threads, shared_sm, optin, sms = PROPS[cc]
    major, minor = cc.split(".")
    rng = random.Random(cc)
    cases, lines = [], []
    for _ in range(CASES):
        regs = rng.choice([rng.randint(0, 255), rng.choice([16, 32, 64, 128, 255, 256])])
        block = rng.choice([rng.randint(1, 1024), 32 * rng.randint(1, 32)])
        static = rng.choice([0, 0, rng.randint(0, 48 * KB)])
        max_dynamic = rng.choice([48 * KB - static, max(0, optin - static)])
        dynamic = rng.choice([0, rng.randint(0, max_dynamic), rng.randint(0, optin)])
        carveout = rng.choice([-1, -1, 0, 25, 50, 100, rng.randint(0, 100)])
        cases.append((regs, block, static, dynamic, max_dynamic, carveout))
        lines.append(f"{major} {minor} {threads} {shared_sm} {optin} {sms} {regs} {block} {static} {dynamic} "
                     f"{max_dynamic} {carveout}")
    for case, answer in zip(cases, _ask(oracle, lines)):
        regs, block, static, dynamic, max_dynamic, carveout = case
        k = rules.KernelResources(regs, static, max_dynamic, 1024, carveout)
        got = rules.max_active_blocks(sm, k, block, dynamic)
        assert str(got.blocks) == answer, (cc, case, got.limits)


@pytest.mark.parametrize("cc", list(PROPS))
def test_a_light_kernel_through_the_driver(oracle, monkeypatch, cc):
    monkeypatch.setenv("LOWLEVEL_EMU_CC", cc)
    cuda.use_driver("emu")
    ptx = f".version 8.0\n.target sm_{cc.replace('.', '')}\n.address_size 64\n.visible .entry k() {{ ret; }}\n"
    f = cuda.Module.from_ptx(ptx).get_function("k")
    threads, shared_sm, optin, sms = PROPS[cc]
    major, minor = cc.split(".")
    sizes = (32, 64, 96, 256, 1024)
    lines = [f"{major} {minor} {threads} {shared_sm} {optin} {sms} {f.num_regs} {b} {f.shared_size_bytes} 0 "
             f"{f.max_dynamic_shared_memory} -1" for b in sizes]
    assert [str(f.occupancy(b, 0)) for b in sizes] == _ask(oracle, lines)
