"""The conformance suite's fixtures: `build`, each of the six builds of conformance_support.py
and clang's NVPTX backend (clang_support.py), for every conformance test; `any_build` is the
same fixture under the name the first clang-built files used."""
from clang_support import any_build, build  # noqa: F401  (fixtures: pytest finds them here)
