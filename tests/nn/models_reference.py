# Reference outputs for the model tests (tests/nn/models_torch_test.cc), from code ferry did not
# write: torchvision's resnet18/resnet50, torch.nn's TransformerEncoderLayer and
# MultiheadAttention, and a BERT encoder written here with torch.nn following Hugging Face's
# BertModel structure and names. Weights are random (batch-norm statistics too); each case is
# saved as a safetensors file (written with struct and json) holding the weights under their
# PyTorch names, plus "input.*"/"output.*" tensors, "grad.*" / "grad64.*" (the parameters'
# gradients after one train-mode step, in float32 / float64) and "after.*" (buffers after it).
# Usage: /usr/bin/python3 models_reference.py OUT_DIR [SEED]
import json
import math
import struct
import sys

import torch
import torchvision
from torch import nn

DTYPES = {torch.float64: ("F64", 8), torch.float32: ("F32", 4), torch.int64: ("I64", 8), torch.bool: ("BOOL", 1)}


def save(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        code, size = DTYPES[t.dtype]
        blob = t.numpy().tobytes() if t.dtype != torch.bool else bytes(t.to(torch.uint8).flatten().tolist())
        assert len(blob) == t.numel() * size
        header[name] = {"dtype": code, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def randomize_batch_norms(model):
    # torchvision leaves BN at weight 1, bias 0, mean 0, var 1: draw them so eval mode tests them.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.num_batches_tracked.fill_(7)


def resnet_case(out_dir, name, size):
    model = getattr(torchvision.models, name)(weights=None)
    randomize_batch_norms(model)
    x = torch.randn(2, 3, size, size)
    tensors = {k: v.clone() for k, v in model.state_dict().items()}  # before any forward
    model.eval()
    with torch.no_grad():
        tensors["output.eval"] = model(x)
    model.train()  # one step: batch statistics, the running ones updated
    with torch.no_grad():
        out = model(x)
    tensors["output.train"] = out
    # Gradients of that step in float64: in float32 a near-tie of a max-pool window or a ReLU
    # input near 0 can round either way and reroute a gradient, so float32 gradients of two
    # correct implementations may differ by a lot; in float64 that is vanishingly rare.
    model64 = getattr(torchvision.models, name)(weights=None)
    model64.load_state_dict({k: v for k, v in tensors.items() if not k.startswith("output.")})
    model64.double().train()
    out64 = model64(x.double())
    grad_output = torch.randn_like(out64)
    (out64 * grad_output).sum().backward()
    tensors["input.grad_output"] = grad_output
    for key, param in model64.named_parameters():
        tensors["grad64." + key] = param.grad
    for key, value in model.state_dict().items():
        if "running" in key or "num_batches" in key:
            tensors["after." + key] = value
    tensors["input.x"] = x
    save(f"{out_dir}/{name}.safetensors", tensors)


# ---- a BERT encoder with Hugging Face's module names ---------------------------------------
CFG = dict(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
           intermediate_size=128, max_position_embeddings=32, type_vocab_size=2,
           layer_norm_eps=1e-12)


class Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab_size"], c["hidden_size"], padding_idx=0)
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], c["hidden_size"])
        self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(0.0)

    def forward(self, ids, types):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.word_embeddings(ids) + self.token_type_embeddings(types)
        return self.dropout(self.LayerNorm(x + self.position_embeddings(pos)))


class SelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.heads, self.size = c["num_attention_heads"], h // c["num_attention_heads"]
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.dropout = nn.Dropout(0.0)

    def forward(self, x, mask):
        b, s, _ = x.shape
        split = lambda t: t.view(b, s, self.heads, self.size).permute(0, 2, 1, 3)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.size) + mask
        ctx = self.dropout(scores.softmax(-1)) @ v
        return ctx.permute(0, 2, 1, 3).reshape(b, s, -1)


