"""Where the handwritten kernels of ptx/ are, from a checkout and from an installed wheel,
and each one loaded as a Module (`lowlevel.kernels` is this module).

In a checkout they sit in ptx/ beside the package; a wheel carries them inside the package
as lowlevel/_ptx/ (pyproject.toml maps one onto the other).
"""
import functools
import pathlib

from ..cuda import Module
from ..cuda.context import ensure_context

_PACKAGE = pathlib.Path(__file__).resolve().parents[1]       # lowlevel/


def ptx_dir() -> pathlib.Path:
    for candidate in (_PACKAGE / "_ptx", _PACKAGE.parent / "ptx"):
        if candidate.is_dir() and any(candidate.glob("*.ptx")):
            return candidate
    raise FileNotFoundError(f"the handwritten PTX kernels are missing: looked in {_PACKAGE / '_ptx'} "
                            f"and {_PACKAGE.parent / 'ptx'}")


def ptx_files() -> list[pathlib.Path]:
    return sorted(ptx_dir().glob("*.ptx"))


def ptx_source(name: str) -> str:
    """The text of ptx/NAME.ptx (NAME with or without the suffix)."""
    path = ptx_dir() / (name if name.endswith(".ptx") else name + ".ptx")
    if not path.is_file():
        known = ", ".join(p.stem for p in ptx_files())
        raise FileNotFoundError(f"no handwritten kernel file {path.name}; there are: {known}")
    return path.read_text()


@functools.cache
def _module(name: str, driver_id: int, device: int, context_generation: int):
    return Module.from_ptx(ptx_source(name))


def module(name: str):
    """ptx/NAME.ptx loaded into the current context (once per driver, device and context)."""
    drv, ctx = ensure_context()
    return _module(name, id(drv), ctx.ordinal, ctx.generation)
