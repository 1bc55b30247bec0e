#!/usr/bin/python3
"""Writes a long evaluation text: stories the teacher (stories260K) tells from
seeds the training corpus does not use, joined until the text fills a token
budget, cut at the last line break that fits.

The recall model's 4K fidelity and indexer tables are measured on it
(resources/texts/stories-4k.txt, --tokens 4090: with BOS it fits the model's
4096-token context with room for eval's prefill). Token counts are kvscope's
own tokenization, so `kvscope-cli eval -f` sees exactly this many tokens.
"""
import argparse
import json
import subprocess


def cli_json(cli, teacher, prompt, tokens, seed):
    cmd = [cli, "generate", "-m", teacher, "--backend", "cpu", "--threads", "1", "--json",
           "-c", "8192", "-p", prompt, "-n", str(tokens), "--temp", "0.8", "--seed", str(seed)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def token_count(cli, teacher, text):
    """Tokens of `text` as a prompt, BOS included (the 8192-token context only
    lets the teacher take the whole text; nothing is generated)."""
    return len(cli_json(cli, teacher, text, 0, 0)["prompt_tokens"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cli", required=True, help="path to kvscope-cli")
    p.add_argument("--teacher", required=True, help="path to stories260K.gguf")
    p.add_argument("--out", required=True)
    p.add_argument("--tokens", type=int, default=4090, help="at most this many tokens, BOS included")
    p.add_argument("--seed", type=int, default=900001,
                   help="first seed (make_corpus.py uses seed x 1000003 + call)")
    args = p.parse_args()

    text, seed = "", args.seed
    while token_count(args.cli, args.teacher, text) < args.tokens + 200:
        story = cli_json(args.cli, args.teacher, "Once upon a time", 490, seed)["text"]
        text += ("Once upon a time" + story).strip() + "\n\n"
        seed += 1
    # Cut at line breaks until the budget holds.
    lines = text.rstrip("\n").split("\n")
    while token_count(args.cli, args.teacher, "\n".join(lines) + "\n") > args.tokens:
        lines.pop()
    text = "\n".join(lines).rstrip("\n") + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    print(f"{args.out}: {token_count(args.cli, args.teacher, text)} tokens, {len(text)} bytes, "
          f"seeds {args.seed}..{seed - 1}")


if __name__ == "__main__":
    main()
