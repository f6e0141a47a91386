"""Modules (loaded PTX, cubins, fatbins) and their kernels (Function, launch).

`Module.from_ptx` hands PTX to the driver's JIT with info and error log buffers: the error
log travels in the CudaError of a failed load, the info log is `module.info_log` after a
good one. `Function.launch` checks and packs the arguments, then calls cuLaunchKernel: it
returns as soon as the launch is queued, not when the kernel is done.
"""
import ctypes
import pathlib
import weakref
from ctypes import c_uint

from .. import compiler
from ..capi.constants import CURESULT, FUNCTION_ATTRIBUTE, JIT_OPTION
from ..capi.enums import enum_value
from ..capi.images import ELF_MAGIC, FATBIN_MAGIC, KIND_ELF, fatbin_entries
from ..capi.versions import format_driver_version, ptx_isa_version
from ..compiler import select
from . import profiling
from .checked import c_integer
from .context import GPU, ContextBound, ContextResource, ensure_context
from .errors import CudaError
from .kernel_args import PackedArgs, pack_value
from .launch_config import LaunchConfig, PreparedLaunchEx, launch_attributes
from .occupancy import active_blocks_per_sm
from .prepared import PreparedLaunch, launch_dims, shared_bytes
from .ptx_signature import kernel_params
from .stream import stream_handle

LOG_SIZE = 64 * 1024
INVALID_VALUE = CURESULT["CUDA_ERROR_INVALID_VALUE"]
FATBIN_MAGIC_BYTES = FATBIN_MAGIC.to_bytes(4, "little")


def _text_name(name, what: str) -> bytes:
    """A kernel or variable name as the C string the driver takes: a str with no NUL in it
    (the driver would read it only up to the NUL, and find another name)."""
    if not isinstance(name, str):
        raise TypeError(f"{what}: the name must be a str, got {type(name).__name__} {name!r}")
    if "\0" in name:
        raise ValueError(f"{what}: the name {name!r} contains a NUL character; a C string ends there")
    return name.encode()


