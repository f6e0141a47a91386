"""The emulated driver's module functions: load (PTX, fatbins; the JIT's checks), functions,
global variables and parameter info (function attributes: funcattrs.py)."""
import ctypes

from ...capi.constants import JIT_OPTION
from ...capi.images import ImageError, ptx_from_fatbin, read_image
from ...capi.versions import format_driver_version, max_ptx_isa
from ..engine.decode import load_ptx
from ..engine.memory import OutOfMemory
from ..engine.spaces import allocate_globals, free_globals
from ..ptx.errors import PtxError
from ..ptx.ir import layout_variables
from . import assembler, device, linked
from .assembler import ptx_header
from .context import Context, api, current, lookup_handle
from .entry import write_out
from .errors import EmuError


class Module:
    def __init__(self, handle: int, ptx_module, source_kind: str, figures: dict | None = None):
        self.handle = handle
        self.ptx = ptx_module
        self.source_kind = source_kind       # "ptx" or "fatbin"
        self.functions: dict[str, int] = {}  # kernel name -> function handle
        self.figures = figures or {}         # kernel name -> assembler.KernelFigures


class Function:
    def __init__(self, handle: int, module: Module, kernel):
        self.handle = handle
        self.module = module
        self.kernel = kernel
        self.figures = module.figures.get(kernel.name)     # None: the emulator's own estimates
        # What cuFuncSetAttribute changes (funcattrs.py): the opt-in to more dynamic shared
        # memory starts at what fits beside the static shared memory in the default 48 KB.
        self.max_dynamic_shared = max(0, device.MAX_SHARED_PER_BLOCK - self.resources()["shared"])
        self.carveout = -1                                  # CU_SHAREDMEM_CARVEOUT_DEFAULT
        dims = kernel.reqnctapercluster
        self.cluster_dims = (*dims, 1, 1)[:3] if dims else (0, 0, 0)
        self.cluster_dims_compiled = bool(dims)            # then not settable at run time
        self.non_portable_cluster = 0
        self.cluster_scheduling = 0                         # CU_CLUSTER_SCHEDULING_POLICY_DEFAULT

    def resources(self) -> dict[str, int]:
        """Registers and bytes of shared, local and user constant memory per thread/CTA:
        the assembler's figures where it ran, else the emulator's estimates."""
        k, fig = self.kernel, self.figures
        const = fig.const if fig is not None and fig.const is not None else \
            layout_variables([v for v in self.module.ptx.globals if v.space == "const"])[1]
        if fig is None:
            return {"registers": k.num_regs, "shared": k.shared_bytes, "local": k.local_bytes, "const": const}
        return {"registers": fig.registers, "shared": fig.shared, "local": fig.local, "const": const}


def jit_options(count: int, options: int, values: int) -> dict[int, int]:
    """The (option -> value slot address) pairs of cuModuleLoadDataEx."""
    if count and not (options and values):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "JIT options given without their arrays")
    known = set(JIT_OPTION.values())
    slots = {}
    for i in range(count):
        option = ctypes.c_int.from_address(options + 4 * i).value
        if option not in known or option == JIT_OPTION["CU_JIT_NUM_OPTIONS"]:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown JIT option {option}")
        slots[option] = values + 8 * i
    return slots


def write_log(slots: dict, buffer_option: str, size_option: str, text: str) -> None:
    buf_slot, size_slot = slots.get(JIT_OPTION[buffer_option]), slots.get(JIT_OPTION[size_option])
    if buf_slot is None or size_slot is None:
        return
    buf = ctypes.c_void_p.from_address(buf_slot).value
    capacity = ctypes.c_size_t.from_address(size_slot).value & 0xFFFFFFFF
    if not buf or capacity == 0:
        return
    data = text.encode()[: capacity - 1] + b"\0"
    ctypes.memmove(buf, data, len(data))
    # The driver reports how much of the buffer it filled, in the size option's slot.
    ctypes.c_size_t.from_address(size_slot).value = len(data) - 1


def refuse(slots: dict, code_name: str, log: str) -> None:
    write_log(slots, "CU_JIT_ERROR_LOG_BUFFER", "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES", log)
    raise EmuError(code_name, log)


