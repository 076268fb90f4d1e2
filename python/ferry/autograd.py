"""ferry.autograd: grad mode as torch sets it. `no_grad()` and `enable_grad()` are context managers
and decorators; `set_grad_enabled(mode)` takes effect when called and, used as a context manager,
restores the previous mode on exit. Grad mode is per thread, as in torch."""

import functools

from ferry import _C

is_grad_enabled = _C.is_grad_enabled


class _GradModeContext:
    _mode = True

    def __enter__(self):
        self._previous = _C.is_grad_enabled()
        _C._set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._previous)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradModeContext):
    """Operators inside record no graph (torch.no_grad)."""

    _mode = False


class enable_grad(_GradModeContext):
    """Operators inside record the graph again, e.g. within no_grad (torch.enable_grad)."""

    _mode = True


class set_grad_enabled:
    """Sets grad mode now; as a context manager, restores the previous mode on exit."""

    def __init__(self, mode):
        self._previous = _C.is_grad_enabled()
        _C._set_grad_enabled(bool(mode))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._previous)
        return False
