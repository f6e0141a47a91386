"""Which exception each refusal raises, in PyTorch (CPU) and in lowlevel: a survey.

Each case below is one refusal written once with `T`, the module (torch or lowlevel); it
runs against both, and a case agrees when lowlevel's exception is an instance of the class
PyTorch raised (a lowlevel error that subclasses RuntimeError and ValueError agrees with
PyTorch's RuntimeError). Run

    python tools/survey_refusals.py            # needs torch: pip install -e '.[torch]'

It prints each case that differs and the counts; nothing here is a test (the suite's
tests/frontend/test_torch_differential.py runs the snippets of tests/frontend/torch_snippets/).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))      # this checkout's lowlevel

CASES = {
    "broadcast add": lambda T: T.zeros(3) + T.zeros(4),
    "broadcast mul 2-D": lambda T: T.zeros(2, 3) * T.zeros(3, 2),
    "broadcast sub": lambda T: T.zeros(3) - T.zeros(2),
    "broadcast compare": lambda T: T.zeros(3) < T.zeros(4),
    "broadcast where": lambda T: T.where(T.zeros(3) > 0, T.zeros(3), T.zeros(4)),
    "broadcast maximum": lambda T: T.maximum(T.zeros(3), T.zeros(4)),
    "reshape bad size": lambda T: T.zeros(6).reshape(4),
    "reshape two -1": lambda T: T.zeros(6).reshape(-1, -1),
    "view bad size": lambda T: T.zeros(6).view(5),
    "reshape -1 not dividing": lambda T: T.zeros(7).reshape(2, -1),
    "permute not a permutation": lambda T: T.zeros(2, 3).permute(0, 0),
    "expand fewer dims": lambda T: T.zeros(2, 3).expand(3),
    "expand bad size": lambda T: T.zeros(2, 3).expand(4, 3),
    "item of many": lambda T: T.zeros(3).item(),
    "float() of many": lambda T: float(T.zeros(3)),
    "int() of many": lambda T: int(T.zeros(3)),
    "cat sizes differ": lambda T: T.cat([T.zeros(2, 3), T.zeros(2, 4)]),
    "cat empty list": lambda T: T.cat([]),
    "cat 0-d": lambda T: T.cat([T.zeros(())]),
    "cat not a list": lambda T: T.cat(T.zeros(2)),
    "cat dim out of range": lambda T: T.cat([T.zeros(2), T.zeros(2)], 2),
    "stack sizes differ": lambda T: T.stack([T.zeros(2), T.zeros(3)]),
    "matmul inner dims": lambda T: T.zeros(2, 3) @ T.zeros(2, 3),
    "matmul dtypes": lambda T: T.zeros(2, 2) @ T.zeros(2, 2, dtype=T.float64),
    "matmul 0-d": lambda T: T.matmul(T.zeros(()), T.zeros(())),
    "matmul batch": lambda T: T.zeros(2, 2, 3) @ T.zeros(3, 3, 2),
    "mean of ints": lambda T: T.tensor([1, 2]).mean(),
    "softmax of ints": lambda T: T.tensor([1, 2]).softmax(0),
    "sum dim out of range": lambda T: T.zeros(2, 3).sum(2),
    "max dim out of range": lambda T: T.zeros(2, 3).max(5),
    "argmax dim out of range": lambda T: T.zeros(2, 3).argmax(5),
    "softmax dim out of range": lambda T: T.zeros(2, 3).softmax(3),
    "max of empty": lambda T: T.zeros(0).max(),
    "argmax of empty": lambda T: T.zeros(0).argmax(),
    "sub of bools": lambda T: T.tensor([True]) - T.tensor([True]),
    "neg of bool": lambda T: -T.tensor([True]),
    "floor_divide of bools": lambda T: T.tensor([True]) // T.tensor([True]),
    "remainder of bools": lambda T: T.tensor([True]) % T.tensor([True]),
    "int // 0": lambda T: T.tensor([5]) // T.tensor([0]),
    "int % 0": lambda T: T.tensor([5]) % T.tensor([0]),
    "int += float": lambda T: T.tensor([1, 2]).add_(1.5),
    "int /= int": lambda T: T.tensor([1, 2]).div_(2),
    "bool += int": lambda T: T.tensor([True]).add_(1),
    "int *= float tensor": lambda T: T.tensor([1, 2]).mul_(T.tensor([1.5, 2.0])),
    "inplace broadcast grows": lambda T: T.zeros(3).add_(T.zeros(2, 3)),
    "copy_ shapes": lambda T: T.zeros(3).copy_(T.zeros(4)),
    "fill_ with a tensor of many": lambda T: T.zeros(3).fill_(T.zeros(2)),
    "int32 overflow at creation": lambda T: T.tensor([2 ** 31], dtype=T.int32),
    "int64 overflow at creation": lambda T: T.tensor([2 ** 63]),
    "int32 scalar overflow in op": lambda T: T.tensor([1], dtype=T.int32) + 2 ** 40,
    "full int32 overflow": lambda T: T.full((2,), 2 ** 31, dtype=T.int32),
    "negative dimension": lambda T: T.zeros(-1),
    "negative dimension empty": lambda T: T.empty(2, -3),
    "unknown dtype name": lambda T: T.zeros(2, dtype="complex64"),
    "tensor of strings": lambda T: T.tensor(["a"]),
    "add a string": lambda T: T.zeros(2) + "x",
    "add None": lambda T: T.add(T.zeros(2), None),
    "add a list": lambda T: T.maximum(T.zeros(2), [1.0]),
    "pow of ints": lambda T: T.tensor([1, 2]) ** -1,
    "where cond not bool": lambda T: T.where(T.zeros(2), T.zeros(2), T.zeros(2)),
    "masked_select non-bool mask": lambda T: T.masked_select(T.zeros(2), T.zeros(2)),
    "masked_select broadcast": lambda T: T.masked_select(T.zeros(3), T.zeros(4) > 0),
    "index with a float tensor": lambda T: T.zeros(3)[T.zeros(2)],
    "index out of range": lambda T: T.zeros(3)[5],
    "too many indices": lambda T: T.zeros(3)[0, 0],
    "mask of the wrong shape": lambda T: T.zeros(3)[T.zeros(4) > 0],
    "len of 0-d": lambda T: len(T.zeros(())),
    "iterate 0-d": lambda T: list(T.zeros(())),
    "unsqueeze dim": lambda T: T.zeros(2).unsqueeze(3),
    "squeeze dim": lambda T: T.zeros(2).squeeze(3),
    "flatten dims reversed": lambda T: T.zeros(2, 3, 4).flatten(2, 1),
    "transpose dim": lambda T: T.zeros(2, 3).transpose(0, 2),
    "clamp without bounds": lambda T: T.zeros(2).clamp(),
    "eye negative": lambda T: T.eye(-1),
    "linspace negative steps": lambda T: T.linspace(0, 1, -1),
    "arange zero step": lambda T: T.arange(0, 5, 0),
    "backward of non-scalar": lambda T: T.zeros(2, requires_grad=True).mul(2).backward(),
    "backward without grad": lambda T: T.zeros(()).backward(),
    "in-place on a leaf": lambda T: T.zeros(2, requires_grad=True).add_(1),
    "requires_grad on ints": lambda T: T.tensor([1, 2], requires_grad=True),
    "numpy of a grad tensor": lambda T: T.zeros(2, requires_grad=True).numpy(),
    "to an unknown device": lambda T: T.zeros(2).to("tpu"),
    "from_numpy of a list": lambda T: T.from_numpy([1, 2]),
}


def outcome(module, case):
    try:
        case(module)
    except Exception as e:          # noqa: BLE001 - the survey records whatever is raised
        return type(e)
    return None


def main() -> int:
    import torch

    import lowlevel
    agree, differ, total = 0, [], 0
    for name, case in CASES.items():
        want, got = outcome(torch, case), outcome(lowlevel, case)
        if want is None:
            continue            # not a refusal in PyTorch: the differential test's subject, not this one's
        total += 1
        if got is not None and issubclass(got, want):
            agree += 1
        else:
            differ.append((name, want.__name__, got.__name__ if got else "no error"))
    for name, want, got in differ:
        sys.stdout.write(f"  differs  {name:<32} torch {want:<22} lowlevel {got}\n")
    sys.stdout.write(f"{total} refusals of PyTorch: {agree} raise an exception of its class in lowlevel, "
                     f"{len(differ)} differ\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
