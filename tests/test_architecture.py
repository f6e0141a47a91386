"""The five layers are the folders, and the checks that keep them so.

- import-linter's contracts in pyproject.toml (the layers, "emu imports only capi")
- no modules of lowlevel import each other in a cycle (grimp, which import-linter uses;
  it counts imports inside functions too)
- no file of the package is over 500 lines
- ruff's rule set in pyproject.toml, including no private name used from another module
  (ruff's PLC2701 skips relative imports, so `from .x import _y` is checked here too)
- every package's __init__.py opens with a map of what is inside
- test files have unique names (test folders have no __init__.py: see pyproject.toml)

The checks are per package (and per folder for ruff), so a failure names where it is.
"""
import ast
import collections
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

import lowlevel

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lowlevel"
MAX_LINES = 500
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


def _run(*args) -> subprocess.CompletedProcess:
    """A command run at the repository root, on this checkout's lowlevel."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_this_checkout_is_the_package_checked():
    assert pathlib.Path(lowlevel.__file__).resolve().parent == PACKAGE


def test_the_import_contracts_hold():
    if importlib.util.find_spec("importlinter") is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    run = _run(sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                                     "sys.exit(lint_imports(no_cache=True, no_logo=True))")
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.fixture(scope="module")
def import_graph():
    grimp = pytest.importorskip("grimp")
    return grimp.build_graph("lowlevel", cache_dir=None)


def _cycles(graph, modules) -> list[str]:
    """Each import cycle through `modules`, once, as "a -> b -> a"."""
    found, seen = [], set()
    for module in sorted(modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain and frozenset(chain) not in seen:
                seen.add(frozenset(chain))
                found.append(" -> ".join((module, *chain)))
    return found


@pytest.mark.parametrize("package", ["lowlevel", *SUBPACKAGES])
def test_no_modules_import_each_other_in_a_cycle(import_graph, package):
    if package == "lowlevel":          # the package's own top-level modules
        modules = {m for m in import_graph.modules if m.count(".") <= 1 and m.split(".")[-1] not in SUBPACKAGES}
    else:
        modules = {m for m in import_graph.modules if m == f"lowlevel.{package}" or
                   m.startswith(f"lowlevel.{package}.")}
    cycles = _cycles(import_graph, modules)
    assert not cycles, f"import cycles through lowlevel.{package}:\n" + "\n".join(cycles)


@pytest.mark.parametrize("package", ["lowlevel", *SUBPACKAGES])
def test_no_file_of_the_package_is_over_500_lines(package):
    files = PACKAGE.glob("*.py") if package == "lowlevel" else (PACKAGE / package).rglob("*.py")
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines: {long}"


@pytest.mark.parametrize("package", ["lowlevel", *SUBPACKAGES])
def test_no_private_name_is_imported_from_another_module(package):
    files = PACKAGE.glob("*.py") if package == "lowlevel" else (PACKAGE / package).rglob("*.py")
    private = [f"{p.relative_to(ROOT)}:{node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}"
               for p in files for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.ImportFrom)
               for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not private, "private names imported from another module:\n" + "\n".join(private)


def _ruff_targets() -> list[str]:
    folders = [f"lowlevel/{name}" for name in SUBPACKAGES] + [str(p.relative_to(ROOT)) for p in PACKAGE.glob("*.py")]
    folders += [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").iterdir())
                if p.is_dir() and not p.name.startswith((".", "__"))]
    return sorted(folders) + ["tests/*.py", "tools"]


@pytest.mark.parametrize("target", _ruff_targets())
def test_ruff_finds_nothing(target):
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    paths = [str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("*.py")] if target == "tests/*.py" else [target]
    run = _run(sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *paths)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("init", sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("__init__.py")))
def test_every_package_opens_with_a_map_of_what_is_inside(init):
    doc = ast.get_docstring(ast.parse((ROOT / init).read_text()))
    assert doc and len(doc.splitlines()) >= 3, f"{init}: no docstring saying what the package holds"


def test_test_files_have_unique_names():
    by_name = collections.defaultdict(list)
    for path in (ROOT / "tests").rglob("*.py"):
        if path.name != "__init__.py" and "helpers" not in path.relative_to(ROOT / "tests").parts[:1]:
            by_name[path.name].append(str(path.relative_to(ROOT)))
    by_name.pop("conftest.py", None)           # pytest imports each conftest.py by its path
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"test modules sharing a name (pytest would import only one): {clashes}"
