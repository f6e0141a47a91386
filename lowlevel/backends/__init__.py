"""Kernels per backend key. Importing this package registers the CPU and CUDA backends."""
from . import cpu, cuda  # noqa: F401
