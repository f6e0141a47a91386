"""Architecture names: "sm_90" is a real architecture (SASS runs on it), "compute_90" the
virtual one that PTX targets."""
import re


def parse_arch(arch) -> int:
    """90 for "sm_90", "compute_90", "sm_90a", "90", 90 or (9, 0)."""
    if isinstance(arch, tuple):
        return 10 * arch[0] + arch[1]
    if isinstance(arch, int):
        return arch
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)[af]?", str(arch).strip())
    if not m:
        raise ValueError(f"not an architecture: {arch!r} (expected e.g. 'sm_90')")
    return int(m.group(1))