def _image_bytes(data, what: str) -> bytes:
    """A cubin or fatbin image as bytes (bytes(5) would be five zero bytes, not an image)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{what}: expected the image as bytes, got {type(data).__name__}")
    return bytes(data)


class Module(ContextResource):
    """A loaded module. Make one with from_ptx, from_cubin, from_fatbin or load."""

    handle = ContextBound("_handle")       # refused once the context is reset

    def __init__(self, handle: int, kind: str, param_types: dict | None = None,
                 info_log: str = "", image_kind: str = "ptx-jit"):
        self.handle = handle
        self.kind = kind                         # "ptx", "cubin" or "fatbin": what was loaded
        self.image_kind = image_kind             # what runs: "sass", or "ptx-jit" (the driver's JIT)
        self.info_log = info_log
        self.notes: list[str] = []               # from_cuda: why this image, what was tried
        self.lowered_names: dict[str, str] = {}  # from_cuda: name expression -> mangled name
        self._param_types = param_types or {}
        self._adopt()
        # A Function keeps its module loaded; the module only remembers its functions
        # weakly, so the two never form a cycle and the module is unloaded as soon as the
        # last reference to it (or to one of its functions) goes, not whenever the cyclic
        # garbage collector happens to run.
        self._functions: weakref.WeakValueDictionary[str, Function] = weakref.WeakValueDictionary()

    @classmethod
    def from_ptx(cls, ptx: str | bytes, options: dict | None = None) -> "Module":
        """JIT-compile PTX text. `options`: JIT options by name, e.g. {"MAX_REGISTERS": 32}."""
        if not isinstance(ptx, (str, bytes)):
            raise TypeError(f"Module.from_ptx: expected PTX as str or bytes, got {type(ptx).__name__}")
        # bytes go to the driver as they are: ptxas takes any bytes (UTF-8 or not) in comments
        image = (bytes(ptx) if isinstance(ptx, bytes) else ptx.encode()).rstrip(b"\0")
        if b"\0" in image:
            # The driver reads the PTX as a C string: it would load only what comes before.
            raise ValueError(f"Module.from_ptx: the PTX has a NUL character at offset {image.index(0)}")
        text = image.decode(errors="replace")
        return cls._load(image + b"\0", "ptx", options, kernel_params(text))

    @classmethod
    def from_cubin(cls, data: bytes, options: dict | None = None) -> "Module":
        """Load SASS for this exact GPU (an ELF cubin)."""
        return cls._load(_image_bytes(data, "Module.from_cubin"), "cubin", options, {})

    @classmethod
    def from_fatbin(cls, data: bytes, options: dict | None = None) -> "Module":
        """Load a fatbin: the driver picks the SASS for this GPU, or JITs the PTX inside."""
        return cls._load(_image_bytes(data, "Module.from_fatbin"), "fatbin", options, {})

    @classmethod
    def from_cuda(cls, source: str, options=(), name_expressions=(), name: str = "kernel.cu") -> "Module":
        """Compile CUDA C++ for the current device and load it.

        A driver that runs SASS (a real GPU) gets a cubin for its exact architecture when
        NVRTC knows it, else PTX for the driver's JIT, if the driver accepts that PTX's ISA
        version; one that runs PTX only (the emulated GPU) gets PTX. `image_kind` says what
        ran ("sass" or "ptx-jit"), `notes` why. Kernels named by `name_expressions`
        ("scale<float>") are fetched by those names with get_function.
        """
        drv, ctx = ensure_context()
        dev = GPU(ctx.ordinal)
        arch = compiler.parse_arch(dev.compute_capability)
        options, name_expressions = tuple(options), tuple(name_expressions)
        ptx = compiler.compile(source, "ptx", arch, options, name_expressions, name)
        ptx_isa = ptx_isa_version(ptx)
        sass_archs = compiler.nvrtc.supported_archs() if drv.runs_sass else []
        steps = select.plan(not drv.runs_sass, arch, drv.version(), sass_archs, ptx_isa, compiler.nvrtc.version())
        notes, failure = [], None
        for step in steps:
            try:
                if step == "sass":
                    cubin = compiler.compile(source, "cubin", arch, options, name_expressions, name)
                    module = cls._load(cubin, "cubin", None, kernel_params(ptx))
                else:
                    module = cls.from_ptx(ptx)
            except CudaError as e:
                notes.append(f"{step} for sm_{arch} did not load: {e.name}")
                failure = e
                continue
            notes.append(f"loaded {step} for sm_{arch} (PTX ISA {ptx_isa[0]}.{ptx_isa[1]}, "
                         f"{drv.kind} driver CUDA {format_driver_version(drv.version())})")
            module.notes = notes
            module.lowered_names = compiler.lowered_names(source, name_expressions, arch, options, name) \
                if name_expressions else {}
            return module
        raise failure

    @classmethod
    def load(cls, path, options: dict | None = None) -> "Module":
        """Load a file by what it contains (PTX text, cubin ELF or fatbin), not its name."""
        data = pathlib.Path(path).read_bytes()
        if data[:4] == ELF_MAGIC:
            return cls.from_cubin(data, options)
        if data[:4] == FATBIN_MAGIC_BYTES:
            return cls.from_fatbin(data, options)
        return cls.from_ptx(data.decode(), options)

    @classmethod
    def _load(cls, image: bytes, kind: str, options: dict | None, param_types: dict) -> "Module":
        drv, _ = ensure_context()
        info = ctypes.create_string_buffer(LOG_SIZE)
        error = ctypes.create_string_buffer(LOG_SIZE)
        pairs = [
            (JIT_OPTION["CU_JIT_INFO_LOG_BUFFER"], ctypes.addressof(info)),
            (JIT_OPTION["CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES"], LOG_SIZE),
            (JIT_OPTION["CU_JIT_ERROR_LOG_BUFFER"], ctypes.addressof(error)),
            (JIT_OPTION["CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES"], LOG_SIZE),
            (JIT_OPTION["CU_JIT_LOG_VERBOSE"], 1),
        ]
        for name, value in (options or {}).items():
            # The driver reads these option values as unsigned ints.
            pairs.append((enum_value("JIT option", name), c_integer(value, c_uint, f"JIT option {name}")))
        keys = (ctypes.c_int * len(pairs))(*[k for k, _ in pairs])
        values = (ctypes.c_void_p * len(pairs))(*[v for _, v in pairs])
        handle = ctypes.c_void_p()
        image_buf = ctypes.create_string_buffer(image, len(image))
        code = drv.cuModuleLoadDataEx.unchecked(ctypes.byref(handle), image_buf, len(pairs), keys, values)
        if code != 0:
            raise drv.error(code, "cuModuleLoadDataEx", log=error.value.decode(errors="replace"))
        return cls(handle.value, kind, param_types, info.value.decode(errors="replace"), _image_kind(kind, image, drv))

    def get_function(self, name: str) -> "Function":
        """The kernel `name`, or the one a name expression given to from_cuda stands for
        (CUDA_ERROR_NOT_FOUND if the module has none)."""
        _text_name(name, "get_function")           # a str with no NUL, before any lookup
        self.check_context()
        f = self._functions.get(name)
        if f is None:
            symbol = self.lowered_names.get(name, name)
            h = ctypes.c_void_p()
            self._drv.cuModuleGetFunction(ctypes.byref(h), self.handle, _text_name(symbol, "get_function"))
            f = Function(self, symbol, h.value, self._param_types.get(symbol))
            self._functions[name] = f
            profiling.remember_kernel(h.value, symbol, profiling.image_description(self.kind, self.image_kind))
        return f

    def get_global(self, name: str) -> tuple[int, int]:
        """(device address, size in bytes) of a module-scope variable."""
        c_name = _text_name(name, "get_global")
        ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
        self._drv.cuModuleGetGlobal(ctypes.byref(ptr), ctypes.byref(size), self.handle, c_name)
        return ptr.value, size.value

    def unload(self) -> None:
        self.release()

    def _release(self) -> None:
        self._drv.cuModuleUnload(self.handle)


def _image_kind(kind: str, image: bytes, drv) -> str:
    """What the driver runs for a loaded image: its own SASS, or PTX it JIT-compiled."""
    if kind == "cubin":
        return "sass"
    if kind == "fatbin" and drv.runs_sass:
        major, minor = GPU(ensure_context()[1].ordinal).compute_capability
        if any(e["kind"] == KIND_ELF and e["arch"] == 10 * major + minor for e in fatbin_entries(image)):
            return "sass"
    return "ptx-jit"


class Function:
    """A kernel in a loaded module."""

    def __init__(self, module: Module, name: str, handle: int, param_types: list[tuple[str, str]] | None):
        self.module = module            # keeps the module loaded while the kernel is in use
        self.name = name
        self._handle = handle
        self._drv = module.driver
        self._param_types = param_types
        self._params = None

    def __repr__(self):
        return f"<Function {self.name}: {len(self.params)} parameters>"

    @property
    def driver(self):
        """The driver this kernel's module was loaded with."""
        return self._drv

    @property
    def handle(self) -> int:
        """The CUfunction; ContextResetError once its module's context was reset."""
        self.module.check_context()
        return self._handle

    def attribute(self, name: str) -> int:
        """A CUfunction_attribute by name: "NUM_REGS" or "CU_FUNC_ATTRIBUTE_NUM_REGS"."""
        number = enum_value("function attribute", name)
        value = ctypes.c_int()
        self._drv.cuFuncGetAttribute(ctypes.byref(value), number, self.handle)
        return value.value

    def set_attribute(self, name: str, value: int) -> None:
        """Set a CUfunction_attribute by name (cuFuncSetAttribute): MAX_DYNAMIC_SHARED_SIZE_BYTES,
        PREFERRED_SHARED_MEMORY_CARVEOUT, REQUIRED_CLUSTER_WIDTH/HEIGHT/DEPTH,
        NON_PORTABLE_CLUSTER_SIZE_ALLOWED, CLUSTER_SCHEDULING_POLICY_PREFERENCE."""
        number = enum_value("function attribute", name)
        value = c_integer(value, ctypes.c_int, f"{self.name}: attribute {name}")
        self._drv.cuFuncSetAttribute(self.handle, number, value)

    @property
    def attributes(self) -> dict[str, int]:
        """Every CUfunction_attribute the driver reports for this kernel, by short name (a
        driver older than the header refuses the newest ones: those are left out)."""
        values = {}
        for name, number in FUNCTION_ATTRIBUTE.items():
            value = ctypes.c_int()
            code = self._drv.cuFuncGetAttribute.unchecked(ctypes.byref(value), number, self.handle)
            if code == INVALID_VALUE:
                continue
            if code != 0:
                raise self._drv.error(code, "cuFuncGetAttribute")
            values[name.removeprefix("CU_FUNC_ATTRIBUTE_")] = value.value
        return values

    @property
    def max_dynamic_shared_memory(self) -> int:
        """The most dynamic shared memory a launch may ask for; assign to opt in to more than
        48 KB (up to the device's MAX_SHARED_MEMORY_PER_BLOCK_OPTIN minus the static shared)."""
        return self.attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES")

    @max_dynamic_shared_memory.setter
    def max_dynamic_shared_memory(self, nbytes: int) -> None:
        self.set_attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES", nbytes)

    def occupancy(self, block_size: int, dynamic_shared: int = 0) -> int:
        """Blocks of `block_size` threads (with `dynamic_shared` bytes each) that one SM
        holds at once (cuOccupancyMaxActiveBlocksPerMultiprocessor); see occupancy.py."""
        return active_blocks_per_sm(self, block_size, dynamic_shared)

    @property
    def num_regs(self) -> int:
        return self.attribute("NUM_REGS")

    @property
    def shared_size_bytes(self) -> int:
        return self.attribute("SHARED_SIZE_BYTES")

    @property
    def local_size_bytes(self) -> int:
        return self.attribute("LOCAL_SIZE_BYTES")

    @property
    def max_threads_per_block(self) -> int:
        return self.attribute("MAX_THREADS_PER_BLOCK")

    @property
    def params(self) -> list[tuple[int, int]]:
        """(offset, size) of each parameter, as the driver reports them (cuFuncGetParamInfo)."""
        if self._params is None:
            params = []
            offset, size = ctypes.c_size_t(), ctypes.c_size_t()
            while True:
                code = self._drv.cuFuncGetParamInfo.unchecked(self.handle, len(params),
                                                              ctypes.byref(offset), ctypes.byref(size))
                if code == INVALID_VALUE:
                    break       # past the last parameter
                if code != 0:
                    raise self._drv.error(code, "cuFuncGetParamInfo")
                params.append((offset.value, size.value))
            self._params = params
        return self._params

    def declared_params(self) -> list[tuple[str, str | None]]:
        """(name, PTX type) of each parameter; ("param i", None) where the types are unknown
        (a cubin or fatbin loaded without its PTX)."""
        params = self.params
        declared = self._param_types if self._param_types and len(self._param_types) == len(params) else None
        return list(declared) if declared else [(f"param {i}", None) for i in range(len(params))]

    def pack(self, args) -> PackedArgs:
        """Check and pack `args`; a TypeError or ValueError names the kernel and parameter."""
        params = self.params
        args = tuple(args)
        if len(args) != len(params):
            raise TypeError(f"{self.name} takes {len(params)} arguments, got {len(args)}")
        chunks = []
        for i, (value, (pname, ptype), (_, size)) in enumerate(zip(args, self.declared_params(), params)):
            chunks.append(pack_value(self.name, i, pname, ptype, size, value))
        return PackedArgs(chunks)

    def prepare(self, grid, block, shared_mem: int = 0, *, cluster=None, cooperative=None,
                priority=None) -> PreparedLaunch | PreparedLaunchEx:
        """This kernel with this launch configuration, checked once: call the result with
        the arguments (and stream=) to launch; see prepared.py. `cluster`, `cooperative` and
        `priority` are launch's: such a launch goes through cuLaunchKernelEx
        (launch_config.PreparedLaunchEx)."""
        if cluster is None and cooperative is None and priority is None:
            return PreparedLaunch(self, grid, block, shared_mem)
        attrs = launch_attributes(self.name, cluster, cooperative, priority)
        return PreparedLaunchEx(self, grid, block, shared_mem, attrs)

    def launch(self, grid, block, args=(), shared_mem: int = 0, stream=None, *,
               cluster=None, cooperative=None, priority=None) -> None:
        """Queue the kernel on `stream` (default: the legacy default stream). Returns once
        the launch is queued; errors in the kernel itself surface at a later synchronising
        call, as on a GPU. `cluster=(x, y, z)` (thread-block clusters), `cooperative=True`
        (all blocks resident at once: grid-wide sync) and `priority` launch through
        cuLaunchKernelEx's launch attributes (launch_config.py)."""
        gx, gy, gz = launch_dims(grid, f"{self.name}: grid")
        bx, by, bz = launch_dims(block, f"{self.name}: block")
        shared_mem = shared_bytes(shared_mem, self.name)
        handle = stream_handle(stream, f"{self.name}: stream")
        plain = cluster is None and cooperative is None and priority is None
        attrs = () if plain else launch_attributes(self.name, cluster, cooperative, priority)
        packed = self.pack(args)
        if attrs:
            config = LaunchConfig((gx, gy, gz), (bx, by, bz), shared_mem, handle, attrs)
            self._drv.cuLaunchKernelEx(config.pointer(), self.handle, packed.kernel_params, None)
            return
        self._drv.cuLaunchKernel(self.handle, gx, gy, gz, bx, by, bz, shared_mem, handle,
                                 packed.kernel_params, None)


__all__ = ["Module", "Function", "CudaError"]
