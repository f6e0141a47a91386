"""tools/train_mlp.py: a two-layer MLP trained by SGD with lowlevel's autograd; on every
device present (the emulated GPU always) its loss falls by a clear factor."""
import importlib.util
import io
import math
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "train_mlp.py"


def _tool():
    spec = importlib.util.spec_from_file_location("train_mlp", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_loss_falls(device):
    printed = io.StringIO()
    losses = _tool().train(steps=30, hidden=16, n=64, device=device, every=10, seed=1, out=printed)
    assert len(losses) == 30 and all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0] / 5, losses
    assert printed.getvalue().count("loss") == 4          # steps 0, 10, 20 and the last
