"""The C API both drivers implement, and nothing else: no calls, no state.

    prototypes.py        every driver function lowlevel calls: symbol and argument types
    constants.py         CUresult codes, attributes, JIT options (generated from cuda.h)
    cublas_constants.py  cuBLAS enums (generated from cublas_api.h and library_types.h)
    enums.py             those enums looked up by name ("NUM_REGS" or "CU_FUNC_ATTRIBUTE_NUM_REGS")
    memory_constants.py  the enums of managed memory and pointer attributes (advice, locations, ranges)
    launch_types.py      cuLaunchKernelEx's C types: CUlaunchConfig, CUlaunchAttribute and its values
    structs.py           C structs the calls take (CUDA_MEMCPY2D/3D, CUmemLocation, CUuuid)
    versions.py          driver versions ("13.0"), the PTX ISA each one JITs, lowlevel's own version
    proc_addresses.py    what cuGetProcAddress answers: each function's versions and symbols (generated
                         from cudaTypedefs.h by tools/gen_proc_addresses.py)
    images.py            what a module image is: PTX text, a cubin (ELF) or a fatbin, and
                         the entries of a fatbin

Every other layer may import this package; it imports nothing of lowlevel.
"""
