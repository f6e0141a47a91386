"""PTX to a cubin for one architecture with nvJitLink (the library form of ptxas + nvlink)."""
from .errors import LinkError, ToolMissing


def _nvjitlink():
    try:
        from cuda.bindings import nvjitlink  # noqa: PLC0415  (loaded on first use; ToolMissing says what to install)
    except ImportError as e:
        raise ToolMissing("nvJitLink bindings are missing: pip install cuda-python nvidia-nvjitlink") from e
    return nvjitlink


def version() -> tuple[int, int]:
    return tuple(_nvjitlink().version())


def _log(nvjitlink, handle, size_fn, get_fn) -> str:
    try:
        size = size_fn(handle)
        buf = bytearray(size)
        get_fn(handle, buf)
        return bytes(buf).rstrip(b"\0").decode(errors="replace")
    except Exception:
        return ""


def ptx_to_cubin(ptx: str, arch: int, options=(), name: str = "kernel.ptx") -> tuple[bytes, str]:
    """(cubin, info log). `options` are nvJitLink's: "-O3", "-lineinfo", "-maxrregcount=32"...

    -verbose is always on, so the info log has ptxas's per-kernel resource lines."""
    nvjitlink = _nvjitlink()
    all_options = [f"-arch=sm_{arch}", "-verbose", *options]
    handle = nvjitlink.create(len(all_options), all_options)
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as e:
            log = _log(nvjitlink, handle, nvjitlink.get_error_log_size, nvjitlink.get_error_log)
            raise LinkError(f"nvJitLink could not build sm_{arch} code from {name} ({e}) with options {all_options}",
                            log) from None
        size = nvjitlink.get_linked_cubin_size(handle)
        cubin = bytearray(size)
        nvjitlink.get_linked_cubin(handle, cubin)
        info = _log(nvjitlink, handle, nvjitlink.get_info_log_size, nvjitlink.get_info_log)
        return bytes(cubin), info
    finally:
        nvjitlink.destroy(handle)
