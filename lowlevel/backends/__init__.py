"""Layer 4, the kernel libraries: the kernels each backend key runs. Importing this package
registers them with the dispatcher (lowlevel/__init__.py does).

    cpu.py    every op through numpy, on strided views of host storage (the CPU key)
    cpu_indexing.py  the CPU key's gather, scatter, scatter_add, argsort, cumsum, cumprod
    cpu_math.py  the CPU key's sin cos floor ceil round trunc and bitwise ops (numpy)
    philox.py Philox4x32-10 in numpy, and the CPU key's rand / randn / randint on it
    cuda/     the CUDA key: handwritten PTX kernels and cuBLAS, on the current stream
    ptx.py    where the handwritten kernels of ptx/ are, loaded once per context
              (`lowlevel.kernels` is this module)

The backends sit above the frontend: a kernel makes its result as a Tensor (as ATen's do),
while the frontend never imports a backend.
"""
from . import cpu, cpu_indexing, cpu_math, cuda, philox, ptx  # noqa: F401
