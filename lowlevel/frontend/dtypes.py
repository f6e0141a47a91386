"""The element types a tensor can hold.

Each DType knows how it is stored (a numpy dtype; bfloat16 is stored as its 16 raw bits,
since numpy has no bfloat16) and how it is described to other libraries (DLPack codes and
the __cuda_array_interface__ typestr).
"""
import numpy as np


class DType:
    def __init__(self, name: str, storage, dlpack_code: int, typestr: str | None, is_float: bool):
        self.name = name
        self.storage = np.dtype(storage)        # how the bytes are held
        self.itemsize = self.storage.itemsize
        self.dlpack_code = dlpack_code          # kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6
        self.typestr = typestr                  # for __cuda_array_interface__ (None: not expressible)
        self.is_float = is_float

    def __repr__(self):
        return f"lowlevel.{self.name}"

    def to_numpy_values(self, raw: np.ndarray) -> np.ndarray:
        """Stored bits -> a numpy array of the values (bfloat16 widens to float32)."""
        if self is bfloat16:
            return (raw.astype(np.uint32) << np.uint32(16)).view(np.float32)
        return raw

    def from_numpy_values(self, values: np.ndarray) -> np.ndarray:
        """Values -> stored bits (bfloat16 rounds float32 to nearest even)."""
        if self is bfloat16:
            bits = np.asarray(values, np.float32).view(np.uint32)
            rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
            return np.where(np.isnan(values), np.uint32(0x7FC0), rounded).astype(np.uint16)
        return np.asarray(values).astype(self.storage)


float32 = DType("float32", np.float32, 2, "<f4", True)
float16 = DType("float16", np.float16, 2, "<f2", True)
float64 = DType("float64", np.float64, 2, "<f8", True)
bfloat16 = DType("bfloat16", np.uint16, 4, None, True)
int32 = DType("int32", np.int32, 0, "<i4", False)
int64 = DType("int64", np.int64, 0, "<i8", False)
bool_ = DType("bool", np.bool_, 6, "|b1", False)

ALL = [float32, float16, float64, bfloat16, int32, int64, bool_]
_BY_NUMPY = {d.storage: d for d in ALL if d is not bfloat16}
_BY_NAME = {d.name: d for d in ALL}


def is_dtype_name(name: str) -> bool:
    """Whether `name` names a dtype ("float32"), as against a device ("cuda")."""
    return name in _BY_NAME


def as_dtype(value) -> DType:
    """A DType from a DType, its name ("float32"), or a numpy dtype."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    try:
        found = _BY_NUMPY.get(np.dtype(value))
    except TypeError:
        found = None
    if found is None:
        raise TypeError(f"unsupported dtype {value!r}; lowlevel has {', '.join(_BY_NAME)}")
    return found
