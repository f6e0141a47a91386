"""cuLink*: the driver's linker, on the emulated GPU a PTX linker (ptx/linker.py).

    cuLinkCreate -> cuLinkAddData / cuLinkAddFile (one input each) -> cuLinkComplete -> cuLinkDestroy

A real driver compiles each PTX input to SASS as it is added and links the objects into a
cubin. Here the inputs are linked as PTX into one whole-program module, which is what
cuLinkComplete hands back as the "cubin": the linked PTX text (NUL-terminated, owned by the
link state until cuLinkDestroy), which cuModuleLoadData and cuLibraryLoadData load like any
PTX. Where the real driver refuses, this refuses with the same code and a log line naming
the symbol and the inputs:
  - a definition twice: at cuLinkAddData, CUDA_ERROR_INVALID_SOURCE ("Multiple definition
    of 'f' in 'b.ptx', first defined in 'a.ptx'");
  - an extern no input defines: at cuLinkComplete, CUDA_ERROR_UNKNOWN ("Undefined reference
    to 'g' in 'a.ptx'"), the code drivers are reported to return for nvlink's failures;
  - PTX that ptxas (or the emulator) refuses: CUDA_ERROR_INVALID_PTX at cuLinkComplete, where
    the linked module is checked as cuModuleLoadData checks a module (the real driver finds
    it when the input is added).
Inputs: PTX, fatbins (their PTX for this device), and cubins this process linked itself
(emu/driver/linked.py). Other cubins, host objects and libraries (libcudadevrt.a) carry
SASS only: CUDA_ERROR_NO_BINARY_FOR_GPU / CUDA_ERROR_NOT_SUPPORTED, saying so.
JIT options are those of cuModuleLoadDataEx: the log buffers given to cuLinkCreate are
filled as the real driver fills them (the option arrays must stay valid for the link's
life, as cuda.h says), and CU_JIT_WALL_TIME gets the link's milliseconds.
"""
import ctypes
import os
import threading
import time

from ...capi.constants import JIT_OPTION
from ...capi.images import ImageError, ptx_from_fatbin
from ..ptx.linker import Linker, LinkError
from ..ptx.parser import parse_ptx
from . import device, linked
from .context import api, current
from .entry import write_out
from .errors import EmuError
from .modules import compile_ptx, jit_options, refuse, write_log

# CUjitInputType
INPUT_CUBIN, INPUT_PTX, INPUT_FATBINARY, INPUT_OBJECT, INPUT_LIBRARY, INPUT_NVVM = range(6)
INPUT_NAMES = {INPUT_CUBIN: "a cubin", INPUT_PTX: "PTX", INPUT_FATBINARY: "a fatbin", INPUT_OBJECT: "a host object",
               INPUT_LIBRARY: "a library", INPUT_NVVM: "NVVM IR"}


class LinkState:
    """One CUlinkState: the options given to cuLinkCreate, the inputs so far, the image."""

    def __init__(self, slots: dict):
        self.slots = slots
        self.linker = Linker()
        self.names: list[str] = []
        self.image = None                  # the linked PTX, a C buffer, once complete
        self.started = time.perf_counter()


_lock = threading.Lock()
_states: dict[int, LinkState] = {}


def _state(handle: int) -> LinkState:
    with _lock:
        state = _states.get(handle or 0)
    if state is None:
        raise EmuError("CUDA_ERROR_INVALID_HANDLE", f"{handle:#x} is not a CUlinkState" if handle else "NULL CUlinkState")
    return state


@api
def cuLinkCreate(count, options, values, state_out):
    ctx = current()
    slots = jit_options(count, options, values)
    if not state_out:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuLinkCreate: NULL stateOut")
    handle = ctx.new_handle()
    with _lock:
        _states[handle] = LinkState(slots)
    write_out(ctypes.c_void_p, state_out, handle)


def _refused(state: LinkState, own: dict, code_name: str, log: str):
    """Refuse the call, the log in the link's error buffer and in this input's own."""
    write_log(own, "CU_JIT_ERROR_LOG_BUFFER", "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES", log)
    refuse(state.slots, code_name, log)


