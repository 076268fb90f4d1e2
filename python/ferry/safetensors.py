"""ferry.safetensors: load_file(filename, device=None) -> {name: Tensor} and
save_file(tensors, filename, metadata=None), with the safetensors package's names. Loading to a
device goes through pinned staging; the file format is checked before anything is allocated."""

from ferry._C import _safetensors as _m

load_file = _m.load_file
save_file = _m.save_file
