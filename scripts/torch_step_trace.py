#!/usr/bin/env python3
"""Record a PyTorch profiler (Kineto) trace of training steps of a Llama-style decoder stack on
one GPU, for `pipewright calibrate --from-trace`, and time the forward and backward passes with
CUDA events so that a prediction of the same layers can be checked against them.

The model is written here in plain PyTorch: RMSNorm, grouped-query attention through
scaled_dot_product_attention (causal, RoPE), a SwiGLU MLP, no biases, bf16 weights, SGD.
Defaults: the layer of Llama 3 8B (hidden 4096, 32 heads, 8 key/value groups, ffn 14336) at
sequence 4096, micro-batch 1, 4 layers, vocabulary 128256.

  python3 scripts/torch_step_trace.py --out step.json [--layers 4 --seq 4096 ...]

Prints one line per measured quantity (median over --steps timed steps after --warmup) and a JSON
summary (--summary FILE) with the configuration and the times.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (x.float() * rstd).to(x.dtype) * self.weight


def rope_tables(seq, head_dim, device, theta=500000.0):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    ang = torch.outer(torch.arange(seq, device=device).float(), inv)  # [seq, head_dim/2]
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    # x: [batch, heads, seq, head_dim]; pairs (2j, 2j+1) turn by the position's angle
    x1, x2 = x[..., 0::2], x[..., 1::2]
    c, s = cos.to(x.dtype), sin.to(x.dtype)
    out = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    return out.flatten(-2)


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.heads, self.groups = a.heads, a.kv_heads
        self.head_dim = a.hidden // a.heads
        self.norm1 = RMSNorm(a.hidden)
        self.q = nn.Linear(a.hidden, a.heads * self.head_dim, bias=False)
        self.kv = nn.Linear(a.hidden, 2 * a.kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(a.heads * self.head_dim, a.hidden, bias=False)
        self.norm2 = RMSNorm(a.hidden)
        self.gate_up = nn.Linear(a.hidden, 2 * a.ffn, bias=False)
        self.down = nn.Linear(a.ffn, a.hidden, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(h).view(b, s, 2, self.groups, self.head_dim).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = self.heads // self.groups
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(att.transpose(1, 2).reshape(b, s, -1))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Model(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.hidden)
        self.blocks = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = RMSNorm(a.hidden)
        self.head = nn.Linear(a.hidden, a.vocab, bias=False)

    def forward(self, tokens, cos, sin):
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.head(self.norm(x))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="Chrome trace to write")
    p.add_argument("--summary", help="JSON summary to write")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=14336)
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--profile-steps", type=int, default=2)
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model (fused element-wise kernels, as a tuned stack)")
    a = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_step_trace.py: no CUDA device")
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = Model(a).to(device=dev, dtype=torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    run = torch.compile(model) if a.compile else model
    cos, sin = rope_tables(a.seq, a.hidden // a.heads, dev)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
    targets = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)

    def step(times=None):
        e = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        e[0].record()
        logits = run(tokens, cos, sin)
        loss = F.cross_entropy(logits.view(-1, a.vocab).float(), targets.view(-1))
        e[1].record()
        loss.backward()
        e[2].record()
        opt.step()
        opt.zero_grad(set_to_none=True)
        e[3].record()
        if times is not None:
            torch.cuda.synchronize()
            times.append([e[0].elapsed_time(e[1]), e[1].elapsed_time(e[2]),
                          e[2].elapsed_time(e[3])])
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(a.steps):
        step(times)
    fwd = statistics.median(t[0] for t in times)
    bwd = statistics.median(t[1] for t in times)
    optim = statistics.median(t[2] for t in times)

    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
        for _ in range(a.profile_steps):
            step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(a.out)

    n_params = sum(t.numel() for t in model.parameters())
    block_params = sum(t.numel() for t in model.blocks.parameters())
    props = torch.cuda.get_device_properties(0)
    summary = {
        "device": props.name, "sms": props.multi_processor_count,
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "config": vars(a), "compiled": a.compile, "params": n_params, "block_params": block_params,
        "forward_ms": fwd, "backward_ms": bwd, "optimizer_ms": optim,
        "samples_ms": times, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(f"device {props.name} ({props.multi_processor_count} SMs), torch {torch.__version__}")
    print(f"model: {a.layers} layers h={a.hidden} heads={a.heads} kv={a.kv_heads} ffn={a.ffn} "
          f"vocab={a.vocab} seq={a.seq} batch={a.batch}: {n_params / 1e9:.3f} B parameters"
          f"{' (torch.compile)' if a.compile else ''}")
    print(f"forward {fwd:.3f} ms  backward {bwd:.3f} ms  optimizer {optim:.3f} ms "
          f"(median of {a.steps} steps)")
    if a.summary:
        with open(a.summary, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
