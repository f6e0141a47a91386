"""The binding table against cuda.h (and cudaProfilerTypedefs.h, for the driver's
cuProfilerStart/Stop): each entry binds the symbol the header maps its public name to, with as
many arguments as the header's prototype."""
import pathlib
import re

import pytest

from lowlevel.capi import constants
from lowlevel.cuda import bindings


def _header_text() -> str:
    pathfinder = pytest.importorskip("cuda.pathfinder")
    include = pathfinder.find_nvidia_header_directory("cudart")
    if include is None or not (pathlib.Path(include) / "cuda.h").is_file():
        pytest.skip("cuda.h not found (pip install nvidia-cuda-runtime)")
    # the wheel has no cudaProfiler.h: its typedefs, PFN_cuProfilerStart_v4000, give the prototypes
    typedefs = (pathlib.Path(include) / "cudaProfilerTypedefs.h").read_text()
    profiler = re.sub(r"typedef CUresult \(CUDAAPI \*PFN_(cu\w+?)_v\d+\)", r"CUresult CUDAAPI \1", typedefs)
    return (pathlib.Path(include) / "cuda.h").read_text() + profiler


@pytest.fixture(scope="module")
def header():
    text = _header_text()
    defines = {}
    for name, target in re.findall(r"#define\s+(cu\w+)\s+(.+)", text):
        inner = re.search(r"\((\w+)\)", target)
        defines.setdefault(name, inner.group(1) if inner else target.strip())
    protos = {}
    for name, args in re.findall(r"CUresult\s+CUDAAPI\s+(\w+)\s*\(([^;]*?)\)\s*;", text, re.S):
        args = re.sub(r"/\*.*?\*/", "", args, flags=re.S).strip()
        # The first declaration is the documented API; later ones with the same name (the
        # header's block for old ABIs, e.g. cuStreamGetCaptureInfo with 3 arguments) are not.
        protos.setdefault(name, 0 if args in ("", "void") else len(args.split(",")))
    # A symbol declared only under the public name that #defines to it
    # (cuGraphInstantiate -> cuGraphInstantiateWithFlags) has that name's prototype.
    for name, target in defines.items():
        if name in protos:
            protos.setdefault(target, protos[name])
    return defines, protos


@pytest.mark.parametrize("public", sorted(bindings.PROTOTYPES))
def test_entry_matches_cuda_h(header, public):
    defines, protos = header
    symbol, argtypes = bindings.PROTOTYPES[public]
    expected_symbol = defines.get(public, public)
    assert symbol == expected_symbol, f"{public}: cuda.h maps it to {expected_symbol}, table binds {symbol}"
    # The header declares the public name; its #define turns that into the versioned symbol.
    declared = public if public in protos else symbol
    assert declared in protos, f"{public} has no prototype in cuda.h"
    assert len(argtypes) == protos[declared], (
        f"{symbol}: cuda.h declares {protos[declared]} arguments, table has {len(argtypes)}")


def test_constants_match_cuda_h():
    """The generated constants are the header's (regenerate with tools/gen_constants.py)."""
    text = _header_text()
    for table in (constants.CURESULT, constants.DEVICE_ATTRIBUTE, constants.JIT_OPTION,
                  constants.FUNCTION_ATTRIBUTE):
        for name, value in table.items():
            assert re.search(rf"\b{name}\b", text), f"{name} not in cuda.h"
            m = re.search(rf"\b{name}\s*=\s*([^,\n/]+)", text)
            if m and re.fullmatch(r"0x[0-9a-fA-F]+|\d+", m.group(1).strip()):
                assert int(m.group(1).strip(), 0) == value, name


def test_an_old_driver_gets_the_older_symbol():
    """A library without cuEventElapsedTime_v2 is bound to cuEventElapsedTime."""
    class OldLibrary:
        def __getattr__(self, symbol):
            if symbol == "cuEventElapsedTime_v2":
                raise AttributeError(symbol)
            return type("Function", (), {"name": symbol})()
    bound = bindings.bind_library(OldLibrary())
    assert bound["cuEventElapsedTime"].name == "cuEventElapsedTime"
    assert bound["cuMemAlloc"].name == "cuMemAlloc_v2"
