"""lowlevel: a Python runtime that drives an NVIDIA GPU from the CUDA driver API up.

    import lowlevel as ll
    a = ll.randn(1024, 1024, device="cuda")
    c = a @ a.T                       # frontend -> dispatcher -> cuBLAS -> the GPU (or the emulated one)

The layers are the folders and modules: tensor.py and ops.py (layer 1), cuda/ (layer 2,
the ctypes boundary and driver objects), dispatch.py (layer 3), backends/, compiler/ and
ptx/ (layer 4), and the GPU or emu/ (layer 5).
"""
__version__ = "0.1.0"

from . import backends  # noqa: E402,F401  (registers the CPU and CUDA kernels)
from .backends import ptx as kernels  # noqa: E402,F401
from .dispatch import explain  # noqa: E402
from .frontend.interop import from_dlpack  # noqa: E402
from .frontend.dtypes import bfloat16, float16, float32, float64, int32, int64  # noqa: E402
from .frontend.dtypes import bool_ as bool  # noqa: E402,A001
from .frontend.ops import add, div, exp, matmul, max, mean, mul, neg, relu, softmax, sub, sum  # noqa: E402,A004
from .dispatch.profiler import profile  # noqa: E402
from .frontend.tensor import (Device, Tensor, arange, empty, full, manual_seed, ones, rand, randn,  # noqa: E402
                     tensor, zeros)
