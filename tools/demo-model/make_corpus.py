#!/usr/bin/python3
"""Samples the demo model's training corpus from a teacher model with kvscope-cli.

The teacher is stories260K.gguf (Karpathy's llama2.c TinyStories model, MIT).
Each call runs `kvscope-cli generate --json` on the CPU backend from a story
opening with its own seed, so the corpus is reproducible from --seed and
--calls. The teacher separates stories with BOS, so one call yields the story
that continues our opening plus the unconditioned stories the teacher starts
after it.

Records (one JSON object per line, token ids of the teacher's 512-token
SentencePiece vocabulary, which the demo model reuses):
  {"kind": "chat",  "tokens": [...]}  <s>[INST] request [/INST] story </s>
  {"kind": "plain", "tokens": [...]}  <s> story </s>   (no </s> if cut off)

Chat records use the Llama 2 chat format because it needs no tokens beyond
BOS/EOS, which the 512-token vocabulary has; the request is tokenized by
kvscope itself, exactly as the engine tokenizes a rendered chat prompt.
"""
import argparse
import concurrent.futures
import json
import random
import subprocess
import sys
import time

BOS, EOS = 1, 2

# (what a user asks about, how the story opens). The opening steers the teacher
# toward the topic the request names.
TOPICS = [
    ("a dog", ["Once upon a time, there was a little dog named", "One day, a dog"]),
    ("a cat", ["Once upon a time, there was a cat named", "One day, a little cat"]),
    ("a bird", ["Once upon a time, there was a little bird", "One day, a bird"]),
    ("a fish", ["Once upon a time, there was a small fish", "One day, a fish"]),
    ("a bunny", ["Once upon a time, there was a bunny named", "One day, a little bunny"]),
    ("a bear", ["Once upon a time, there was a big bear", "One day, a bear"]),
    ("a frog", ["Once upon a time, there was a frog", "One day, a little frog"]),
    ("a duck", ["Once upon a time, there was a duck", "One day, a little duck"]),
    ("a lion", ["Once upon a time, there was a lion", "One day, a big lion"]),
    ("a mouse", ["Once upon a time, there was a little mouse", "One day, a mouse"]),
    ("a girl", ["Once upon a time, there was a little girl named", "One day, a girl named"]),
    ("a boy", ["Once upon a time, there was a little boy named", "One day, a boy named"]),
    ("a princess", ["Once upon a time, there was a princess", "One day, a princess"]),
    ("a king", ["Once upon a time, there was a king", "One day, the king"]),
    ("a dragon", ["Once upon a time, there was a dragon", "One day, a big dragon"]),
    ("a robot", ["Once upon a time, there was a robot", "One day, a little robot"]),
    ("a car", ["Once upon a time, there was a red car", "One day, a little car"]),
    ("a train", ["Once upon a time, there was a train", "One day, a big train"]),
    ("a boat", ["Once upon a time, there was a boat", "One day, a little boat"]),
    ("a tree", ["Once upon a time, there was a big tree", "One day, a little tree"]),
    ("a flower", ["Once upon a time, there was a pretty flower", "One day, a flower"]),
    ("a ball", ["Once upon a time, there was a red ball", "One day, Tim found a ball"]),
    ("a toy", ["Once upon a time, there was a toy", "One day, Lily found a toy"]),
    ("the sun", ["Once upon a time, the sun", "One day, the sun was"]),
    ("the moon", ["Once upon a time, the moon", "One night, the moon"]),
    ("the sea", ["Once upon a time, there was a girl who lived by the sea", "One day, Tom went to the sea"]),
    ("the park", ["Once upon a time, Lily went to the park", "One day, Ben went to the park"]),
    ("a garden", ["Once upon a time, there was a big garden", "One day, Sue went to the garden"]),
    ("a cake", ["Once upon a time, Mom made a big cake", "One day, Tim wanted a cake"]),
    ("the snow", ["Once upon a time, it was snowing", "One day, there was snow"]),
    ("the rain", ["Once upon a time, it was raining", "One day, the rain"]),
    ("friends", ["Once upon a time, there were two friends", "One day, two friends"]),
    ("a family", ["Once upon a time, there was a happy family", "One day, Mom and Dad"]),
    ("a monster", ["Once upon a time, there was a monster", "One day, a big monster"]),
    ("a farm", ["Once upon a time, there was a farm", "One day, a cow on the farm"]),
    ("a school", ["Once upon a time, Lily went to school", "One day, at school"]),
    ("a cow", ["Once upon a time, there was a cow", "One day, a big cow"]),
    ("a pig", ["Once upon a time, there was a pig", "One day, a little pig"]),
    ("a horse", ["Once upon a time, there was a horse", "One day, a big horse"]),
    ("a monkey", ["Once upon a time, there was a monkey", "One day, a funny monkey"]),
]

