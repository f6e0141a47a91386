"""Layer 1, the Python frontend: what a user of lowlevel holds and calls.

    dtypes.py     the element types (DType), with their DLPack codes and typestrs
    device.py     Device("cpu" | "cuda" | "cuda:1" | a user backend's device type)
    shapes.py     strides, -1 inference and broadcasting, shared with the backends
    tensor.py     Tensor (shape, strides, offset, dtype, device over a Storage) and its views
    creation.py   empty, zeros, ones, full, arange, tensor()
    random.py     rand, randn, randint (and *_like), manual_seed, Generator: Philox on the device
    ops.py        validate shapes, devices and dtypes, then hand the call to the dispatcher;
                  attaches the ops to Tensor as its operators and methods
    fast_ops.py   the element-wise ops' common cases, checked and dispatched in one frame
                  (everything else through ops.py's checks)
    inplace.py    copy_, fill_, zero_, add_ ... div_, +=, and t[index] = value
    promotion.py  type promotion as PyTorch's torch.result_type: the dtype of a OP b, and the
                  casts that make the operands of it
    division.py   floor_divide and remainder (// and %, floor semantics), with their operators
    errors.py     the RuntimeError subclasses raised where PyTorch raises RuntimeError
    reductions.py sum/mean over dim tuples, max/min(dim) -> (values, indices), amax amin prod
                  cumsum cumprod var std logsumexp norm all any, sort argsort topk kthvalue
    return_types.py  the named tuples (values, indices) those return, as torch.return_types
    indexing.py   gather, scatter, scatter_add, index_select, masked_fill, nonzero, bounds checks
    advanced_indexing.py  x[idx], x[:, idx], x[i, j] with integer tensors or lists, and x[idx] = v
    joining.py    unsqueeze, squeeze, flatten, cat, stack, *_like, eye, linspace, from_numpy,
                  half/float/double, float(t) and int(t)
    math_ops.py   sin cos floor ... log_softmax, isnan, logical_*, bitwise_*, isclose, mm, bmm,
                  matmul with broadcast batch dimensions: kernels, or decompositions
    methods.py    the Tensor methods and operators PyTorch users expect beside those: .long()
                  .t() .stride() .add(alpha=) & | ^ ~ 2 ** x chunk split relu_ retain_grad to(...)
    formatting.py repr() of a tensor as PyTorch prints it
    interop.py    DLPack (__dlpack__, from_dlpack) and __cuda_array_interface__
    autograd/     requires_grad, backward, no_grad: the Autograd dispatch key's kernel and
                  the backward formulas (written with the ops above)

Nothing here calls ctypes or knows a kernel: ops go through lowlevel.dispatch, and the
backends (lowlevel.backends, above this layer) register the kernels.
"""
from . import (autograd, creation, device, division, dtypes, errors, fast_ops, formatting, inplace, interop,  # noqa: F401  (they attach Tensor methods)
               joining, math_ops, methods, ops, promotion, random, shapes, tensor)
from . import advanced_indexing, indexing, reductions, return_types  # noqa: F401,E402  (after ops: they extend its methods)
