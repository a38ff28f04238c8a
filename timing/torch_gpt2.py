#!/usr/bin/env python3
"""GPT-2 training in PyTorch, the same model, data order and AdamW as tsr_gpt2,
for comparisons in one run (timing/gpu_node.sh torch; docs/gpu.md).

Reads an llm.c checkpoint (version 3, float32: `tsr_gpt2 --steps 0
--write-checkpoint FILE` writes the initial one) and an llm.c token file,
trains with batches taken in order (as `tsr_gpt2 --no-shuffle`) and prints
a line a step and a summary line like tsr_gpt2's:

  summary: ... median step X ms, Y tokens/ms ...

fp32 (TF32 matmuls on CUDA, as tsr_gpt2 and llm.c) or bf16 (autocast, float32
master weights and loss), eager or torch.compile; attention by
scaled_dot_product_attention where PyTorch has it; AdamW fused on CUDA.

  torch_gpt2.py --load CKPT [--train FILE] [-B 8] [-T 1024] [--steps 20]
                [--precision fp32|bf16] [--compile] [--device cuda|cpu]
                [--lr 1e-4] [--beta1 0.9] [--beta2 0.999] [--eps 1e-8] [--wd 0]
"""
import argparse
import math
import os
import statistics
import struct
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("torch_gpt2.py: this python3 has no torch (install python3-torch, or use the GPU node's python3)")

CKPT_MAGIC, CKPT_VERSION, TOKENS_MAGIC = 20240326, 3, 20240520
HEADER_INTS = 256


def fail(msg):
    sys.exit(f"torch_gpt2.py: {msg}")


def read_header(f, path, what):
    raw = f.read(HEADER_INTS * 4)
    if len(raw) != HEADER_INTS * 4:
        fail(f"{path}: shorter than an llm.c {what} header")
    return struct.unpack(f"<{HEADER_INTS}i", raw)


def load_checkpoint(path):
    """The config (maxT, V, L, NH, C, Vp) and llm.c's 16 parameter tensors."""
    with open(path, "rb") as f:
        h = read_header(f, path, "checkpoint")
        if h[0] != CKPT_MAGIC or h[1] != CKPT_VERSION:
            fail(f"{path}: not an llm.c float32 checkpoint (magic {h[0]}, version {h[1]}; want {CKPT_MAGIC}, 3)")
        maxT, V, L, NH, C, Vp = h[2], h[3], h[4], h[5], h[6], h[7]
        if min(maxT, V, L, NH, C) < 1 or Vp < V or C % NH or C > 65536 or L > 1024 or Vp > 1 << 22:
            fail(f"{path}: implausible model maxT {maxT} V {V} L {L} NH {NH} C {C} Vp {Vp}")
        shapes = [("wte", (Vp, C)), ("wpe", (maxT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
                  ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)), ("attprojb", (L, C)),
                  ("ln2w", (L, C)), ("ln2b", (L, C)), ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)),
                  ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)), ("lnfw", (C,)), ("lnfb", (C,))]
        count = sum(math.prod(s) for _, s in shapes)
        size = os.fstat(f.fileno()).st_size
        if size != (HEADER_INTS + count) * 4:
            fail(f"{path}: {size} bytes, the header's model needs {(HEADER_INTS + count) * 4}")
        data = f.read(count * 4)
    flat = torch.frombuffer(bytearray(data), dtype=torch.float32)
    params, at = {}, 0
    for name, shape in shapes:
        n = math.prod(shape)
        params[name] = flat[at:at + n].view(shape).clone()
        at += n
    return dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp), params


def load_tokens(path, V):
    with open(path, "rb") as f:
        h = read_header(f, path, "token file")
        if h[0] != TOKENS_MAGIC or h[1] != 1:
            fail(f"{path}: not an llm.c token file (magic {h[0]}, version {h[1]})")
        data = f.read()
    if len(data) != 2 * h[2]:
        fail(f"{path}: {len(data) // 2} tokens, its header says {h[2]}")
    tokens = torch.frombuffer(bytearray(data), dtype=torch.int16).to(torch.int32) & 0xFFFF
    if tokens.numel() and int(tokens.max()) >= V:
        fail(f"{path}: token {int(tokens.max())} is not in the model's vocabulary of {V}")
    return tokens.to(torch.long)


