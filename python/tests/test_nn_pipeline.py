"""ferry.nn, ferry.safetensors and ferry.pipeline from Python: ResNet-18 against torchvision with
the same weights, state dicts and their strict errors, moves to the sim device, Sequential
sharing its layers, safetensors round trips, BERT's outputs, and GPipe giving the unpipelined
module's outputs and gradients. The seed is in pytest's header (FERRY_TEST_SEED replays it)."""

import numpy as np
import pytest

import ferry
import ferry.nn.functional as F
from ferry import nn


def test_resnet18_matches_torchvision_with_the_same_weights(torch, rng, seed):
    import torchvision  # installed with torch by scripts/install-deps.sh --torch

    model = nn.models.resnet18(num_classes=10, seed=seed % 1000).eval()
    reference = torchvision.models.resnet18(num_classes=10).eval()
    state = {k: torch.from_numpy(v.numpy().copy()) for k, v in model.state_dict().items()}
    reference.load_state_dict(state)  # strict: the names are torchvision's
    x = rng.standard_normal((2, 3, 64, 64)).astype(np.float32)
    with ferry.no_grad(), torch.no_grad():
        ours = model(ferry.tensor(x)).numpy()
        theirs = reference(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


def test_state_dict_round_trip_and_strict_errors():
    a = nn.models.mlp(4, [8], 2, seed=1)
    b = nn.models.mlp(4, [8], 2, seed=2)
    assert [k for k, _ in a.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert p.tolist() == q.tolist()
    partial = {"0.weight": a.state_dict()["0.weight"], "extra": ferry.zeros(1)}
    with pytest.raises(ferry.Error, match="0.bias") as e:
        b.load_state_dict(partial)
    assert "extra" in str(e.value)
    result = b.load_state_dict(partial, strict=False)
    assert "2.weight" in result.missing_keys and result.unexpected_keys == ["extra"]


def test_module_to_sim_and_back_gives_the_same_outputs(rng):
    model = nn.Sequential(nn.Linear(6, 5), nn.GELU(), nn.Dropout(0.0), nn.Linear(5, 3)).eval()
    x = ferry.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    expected = model(x).tolist()
    same_object = model.to("sim:0", non_blocking=True)
    assert same_object is model
    assert all(p.device == ferry.device("sim:0") for p in model.parameters())
    on_sim = model(x.to("sim:0"))
    assert on_sim.device == ferry.device("sim:0")
    np.testing.assert_allclose(on_sim.cpu().tolist(), expected, rtol=1e-6)
    model.to(dtype=ferry.float64).cpu()
    assert all(p.dtype == ferry.float64 for p in model.parameters())


def test_sequential_shares_its_layers_and_slices():
    first = nn.Linear(3, 3)
    seq = nn.Sequential(first, nn.ReLU(), nn.Linear(3, 2))
    assert len(seq) == 3
    assert seq[0].weight.data_ptr() == first.weight.data_ptr()
    head = seq[:2]
    assert len(head) == 2 and isinstance(head, nn.Sequential)
    assert [k for k, _ in head.named_parameters()] == ["0.weight", "0.bias"]
    assert "Linear(in_features=3, out_features=2, bias=True)" in repr(seq)
    with pytest.raises(TypeError, match="Tensor -> Tensor forward"):
        nn.Sequential(nn.models.bert(num_hidden_layers=1, hidden_size=8, num_attention_heads=2,
                                     intermediate_size=16, vocab_size=30))


def test_safetensors_round_trip_and_module_load(tmp_path, rng):
    model = nn.models.mlp(5, [7], 3, seed=4)
    path = str(tmp_path / "mlp.safetensors")
    ferry.safetensors.save_file(model.state_dict(), path, metadata={"format": "pt"})
    loaded = ferry.safetensors.load_file(path)
    assert sorted(loaded) == sorted(model.state_dict())
    on_sim = ferry.safetensors.load_file(path, device="sim:0")
    assert on_sim["0.weight"].device == ferry.device("sim:0")
    other = nn.models.mlp(5, [7], 3, seed=5)
    other.load(path, device="sim:0")
    x = ferry.tensor(rng.standard_normal((2, 5)).astype(np.float32))
    np.testing.assert_array_equal(other(x.to("sim:0")).cpu().numpy(), model(x).numpy())
    with pytest.raises(ferry.Error):
        ferry.safetensors.load_file(str(tmp_path / "missing.safetensors"))


def test_bert_outputs(rng):
    model = nn.models.bert(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=32).eval()
    ids = ferry.tensor(rng.integers(0, 50, (2, 7)))
    mask = ferry.ones(2, 7, dtype=ferry.int64)
    hidden, pooled = model(ids, attention_mask=mask)
    assert hidden.shape == (2, 7, 16) and pooled.shape == (2, 16)
    again, _ = model(ids)  # an all-ones mask is the default
    assert hidden.tolist() == again.tolist()
    _, none = nn.models.bert(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                             num_attention_heads=4, intermediate_size=32,
                             add_pooling_layer=False)(ids)
    assert none is None
    with pytest.raises(TypeError, match="unexpected keyword argument 'hiden_size'"):
        nn.models.bert(hiden_size=16)


def test_gpipe_gives_the_modules_outputs_and_gradients(rng):
    def build():
        return nn.models.mlp(6, [16, 16, 16], 4, seed=7)

    reference = build()
    model = build()
    pipe = ferry.pipeline.GPipe(model, balance=[4, 3], devices=["sim:0", "sim:1"], chunks=4)
    assert pipe.devices == [ferry.device("sim:0"), ferry.device("sim:1")]
    assert pipe.balance == [4, 3] and pipe.chunks == 4 and pipe.checkpoint == "except_last"
    x = rng.standard_normal((8, 6)).astype(np.float32)
    labels = ferry.tensor(rng.integers(0, 4, (8,)))
    out = pipe(ferry.tensor(x).to("sim:0"))
    assert out.device == ferry.device("sim:1")
    F.cross_entropy(out, labels.to("sim:1")).backward()
    expected = reference(ferry.tensor(x))
    F.cross_entropy(expected, labels).backward()
    np.testing.assert_allclose(out.detach().cpu().numpy(), expected.detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)
    with pytest.raises(ferry.Error, match="expected balance to sum to"):
        ferry.pipeline.GPipe(build(), balance=[3, 3], devices=["sim:0", "sim:1"], chunks=2)


def test_exit_waits_for_queued_device_work(torch, tmp_path):
    """The interpreter exits right after queueing a model's kernels on the sim; the queued work
    must finish before the exit handlers tear down the libraries it uses (it crashed here
    before ferry waited for it at exit; importing torch first changes the teardown order)."""
    import subprocess
    import sys

    script = tmp_path / "queued_at_exit.py"
    script.write_text(
        "import torch, ferry\n"
        "model = ferry.nn.models.resnet18(num_classes=10).eval().to('sim:0')\n"
        "with ferry.no_grad():\n"
        "    y = model(ferry.randn(2, 3, 32, 32).to('sim:0'))\n")
    for _ in range(2):  # it crashed in about two runs of three
        run = subprocess.run([sys.executable, str(script)], capture_output=True, timeout=120)
        assert run.returncode == 0, run.stderr.decode()[-2000:]
