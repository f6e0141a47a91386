"""Fatbins with nvfatbin: SASS for several architectures plus PTX, in one image the driver
picks from (the SASS for its GPU, else a JIT of the PTX)."""
from .errors import LinkError, ToolMissing


def _nvfatbin():
    try:
        from cuda.bindings import nvfatbin  # noqa: PLC0415  (loaded on first use; ToolMissing says what to install)
    except ImportError as e:
        raise ToolMissing("nvfatbin bindings are missing: pip install cuda-python nvidia-nvfatbin") from e
    return nvfatbin


def build(cubins: dict[int, bytes], ptx: dict[int, str], identifier: str = "lowlevel") -> bytes:
    """A fatbin holding each cubin (arch -> SASS) and each PTX (arch -> text)."""
    nvfatbin = _nvfatbin()
    handle = nvfatbin.create([], 0)
    try:
        try:
            for arch, cubin in sorted(cubins.items()):
                nvfatbin.add_cubin(handle, cubin, len(cubin), str(arch), identifier)
            for arch, text in sorted(ptx.items()):
                data = text.encode() + b"\0"
                nvfatbin.add_ptx(handle, data, len(data), str(arch), identifier, "")
        except nvfatbin.nvFatbinError as e:
            raise LinkError(f"nvfatbin could not build the fatbin: {e}") from None
        out = bytearray(nvfatbin.size(handle))
        nvfatbin.get(handle, out)
        return bytes(out)
    finally:
        nvfatbin.destroy(handle)
