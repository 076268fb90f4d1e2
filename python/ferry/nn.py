"""ferry.nn: modules with torch.nn's methods (parameters, state_dict, load_state_dict, to, train,
eval, load for safetensors files), the layers (Linear, Conv2d, BatchNorm2d, ReLU, GELU, Dropout,
Flatten, MaxPool2d, AdaptiveAvgPool2d, LayerNorm, Embedding, Sequential), the model zoo in
ferry.nn.models (resnet18..resnet152, mlp, bert) and ferry.nn.functional. The objects are ferry's
C++ modules (docs/python.md, "Modules")."""

import sys

from ferry._C import _nn as _m

for _name in dir(_m):
    if not _name.startswith("__"):
        globals()[_name] = getattr(_m, _name)

# `import ferry.nn.functional as F` and `from ferry.nn import models` both work.
sys.modules[__name__ + ".models"] = _m.models
sys.modules[__name__ + ".functional"] = _m.functional
del _name
