"""Grad mode: whether ops on tensors that require grad record a graph (per thread).

    with lowlevel.no_grad(): ...       # nothing is recorded (an SGD step, evaluation)
    with lowlevel.enable_grad(): ...   # recording again, inside a no_grad block

Both work as decorators too. Autograd also records nothing while its own key is excluded on
this thread (inside its kernel's redispatch, so the backend's inner ops are not recorded).
"""
import functools
import threading

from ...dispatch import Autograd, is_excluded


class _Mode(threading.local):
    enabled = True


_mode = _Mode()


def is_grad_enabled() -> bool:
    return _mode.enabled


def recording() -> bool:
    """Whether an op on a tensor that requires grad records a node now."""
    return _mode.enabled and not is_excluded(Autograd)


class _GradMode:
    value = True

    def __enter__(self):
        self.previous = _mode.enabled
        _mode.enabled = self.value
        return self

    def __exit__(self, *exc):
        _mode.enabled = self.previous
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapped


class no_grad(_GradMode):
    """Record no graph inside the block (results do not require grad)."""
    value = False


class enable_grad(_GradMode):
    """Record again inside the block (undoes an enclosing no_grad)."""
    value = True