def _read_ptx(image: int, slots: dict) -> tuple[str, str, bytes]:
    """(image kind, PTX text, PTX bytes as given) of a PTX or fatbin image."""
    try:
        kind, data = read_image(image)
        if kind == "cubin":
            remembered = linked.ptx_of(linked.elf_at(image))
            if remembered is not None and remembered[0] == device.arch():    # linked here, for this GPU
                return "linked-cubin", remembered[1], remembered[1].encode()
            raise ImageError("CUDA_ERROR_NO_BINARY_FOR_GPU",
                             "the image is a cubin (SASS, machine code for one real GPU architecture); "
                             "the emulated GPU runs PTX only: load the PTX, or a fatbin that contains PTX")
        if kind == "fatbin":
            text = ptx_from_fatbin(data, device.arch())
            return kind, text, text.encode()
        return kind, data.decode("utf-8", errors="replace"), data
    except ImageError as e:
        refuse(slots, e.code_name, str(e))


def _check_versions(slots: dict, version, target) -> None:
    """The driver's own refusals, which come before any verdict on the PTX itself: a
    `.target` newer than the device, a PTX ISA newer than the driver."""
    refusal = device.target_refusal(target) if target else ""
    if refusal:
        refuse(slots, "CUDA_ERROR_NO_BINARY_FOR_GPU", f"ptxas (emulated) fatal   : {refusal}")
    newest = max_ptx_isa(device.DRIVER_VERSION)
    if version is not None and tuple(version) > newest:
        refuse(slots, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
                f"PTX ISA {version[0]}.{version[1]} is newer than this driver "
                f"(CUDA {format_driver_version(device.DRIVER_VERSION)}) supports: "
                f"at most {newest[0]}.{newest[1]}")


def _option_values(slots: dict) -> dict[str, int]:
    """The JIT options given as numbers (name without CU_JIT_ -> value): each is an
    unsigned int carried in its pointer-sized slot of the values array."""
    values = {}
    for name in ("MAX_REGISTERS", "THREADS_PER_BLOCK", "OPTIMIZATION_LEVEL",
                 "GENERATE_DEBUG_INFO", "GENERATE_LINE_INFO"):
        slot = slots.get(JIT_OPTION["CU_JIT_" + name])
        if slot is not None:
            values[name] = (ctypes.c_void_p.from_address(slot).value or 0) & 0xFFFFFFFF
    return values


def _assemble(raw: bytes, version, target, slots: dict):
    """(the assembler's Assembly, a note) for an accepted module; refuses what ptxas
    refuses. (None, why) when no assembler can judge: the emulator's own checks decide."""
    asm = assembler.active(version)
    if asm is None:
        return None, f"checked by the emulator's own checks ({assembler.missing_reason(version)})"
    newest = assembler.max_ptx_isa(asm)
    if version is not None and newest is not None and tuple(version) > newest:
        return None, (f"checked by the emulator's own checks: PTX ISA {version[0]}.{version[1]} is newer "
                      f"than {asm.description} reads")
    try:
        result = assembler.assemble(asm, raw, assembler.target_arch(target, device.arch()),
                                    assembler.jit_flags(_option_values(slots)))
    except assembler.AssemblerUnusable as e:
        return None, f"checked by the emulator's own checks: {e}"
    if not result.accepted:
        refuse(slots, "CUDA_ERROR_INVALID_PTX", result.error_log or f"ptxas refused the PTX ({asm.description})")
    return result, f"assembled by {asm.description}"


def _decode(text: str, slots: dict, assembled: bool, read=load_ptx):
    """The emulator's decoded module (`read`: parse_ptx to parse only); PTX it cannot run is
    refused, and where ptxas has accepted it the log says it is valid PTX, not a mistake in it."""
    try:
        return read(text)
    except PtxError as e:
        if assembled:
            where = f" at line {e.line}" if e.line else ""
            refuse(slots, "CUDA_ERROR_INVALID_PTX", f"valid PTX that the emulated GPU cannot run: {e.message}{where}")
        refuse(slots, "CUDA_ERROR_INVALID_PTX", f"ptxas (emulated) error   : {e}")


def _info_log(ptx_module, assembly, note: str) -> str:
    if assembly is None:
        return f"{ptx_module.info_log()}\n{note}"
    decoded = [f"emulated: {k.name}: {k.instruction_count} instructions decoded in "
               f"{len(k.compiled.blocks) if k.compiled else 0} basic blocks" for k in ptx_module.kernels.values()]
    return "\n".join([assembly.info_log, note, *decoded])


