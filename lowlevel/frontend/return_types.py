"""The named tuples of the ops that return values and their indices, as PyTorch's
torch.return_types: `v, i = x.max(1)` unpacks, `x.max(1).values`, `x.max(1)[0]` index.

    max, min, sort, topk, kthvalue     (values, indices)
"""
from collections import namedtuple

max = namedtuple("max", ["values", "indices"])              # noqa: A001 - PyTorch's names
min = namedtuple("min", ["values", "indices"])              # noqa: A001
sort = namedtuple("sort", ["values", "indices"])
topk = namedtuple("topk", ["values", "indices"])
kthvalue = namedtuple("kthvalue", ["values", "indices"])

for _cls in (max, min, sort, topk, kthvalue):
    _cls.__module__ = __name__
    _cls.__qualname__ = _cls.__name__
