"""Building the drop-in libcuda.so.1: the generated C (source.py) compiled with the system's
C compiler, once, into the compile cache.

The build is keyed by a hash of the source and the compiler's identity, so a new lowlevel
or another compiler builds again and nothing stale is reused. It is written to a temporary
file and renamed into place, so two processes building at once never see half a library.
With caching off (LOWLEVEL_CACHE=0) it is built into a fresh temporary folder.
"""
import os
import pathlib
import shutil
import subprocess
import tempfile

from ..driver.assembler import cache_dir
from .source import source, source_hash

LIBRARY = "libcuda.so.1"


class BuildError(RuntimeError):
    """The library could not be built: no C compiler, or it refused the source."""


def compiler() -> str:
    """The C compiler: $CC, else cc, gcc or clang on the PATH."""
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate.split()[0]):
            return candidate
    raise BuildError("building the emulated libcuda.so.1 needs a C compiler (cc, gcc or clang) on the PATH, "
                     "or $CC")


def _identity(cc: str) -> str:
    run = subprocess.run([*cc.split(), "--version"], capture_output=True, text=True, timeout=60)
    return (run.stdout or run.stderr).splitlines()[0] if (run.stdout or run.stderr) else cc


def directory() -> pathlib.Path:
    """The folder holding libcuda.so.1 (and libcuda.so), built first if it is not there."""
    folder = built(LIBRARY, source(), "libcuda")
    link = folder / "libcuda.so"
    if not link.exists():
        tmp_link = folder / f".libcuda.so.{os.getpid()}"
        tmp_link.unlink(missing_ok=True)
        tmp_link.symlink_to(LIBRARY)
        os.replace(tmp_link, link)
    return folder


def built(soname: str, text: str, kind: str) -> pathlib.Path:
    """The cache folder holding the shared library `soname` compiled from C `text`, built
    first if it is not there (`kind` names the folder: libcuda, nvjitlink)."""
    cc = compiler()
    key = source_hash(text + "\0" + _identity(cc))
    root = cache_dir()
    folder = (root / kind / key) if root is not None else pathlib.Path(tempfile.mkdtemp(prefix=f"lowlevel-{kind}-"))
    target = folder / soname
    if target.is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=folder, prefix=".build-", suffix=".so")
    os.close(fd)
    c_file = pathlib.Path(partial).with_suffix(".c")
    try:
        c_file.write_text(text)
        run = subprocess.run([*cc.split(), "-shared", "-fPIC", "-O2", "-fvisibility=hidden",
                              f"-Wl,-soname,{soname}", "-o", partial, str(c_file), "-ldl", "-lpthread"],
                             capture_output=True, text=True, timeout=300)
        if run.returncode != 0:
            raise BuildError(f"{cc} could not build the emulated {soname}:\n{run.stderr[-4000:]}")
        os.replace(partial, target)
    finally:
        for leftover in (partial, c_file):
            if os.path.exists(leftover):
                os.unlink(leftover)
    return folder
