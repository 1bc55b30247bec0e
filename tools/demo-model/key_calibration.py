#!/usr/bin/python3
"""Does per-channel key calibration from the prefill help a rotated 4-bit cache?

Measured on a model trained by train.py (its training.pt), on windows of its
held-out text: each layer's post-RoPE keys and queries (as a cache holds
them), a key codec applied to every key row, and the KL divergence between
the softmax of q.k and of q.k_hat for queries past the prefill, averaged over
layers, heads and positions. Two stand-in codecs, 4 bits per value with a
scale per 32 values: an absmax grid of 16 levels (q4_0-like) and a Lloyd-Max
grid for N(0, 1) scaled by the block's RMS (turbo4b-like), each on the
Hadamard-rotated row (as kvscope and llama.cpp rotate) or, with
--no-rotation, on the raw row. Calibrations, all from the first --prefill
rows of the window, all exact for the unquantized scores:
  center   k - mu (mu: the per-channel mean; shifts every score of a query
           by the same q.mu, which the softmax ignores)
  scale    k / s, q * s (s: the per-channel RMS of the keys)
  qaware   s = (rms_k / rms_q)^(1/2), which minimizes the score error when
           the quantization error is spread evenly over channels
  center+qaware
Prints the mean KL per codec and calibration, and its ratio to none.

  key_calibration.py --checkpoint build/recall-model/phase10/training.pt \\
      --corpus build/recall-model/corpus.jsonl --context 4096 --yarn 8 (+ the model's shape flags)
"""
import argparse
import math
import sys

import numpy as np
import torch

from train import Config, Llama, load_corpus, rotate

CALIBRATIONS = ["none", "center", "scale", "qaware", "center+qaware"]


def hadamard(d, seed):
    """A random-sign normalized Hadamard matrix: an orthogonal rotation."""
    h = np.array([[1.0]])
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=d)
    return h * signs[None, :] / math.sqrt(d)


def lloyd_max(levels, seed=1, iterations=200):
    """The levels of least squared error for N(0, 1) (Lloyd's algorithm on samples)."""
    x = np.random.default_rng(seed).standard_normal(400_000)
    c = np.quantile(x, (np.arange(levels) + 0.5) / levels)
    for _ in range(iterations):
        nearest = np.abs(x[:, None] - c[None, :]).argmin(1)
        c = np.array([x[nearest == j].mean() for j in range(levels)])
    return np.sort(c)


def absmax4(x):
    """16 levels (-7.5 .. 7.5) x amax / 7.5 per block of 32."""
    b = x.reshape(-1, 32)
    amax = np.abs(b).max(1, keepdims=True)
    s = np.where(amax > 0, amax / 7.5, 1.0)
    return ((np.clip(np.round(b / s - 0.5), -8, 7) + 0.5) * s).reshape(x.shape)


def make_rms4(grid):
    def rms4(x):
        """The nearest of 16 Lloyd-Max levels x the block's RMS, per block of 32."""
        b = x.reshape(-1, 32)
        r = np.sqrt((b ** 2).mean(1, keepdims=True))
        r = np.where(r > 0, r, 1.0)
        nearest = np.abs((b / r)[..., None] - grid).argmin(-1)
        return (grid[nearest] * r).reshape(x.shape)
    return rms4


