"""Regenerate lowlevel/cuda/constants.py from the cuda.h of the nvidia-cuda-runtime wheel.

The enum values are facts of the driver ABI; reading them from the header (instead of typing
them) keeps them right. Only names and values are taken: descriptions are written by hand in
lowlevel/emu/errors.py for the codes the emulated GPU returns.

    python tools/gen_constants.py            # rewrites lowlevel/cuda/constants.py
"""
import pathlib
import re
import sys

ENUMS = {  # C enum type -> Python dict name
    "CUresult": "CURESULT",
    "CUdevice_attribute": "DEVICE_ATTRIBUTE",
    "CUfunction_attribute": "FUNCTION_ATTRIBUTE",
    "CUjit_option": "JIT_OPTION",
}


def find_header() -> pathlib.Path:
    from cuda.pathfinder import find_nvidia_header_directory
    return pathlib.Path(find_nvidia_header_directory("cudart")) / "cuda.h"


def enum_body(text: str, name: str) -> str:
    end = re.search(r"\}\s*" + name + r"\s*;", text)
    if not end:
        sys.exit(f"enum {name} not found")
    start = text.rfind("typedef enum", 0, end.start())
    return text[text.index("{", start) + 1:end.start()]


def c_int_expr(expr: str) -> int:
    """Value of a constant C integer expression such as 0x1, 1u<<3 or (1 << 4)."""
    expr = re.sub(r"(?<=[0-9a-fA-F])[uUlL]+\b", "", expr)
    if not re.fullmatch(r"[0-9a-fA-FxX()<>|+\- ]+", expr):
        raise ValueError(expr)
    return int(eval(expr, {"__builtins__": {}}))


def parse_enum(body: str) -> list[tuple[str, int]]:
    """(name, value) for each enumerator, comments skipped."""
    body = re.sub(r"/\*.*?\*/|//[^\n]*", " ", body, flags=re.S)
    out, value = [], -1
    for m in re.finditer(r"\b([A-Z][A-Z0-9_]+)\s*(?:=\s*([^,}]+))?\s*(?:,|$)", body):
        name, expr = m.group(1), m.group(2)
        if expr is not None:
            expr = expr.strip()
            known = dict(out)
            value = known[expr] if expr in known else c_int_expr(expr)
        else:
            value += 1
        out.append((name, value))
    return out


def main() -> None:
    header = find_header()
    text = header.read_text()
    version = re.search(r"#define CUDA_VERSION (\d+)", text).group(1)
    lines = [
        '"""CUDA driver constants, generated from cuda.h by tools/gen_constants.py. Do not edit."""',
        f"CUDA_H_VERSION = {version}",
        "",
    ]
    for cname, pyname in ENUMS.items():
        entries = parse_enum(enum_body(text, cname))
        lines.append(f"{pyname} = {{")
        for name, value in entries:
            if not name.endswith("_MAX") or cname == "CUresult":
                lines.append(f"    {name!r}: {value},")
        lines.append("}")
        lines.append("")
    lines.append("CURESULT_NAME = {v: k for k, v in CURESULT.items()}")
    out = pathlib.Path(__file__).resolve().parent.parent / "lowlevel" / "cuda" / "constants.py"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out} from {header} (CUDA_VERSION {version})")


if __name__ == "__main__":
    main()
