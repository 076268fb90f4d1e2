"""ferry: moves tensors between layouts, dtypes, devices (cpu, the software "sim" device, CUDA),
streams and processes. The API follows PyTorch's names; DLPack exchange with torch, numpy and
other array libraries is zero-copy both ways. See docs/python.md."""

from ferry import _C
from ferry._C import *  # noqa: F401,F403  (the bound classes and functions)
from ferry._C import (  # noqa: F401  (names `import *` leaves out or that read better here)
    Tensor, Stream, Event, device, dtype, from_dlpack, to_dlpack, DLPACK_VERSION,
    Error, ShapeError, DTypeError, DeviceError, IndexError, OutOfMemoryError,
    NotImplementedError, DLPackError,
)
from ferry import memory, sim  # noqa: F401

__version__ = _C.__version__

# Each C++ area's bindings live in python/src/<area>.cc; names added there appear here through
# the `import *` above unless they start with an underscore.
