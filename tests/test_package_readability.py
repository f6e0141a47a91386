"""What a newcomer reads holds up: the package maps, the file names comments point at, and
the length of functions.

- every package's __init__.py map names each of its modules and subpackages
- a `name.py` named in a comment or docstring of the package is a file that exists
- no function of the package is over 80 lines
- no two public classes of the client-side layers (all but the emulated GPU, emu/) share a
  name: `lowlevel.Device` is where a tensor lives, `lowlevel.cuda.GPU` a GPU
"""
import ast
import collections
import io
import pathlib
import re
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lowlevel"
MAX_FUNCTION_LINES = 80
PY_NAME = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*\w+\.py)\b")
INITS = sorted(PACKAGE.rglob("__init__.py"))


def _package_files() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("init", INITS, ids=[str(p.parent.relative_to(ROOT)) for p in INITS])
def test_each_package_map_names_everything_inside(init):
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    folder = init.parent
    inside = [p.name for p in folder.glob("*.py") if p.name != "__init__.py"]
    inside += [f"{p.name}/" for p in folder.iterdir() if (p / "__init__.py").is_file()]
    missing = sorted(name for name in inside if not re.search(rf"(?<![\w.]){re.escape(name.rstrip('/'))}\b", doc))
    assert not missing, f"{init.relative_to(ROOT)}'s map does not name {missing}"


def _comments_and_docstrings(path: pathlib.Path):
    """(line, text) of each comment and string constant in `path`."""
    source = path.read_text()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def _exists(name: str, path: pathlib.Path) -> bool:
    """A file named `name` in a comment of `path`: near it, in the package, or in the repository."""
    if "/" in name:
        return any((base / name).is_file() for base in (ROOT, PACKAGE, path.parent, path.parent.parent))
    return any(p.name == name for p in ROOT.rglob(name))


def test_files_named_in_comments_exist():
    known = collections.defaultdict(bool)
    stale = []
    for path in _package_files():
        for line, text in _comments_and_docstrings(path):
            for name in PY_NAME.findall(text):
                if re.fullmatch(r"(?:[\w-]+/)*[A-Z_]+\.py", name):      # a placeholder: tools/demos/NAME.py
                    continue
                key = (name, path.parent)
                if key not in known:
                    known[key] = _exists(name, path)
                if not known[key]:
                    stale.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    assert not stale, "comments naming files that do not exist:\n" + "\n".join(stale)


def test_no_function_is_over_80_lines():
    long = []
    for path in _package_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name} ({lines} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


def test_one_public_class_per_name_on_the_client_side():
    where = collections.defaultdict(list)
    for path in _package_files():
        if "emu" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(str(path.relative_to(ROOT)))
    shared = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not shared, f"public classes sharing a name: {shared}"
