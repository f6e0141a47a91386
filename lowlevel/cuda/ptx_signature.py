"""The parameter types of each kernel in a PTX text, read from its `.entry` declarations.

The driver tells the offset and size of each parameter (cuFuncGetParamInfo) but not its
type; PTX declares it (`.param .f32 scale`), and with the type a Python float can be packed
as the kernel expects. This reads only the signatures, not the bodies.
"""
import re

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\((.*?)\)", re.S)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?(?:\.ptr\s+)?\.(\w+)(?:\s+\.ptr(?:\s+\.(?!align\b)\w+)*(?:\s+\.align\s+\d+)?)?\s+([\w$]+)\s*(\[\s*\d*\s*\])?")


def kernel_params(ptx: str) -> dict[str, list[tuple[str, str]]]:
    """Kernel name -> (name, PTX type) of each parameter; the type is e.g. "u64", "f32",
    or "b8[]" for a byte array."""
    text = _COMMENTS.sub(" ", ptx)
    result = {}
    for name, params in _ENTRY.findall(text):
        types = []
        for ptype, pname, array in _PARAM.findall(params):
            types.append((pname, ptype + ("[]" if array else "")))
        result[name] = types
    return result