def softmax_kl(q, k, k_hat, positions):
    """Mean over `positions` of KL(softmax(q_t . k) || softmax(q_t . k_hat)), causal."""
    d = k.shape[1]
    mask = np.arange(len(k))[None, :] <= positions[:, None]
    logp = [np.where(mask, q[positions] @ kk.T / math.sqrt(d), -np.inf) for kk in (k, k_hat)]
    logp = [lp - lp.max(1, keepdims=True) for lp in logp]
    logp = [np.where(mask, lp - np.log(np.exp(lp).sum(1, keepdims=True)), 0.0) for lp in logp]
    return float((np.exp(logp[0]) * mask * (logp[0] - logp[1])).sum(1).mean())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--corpus", required=True)
    p.add_argument("--context", type=int, default=4096)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--yarn", type=float, default=1.0, help="the model's YaRN factor (train.py --yarn)")
    p.add_argument("--prefill", type=int, default=512, help="rows the calibration is taken from")
    p.add_argument("--windows", type=int, default=2)
    p.add_argument("--stride", type=int, default=16, help="score every STRIDE-th query past the prefill")
    p.add_argument("--no-rotation", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)

    cfg = Config(dim=args.dim, layers=args.layers, heads=args.heads, kv_heads=args.kv_heads,
                 hidden=args.hidden, context=args.context, yarn=args.yarn)
    model = Llama(cfg)
    model.load_state_dict(torch.load(args.checkpoint)["model"])
    model.eval()
    _, held_out, _ = load_corpus(args.corpus, 0.05, 1)
    captured = {}

    def keep(layer):
        def hook(module, inputs, _):
            x = inputs[0]
            t = x.shape[1]
            q = module.q_proj(x).view(1, t, cfg.heads, cfg.head_dim).transpose(1, 2)
            k = module.k_proj(x).view(1, t, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
            cos, sin = model.cos[:t], model.sin[:t]
            captured[layer] = (rotate(q, cos, sin)[0].double().numpy(),
                               rotate(k, cos, sin)[0].double().numpy())
        return hook

    for i, block in enumerate(model.layers):
        block.self_attn.register_forward_hook(keep(i))
    d, group = cfg.head_dim, cfg.heads // cfg.kv_heads
    rotation = np.eye(d) if args.no_rotation else hadamard(d, 0)
    codecs = {"absmax4": absmax4, "rms4": make_rms4(lloyd_max(16))}
    positions = np.arange(args.prefill, args.context, args.stride)
    kl = {(c, m): [] for c in codecs for m in CALIBRATIONS}
    rng = np.random.default_rng(0)
    for _ in range(args.windows):
        start = int(rng.integers(0, len(held_out) - args.context))
        with torch.no_grad():
            model(torch.from_numpy(held_out[None, start:start + args.context]))
        for layer in range(cfg.layers):
            queries, keys = captured[layer]
            for h in range(cfg.kv_heads):
                k, qs = keys[h], queries[h * group:(h + 1) * group]
                first = k[:args.prefill]
                mu = first.mean(0)
                rms_k = np.sqrt((first ** 2).mean(0)) + 1e-6
                sd_k = np.sqrt(((first - mu) ** 2).mean(0)) + 1e-6
                rms_q = np.sqrt((qs[:, :args.prefill] ** 2).mean((0, 1))) + 1e-6
                for method in CALIBRATIONS:
                    shift = mu if "center" in method else 0.0
                    spread = sd_k if "center" in method else rms_k
                    if method == "scale":
                        s = rms_k
                    elif "qaware" in method:
                        s = np.sqrt(spread / rms_q)
                    else:
                        s = np.ones(d)
                    for name, codec in codecs.items():
                        # k_hat = shift + s * R^T codec(R (k - shift) / s); q . k_hat is
                        # what attention on the calibrated codes computes, up to q . shift.
                        k_hat = codec(((k - shift) / s) @ rotation.T) @ rotation * s + shift
                        kl[(name, method)].append(np.mean([softmax_kl(q, k, k_hat, positions)
                                                           for q in qs]))
    print(f"{args.checkpoint}: {args.windows} windows of {args.context}, calibrated on "
          f"{args.prefill} rows, {'no rotation' if args.no_rotation else 'Hadamard-rotated'}")
    for name in codecs:
        none = np.mean(kl[(name, "none")])
        print(f"{name:8s}" + "  ".join(f"{m} {np.mean(kl[(name, m)]):.3e} "
                                       f"({np.mean(kl[(name, m)]) / none:.2f}x)"
                                       for m in CALIBRATIONS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
