"""ferry.pipeline: GPipe(module, balance, devices, chunks, checkpoint="except_last"), torchgpipe's
pipeline over a ferry.nn.Sequential: partitions on devices, micro-batches, checkpointing, and a
backward that follows torchgpipe's stream rules (docs/pipeline.md)."""

from ferry._C import _pipeline as _m

GPipe = _m.GPipe
