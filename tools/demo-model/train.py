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
        # YaRN: positions of a context `yarn` times the one the RoPE was
        # trained at (1: none), as the engine applies it (model/description.cpp).
        self.yarn = kw.get("yarn", 1.0)

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


def yarn_bounds(cfg):
    """The pair indices where YaRN's ramp from the original angle to the
    interpolated one starts and ends: beta_fast = 32 and beta_slow = 1
    rotations over the original context, floored and ceiled, as the engine
    (and llama.cpp) rounds them."""
    def pair(rotations):
        original = cfg.context / cfg.yarn
        return cfg.head_dim * math.log(original / (rotations * 2 * math.pi)) / (
            2 * math.log(cfg.rope_theta))
    return max(0.0, math.floor(pair(32.0))), min(cfg.head_dim - 1.0, math.ceil(pair(1.0)))


def rope_tables(cfg, length):
    # HF Llama layout: the two halves of a head are the rotated pairs.
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2).float() / cfg.head_dim))
    magnitude = 1.0
    if cfg.yarn != 1.0:
        # Pair i keeps its original frequency below the ramp, turns yarn
        # times slower above it, and mixes the two across it; cos and sin
        # grow by 1 + 0.1 ln(yarn).
        low, high = yarn_bounds(cfg)
        i = torch.arange(cfg.head_dim // 2).float()
        original = 1.0 - ((i - low) / max(0.001, high - low)).clamp(0.0, 1.0)
        inv = inv / cfg.yarn * (1.0 - original) + inv * original
        magnitude = 1.0 + 0.1 * math.log(cfg.yarn)
    angles = torch.outer(torch.arange(length).float(), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos() * magnitude, angles.sin() * magnitude


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

    def forward(self, x, cos, sin, mask, keep=None):
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
        probs = F.softmax(scores, dim=-1)  # [b, heads, t (query), t (key)]
        if keep is not None:
            keep.append(probs)
        return self.o_proj((probs @ v).transpose(1, 2).reshape(b, t, c.dim))


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

    def forward(self, x, cos, sin, mask, keep=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, keep)
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

    def forward(self, tokens, attention=None):
        """Logits [b, t, vocab]. `attention` (a dict layer -> None) gets each
        named layer's attention probabilities [b, heads, t, t]."""
        t = tokens.shape[1]
        x = self.embed_tokens(tokens)
        cos, sin, mask = self.cos[:t], self.sin[:t], self.mask[:t, :t]
        for i, layer in enumerate(self.layers):
            keep = [] if attention is not None and i in attention else None
            x = layer(x, cos, sin, mask, keep)
            if keep:
                attention[i] = keep[0]
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


class CopyTask:
    """Copies that teach a model to retrieve (the recall model). A window of
    the stories may instead be a random half window and its repeat
    (--repeat-halves) or random byte tokens with spans of normal tokens
    planted twice (--random-copies); else it may be tiled from a short piece
    of itself, as the retrieval probe cycles its filler (--tiled), and get
    random spans of normal tokens planted twice (--planted-copies). Planted
    copies lie at distances uniform over the window, so a long one is as
    common as a short one. A first copy cannot be predicted, so its targets
    are not scored; every repeat position names the row an induction head
    should read (the token after the first copy of the current one), for the
    auxiliary attention loss."""

    def __init__(self, args, vocab):
        self.rng = random.Random(args.seed * 7919 + 1)
        self.halves, self.random, self.tiled = args.repeat_halves, args.random_copies, args.tiled
        self.planted, self.max_spans = args.planted_copies, args.spans
        self.ambiguous = args.ambiguous_spans
        self.normal = list(range(args.span_first, vocab))

    def enabled(self):
        return self.halves > 0 or self.random > 0 or self.tiled > 0 or self.planted > 0

    def plant(self, w, span, a, b, ignore, pairs):
        w[a:a + len(span)] = span
        w[b:b + len(span)] = span
        ignore.extend(range(a - 1, a + len(span) - 1))  # targets inside the first copy
        ignore.append(b - 1)  # the repeat's first token
        pairs.extend((b + i, a + i + 1) for i in range(len(span) - 1))

    def apply(self, w):
        """w: ctx + 1 tokens (changed in place). Returns (ignored target
        positions, [(query position, row to read)])."""
        ctx, rng = len(w) - 1, self.rng
        ignore, pairs = [], []
        if self.halves > 0 and rng.random() < self.halves:
            # A random span of half the window and its repeat: every copy is
            # the same distance back, so this teaches reading a copy, not
            # finding one (heads may learn the offset).
            n = ctx // 2
            w[0] = BOS
            self.plant(w, np.array(rng.choices(self.normal, k=n)), 1, 1 + n, ignore, pairs)
            return ignore, pairs
        if self.random > 0 and rng.random() < self.random:
            # Spans planted twice in random byte tokens (the induction task;
            # the copies' distances vary, so no fixed offset predicts them).
            # No normal token occurs twice but in a copy, so the current token
            # alone points at the row to read.
            w[:] = rng.choices(range(3, self.normal[0]), k=len(w))
            w[0] = BOS
            self.plant_spans(w, 4 * self.max_spans, ignore, pairs, distinct=True)
            return ignore, pairs
        if rng.random() < self.tiled:
            piece = w[:rng.randint(48, 256)].copy()
            w[:] = np.resize(piece, len(w))
            w[0] = BOS
        if rng.random() < self.planted:
            # Spans of the window's own tokens: each recurs elsewhere with
            # other successors, so only the token before it tells the copy.
            # (No draw when off, so earlier phases' windows stay as they were.)
            own = sorted({t for t in w.tolist() if t >= self.normal[0]}) if self.ambiguous else []
            pool = own if own and rng.random() < self.ambiguous else None
            self.plant_spans(w, rng.randint(1, self.max_spans), ignore, pairs, tokens=pool)
        return ignore, pairs

    def plant_spans(self, w, count, ignore, pairs, distinct=False, tokens=None):
        """Plants up to `count` random spans of 8-40 tokens twice each, none
        overlapping, the distance between copies uniform over the window;
        `distinct`: no token in two spans or twice in one; `tokens`: drawn
        from these (else from every normal token)."""
        ctx, rng, taken = len(w) - 1, self.rng, []
        pool = rng.sample(self.normal, len(self.normal)) if distinct else None
        for _ in range(count):
            n = rng.randint(8, 40)
            for _ in range(10):
                d = rng.randint(n, ctx - n - 1)
                a = rng.randint(1, ctx - n - d)
                b = a + d
                if all(b + n <= x or y <= a for x, y in taken):
                    break
            else:
                continue
            if distinct:
                if len(pool) < n:
                    break
                span, pool = pool[:n], pool[n:]
            else:
                span = rng.choices(tokens or self.normal, k=n)
            taken.append((a, b + n))
            self.plant(w, np.array(span), a, b, ignore, pairs)

    @torch.no_grad()
    def accuracy(self, model, stream, context, depth, trials):
        """The retrieval probe in miniature: a held-out piece tiled to the
        context, a 32-token span at `depth`, its repeat at the end; the share
        of the repeat's next tokens the model's argmax gets right."""
        model.eval()
        rng = random.Random(12345)
        correct = total = 0
        for _ in range(trials):
            start = rng.randrange(0, len(stream) - 256)
            w = np.resize(stream[start:start + rng.randint(96, 256)], context)
            w[0] = BOS
            n = 32
            b = context - n
            a = 1 + int(depth * (b - n - 1))
            span = np.array(rng.choices(self.normal, k=n))
            w[a:a + n] = span
            w[b:] = span
            pred = model(torch.from_numpy(w)[None])[0, b:context - 1].argmax(-1).numpy()
            correct += int((pred == span[1:]).sum())
            total += n - 1
        model.train()
        return correct / total


def attention_loss(attention, rows, layer, heads):
    """Mean -log of the attention the named heads of `layer` pay to the named
    rows: rows is a list of (batch row, query position, key position)."""
    probs = attention[layer]
    b = torch.tensor([r[0] for r in rows])
    t = torch.tensor([r[1] for r in rows])
    k = torch.tensor([r[2] for r in rows])
    picked = torch.stack([probs[b, h, t, k] for h in heads])
    return -(picked + 1e-9).log().mean()


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
    if cfg.yarn != 1.0:
        config["rope_scaling"] = {"type": "yarn", "factor": cfg.yarn,
                                  "original_max_position_embeddings": round(cfg.context / cfg.yarn)}
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
    p.add_argument("--yarn", type=float, default=1.0,
                   help="YaRN factor: RoPE trained at context / YARN, stretched to the context")
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
    p.add_argument("--init", help="start from this training.pt's weights (a new schedule)")
    g = p.add_argument_group("copy tasks (the recall model; all off by default)")
    g.add_argument("--repeat-halves", type=float, default=0.0,
                   help="share of windows that are a random half window and its repeat")
    g.add_argument("--random-copies", type=float, default=0.0,
                   help="share of windows of random byte tokens with many spans planted twice")
    g.add_argument("--tiled", type=float, default=0.0,
                   help="share of windows tiled from a short piece of themselves")
    g.add_argument("--planted-copies", type=float, default=0.0,
                   help="share of windows with random spans planted twice")
    g.add_argument("--spans", type=int, default=3, help="at most this many spans per window")
    g.add_argument("--ambiguous-spans", type=float, default=0.0,
                   help="share of planted windows whose spans are drawn from the window's own "
                   "normal tokens")
    g.add_argument("--span-first", type=int, default=259,
                   help="first normal token id (stories260K: after <unk>, <s>, </s>, 256 bytes)")
    g.add_argument("--induction-aux", type=float, default=0.0,
                   help="weight of the loss that points the induction heads at the copy")
    g.add_argument("--induction-layer", type=int, default=2)
    g.add_argument("--induction-heads", type=int, default=2, help="heads 0..N-1 of that layer")
    g.add_argument("--prev-aux", type=float, default=0.0,
                   help="weight of the loss that points head 0 of layer 0 at the previous token")
    g.add_argument("--prev2", action="store_true",
                   help="with --prev-aux: also point head 2 of layer 0 at the token before that")
    g.add_argument("--copy-eval", type=int, default=0,
                   help="at each eval, this many miniature probes per depth")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    train, val, n_records = load_corpus(args.corpus, args.held_out, args.seed)
    print(f"corpus: {n_records} records, {len(train)} train tokens, {len(val)} held-out tokens",
          flush=True)
    cfg = Config(dim=args.dim, layers=args.layers, heads=args.heads, kv_heads=args.kv_heads,
                 hidden=args.hidden, context=args.context, yarn=args.yarn)
    model = Llama(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters, dim {cfg.dim}, {cfg.layers} layers, "
          f"{cfg.heads} heads / {cfg.kv_heads} kv heads of {cfg.head_dim}, ffn {cfg.hidden}",
          flush=True)
    if args.init:
        model.load_state_dict(torch.load(args.init)["model"])
        print(f"weights from {args.init}", flush=True)
    copies = CopyTask(args, cfg.vocab)
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

    # The previous-token targets, the same every step: (rows, head of layer 0).
    back = [1, 2] if args.prev2 else [1]
    previous = [([(row, t, t - k) for row in range(args.batch) for t in range(k, args.context)],
                 2 * (k - 1)) for k in back] if args.prev_aux > 0 else []
    start = time.time()
    while step < args.steps:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        starts = torch.randint(0, len(train) - args.context - 1, (args.batch,), generator=gen)
        windows = [train[s:s + args.context + 1].copy() for s in starts.tolist()]
        ignored, pairs = [], []
        if copies.enabled():
            for row, w in enumerate(windows):
                ignore, induction = copies.apply(w)
                ignored += [(row, t) for t in ignore]
                pairs += [(row, t, k) for t, k in induction]
        x = torch.stack([torch.from_numpy(w[:-1]) for w in windows])
        y = torch.stack([torch.from_numpy(w[1:]) for w in windows])
        for row, t in ignored:
            y[row, t] = -100
        attention = {}
        if args.induction_aux > 0:
            attention[args.induction_layer] = None
        if args.prev_aux > 0:
            attention[0] = None
        logits = model(x, attention if attention else None)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100)
        lm_loss = loss.item()
        if args.induction_aux > 0 and pairs:
            loss = loss + args.induction_aux * attention_loss(
                attention, pairs, args.induction_layer, range(args.induction_heads))
        for rows, head in previous:
            loss = loss + args.prev_aux * attention_loss(attention, rows, 0, [head])
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
            aux = f" (lm {lm_loss:.4f})" if loss.item() != lm_loss else ""
            print(f"step {step} loss {loss.item():.4f}{aux} lr {lr_at(step, args):.2e} "
                  f"{elapsed:.0f} s", flush=True)
        if step % args.eval_every == 0 or step == args.steps:
            val_loss = evaluate(model, val, args.context, args.eval_windows)
            print(f"eval step {step} held-out loss {val_loss:.4f} ppl {math.exp(val_loss):.3f}",
                  flush=True)
            if args.copy_eval:
                accuracy = [copies.accuracy(model, val, args.context, d, args.copy_eval)
                            for d in (0.1, 0.5, 0.9)]
                print(f"eval step {step} copy accuracy at depths 0.1 / 0.5 / 0.9: "
                      + " / ".join(f"{a:.3f}" for a in accuracy), flush=True)
            write_hf_folder(args.out, model, cfg)
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "generator": gen.get_state(), "step": step}, state_path + ".tmp")
            os.replace(state_path + ".tmp", state_path)
    val_loss = evaluate(model, val, args.context, 10**9)
    print(f"final held-out loss {val_loss:.4f} ppl {math.exp(val_loss):.3f} "
          f"({len(val)} tokens)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
