"""lowlevel: a Python runtime that drives an NVIDIA GPU from the CUDA driver API up.

    import lowlevel as ll
    a = ll.randn(1024, 1024, device="cuda")
    c = a @ a.T                       # frontend -> dispatcher -> cuBLAS -> the GPU (or the emulated one)

The layers are the folders:

    frontend/    layer 1: dtypes, Device, Tensor and its views, creation, ops, DLPack
    cuda/        layer 2: the ctypes boundary and the driver objects
    dispatch/    layer 3: dispatch keys, per-op tables, call / explain, the Profiler key
    backends/    layer 4: the CPU and CUDA kernels, the loader of ptx/ (lowlevel.kernels)
    compiler/    layer 4 -> 5: NVRTC, nvJitLink, fatbins, SASS
    emu/         layer 5 without a GPU: the emulated driver, cuBLAS and PTX engine
    capi/        the C API both drivers implement: prototypes, constants, versions, image formats
    trace/       the hooks every layer reports to; cli/ is the `lowlevel` command
    __main__.py  `python -m lowlevel`, the same command

This module re-exports the public API, and imports the backends so that they register.
"""
from .capi.versions import LOWLEVEL_VERSION

__version__ = LOWLEVEL_VERSION

from . import backends  # noqa: E402,F401  (registers the CPU and CUDA kernels)
from .backends import ptx as kernels  # noqa: E402,F401
from .dispatch import explain, profile  # noqa: E402
from .frontend.creation import arange, empty, full, ones, tensor, zeros  # noqa: E402
from .frontend.random import (Generator, initial_seed, manual_seed, rand, rand_like, randint, randint_like,  # noqa: E402
                              randn, randn_like)
from .frontend.autograd import enable_grad, is_grad_enabled, no_grad  # noqa: E402
from .frontend.device import Device  # noqa: E402
from .frontend.dtypes import bfloat16, float16, float32, float64, int32, int64  # noqa: E402
from .frontend.dtypes import bool_ as bool  # noqa: E402,A001
from .frontend.division import floor_divide, remainder  # noqa: E402
from .frontend.promotion import can_cast, promote_types, result_type  # noqa: E402
from .frontend.interop import from_dlpack  # noqa: E402
from .frontend.joining import (cat, empty_like, eye, flatten, from_numpy, full_like, linspace, ones_like, squeeze,  # noqa: E402
                               stack, unsqueeze, zeros_like)
from .frontend.ops import (abs, argmax, argmin, clamp, eq, exp, expm1, ge, gt, le,  # noqa: E402,A004
                           log, log1p, lt, masked_select, matmul, maximum, minimum, mul, ne, neg,
                           pow, relu, rsqrt, sigmoid, sqrt, tanh, where)
from .frontend import return_types  # noqa: E402
from .frontend.indexing import gather, index_select, masked_fill, nonzero, scatter, scatter_add  # noqa: E402
from .frontend.reductions import (all, amax, amin, any, argsort, cumprod, cumsum, kthvalue, logsumexp,  # noqa: E402,A004
                                  max, mean, min, norm, prod, softmax, sort, std, sum, topk, var)
from .frontend.math_ops import (allclose, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, bmm, ceil, cos,  # noqa: E402,A004
                                equal, exp2, floor, isclose, isfinite, isinf, isnan, log2, log10, log_softmax,
                                logical_and, logical_not, logical_or, logical_xor, mm, reciprocal, round, sign, sin,
                                square, trunc)
from .frontend.methods import add, chunk, div, narrow, split, sub  # noqa: E402
from .frontend.tensor import Tensor  # noqa: E402

__all__ = [
    "all", "any", "argmax", "argmin", "masked_select",
    "amax", "amin", "argsort", "cumprod", "cumsum", "kthvalue", "logsumexp", "norm", "prod", "return_types", "sort",
    "std", "topk", "var", "gather", "index_select", "masked_fill", "nonzero", "scatter", "scatter_add",
    "abs", "clamp", "expm1", "log", "log1p", "min", "minimum", "pow", "rsqrt", "sigmoid", "sqrt", "tanh",
    "cat", "empty_like", "eye", "flatten", "from_numpy", "linspace", "ones_like", "squeeze", "stack", "unsqueeze",
    "zeros_like",
    "can_cast", "floor_divide", "promote_types", "remainder", "result_type",
    "add", "arange", "bfloat16", "bool", "Device", "div", "empty", "enable_grad", "eq", "exp", "explain", "float16",
    "float32", "float64", "from_dlpack", "full", "ge", "gt", "int32", "int64", "is_grad_enabled", "kernels", "le",
    "lt", "manual_seed", "matmul", "max", "maximum", "mean", "mul", "ne", "neg", "no_grad", "ones", "profile", "rand", "randn",
    "relu", "softmax", "sub", "sum", "Tensor", "tensor", "where", "zeros",
    "allclose", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "bmm", "ceil", "chunk", "cos", "equal",
    "exp2", "floor", "isclose", "isfinite", "isinf", "isnan", "log2", "log10", "log_softmax", "logical_and",
    "logical_not", "logical_or", "logical_xor", "mm", "narrow", "reciprocal", "round", "sign", "sin", "split",
    "square", "trunc",
    "full_like", "Generator", "initial_seed", "rand_like", "randint", "randint_like", "randn_like",
]