def compile_ptx(text: str, raw: bytes, slots: dict, read=load_ptx):
    """(the module, the Assembly or None, a note): the driver's version checks, then ptxas's
    verdict (lowlevel/emu/driver/assembler.py), then the emulator's decoding (`read`:
    parse_ptx to parse only). What fails is refused, its log in the slots' error buffer."""
    version, target = ptx_header(text)
    _check_versions(slots, version, target)
    assembly, note = _assemble(raw, version, target, slots)
    ptx_module = _decode(text, slots, assembled=assembly is not None, read=read)
    _check_versions(slots, ptx_module.version, ptx_module.target)
    return ptx_module, assembly, note


def _load(module_out: int, image: int, slots: dict) -> None:
    """cuModuleLoadData(Ex)/cuModuleLoadFatBinary: compile_ptx, then the module's variables."""
    ctx = current()
    if not image:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "NULL image")
    kind, text, raw = _read_ptx(image, slots)
    ptx_module, assembly, note = compile_ptx(text, raw, slots)
    try:                     # module-scope .global/.const variables live in the context's memory
        allocate_globals(ptx_module, ctx.memory)
    except OutOfMemory:
        raise EmuError("CUDA_ERROR_OUT_OF_MEMORY", "no room for the module's global variables")
    write_log(slots, "CU_JIT_INFO_LOG_BUFFER", "CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES", _info_log(ptx_module, assembly, note))
    write_log(slots, "CU_JIT_ERROR_LOG_BUFFER", "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES", "")
    handle = ctx.new_handle()
    ctx.modules[handle] = Module(handle, ptx_module, kind, assembly.figures if assembly else None)
    write_out(ctypes.c_void_p, module_out, handle)


@api
def cuModuleLoadData(module_out, image):
    _load(module_out, image, {})


@api
def cuModuleLoadDataEx(module_out, image, count, options, values):
    _load(module_out, image, jit_options(count, options, values))


@api
def cuModuleLoadFatBinary(module_out, image):
    _load(module_out, image, {})


def _module(ctx: Context, handle: int) -> Module:
    return lookup_handle(ctx.modules, handle, "module")


@api
def cuModuleUnload(handle):
    ctx = current()
    module = _module(ctx, handle)
    ctx.synchronize()       # work using the module finishes before it goes away
    for fh in module.functions.values():
        ctx.functions.pop(fh, None)
    free_globals(module.ptx, ctx.memory)
    del ctx.modules[handle]


@api
def cuModuleGetFunction(function_out, module_handle, name):
    ctx = current()
    module = _module(ctx, module_handle)
    name = name.decode() if name else ""
    kernel = module.ptx.kernels.get(name)
    if kernel is None:
        known = ", ".join(sorted(module.ptx.kernels)) or "none"
        raise EmuError("CUDA_ERROR_NOT_FOUND", f"no kernel named {name!r} in the module (kernels: {known})")
    handle = module.functions.get(name)
    if handle is None:
        handle = module.functions[name] = ctx.new_handle()
        ctx.functions[handle] = Function(handle, module, kernel)
    write_out(ctypes.c_void_p, function_out, handle)


@api
def cuModuleGetGlobal(dptr_out, size_out, module_handle, name):
    ctx = current()
    module = _module(ctx, module_handle)
    name = name.decode() if name else ""
    symbols = getattr(module.ptx, "symbols", {})
    if name not in symbols:
        raise EmuError("CUDA_ERROR_NOT_FOUND", f"no global variable named {name!r} in the module")
    address, size = symbols[name]
    if dptr_out:
        write_out(ctypes.c_uint64, dptr_out, address)
    if size_out:
        write_out(ctypes.c_size_t, size_out, size)


def function_of(ctx: Context, handle: int) -> Function:
    return lookup_handle(ctx.functions, handle, "function")


@api
def cuFuncGetParamInfo(handle, index, offset_out, size_out):
    ctx = current()
    params = function_of(ctx, handle).kernel.params
    if index >= len(params):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"parameter index {index} >= parameter count {len(params)}")
    if offset_out:
        write_out(ctypes.c_size_t, offset_out, params[index].offset)
    if size_out:
        write_out(ctypes.c_size_t, size_out, params[index].size)