class GPT2(torch.nn.Module):
    """llm.c's GPT-2: pre-norm blocks, tanh GELU, the LM head tied to wte,
    the loss over the first V of Vp padded logits."""

    def __init__(self, cfg, params):
        super().__init__()
        self.cfg = cfg
        self.p = torch.nn.ParameterDict({k: torch.nn.Parameter(v) for k, v in params.items()})

    def attention(self, qkv, B, T):
        C, NH = self.cfg["C"], self.cfg["NH"]
        q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in qkv.split(C, dim=2))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch before 2.0
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
            mask = torch.ones(T, T, dtype=torch.bool, device=qkv.device).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        return y.transpose(1, 2).reshape(B, T, C)

    def forward(self, idx, targets):
        p, c = self.p, self.cfg
        B, T = idx.shape
        x = p["wte"][idx] + p["wpe"][:T]
        for l in range(c["L"]):
            h = F.layer_norm(x, (c["C"],), p["ln1w"][l], p["ln1b"][l], 1e-5)
            h = self.attention(F.linear(h, p["qkvw"][l], p["qkvb"][l]), B, T)
            x = x + F.linear(h, p["attprojw"][l], p["attprojb"][l])
            h = F.layer_norm(x, (c["C"],), p["ln2w"][l], p["ln2b"][l], 1e-5)
            h = F.gelu(F.linear(h, p["fcw"][l], p["fcb"][l]), approximate="tanh")
            x = x + F.linear(h, p["fcprojw"][l], p["fcprojb"][l])
        x = F.layer_norm(x, (c["C"],), p["lnfw"], p["lnfb"], 1e-5)
        logits = F.linear(x, p["wte"][: c["V"]])
        return F.cross_entropy(logits.float().view(B * T, -1), targets.view(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--load", required=True, help="llm.c checkpoint (version 3)")
    ap.add_argument("--train", default=os.path.join(here, "..", "algorithms", "gpt2", "data",
                                                    "tiny_shakespeare_train.bin"))
    ap.add_argument("-B", type=int, default=8)
    ap.add_argument("-T", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch 2)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    for name, default in (("lr", 1e-4), ("beta1", 0.9), ("beta2", 0.999), ("eps", 1e-8), ("wd", 0.0)):
        ap.add_argument(f"--{name}", type=float, default=default)
    a = ap.parse_args()
    if not (1 <= a.B <= 1 << 20 and 1 <= a.T <= 1 << 20 and 0 <= a.steps <= 1 << 30):
        fail(f"-B {a.B}, -T {a.T}, --steps {a.steps}: out of range")
    if not (math.isfinite(a.lr) and a.lr >= 0 and 0 <= a.beta1 < 1 and 0 <= a.beta2 < 1 and a.eps > 0 and a.wd >= 0):
        fail("--lr, --beta1, --beta2, --eps, --wd: AdamW needs lr >= 0, 0 <= betas < 1, eps > 0, wd >= 0")
    if a.device == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: this PyTorch sees no GPU")
    if a.compile and not hasattr(torch, "compile"):
        fail(f"--compile: PyTorch {torch.__version__} has no torch.compile")

    try:
        cfg, params = load_checkpoint(a.load)
        if a.T > cfg["maxT"]:
            fail(f"-T {a.T} is longer than the model's maxT {cfg['maxT']}")
        tokens = load_tokens(a.train, cfg["V"])
    except OSError as e:
        fail(f"{e.filename}: {e.strerror}")
    batches = (tokens.numel() - 1) // (a.B * a.T)
    if batches < 1:
        fail(f"{a.train}: {tokens.numel()} tokens, fewer than one batch of B {a.B} x T {a.T} + 1")
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    model = GPT2(cfg, params).to(dev)
    opt_args = dict(lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps, weight_decay=a.wd)
    try:
        opt = torch.optim.AdamW(model.parameters(), fused=dev.type == "cuda", **opt_args)
    except TypeError:  # PyTorch before 2.0: no fused AdamW
        opt = torch.optim.AdamW(model.parameters(), **opt_args)
    step_fn = torch.compile(model) if a.compile else model
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16")

    times = []
    for step in range(a.steps):
        at = (step % batches) * a.B * a.T  # batches in order, as tsr_gpt2 --no-shuffle
        chunk = tokens[at:at + a.B * a.T + 1].to(dev)
        x, y = chunk[:-1].view(a.B, a.T), chunk[1:].view(a.B, a.T)
        t0 = time.perf_counter()
        with amp:
            loss = step_fn(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()  # waits for the step
        ms = (time.perf_counter() - t0) * 1e3
        times.append(ms)
        print(f"step {step}: train loss {value:.6f} (took {ms:.1f} ms, {a.B * a.T / ms:.4f} tokens/ms)", flush=True)
    steady = times[2:] if len(times) > 3 else times  # the first steps warm up (and compile)
    if steady:
        med = statistics.median(steady)
        print(f"summary: torch {torch.__version__} {a.device} {a.precision}{' compiled' if a.compile else ' eager'}, "
              f"B {a.B} T {a.T}; median step {med:.1f} ms, {a.B * a.T / med:.4f} tokens/ms "
              f"({len(steady)} steps after the first {len(times) - len(steady)})")


if __name__ == "__main__":
    main()
