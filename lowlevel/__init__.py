"""lowlevel: a Python runtime that drives an NVIDIA GPU from the CUDA driver API up.

The layers are the folders: cuda/ (the ctypes boundary and driver objects), emu/ (the
emulated GPU behind the same C functions), ptx/ (handwritten kernels, beside the package).
"""
__version__ = "0.1.0"
