"""What a module image is (PTX text, a cubin, a fatbin), and the PTX inside a fatbin.

The emulated GPU runs PTX only. A cubin holds SASS for one architecture and is refused; a
fatbin is searched for its PTX entries, as a real driver JITs a fatbin's PTX when it holds
no SASS for the device.

A fatbin is a 16-byte header (magic 0xBA55ED50, version, header size, payload size) and a
sequence of entries, each with its own header: kind (1 = PTX, 2 = ELF/cubin), header size,
payload size, target architecture, flags and (when compressed) the uncompressed size.
Current nvcc compresses entries with zstd (flag 0x8000); older ones used a different scheme
(flag 0x2000), which is refused by name.

A header or size that does not add up (a version or header size nvcc never writes, entries
running past the payload, a payload that does not decompress) is CUDA_ERROR_INVALID_IMAGE.
"""
import ctypes
import re
import struct

from .versions import target_refusal

FATBIN_MAGIC = 0xBA55ED50
FATBIN_WRAPPER_MAGIC = 0x466243B1   # the __fatBinC_Wrapper_t that cuModuleLoadFatBinary may get
ELF_MAGIC = b"\x7fELF"

KIND_PTX, KIND_ELF = 1, 2
FATBIN_HEADER = 16
MAX_FATBIN = 1 << 32          # larger than any fatbin nvcc writes: a garbage size
MAX_ENTRY_HEADER = 4096
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
        _, payload = _check_fatbin_header(head, None)
        return "fatbin", ctypes.string_at(address, FATBIN_HEADER + payload)
    return "ptx", ctypes.string_at(address)


def _invalid(why: str) -> ImageError:
    return ImageError("CUDA_ERROR_INVALID_IMAGE", f"not a valid fatbin: {why}")


def _check_fatbin_header(data: bytes, length: int | None) -> tuple[int, int]:
    """(version, payload size) of a fatbin header, refused unless it is one nvcc writes:
    version 1, a 16-byte header, a payload within `length` bytes (when known) and below
    MAX_FATBIN. The driver is given a bare pointer, so the header must be sane before
    the payload is read from it."""
    if len(data) < FATBIN_HEADER:
        raise _invalid(f"{len(data)} bytes, shorter than its {FATBIN_HEADER}-byte header")
    _, version, header_size, payload = struct.unpack_from("<IHHQ", data)
    if version != 1 or header_size != FATBIN_HEADER:
        raise _invalid(f"header version {version} and size {header_size} (nvcc writes 1 and "
                       f"{FATBIN_HEADER})")
    if payload > MAX_FATBIN or (length is not None and FATBIN_HEADER + payload > length):
        have = "" if length is None else f" of the {length - FATBIN_HEADER} there are"
        raise _invalid(f"its header claims {payload} bytes of entries{have}")
    return version, payload


def fatbin_entries(data: bytes) -> list[dict]:
    """The entries of a fatbin: kind, arch (e.g. 80), flags, payload (still compressed).
    ImageError (CUDA_ERROR_INVALID_IMAGE) when a header or size does not add up."""
    _, payload_size = _check_fatbin_header(data, len(data))
    entries, offset, end = [], FATBIN_HEADER, FATBIN_HEADER + payload_size
    while offset < end:
        if end - offset < 16:
            if data[offset:end].strip(b"\0"):
                raise _invalid(f"{end - offset} bytes of garbage after its last entry")
            break
        kind, _, entry_header, size = struct.unpack_from("<HHIQ", data, offset)
        if not 16 <= entry_header <= MAX_ENTRY_HEADER or size > end - offset - entry_header:
            raise _invalid(f"the entry at offset {offset} has a {entry_header}-byte header and "
                           f"{size} bytes of payload, with {end - offset} bytes left")
        head = data[offset:offset + entry_header]
        body = data[offset + entry_header: offset + entry_header + size]
        entries.append({"kind": kind, "arch": _field(head, "<I", 28), "flags": _field(head, "<Q", 40),
                        "payload": body, "raw_size": _field(head, "<Q", 64), "offset": offset})
        offset += entry_header + size
    return entries


def _field(head: bytes, fmt: str, at: int) -> int:
    """A field of an entry header, 0 where the header is too short to hold it."""
    if len(head) < at + struct.calcsize(fmt):
        return 0
    return struct.unpack_from(fmt, head, at)[0]


def _decompress(entry: dict) -> bytes:
    if entry["flags"] & FLAG_COMPRESSED_ZSTD:
        try:
            import zstandard  # noqa: PLC0415  (only zstd-compressed fatbins need it; its absence is reported)
        except ImportError:
            raise ImageError("CUDA_ERROR_INVALID_IMAGE",
                             "the fatbin's PTX is zstd-compressed and the zstandard package is not installed")
        try:
            return zstandard.ZstdDecompressor().decompress(
                entry["payload"], max_output_size=entry["raw_size"] or 1 << 30)
        except zstandard.ZstdError as e:
            raise _invalid(f"the PTX entry at offset {entry['offset']} does not decompress: {e}")
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
    # invalid UTF-8 becomes U+FFFD: fine in a comment, refused elsewhere by the PTX parser
    texts = [_decompress(e).rstrip(b"\0").decode("utf-8", "replace") for e in usable]
    if device_arch is not None:
        for text in texts:          # an arch-specific sm_90a entry suits sm_90 alone
            m = re.search(r"^\s*\.target\s+(\w+)", text, re.M)
            if m is None or not target_refusal(m.group(1), device_arch):
                return text
    return texts[0]             # refused at load, naming its target
