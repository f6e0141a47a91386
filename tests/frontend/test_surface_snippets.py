"""The snippets of torch_snippets/surface.py run on torch (CPU) and on lowlevel's "cpu" and
"cuda", compared by value, dtype and shape: none may differ silently (one torch refuses
must be refused too). The file is in the torch differential harness's format (a global `T`,
snippet_* functions; test_torch_differential.py, where it is merged, runs every file of
torch_snippets/, this one included): until then this runs it the same way."""
import functools
import pathlib
import types

import numpy as np
import pytest

import lowlevel as ll

torch = pytest.importorskip("torch", reason="PyTorch is the reference here: pip install torch (CPU)")

HERE = pathlib.Path(__file__).resolve().parent
PATH = HERE / "torch_snippets" / "surface.py"
CREATION = ("tensor", "zeros", "ones", "full", "arange", "empty", "eye", "linspace", "rand", "randn", "randint")
pytestmark = pytest.mark.skipif((HERE / "test_torch_differential.py").exists(),
                                reason="the torch differential harness runs torch_snippets/surface.py")


def _namespace(T) -> dict:
    namespace = {"__name__": "surface_snippets"}
    exec(compile(PATH.read_text(), str(PATH), "exec"), namespace)       # noqa: S102 - the suite's own file
    namespace["T"] = T
    return namespace


NAMES = sorted(n for n in _namespace(None) if n.startswith("snippet_"))


def _lowlevel_on(device: str):
    """lowlevel as `T`, its creation functions making tensors on `device` unless told."""
    module = types.SimpleNamespace(**{k: getattr(ll, k) for k in dir(ll) if not k.startswith("__")})
    for name in CREATION:
        setattr(module, name, functools.partial(_on_device, getattr(ll, name), device))
    return module


def _on_device(fn, default, /, *args, **kwargs):
    kwargs.setdefault("device", default)        # a snippet's own device= (positional-only: no clash)
    return fn(*args, **kwargs)


def _differences(got, expect, where="result") -> list:
    if isinstance(expect, torch.Tensor):
        if not isinstance(got, ll.Tensor):
            return [f"{where}: {type(got).__name__}, torch gives a tensor"]
        if got.shape != tuple(expect.shape) or got.dtype.name != str(expect.dtype).removeprefix("torch."):
            return [f"{where}: {got.shape} {got.dtype.name}, torch {tuple(expect.shape)} {expect.dtype}"]
        e, g = expect.detach().float().numpy() if expect.dtype == torch.bfloat16 else expect.detach().numpy(), \
            got.detach().numpy()
        if expect.dtype.is_floating_point:
            close = np.allclose(g.astype(np.float64), e.astype(np.float64), rtol=2e-5, atol=1e-6, equal_nan=True)
        else:
            close = np.array_equal(g, e)
        return [] if close else [f"{where}: values {g.tolist()} against torch's {e.tolist()}"]
    if isinstance(expect, (tuple, list)) and not isinstance(expect, torch.Size):
        if not isinstance(got, (tuple, list)) or len(got) != len(expect):
            return [f"{where}: {got!r} against torch's {expect!r}"]
        return [d for i, (g, e) in enumerate(zip(got, expect)) for d in _differences(g, e, f"{where}[{i}]")]
    return [] if got == expect else [f"{where}: {got!r} against torch's {expect!r}"]


def _run(namespace, name):
    try:
        return namespace[name](), None
    except Exception as error:            # noqa: BLE001 - a refusal is a result to compare
        return None, error


@pytest.fixture(scope="module")
def torch_results():
    namespace = _namespace(torch)
    return {name: _run(namespace, name) for name in NAMES}


def test_there_are_about_a_hundred_snippets():
    assert len(NAMES) >= 100


def test_every_snippet_agrees_with_torch(device, torch_results):
    namespace = _namespace(_lowlevel_on(device))
    different = []
    for name in NAMES:
        (expect, refused), (got, error) = torch_results[name], _run(namespace, name)
        if refused is not None:
            if error is None:
                different.append(f"{name}: torch refuses ({refused!r}), lowlevel gives {got!r}")
        elif error is not None:
            different.append(f"{name}: lowlevel refuses: {error!r}")
        else:
            different += [f"{name}: {d}" for d in _differences(got, expect)]
    assert not different, "\n".join(different)
