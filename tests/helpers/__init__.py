"""Helpers shared by the tests (fixtures stay in tests/conftest.py):

    memory.py   poisoned host arrays, device allocations filled with a poison, upload, download
    cuda_c.py   CUDA C to PTX at test time (NVRTC, nvcc), and loading what they made
    emu_engine.py        device buffers in an emulated DeviceMemory, launches straight through
                         the engine (tests/emu)
    float_reference.py   exact-rational references for rounding modes (tests/emu)
    wgmma_kernels.py     wgmma test kernels: the ISA's shared-memory layouts and fragments

Imported as `from helpers.memory import upload`: pyproject's pytest `pythonpath` puts tests/
on sys.path.
"""
