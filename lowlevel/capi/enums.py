"""Driver enum members by name, as users write them: "NUM_REGS" or "CU_FUNC_ATTRIBUTE_NUM_REGS"."""
from .constants import DEVICE_ATTRIBUTE, FUNCTION_ATTRIBUTE, JIT_OPTION
from .memory_constants import LIMIT, MEM_ADVISE, POINTER_ATTRIBUTE

_TABLES = {
    "device attribute": (DEVICE_ATTRIBUTE, "CU_DEVICE_ATTRIBUTE_"),
    "function attribute": (FUNCTION_ATTRIBUTE, "CU_FUNC_ATTRIBUTE_"),
    "JIT option": (JIT_OPTION, "CU_JIT_"),
    "pointer attribute": (POINTER_ATTRIBUTE, "CU_POINTER_ATTRIBUTE_"),
    "limit": (LIMIT, "CU_LIMIT_"),
    "memory advice": (MEM_ADVISE, "CU_MEM_ADVISE_"),
}


def enum_value(kind: str, name: str) -> int:
    """The number of the `kind` enum member `name`; ValueError naming it if there is none."""
    table, prefix = _TABLES[kind]
    full = name if name.startswith(prefix) else prefix + name.upper()
    if full not in table:
        raise ValueError(f"unknown {kind} {name!r}")
    return table[full]
