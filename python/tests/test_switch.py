"""ferry.switch.Client against a real `ferry serve` (FERRY_TOOL names the tool; without it these
tests skip): a served MLP with weights from a safetensors file answers as the same model run
here, unknown models and wrong inputs raise ferry.SwitchError with the server's code, and the
server drains and exits 0 on SIGTERM. Every wait is bounded."""

import os
import signal
import subprocess
import time

import numpy as np
import pytest

import ferry
from ferry import nn

TOOL = os.environ.get("FERRY_TOOL")
pytestmark = pytest.mark.skipif(not TOOL or not os.path.exists(TOOL),
                                reason="FERRY_TOOL does not name a ferry tool")


@pytest.fixture
def server(tmp_path):
    model = nn.models.mlp(8, [16], 3, seed=11)
    weights = tmp_path / "tiny.safetensors"
    ferry.safetensors.save_file(model.state_dict(), str(weights))
    (tmp_path / "models.toml").write_text(
        '[models.tiny]\narch = "mlp"\nin_features = 8\nhidden = [16]\nout_features = 3\n'
        'weights = "tiny.safetensors"\n')
    socket = tmp_path / "run" / "ferry.sock"
    proc = subprocess.Popen([TOOL, "serve", "--devices", "sim:0", "--models",
                             str(tmp_path / "models.toml"), "--socket", str(socket)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not socket.exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "ferry serve did not create its socket in 60 s"
        time.sleep(0.05)
    yield model, str(socket), proc
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


def test_served_model_answers_as_the_model_run_here(server, rng):
    model, socket, proc = server
    client = ferry.switch.Client(socket)
    x = ferry.tensor(rng.standard_normal((4, 8)).astype(np.float32))
    result = client.infer("tiny", {"x": x})
    assert sorted(result.outputs) == ["y"]
    with ferry.no_grad():
        expected = model.eval()(x).numpy()
    np.testing.assert_allclose(result.outputs["y"].numpy(), expected, rtol=1e-6, atol=1e-7)
    assert set(result.timings) == {"queue_ms", "transfer_ms", "compute_ms"}
    assert all(v >= 0 for v in result.timings.values())
    assert client.connected
    # A one-input model takes a bare tensor too.
    again = client.infer("tiny", x)
    assert again.outputs["y"].tolist() == result.outputs["y"].tolist()

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def test_errors_carry_the_servers_code(server):
    _, socket, _ = server
    client = ferry.switch.Client(socket)
    with pytest.raises(ferry.SwitchError) as e:
        client.infer("missing", ferry.zeros(1, 8))
    assert e.value.code == "unknown_model" and "tiny" in str(e.value)
    with pytest.raises(ferry.SwitchError) as e:
        client.infer("tiny", {"x": ferry.zeros(2, 5)})
    assert e.value.code == "bad_input"
    assert isinstance(e.value, ferry.Error)
    with pytest.raises(TypeError, match="expected the inputs as a Tensor"):
        client.infer("tiny", "x")
    with pytest.raises(TypeError, match="exactly one of socket= .* and port="):
        ferry.switch.Client()