# How users ask. "{}" is the topic.
TOPIC_REQUESTS = [
    "Tell me a story about {}.",
    "Tell me a story about {}",
    "tell me a story about {}",
    "Write a story about {}.",
    "Can you tell me a story about {}?",
    "Please tell me a short story about {}.",
    "I want a story about {}.",
    "Write a short story about {}.",
    "Tell me a bedtime story about {}.",
    "Story about {}, please.",
]
# Requests with no topic: any opening fits.
OPEN_REQUESTS = [
    "Tell me a story.",
    "Tell me a story",
    "Tell me another story.",
    "Can you tell me a story?",
    "Write a story.",
    "Please tell me a story.",
    "Another one, please.",
    "Tell me a short story.",
    "Hi! Tell me a story.",
    "I want to hear a story.",
]
PLAIN_OPENINGS = ["Once upon a time", "One day", "Once upon a time, there was", "Lily", "Tim"]


def run_cli(cli, teacher, prompt, tokens, seed, temperature):
    cmd = [cli, "generate", "-m", teacher, "--backend", "cpu", "--threads", "1", "--json",
           "-p", prompt, "-n", str(tokens), "--temp", str(temperature), "--seed", str(seed)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def plan_call(rng, index, args):
    """What call `index` asks the teacher for: chat or plain, request, opening."""
    temperature = rng.choice([0.8, 0.9, 1.0])
    if rng.random() < args.chat_fraction:
        if rng.random() < 0.7:
            subject, openings = rng.choice(TOPICS)
            request = rng.choice(TOPIC_REQUESTS).format(subject)
            opening = rng.choice(openings)
        else:
            request = rng.choice(OPEN_REQUESTS)
            opening = rng.choice(PLAIN_OPENINGS + [o for _, os in TOPICS for o in os])
        return {"index": index, "seed": args.seed * 1_000_003 + index, "temperature": temperature,
                "request": request, "opening": opening}
    opening = rng.choice(PLAIN_OPENINGS + [o for _, os in TOPICS for o in os])
    return {"index": index, "seed": args.seed * 1_000_003 + index, "temperature": temperature,
            "request": None, "opening": opening}


def split_stories(prompt_tokens, tokens):
    """Splits opening + continuation at the teacher's BOS separators.
    Returns (stories, last_complete): every story starts with BOS."""
    stream = list(prompt_tokens) + list(tokens)
    stories, current = [], []
    for t in stream:
        if t == BOS and current:
            stories.append(current)
            current = []
        current.append(t)
    return stories + [current], len(stories)


def sample(call, args, request_tokens):
    r = run_cli(args.cli, args.teacher, call["opening"], args.tokens, call["seed"],
                call["temperature"])
    stories, complete = split_stories(r["prompt_tokens"], r["tokens"])
    records = []
    for i, story in enumerate(stories):
        done = i < complete
        if len(story) < 8:
            continue
        body = story[1:] + ([EOS] if done else [])
        if i == 0 and call["request"] is not None:
            if not done:
                continue  # a chat reply must end with </s>
            records.append({"kind": "chat", "tokens": request_tokens[call["request"]] + body})
        else:
            records.append({"kind": "plain", "tokens": [BOS] + body})
    return call["index"], records


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cli", required=True, help="path to kvscope-cli")
    p.add_argument("--teacher", required=True, help="path to stories260K.gguf")
    p.add_argument("--out", required=True, help="output .jsonl")
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--tokens", type=int, default=450, help="tokens per call (teacher context 512)")
    p.add_argument("--chat-fraction", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args()

    rng = random.Random(args.seed)
    calls = [plan_call(rng, i, args) for i in range(args.calls)]
    # The engine tokenizes "<s>[INST] request [/INST]" as BOS + the completion
    # tokens of "[INST] request [/INST]" (special tokens parsed, prefix space
    # after them), so the completion tokenization is the chat tokenization.
    request_tokens = {}
    for request in sorted({c["request"] for c in calls if c["request"] is not None}):
        r = run_cli(args.cli, args.teacher, f"[INST] {request} [/INST]", 0, 0, 0.0)
        request_tokens[request] = r["prompt_tokens"]

    results = {}
    start = time.time()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(sample, c, args, request_tokens) for c in calls]
        for n, f in enumerate(concurrent.futures.as_completed(futures), 1):
            index, records = f.result()
            results[index] = records
            if n % 100 == 0:
                tokens = sum(len(r["tokens"]) for rs in results.values() for r in rs)
                print(f"{n}/{len(calls)} calls, {tokens} tokens, {time.time() - start:.0f} s",
                      file=sys.stderr, flush=True)
    with open(args.out, "w") as f:
        for index in sorted(results):
            for record in results[index]:
                f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
