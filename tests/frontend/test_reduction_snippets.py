"""tests/frontend/torch_snippets/reductions.py run on torch (CPU) and on lowlevel's "cpu"
and "cuda" (the emulated GPU where no GPU is), stricter than test_torch_differential.py
(which runs every snippet file, and where lowlevel may refuse what torch computes): here
every snippet must give torch's values, named-tuple type, dtypes and shapes, or be refused by
both with an exception of torch's type. Skipped where torch is not installed (the optional
`torch` test extra)."""
import functools
import pathlib
import re

import numpy as np
import pytest

import lowlevel as ll

torch = pytest.importorskip("torch", reason="the differential snippets need torch (pip install torch)")

_PATH = pathlib.Path(__file__).resolve().parent / "torch_snippets" / "reductions.py"
NAMES = sorted(re.findall(r"^def (snippet_\w+)\(", _PATH.read_text(), flags=re.M))


def snippets_with(module) -> dict:
    """The snippet file run with its global T bound to `module` (as the differential test does)."""
    namespace = {"__name__": "reduction_snippets"}
    exec(compile(_PATH.read_text(), str(_PATH), "exec"), namespace)     # noqa: S102 - the suite's own file
    namespace["T"] = module
    return namespace
_CREATION = ("tensor", "zeros", "ones", "full", "arange", "empty", "eye", "rand", "randn")


class OnDevice:
    """lowlevel with its creation functions making tensors on `device`."""

    def __init__(self, device: str):
        self.device = device

    def __getattr__(self, name):
        value = getattr(ll, name)
        return functools.partial(value, device=self.device) if name in _CREATION else value


def _outcome(fn):
    try:
        return "ok", fn()
    except Exception as e:          # noqa: BLE001 - a refusal is an outcome to compare
        return "refused", e


def _plain(value):
    """(kind, fields) of a result: a tensor as its numpy values, dtype name and shape."""
    if isinstance(value, tuple):
        name = type(value).__name__ if hasattr(value, "_fields") or type(value).__module__ == "torch.return_types" \
            else "tuple"
        return name, [_plain(v) for v in value]
    if isinstance(value, torch.Tensor):
        return "tensor", (value.numpy(), str(value.dtype).removeprefix("torch."), tuple(value.shape))
    if isinstance(value, ll.Tensor):
        return "tensor", (value.numpy(), value.dtype.name, tuple(value.shape))
    return "number", value


def _compare(name, want, got, where):
    assert want[0] == got[0], f"{name} on {where}: torch gives a {want[0]}, lowlevel a {got[0]}"
    if want[0] == "tensor":
        (wv, wd, ws), (gv, gd, gs) = want[1], got[1]
        assert (gd, gs) == (wd, ws), f"{name} on {where}: torch {wd} {ws}, lowlevel {gd} {gs}"
        tol = 1e-5 if wd == "float64" else 2e-4
        assert np.allclose(gv.astype(np.float64), wv.astype(np.float64), rtol=tol, atol=tol, equal_nan=True), \
            f"{name} on {where}:\ntorch    {wv}\nlowlevel {gv}"
    elif want[0] == "number":
        assert np.isclose(got[1], want[1], equal_nan=True), f"{name} on {where}: {want[1]} vs {got[1]}"
    else:
        assert len(want[1]) == len(got[1]), f"{name} on {where}: {len(want[1])} vs {len(got[1])} parts"
        for w, g in zip(want[1], got[1]):
            _compare(name, w, g, where)


@pytest.mark.parametrize("where", ["cpu", "cuda"])
def test_snippets_agree_with_torch(where):
    theirs, ours = snippets_with(torch), snippets_with(OnDevice(where))
    silently_different, refused_differently = [], []
    for name in NAMES:
        want, got = _outcome(theirs[name]), _outcome(ours[name])
        if want[0] != got[0]:
            refused_differently.append(f"{name}: torch {want[0]} ({want[1]!r:.100}), lowlevel {got[0]} ({got[1]!r:.200})")
            continue
        if want[0] == "refused" and not isinstance(got[1], type(want[1])):
            refused_differently.append(f"{name}: torch raises {type(want[1]).__name__}, lowlevel "
                                       f"{type(got[1]).__name__} ({got[1]})")
        if want[0] == "ok":
            try:
                _compare(name, _plain(want[1]), _plain(got[1]), where)
            except AssertionError as e:
                silently_different.append(str(e))
    assert not silently_different and not refused_differently, \
        "\n".join([f"LOWLEVEL_SNIPPET_SEED={theirs['SEED']}", "silently different:", *silently_different, "refused by one only:", *refused_differently])
