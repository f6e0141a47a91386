"""The snippets of torch_snippets/surface.py run on torch (CPU) and on lowlevel's "cpu" and
"cuda", compared by value, dtype and shape: none may differ silently (a snippet torch
refuses must be refused too). The torch differential harness runs the same file."""
import importlib.util
import pathlib

import numpy as np
import pytest

import lowlevel as ll

torch = pytest.importorskip("torch", reason="PyTorch is the reference here: pip install torch (CPU)")

PATH = pathlib.Path(__file__).resolve().parent / "torch_snippets" / "surface.py"
_spec = importlib.util.spec_from_file_location("surface_snippets", PATH)
snippets = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(snippets)
NAMES = sorted(n for n in vars(snippets) if n.startswith("snippet_"))


def _differences(got, expect, where="result") -> list:
    if isinstance(expect, torch.Tensor):
        if not isinstance(got, ll.Tensor):
            return [f"{where}: {type(got).__name__}, torch gives a tensor"]
        if got.shape != tuple(expect.shape) or got.dtype.name != str(expect.dtype).removeprefix("torch."):
            return [f"{where}: {got.shape} {got.dtype.name}, torch {tuple(expect.shape)} {expect.dtype}"]
        e, g = expect.detach().numpy(), got.detach().numpy()
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


def _run(fn, T, device):
    try:
        return fn(T, device), None
    except Exception as error:            # noqa: BLE001 - a refusal is a result to compare
        return None, error


def test_there_are_about_a_hundred_snippets():
    assert len(NAMES) >= 100


@pytest.mark.parametrize("name", NAMES)
def test_snippet_agrees_with_torch(device, name):
    fn = getattr(snippets, name)
    torch.manual_seed(0)
    expect, refused = _run(fn, torch, "cpu")
    got, error = _run(fn, ll, device)
    if refused is not None:
        assert error is not None, f"{name}: torch refuses ({refused!r}), lowlevel gives {got!r}"
        return
    assert error is None, f"{name}: lowlevel refuses: {error!r}"
    assert not _differences(got, expect), _differences(got, expect)
