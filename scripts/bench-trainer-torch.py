#!/usr/bin/env python3
"""PyTorch CPU reference for scripts/bench-trainer.ts.

Builds the same decoder (llama layout: RMSNorm, rotary embeddings, grouped-query attention, SwiGLU MLP, separate
output matrix) with random frozen float32 weights, puts LoRA on the same projections with the same rank, and runs
the same kind of step: forward, masked token loss (SFT cross-entropy or the clipped-ratio RL loss), backward,
gradient clipping and AdamW. Prints one JSON line with tokens/s and peak resident memory.
Run with Debian's interpreter: /usr/bin/python3 scripts/bench-trainer-torch.py --help
"""
import argparse
import json
import math
import resource
import time

import torch
import torch.nn.functional as F


class Lora(torch.nn.Module):
    def __init__(self, d_in, d_out, rank, alpha):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(d_out, d_in) / math.sqrt(d_in), requires_grad=False)
        bound = 1 / math.sqrt(d_in)
        self.a = torch.nn.Parameter(torch.empty(rank, d_in).uniform_(-bound, bound))
        self.b = torch.nn.Parameter(torch.zeros(d_out, rank))
        self.scale = alpha / rank

    def forward(self, x):
        return F.linear(x, self.weight) + F.linear(F.linear(x, self.a), self.b) * self.scale


def rms_norm(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


class Block(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        hd = a.embd // a.heads
        self.heads, self.kv, self.hd = a.heads, a.kv_heads, hd
        self.q = Lora(a.embd, a.heads * hd, a.rank, a.alpha)
        self.k = Lora(a.embd, a.kv_heads * hd, a.rank, a.alpha)
        self.v = Lora(a.embd, a.kv_heads * hd, a.rank, a.alpha)
        self.o = Lora(a.heads * hd, a.embd, a.rank, a.alpha)
        self.gate = Lora(a.embd, a.ff, a.rank, a.alpha)
        self.up = Lora(a.embd, a.ff, a.rank, a.alpha)
        self.down = Lora(a.ff, a.embd, a.rank, a.alpha)
        self.n1 = torch.nn.Parameter(torch.ones(a.embd), requires_grad=False)
        self.n2 = torch.nn.Parameter(torch.ones(a.embd), requires_grad=False)

    def forward(self, h, cos, sin):
        B, T, _ = h.shape
        x = rms_norm(h, self.n1)
        q = self.q(x).view(B, T, self.heads, self.hd).transpose(1, 2)
        k = self.k(x).view(B, T, self.kv, self.hd).transpose(1, 2)
        v = self.v(x).view(B, T, self.kv, self.hd).transpose(1, 2)

        def rope(t):
            t1, t2 = t.chunk(2, dim=-1)
            return t * cos + torch.cat((-t2, t1), dim=-1) * sin

        q, k = rope(q), rope(k)
        g = self.heads // self.kv
        k = k.repeat_interleave(g, dim=1)
        v = v.repeat_interleave(g, dim=1)
        mask = torch.full((T, T), float("-inf")).triu(1)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.hd) + mask, dim=-1)
        out = (att @ v).transpose(1, 2).reshape(B, T, -1)
        h = h + self.o(out)
        x = rms_norm(h, self.n2)
        return h + self.down(F.silu(self.gate(x)) * self.up(x))


class Model(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embd = torch.nn.Parameter(torch.randn(a.vocab, a.embd), requires_grad=False)
        self.blocks = torch.nn.ModuleList([Block(a) for _ in range(a.layers)])
        self.norm = torch.nn.Parameter(torch.ones(a.embd), requires_grad=False)
        self.out = torch.nn.Parameter(torch.randn(a.vocab, a.embd) / math.sqrt(a.embd), requires_grad=False)
        hd = a.embd // a.heads
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(a.seq).float(), inv)
        self.cos = torch.cat((ang.cos(), ang.cos()), -1)
        self.sin = torch.cat((ang.sin(), ang.sin()), -1)

    def forward(self, tokens):
        T = tokens.shape[1]
        h = self.embd[tokens]
        for b in self.blocks:
            h = b(h, self.cos[:T], self.sin[:T])
        return F.linear(rms_norm(h, self.norm), self.out)


def main():
    p = argparse.ArgumentParser()
    for name, default in [("vocab", 1050), ("embd", 128), ("layers", 4), ("heads", 4), ("kv_heads", 2), ("ff", 384),
                          ("rank", 8), ("batch", 8), ("seq", 64), ("steps", 5), ("threads", 1)]:
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=int, default=default)
    p.add_argument("--alpha", type=float, default=16)
    p.add_argument("--mode", choices=["sft", "rl"], default="sft")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Model(a)
    params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq))
    mask = torch.zeros(a.batch, a.seq - 1)
    mask[:, (a.seq - 1) // 2:] = 1  # the answer half is trained
    old = torch.full((a.batch, a.seq - 1), -7.0)
    adv = torch.linspace(-1, 1, a.batch).unsqueeze(1)
    times = []
    for step in range(a.steps + 1):
        t0 = time.perf_counter()
        logits = model(tokens[:, :-1])
        # Each sequence is one micro-batch of a larger step in the tfjs trainer; here the batch goes at once.
        lp = torch.log_softmax(logits, -1).gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)
        if a.mode == "sft":
            loss = -(lp * mask).sum() / mask.sum()
        else:
            w = torch.exp(lp.detach() - old).clamp(0.0, 5.0)
            loss = -(w * adv * lp * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step > 0:  # the first step warms up allocators
            times.append(time.perf_counter() - t0)
    times.sort()
    median = times[len(times) // 2]
    print(json.dumps({
        "tokens_per_second": a.batch * a.seq / median,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "threads": a.threads,
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
