"""The ctypes structs of lowlevel.capi.structs against cuda.h, as a C compiler lays it out:
every field's offset and every struct's size."""
import ctypes
import pathlib
import shutil
import subprocess

import pytest

from lowlevel.capi.structs import STRUCTS


def _include_dir() -> pathlib.Path:
    pathfinder = pytest.importorskip("cuda.pathfinder")
    include = pathfinder.find_nvidia_header_directory("cudart")
    if include is None or not (pathlib.Path(include) / "cuda.h").is_file():
        pytest.skip("cuda.h not found (pip install nvidia-cuda-runtime)")
    return pathlib.Path(include)


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    """(struct, field) -> offset and struct -> size, printed by a compiled C program."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to read cuda.h's layout")
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <cuda.h>", "int main(void) {"]
    for name, cls in STRUCTS.items():
        lines.append(f'printf("{name} %zu\\n", sizeof({name}));')
        for field, *_ in cls._fields_:
            lines.append(f'printf("{name}.{field} %zu\\n", offsetof({name}, {field}));')
    lines.append("return 0; }")
    work = tmp_path_factory.mktemp("layout")
    (work / "layout.c").write_text("\n".join(lines))
    subprocess.run([compiler, "-I", str(_include_dir()), "-o", str(work / "layout"), str(work / "layout.c")],
                   check=True, capture_output=True)
    out = subprocess.run([str(work / "layout")], check=True, capture_output=True, text=True).stdout
    return dict((key, int(value)) for key, value in (line.split() for line in out.splitlines()))


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_layout_matches_cuda_h(c_layout, name):
    cls = STRUCTS[name]
    for field, *_ in cls._fields_:
        assert getattr(cls, field).offset == c_layout[f"{name}.{field}"], f"{name}.{field}"
    assert ctypes.sizeof(cls) == c_layout[name], f"sizeof({name})"
