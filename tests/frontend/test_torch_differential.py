"""The torch differential test: PyTorch-style snippets run on torch (CPU) and on lowlevel's
"cpu" and "cuda" devices, and each classified:

    agree       both give the same results (values, dtype and shape; tuples element-wise)
    refused     both raise, lowlevel an error of the kind torch's is (a RuntimeError where
                torch raises one); or lowlevel raises a clear error (RuntimeError, TypeError,
                ValueError, IndexError, NotImplementedError, AttributeError) where torch does not
    different   lowlevel gives another result, or one where torch raises, or crashes from
                inside (another exception): this fails the test

The snippets live in tests/frontend/torch_snippets/*.py, one file per subject, so that each
subject's snippets are added without touching another's. A file is Python written with the
name `T`, which the harness binds to torch or to lowlevel (on "cuda", creation functions
without a device make their tensors there), in either of two forms:

    # --- int tensor times a float           (a block: up to the next "# ---"; its result
    T.tensor([1, 2]) * 1.5                    is the value of its last expression)

    def snippet_inplace_refusal():            (a function named snippet_*: its return value)
        i = T.tensor([1, 2]); i += 1.5; return i

A block named "[cpu] ..." runs on lowlevel's "cpu" only (what a GPU leaves undefined, such
as an integer division by zero). Functions go before a file's first block; anything there
(imports, `T = None` for the linters, helpers) runs first, in the namespace the blocks
share. Skipped with the reason where torch is absent (pip install -e '.[torch]').
"""
import ast
import functools
import pathlib
import types

import numpy as np
import pytest

import lowlevel as ll

torch = pytest.importorskip("torch", reason="the torch differential test needs torch: pip install -e '.[torch]'")

SNIPPETS = pathlib.Path(__file__).resolve().parent / "torch_snippets"
CREATION = ("tensor", "zeros", "ones", "full", "arange", "empty", "eye", "linspace", "rand", "randn", "randint")
CLEAR_REFUSALS = (RuntimeError, TypeError, ValueError, IndexError, NotImplementedError, AttributeError)
RTOL = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1e-6, "float64": 1e-12}


class Snippet:
    def __init__(self, name: str, run):
        self.name, self.run = name, run


def _last_expression(code: str, filename: str):
    """A function of a namespace: exec the block's statements, evaluate its last expression."""
    tree = ast.parse(code, filename)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = compile(tree, filename, "exec")
    tail = compile(ast.Expression(last.value), filename, "eval") if last is not None else None

    def run(namespace):
        exec(body, namespace)           # noqa: S102 - the suite's own snippet files
        return eval(tail, namespace) if tail is not None else None      # noqa: S307
    return run


def load(path: pathlib.Path):
    """(the file's preamble, its snippets): blocks split at lines starting with "# ---"."""
    text = path.read_text()
    parts, name, start = [], None, 0
    lines = text.split("\n")
    for i, line in enumerate(lines + ["# ---"]):
        if line.startswith("# ---"):
            code = "\n".join([""] * start + lines[start:i])          # line numbers as in the file
            parts.append((name, code, start + 1))
            name, start = line[5:].strip() or None, i + 1
    preamble, blocks = parts[0], parts[1:]
    snippets = [Snippet(f"{path.stem}:{line} {name or ''}".strip(), _last_expression(code, str(path)))
                for name, code, line in blocks if code.strip()]
    return _last_expression(preamble[1], str(path)), snippets


def _functions(path: pathlib.Path, namespace) -> list:
    """The file's snippet_* functions, each called in the namespace of the module under test."""
    return [Snippet(f"{path.stem}:{name}", functools.partial(_call, name))
            for name, fn in namespace.items() if name.startswith("snippet_") and callable(fn)]


def _call(name, namespace):
    return namespace[name]()


def lowlevel_on(device: str):
    """lowlevel as `T`, with its creation functions making tensors on `device` by default."""
    module = types.SimpleNamespace(**{k: getattr(ll, k) for k in dir(ll) if not k.startswith("__")})
    for name in CREATION:
        fn = getattr(ll, name, None)
        if fn is not None:
            setattr(module, name, functools.partial(_on_device, fn, device))
    return module