def _ptx_of(state: LinkState, own: dict, kind: int, data: bytes, name: str) -> str:
    """The PTX text of one input, or the refusal of an input the emulated GPU cannot link."""
    if kind == INPUT_PTX:
        return data.split(b"\0", 1)[0].decode("utf-8", errors="replace")
    if kind == INPUT_FATBINARY:
        try:
            return ptx_from_fatbin(data, device.arch())
        except ImageError as e:
            _refused(state, own, e.code_name, f"{name}: {e}")
    if kind == INPUT_CUBIN:
        remembered = linked.ptx_of(data)
        if remembered is not None and remembered[0] == device.arch():
            return remembered[1]
        _refused(state, own, "CUDA_ERROR_NO_BINARY_FOR_GPU",
                 f"{name}: a cubin is SASS for one real GPU; the emulated GPU links and runs PTX only")
    if kind in (INPUT_OBJECT, INPUT_LIBRARY, INPUT_NVVM):
        _refused(state, own, "CUDA_ERROR_NOT_SUPPORTED",
                 f"{name}: {INPUT_NAMES[kind]} cannot be linked on the emulated GPU, which links PTX only "
                 "(give the PTX, or a fatbin that carries it)")
    raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown CUjitInputType {kind}")


def _add(state: LinkState, kind: int, data: bytes, name: str, own: dict) -> None:
    if state.image is not None:
        raise EmuError("CUDA_ERROR_INVALID_HANDLE", "the link was completed already")
    text = _ptx_of(state, own, kind, data, name)
    try:
        state.linker.add(text, name)
    except LinkError as e:
        _refused(state, own, e.code_name, str(e))
    state.names.append(name)


def _input_name(name: int | bytes, state: LinkState) -> str:
    if isinstance(name, bytes) and name:
        return name.decode(errors="replace")
    return f"input file {len(state.names) + 1}"


@api
def cuLinkAddData(handle, kind, data, size, name, count, options, values):
    state = _state(handle)
    own = jit_options(count, options, values)
    if not data or not size:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuLinkAddData: no data")
    _add(state, kind, ctypes.string_at(data, size), _input_name(name, state), own)


@api
def cuLinkAddFile(handle, kind, path, count, options, values):
    state = _state(handle)
    own = jit_options(count, options, values)
    if not path:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuLinkAddFile: NULL path")
    name = path.decode(errors="replace")
    try:
        with open(os.fsdecode(path), "rb") as f:
            data = f.read()
    except OSError as e:
        raise EmuError("CUDA_ERROR_FILE_NOT_FOUND", f"cuLinkAddFile: {name}: {e.strerror}") from None
    _add(state, kind, data, name, own)


@api
def cuLinkComplete(handle, image_out, size_out):
    state = _state(handle)
    if not image_out or not size_out:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuLinkComplete: NULL cubinOut or sizeOut")
    if state.image is None:
        try:
            text = state.linker.complete()
        except LinkError as e:
            refuse(state.slots, e.code_name, str(e))
        # Checked as cuModuleLoadData checks a module (ptxas, then the emulator's parser),
        # so what cannot load is refused here, by the link.
        _, assembly, note = compile_ptx(text, text.encode(), state.slots, read=parse_ptx)
        info = assembly.info_log if assembly is not None else ""
        write_log(state.slots, "CU_JIT_INFO_LOG_BUFFER", "CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES",
                  "\n".join(s for s in (info, note, f"emulated: linked the PTX of {', '.join(state.names)}") if s))
        write_log(state.slots, "CU_JIT_ERROR_LOG_BUFFER", "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES", "")
        wall = state.slots.get(JIT_OPTION["CU_JIT_WALL_TIME"])
        if wall is not None:
            ctypes.c_float.from_address(wall).value = (time.perf_counter() - state.started) * 1000
        state.image = ctypes.create_string_buffer(text.encode())
    write_out(ctypes.c_void_p, image_out, ctypes.addressof(state.image))
    write_out(ctypes.c_size_t, size_out, ctypes.sizeof(state.image))


@api
def cuLinkDestroy(handle):
    _state(handle)
    with _lock:
        del _states[handle]
