from . import dtypes, interop, ops, tensor  # noqa: F401