def _on_device(fn, device, /, *args, **kwargs):
    kwargs.setdefault("device", device)
    return fn(*args, **kwargs)


def normal(x):
    """A result as plain data: tensors as (values, dtype name, shape)."""
    if isinstance(x, torch.Tensor):
        x = x.detach()
        values = (x.float() if x.dtype == torch.bfloat16 else x).numpy()
        return ("tensor", np.asarray(values), str(x.dtype).removeprefix("torch."), tuple(x.shape))
    if isinstance(x, ll.Tensor):
        return ("tensor", np.asarray(x.detach().numpy()), x.dtype.name, tuple(x.shape))
    if isinstance(x, torch.dtype):
        return ("dtype", str(x).removeprefix("torch."))
    if isinstance(x, ll.float32.__class__):
        return ("dtype", x.name)
    if isinstance(x, (tuple, list, torch.Size)):
        return tuple(normal(v) for v in x)
    return x


def same(a, b) -> bool:
    if isinstance(a, tuple) and a and a[0] == "tensor":
        if not (isinstance(b, tuple) and b and b[0] == "tensor") or a[2:] != b[2:]:
            return False
        va, vb = a[1].astype(np.float64), b[1].astype(np.float64)
        if va.shape != vb.shape:
            return False
        rtol = RTOL.get(a[2], 0.0)
        return bool(np.allclose(va, vb, rtol=rtol, atol=rtol, equal_nan=True)) if rtol else np.array_equal(va, vb)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b) or abs(a - b) <= 1e-6 * max(abs(a), abs(b))
    return type(a) is type(b) and a == b


def outcome(snippet, namespace):
    try:
        return "value", normal(snippet.run(namespace))
    except Exception as e:         # noqa: BLE001 - what a snippet raises is what is compared
        return "raised", e


def builtin_kind(error: Exception) -> type:
    """The built-in exception class torch's error is (torch's own classes derive from them)."""
    return next(k for k in type(error).__mro__ if k.__module__ == "builtins")


def classify(theirs, ours) -> str:
    if theirs[0] == "raised":
        # refused by both, and as the same kind of error: a caller's `except RuntimeError` works
        return "refused" if ours[0] == "raised" and isinstance(ours[1], builtin_kind(theirs[1])) else "different"
    if ours[0] == "raised":
        return "refused" if isinstance(ours[1], CLEAR_REFUSALS) else "different"
    return "agree" if same(theirs[1], ours[1]) else "different"


def run_file(path: pathlib.Path, device: str) -> dict:
    found = {"agree": [], "refused": [], "different": []}
    preamble, snippets = load(path)
    spaces = {}
    for key, module in (("torch", torch), ("lowlevel", lowlevel_on(device))):
        namespace = {"__name__": f"snippets_{path.stem}", "T": module}
        preamble(namespace)
        namespace["T"] = module         # a preamble's `T = None` (for the linters) is replaced
        spaces[key] = namespace
    snippets += _functions(path, spaces["torch"])
    for snippet in snippets:
        if "[cpu]" in snippet.name and device != "cpu":
            continue
        theirs, ours = outcome(snippet, spaces["torch"]), outcome(snippet, spaces["lowlevel"])
        kind = classify(theirs, ours)
        found[kind].append((snippet.name, theirs, ours))
    return found


def _describe(result) -> str:
    kind, value = result
    if kind == "raised":
        return f"raises {type(value).__name__}: {str(value)[:120]}"
    return repr(value)[:160]


@pytest.mark.parametrize("path", sorted(SNIPPETS.glob("*.py")), ids=lambda p: p.stem)
def test_snippets_agree_with_torch(device, path):
    torch.manual_seed(0)
    found = run_file(path, device)
    counts = ", ".join(f"{len(v)} {k}" for k, v in found.items())
    print(f"\n{path.stem} on {device}: {counts}")
    for name, theirs, ours in found["refused"]:
        print(f"  refused  {name}: torch {_describe(theirs)}; lowlevel {_describe(ours)}")
    different = [f"{name}\n    torch:    {_describe(theirs)}\n    lowlevel: {_describe(ours)}"
                 for name, theirs, ours in found["different"]]
    assert not different, f"silently different on {device} ({counts}):\n" + "\n".join(different)
