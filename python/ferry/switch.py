"""ferry.switch: Client(socket=path) or Client(port=n) talks to `ferry serve`; client.infer(model,
inputs) returns an InferResult (outputs by name, the server's queue/transfer/compute timings) or
raises ferry.SwitchError, whose `code` says why (docs/switch.md)."""

from ferry._C import _switch as _m

Client = _m.Client
InferResult = _m.InferResult
