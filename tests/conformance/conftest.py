"""The conformance suite's fixtures: `build`, each of the six builds (conformance_support.py),
and `any_build`, those and clang's NVPTX backend (clang_support.py)."""
from clang_support import any_build  # noqa: F401  (a fixture: pytest finds it here)
from conformance_support import build  # noqa: F401  (a fixture: pytest finds it here)
