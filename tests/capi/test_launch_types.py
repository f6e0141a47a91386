"""cuLaunchKernelEx's structures against cuda.h: a C file compiled against the header
prints every size and offset, and the ctypes classes must agree."""
import ctypes
import pathlib
import shutil
import subprocess

import pytest

from lowlevel.capi import launch_types as T

FIELDS = {
    "CUlaunchConfig": ("gridDimX", "gridDimY", "gridDimZ", "blockDimX", "blockDimY", "blockDimZ",
                       "sharedMemBytes", "hStream", "attrs", "numAttrs"),
    "CUlaunchAttribute": ("id", "value"),
    "CUlaunchAttributeValue": ("accessPolicyWindow", "cooperative", "syncPolicy", "clusterDim",
                               "clusterSchedulingPolicyPreference", "programmaticStreamSerializationAllowed",
                               "programmaticEvent", "launchCompletionEvent", "priority", "memSyncDomainMap",
                               "memSyncDomain", "preferredClusterDim", "deviceUpdatableKernelNode",
                               "sharedMemCarveout", "nvlinkUtilCentricScheduling", "portableClusterSizeMode",
                               "sharedMemoryMode"),
    "CUaccessPolicyWindow": ("base_ptr", "num_bytes", "hitRatio", "hitProp", "missProp"),
}


def _header_layout(tmp_path) -> dict[str, int]:
    pathfinder = pytest.importorskip("cuda.pathfinder")
    include = pathfinder.find_nvidia_header_directory("cudart")
    if include is None or not (pathlib.Path(include) / "cuda.h").is_file():
        pytest.skip("cuda.h not found (pip install nvidia-cuda-runtime)")
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to read the header's layout")
    lines = []
    for struct, fields in FIELDS.items():
        lines.append(f'printf("{struct} %zu\\n", sizeof({struct}));')
        for field in fields:
            lines.append(f'printf("{struct}.{field} %zu %zu\\n", offsetof({struct}, {field}), '
                         f'sizeof((({struct} *)0)->{field}));')
    source = tmp_path / "layout.c"
    source.write_text("#include <stdio.h>\n#include <stddef.h>\n#include <cuda.h>\nint main(void) {\n"
                      + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([compiler, f"-I{include}", str(source), "-o", str(exe)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    layout = {}
    for line in out.splitlines():
        name, *numbers = line.split()
        layout[name] = tuple(int(n) for n in numbers)
    return layout


def test_structures_match_cuda_h(tmp_path):
    layout = _header_layout(tmp_path)
    for struct, fields in FIELDS.items():
        cls = getattr(T, struct)
        assert (ctypes.sizeof(cls),) == layout[struct], struct
        for field in fields:
            descriptor = getattr(cls, field)
            assert (descriptor.offset, descriptor.size) == layout[f"{struct}.{field}"], f"{struct}.{field}"
