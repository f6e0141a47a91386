"""The conformance suite's fixture: `build`, each of the six builds (conformance_support.py)."""
from conformance_support import build  # noqa: F401  (a fixture: pytest finds it here)
