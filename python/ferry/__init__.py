"""ferry: moves tensors between layouts, dtypes, devices (cpu, the software "sim" device, CUDA),
streams and processes. The API follows PyTorch's names; DLPack exchange with torch, numpy and
other array libraries is zero-copy both ways. See docs/python.md."""

import atexit as _atexit

from ferry import _C
from ferry._C import *  # noqa: F401,F403  (the bound classes and functions)
from ferry._C import (  # noqa: F401  (names `import *` leaves out or that read better here)
    Tensor, Stream, Event, device, dtype, from_dlpack, to_dlpack, DLPACK_VERSION,
    Error, ShapeError, DTypeError, DeviceError, IndexError, OutOfMemoryError,
    NotImplementedError, DLPackError, SwitchError,
)
from ferry import autograd, memory, nn, pipeline, safetensors, sim, switch  # noqa: F401
from ferry.autograd import enable_grad, no_grad, set_grad_enabled  # noqa: F401

__version__ = _C.__version__


def _finish_queued_work():
    """Waits at interpreter exit for the work still queued on device streams. Without it a sim
    stream's worker thread could still be running a queued kernel (oneDNN, say) while the
    process's exit handlers destroy the libraries that kernel uses. Backends not in use are left
    alone (none is started at exit)."""
    _C._finish_queued_work()


_atexit.register(_finish_queued_work)

# Each C++ area's bindings live in python/src/<area>.cc; names added there appear here through
# the `import *` above unless they start with an underscore.
