"""Train a two-layer MLP with lowlevel's autograd: regression of a random teacher network,
plain SGD, on the (emulated, where there is no GPU) CUDA device by default.

    python tools/train_mlp.py                      # cuda: the real GPU, or the emulated one
    python tools/train_mlp.py --device cpu --steps 300 --hidden 64

Every op of the forward pass goes through the Autograd key (which records it) to the CUDA
kernels; loss.backward() runs the backward formulas on the same kernels; the SGD step
updates the weights in place under no_grad. The loss is printed every --every steps.
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))    # this checkout's lowlevel

import lowlevel as ll


def teacher_data(rng, n, d_in, d_hidden, d_out):
    """Inputs and the outputs of a fixed random two-layer network (the task to learn)."""
    x = rng.standard_normal((n, d_in)).astype(np.float32)
    w1 = rng.standard_normal((d_in, d_hidden)).astype(np.float32) / np.sqrt(d_in)
    w2 = rng.standard_normal((d_hidden, d_out)).astype(np.float32) / np.sqrt(d_hidden)
    y = np.maximum(x @ w1, 0) @ w2
    return x, y.astype(np.float32)


def init_params(rng, d_in, d_hidden, d_out, device):
    def leaf(*shape, scale):
        return ll.tensor((rng.standard_normal(shape) * scale).astype(np.float32), device=device,
                         requires_grad=True)
    return [leaf(d_in, d_hidden, scale=np.sqrt(2 / d_in)), ll.zeros(d_hidden, device=device, requires_grad=True),
            leaf(d_hidden, d_out, scale=np.sqrt(1 / d_hidden)), ll.zeros(d_out, device=device, requires_grad=True)]


def forward(params, x):
    w1, b1, w2, b2 = params
    return (x @ w1 + b1).relu() @ w2 + b2


def train(steps=200, hidden=32, n=256, d_in=8, d_out=2, lr=0.1, device="cuda", every=20, seed=0, out=sys.stdout):
    """Run SGD for `steps` steps; returns the list of losses (one per step)."""
    rng = np.random.default_rng(seed)
    x_np, y_np = teacher_data(rng, n, d_in, 16, d_out)
    x, y = ll.tensor(x_np, device=device), ll.tensor(y_np, device=device)
    params = init_params(rng, d_in, hidden, d_out, device)
    losses = []
    for step in range(steps):
        diff = forward(params, x) - y
        loss = (diff * diff).mean()
        loss.backward()
        with ll.no_grad():
            for p in params:
                p -= lr * p.grad          # in place: the leaf stays the same tensor
                p.grad = None
        losses.append(loss.item())
        if step % every == 0 or step == steps - 1:
            print(f"step {step:5d}  loss {losses[-1]:.6f}", file=out)
    return losses


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.device.startswith("cuda"):
        from lowlevel import cuda
        info = cuda.driver_info()
        print(f"device {args.device} on the {info['kind']} driver ({info['description']})")
    losses = train(args.steps, args.hidden, args.samples, lr=args.lr, device=args.device, every=args.every,
                   seed=args.seed)
    print(f"loss {losses[0]:.6f} -> {losses[-1]:.6f} ({losses[0] / max(losses[-1], 1e-30):.1f}x lower)")


if __name__ == "__main__":
    main()