class ResidualOutput(nn.Module):
    def __init__(self, n_in, c):
        super().__init__()
        self.dense = nn.Linear(n_in, c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(0.0)

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = SelfAttention(c)
        self.output = ResidualOutput(c["hidden_size"], c)

    def forward(self, x, mask):
        return self.output(self.self(x, mask), x)


class Intermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])

    def forward(self, x):
        return nn.functional.gelu(self.dense(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = Attention(c)
        self.intermediate = Intermediate(c)
        self.output = ResidualOutput(c["intermediate_size"], c)

    def forward(self, x, mask):
        a = self.attention(x, mask)
        return self.output(self.intermediate(a), a)


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([Layer(c) for _ in range(c["num_hidden_layers"])])

    def forward(self, x, mask):
        for layer in self.layer:
            x = layer(x, mask)
        return x


class Pooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])

    def forward(self, x):
        return torch.tanh(self.dense(x[:, 0]))


class Bert(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = Embeddings(c)
        self.encoder = Encoder(c)
        self.pooler = Pooler(c)

    def forward(self, ids, mask, types):
        m = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        hidden = self.encoder(self.embeddings(ids, types), m)
        return hidden, self.pooler(hidden)


def bert_case(out_dir):
    model = Bert(CFG)
    with torch.no_grad():  # non-trivial LayerNorm affine parameters
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
    ids = torch.randint(1, CFG["vocab_size"], (2, 8))
    ids[1, 6:] = 0  # padding
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, 6:] = 0
    types = torch.zeros(2, 8, dtype=torch.int64)
    types[:, 4:] = 1
    tensors = {k: v.clone() for k, v in model.state_dict().items()}  # before any forward
    for mode in ("eval", "train"):
        model.train(mode == "train")
        hidden, pooled = model(ids, mask, types)
        tensors[f"output.{mode}.last_hidden_state"] = hidden.detach()
        tensors[f"output.{mode}.pooler_output"] = pooled.detach()
    # Gradients of the train-mode outputs against random output gradients.
    g_hidden, g_pooled = torch.randn_like(hidden), torch.randn_like(pooled)
    ((hidden * g_hidden).sum() + (pooled * g_pooled).sum()).backward()
    tensors["input.grad_hidden"], tensors["input.grad_pooled"] = g_hidden, g_pooled
    for key, param in model.named_parameters():
        tensors["grad." + key] = param.grad
    tensors.update({"input.input_ids": ids, "input.attention_mask": mask,
                    "input.token_type_ids": types})
    save(f"{out_dir}/bert.safetensors", tensors)


def transformer_case(out_dir):
    tensors = {}
    for norm_first, act in ((False, "relu"), (True, "gelu")):
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation=act,
                                           batch_first=True, norm_first=norm_first)
        tag = f"{act}.{'pre' if norm_first else 'post'}"
        x = torch.randn(2, 5, 32)
        layer.eval()
        with torch.no_grad():
            y = layer(x)
        for k, v in layer.state_dict().items():
            tensors[f"{tag}.{k}"] = v
        tensors[f"{tag}.input"] = x
        tensors[f"{tag}.output"] = y
    mha = nn.MultiheadAttention(32, 4)  # sequence first
    with torch.no_grad():
        mha.in_proj_bias.normal_(0.0, 0.1)
        mha.out_proj.bias.normal_(0.0, 0.1)
    q, k, v = torch.randn(5, 2, 32), torch.randn(7, 2, 32), torch.randn(7, 2, 32)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[0, 5:] = True
    with torch.no_grad():
        out, weights = mha(q, k, v, key_padding_mask=pad, need_weights=True)
    for key, value in mha.state_dict().items():
        tensors[f"mha.{key}"] = value
    tensors.update({"mha.q": q, "mha.k": k, "mha.v": v, "mha.pad": pad, "mha.out": out,
                    "mha.weights": weights})
    save(f"{out_dir}/transformer.safetensors", tensors)


if __name__ == "__main__":
    out_dir = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    resnet_case(out_dir, "resnet18", 64)
    resnet_case(out_dir, "resnet50", 64)
    bert_case(out_dir)
    transformer_case(out_dir)
    print(f"wrote reference models to {out_dir} (torch {torch.__version__}, "
          f"torchvision {torchvision.__version__}, seed {seed})")
