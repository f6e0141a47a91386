"""What a module image is (PTX text, a cubin, a fatbin), and the PTX inside a fatbin.

The emulated GPU runs PTX only. A cubin holds SASS for one architecture and is refused; a
fatbin is searched for its PTX entries, as a real driver JITs a fatbin's PTX when it holds
no SASS for the device.

A fatbin is a 16-byte header (magic 0xBA55ED50, version, header size, payload size) and a
sequence of entries, each with its own header: kind (1 = PTX, 2 = ELF/cubin), header size,
payload size, target architecture, flags and (when compressed) the uncompressed size.
Current nvcc compresses entries with zstd (flag 0x8000); older ones used a different scheme
(flag 0x2000), which is refused by name.
"""
import ctypes
import re
import struct

FATBIN_MAGIC = 0xBA55ED50
FATBIN_WRAPPER_MAGIC = 0x466243B1   # the __fatBinC_Wrapper_t that cuModuleLoadFatBinary may get
ELF_MAGIC = b"\x7fELF"

KIND_PTX, KIND_ELF = 1, 2
FLAG_COMPRESSED_LEGACY = 0x2000
FLAG_COMPRESSED_ZSTD = 0x8000


class ImageError(Exception):
    """An image the emulated GPU cannot use; `code_name` is the CUresult it becomes."""

    def __init__(self, code_name: str, message: str):
        super().__init__(message)
        self.code_name = code_name


def read_image(address: int) -> tuple[str, bytes]:
    """Classify the image at a host address; returns (kind, bytes) with kind ptx|cubin|fatbin.

    The driver API passes images as bare pointers: PTX is NUL-terminated text, a cubin is an
    ELF file whose size is in its header, a fatbin carries its size in its header.
    """
    head = ctypes.string_at(address, 16)
    if head[:4] == ELF_MAGIC:
        return "cubin", head
    magic = struct.unpack_from("<I", head)[0]
    if magic == FATBIN_WRAPPER_MAGIC:
        _, _, inner, _ = struct.unpack("<IIQQ", ctypes.string_at(address, 24))
        return read_image(inner)
    if magic == FATBIN_MAGIC:
        _, _, header_size, payload = struct.unpack_from("<IHHQ", head)
        return "fatbin", ctypes.string_at(address, header_size + payload)
    return "ptx", ctypes.string_at(address)


def fatbin_entries(data: bytes) -> list[dict]:
    """The entries of a fatbin: kind, arch (e.g. 80), flags, payload (decompressed)."""
    _, _, header_size, payload_size = struct.unpack_from("<IHHQ", data)
    entries, offset, end = [], header_size, header_size + payload_size
    while offset + 16 <= end:
        kind, _, entry_header, size = struct.unpack_from("<HHIQ", data, offset)
        arch = struct.unpack_from("<I", data, offset + 28)[0] if entry_header >= 32 else 0
        flags = struct.unpack_from("<Q", data, offset + 40)[0] if entry_header >= 48 else 0
        raw_size = struct.unpack_from("<Q", data, offset + 64)[0] if entry_header >= 72 else 0
        body = data[offset + entry_header: offset + entry_header + size]
        entries.append({"kind": kind, "arch": arch, "flags": flags, "payload": body, "raw_size": raw_size})
        offset += entry_header + size
    return entries


def _decompress(entry: dict) -> bytes:
    if entry["flags"] & FLAG_COMPRESSED_ZSTD:
        try:
            import zstandard
        except ImportError:
            raise ImageError("CUDA_ERROR_INVALID_IMAGE",
                             "the fatbin's PTX is zstd-compressed and the zstandard package is not installed")
        return zstandard.ZstdDecompressor().decompress(entry["payload"], max_output_size=entry["raw_size"] or 1 << 30)
    if entry["flags"] & FLAG_COMPRESSED_LEGACY:
        raise ImageError("CUDA_ERROR_INVALID_IMAGE",
                         "the fatbin's PTX uses the legacy compression, which the emulated GPU cannot read; "
                         "rebuild it with -Xfatbin=-compress-mode=size or without compression")
    return entry["payload"]


def ptx_from_fatbin(data: bytes, device_arch: int | None = None) -> str:
    """The PTX a driver JITs from a fatbin, as text: of the entries whose architecture the
    device can run (arch <= `device_arch`; None = any), the newest. ImageError when the
    fatbin holds no PTX, or only PTX for newer GPUs than the device."""
    entries = fatbin_entries(data)
    ptx = [e for e in entries if e["kind"] == KIND_PTX]
    if not ptx:
        archs = ", ".join(f"sm_{e['arch']}" for e in entries if e["kind"] == KIND_ELF) or "none"
        raise ImageError("CUDA_ERROR_NO_BINARY_FOR_GPU",
                         f"the fatbin holds no PTX (SASS only, for {archs}); the emulated GPU runs PTX only")
    usable = ptx if device_arch is None else [e for e in ptx if e["arch"] <= device_arch]
    if not usable:
        archs = ", ".join(f"sm_{e['arch']}" for e in sorted(ptx, key=lambda e: e["arch"]))
        raise ImageError("CUDA_ERROR_NO_BINARY_FOR_GPU",
                         f"the fatbin's PTX is for {archs}, all newer than this device "
                         f"(sm_{device_arch}); no kernel image can run on it")
    usable.sort(key=lambda e: e["arch"], reverse=True)
    texts = [_decompress(e).rstrip(b"\0").decode() for e in usable]
    if device_arch is not None:
        from .device import target_refusal
        for text in texts:          # an arch-specific sm_90a entry suits sm_90 alone
            m = re.search(r"^\s*\.target\s+(\w+)", text, re.M)
            if m is None or not target_refusal(m.group(1), device_arch):
                return text
    return texts[0]             # refused at load, naming its target
