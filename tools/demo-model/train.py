#!/usr/bin/python3
"""Trains kvscope's demo model: a small Llama on the corpus from make_corpus.py.

Writes a Hugging Face-style folder (config.json + model.safetensors, Llama
names, HF rotary order) that `kvscope-cli convert` turns into GGUF. The folder
is rewritten at every checkpoint, so an interrupted run still leaves a usable
model; training.pt holds the state --resume continues from.

Deterministic for a given corpus, seed and thread count. Needs only PyTorch
(Debian: python3-torch) and numpy.
"""
import argparse
import json
import math
import os
import random
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BOS, EOS = 1, 2


class Config:
    def __init__(self, **kw):
        self.vocab = kw.get("vocab", 512)
        self.dim = kw.get("dim", 128)
        self.layers = kw.get("layers", 6)
        self.heads = kw.get("heads", 2)
        self.kv_heads = kw.get("kv_heads", 1)
        self.hidden = kw.get("hidden", 384)
        self.context = kw.get("context", 512)
        self.rope_theta = 10000.0
        self.norm_eps = 1e-5

    @property
    def head_dim(self):
        return self.dim // self.heads


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(cfg, length):
    # HF Llama layout: the two halves of a head are the rotated pairs.
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2).float() / cfg.head_dim))
    angles = torch.outer(torch.arange(length).float(), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.q_proj = nn.Linear(cfg.dim, cfg.heads * hd, bias=False)
        self.k_proj = nn.Linear(cfg.dim, cfg.kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(cfg.dim, cfg.kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.heads * hd, cfg.dim, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        c = self.cfg
        q = self.q_proj(x).view(b, t, c.heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        group = c.heads // c.kv_heads  # query head h reads kv head h // group
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c.head_dim) + mask
        out = F.softmax(scores, dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, t, c.dim))


class Mlp(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.dim, cfg.hidden, bias=False)
        self.up_proj = nn.Linear(cfg.dim, cfg.hidden, bias=False)
        self.down_proj = nn.Linear(cfg.hidden, cfg.dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.mlp = Mlp(cfg)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        cos, sin = rope_tables(cfg, cfg.context)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        mask = torch.full((cfg.context, cfg.context), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                # Residual-branch outputs start smaller so depth does not blow up the stream.
                scale = 1 / math.sqrt(2 * cfg.layers) if name.endswith(("o_proj.weight", "down_proj.weight")) else 1
                nn.init.normal_(p, std=0.02 * scale)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.embed_tokens(tokens)
        cos, sin, mask = self.cos[:t], self.sin[:t], self.mask[:t, :t]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.lm_head(self.norm(x))

    def hf_state(self):
        """Parameters under Hugging Face LlamaForCausalLM names."""
        out = {}
        for name, p in self.named_parameters():
            out[name if name.startswith("lm_head") else "model." + name] = p.detach()
        return out


def load_corpus(path, held_out, seed):
    """Shuffles the records and splits them; returns two flat token streams."""
    records = [json.loads(line)["tokens"] for line in open(path)]
    random.Random(seed).shuffle(records)
    n_val = max(1, int(len(records) * held_out))
    flat = lambda rs: np.array([t for r in rs for t in r], dtype=np.int64)
    return flat(records[n_val:]), flat(records[:n_val]), len(records)


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        data = tensors[name].float().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


def write_hf_folder(folder, model, cfg):
    os.makedirs(folder, exist_ok=True)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": cfg.vocab, "hidden_size": cfg.dim, "intermediate_size": cfg.hidden,
        "num_hidden_layers": cfg.layers, "num_attention_heads": cfg.heads,
        "num_key_value_heads": cfg.kv_heads, "head_dim": cfg.head_dim,
        "max_position_embeddings": cfg.context, "rms_norm_eps": cfg.norm_eps,
        "rope_theta": cfg.rope_theta, "tie_word_embeddings": False, "hidden_act": "silu",
        "bos_token_id": BOS, "eos_token_id": EOS, "torch_dtype": "float32",
    }
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_safetensors(os.path.join(folder, "model.safetensors"), model.hf_state())


@torch.no_grad()
def evaluate(model, stream, context, max_windows):
    """Mean per-token loss over consecutive, non-overlapping windows."""
    model.eval()
    total, count = 0.0, 0
    n = min(max_windows, (len(stream) - 1) // context)
    for i in range(0, n, 8):
        rows = range(i, min(i + 8, n))
        x = torch.stack([torch.from_numpy(stream[j * context:(j + 1) * context]) for j in rows])
        y = torch.stack([torch.from_numpy(stream[j * context + 1:(j + 1) * context + 1]) for j in rows])
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum")
        total += loss.item()
        count += y.numel()
    model.train()
    return total / count


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * min(progress, 1.0)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--corpus", required=True)
    p.add_argument("--out", required=True, help="output folder (HF layout + training.pt)")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--kv-heads", type=int, default=1)
    p.add_argument("--hidden", type=int, default=384)
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--held-out", type=float, default=0.05, help="fraction of records held out")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-windows", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--time-steps", type=int, default=0, help="only time this many steps, then exit")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    train, val, n_records = load_corpus(args.corpus, args.held_out, args.seed)
    print(f"corpus: {n_records} records, {len(train)} train tokens, {len(val)} held-out tokens",
          flush=True)
    cfg = Config(dim=args.dim, layers=args.layers, heads=args.heads, kv_heads=args.kv_heads,
                 hidden=args.hidden, context=args.context)
    model = Llama(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters, dim {cfg.dim}, {cfg.layers} layers, "
          f"{cfg.heads} heads / {cfg.kv_heads} kv heads of {cfg.head_dim}, ffn {cfg.hidden}",
          flush=True)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    os.makedirs(args.out, exist_ok=True)
    state_path = os.path.join(args.out, "training.pt")
    step = 0
    gen = torch.Generator().manual_seed(args.seed)
    if args.resume and os.path.exists(state_path):
        state = torch.load(state_path)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        gen.set_state(state["generator"])
        step = state["step"]
        print(f"resumed at step {step}", flush=True)

    start = time.time()
    while step < args.steps:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        starts = torch.randint(0, len(train) - args.context - 1, (args.batch,), generator=gen)
        x = torch.stack([torch.from_numpy(train[s:s + args.context]) for s in starts.tolist()])
        y = torch.stack([torch.from_numpy(train[s + 1:s + args.context + 1]) for s in starts.tolist()])
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        elapsed = time.time() - start
        if args.time_steps and step >= args.time_steps:
            print(f"{step} steps in {elapsed:.1f} s: {elapsed / step:.2f} s/step", flush=True)
            return
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f} lr {lr_at(step, args):.2e} "
                  f"{elapsed:.0f} s", flush=True)
        if step % args.eval_every == 0 or step == args.steps:
            val_loss = evaluate(model, val, args.context, args.eval_windows)
            print(f"eval step {step} held-out loss {val_loss:.4f} ppl {math.exp(val_loss):.3f}",
                  flush=True)
            write_hf_folder(args.out, model, cfg)
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "generator": gen.get_state(), "step": step}, state_path + ".tmp")
            os.replace(state_path + ".tmp", state_path)
    val_loss = evaluate(model, val, args.context, 10**9)
    print(f"final held-out loss {val_loss:.4f} ppl {math.exp(val_loss):.3f} "
          f"({len(val)} tokens)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
