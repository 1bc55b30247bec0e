#!/usr/bin/env python3
"""Writes what Python's jinja2 renders for kvscope's template tests.

The oracle for kvscope's Jinja interpreter (engine/jinja) is jinja2 itself, set
up as Hugging Face's apply_chat_template sets it up: a sandboxed environment
(ImmutableSandboxedEnvironment) with trim_blocks and lstrip_blocks on, the
loop-controls extension, a {% generation %} tag that renders its body, the
globals raise_exception() and strftime_now(), and a tojson filter that is
json.dumps with ensure_ascii off. strftime_now() formats the fixed time given
in conversations.json so the expected files do not change with the date.

Outputs (committed; the tests read them and need no Python):
  tests/data/chat_templates/expected/<template>.json  every template in
      tests/data/chat_templates/ and the chat templates of the shared
      hf-llama3 / hf-qwen3 tokenizers, for every case in conversations.json,
      with add_generation_prompt on and off;
  tests/data/jinja/features.expected.json  the small feature templates of
      tests/data/jinja/features.json;
  tests/data/chat_templates/cli/chatml.multi_turn.expected.txt  what
      kvscope-cli template must print for cli/chatml.jinja and cli/multi_turn.json.

Each result is {"text": …} or, when jinja2 fails, {"error": message,
"raised": true when the template called raise_exception()}.

Needs Python 3 with jinja2 3.1 (Debian: apt-get install python3-jinja2).
Usage: tools/render-chat-templates.py [--shared DIR]
"""

import argparse
import datetime
import json
import pathlib
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parent.parent


class TemplateRaised(jinja2.exceptions.TemplateError):
    """What raise_exception() throws, told apart from jinja2's own errors."""


class GenerationTag(Extension):
    """Hugging Face's {% generation %} … {% endgeneration %}: renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment(now):
    def raise_exception(message):
        raise TemplateRaised(message)

    def strftime_now(fmt):
        return now.strftime(fmt)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, source, variables):
    try:
        return {"text": env.from_string(source).render(**variables)}
    except TemplateRaised as e:
        return {"error": str(e), "raised": True}
    except Exception as e:  # any jinja2 or Python error: the test expects a failure
        return {"error": f"{type(e).__name__}: {e}", "raised": False}


def chat_variables(conversations, case, generation_prompt):
    variables = {
        "messages": case["messages"],
        "tools": case.get("tools"),
        "documents": None,
        "add_generation_prompt": generation_prompt,
        "bos_token": conversations["bos_token"],
        "eos_token": conversations["eos_token"],
    }
    if "enable_thinking" in case:
        variables["enable_thinking"] = case["enable_thinking"]
    return variables


def write_json(path, value):
    path.write_text(json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True) + "\n",
                    encoding="utf-8")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default=str(ROOT.parent / "shared"),
                        help="the shared fixtures folder (default: ../shared)")
    args = parser.parse_args()

    data = ROOT / "tests" / "data" / "chat_templates"
    conversations = json.loads((data / "conversations.json").read_text(encoding="utf-8"))
    now = datetime.datetime.fromisoformat(conversations["now"])
    env = make_environment(now)

    sources = {}
    for path in sorted(data.glob("*.jinja")):
        # newline="" keeps CRLF files as written; jinja2 normalises line ends itself.
        with open(path, encoding="utf-8", newline="") as f:
            sources[path.stem] = f.read()
    for name in ("hf-llama3", "hf-qwen3"):
        config = pathlib.Path(args.shared) / "tokenizer" / name / "tokenizer_config.json"
        if not config.exists():
            sys.exit(f"missing {config}: pass --shared")
        sources[name] = json.loads(config.read_text(encoding="utf-8"))["chat_template"]

    expected_dir = data / "expected"
    expected_dir.mkdir(exist_ok=True)
    for stem, source in sources.items():
        results = {}
        for case_name, case in conversations["cases"].items():
            for generation_prompt in (True, False):
                key = f"{case_name}.{'gen' if generation_prompt else 'nogen'}"
                results[key] = render(env, source,
                                      chat_variables(conversations, case, generation_prompt))
        write_json(expected_dir / f"{stem}.json", results)
        failures = sum("error" in r for r in results.values())
        print(f"{stem}: {len(results)} renders, {failures} errors")

    # kvscope-cli template's test: the ChatML template file on stories260K
    # (whose BOS/EOS are <s> and </s>) for cli/multi_turn.json.
    cli = data / "cli"
    with open(cli / "chatml.jinja", encoding="utf-8", newline="") as f:
        chatml = f.read()
    messages = json.loads((cli / "multi_turn.json").read_text(encoding="utf-8"))
    result = render(env, chatml, {"messages": messages, "tools": None, "documents": None,
                                  "add_generation_prompt": True,
                                  "bos_token": "<s>", "eos_token": "</s>"})
    (cli / "chatml.multi_turn.expected.txt").write_bytes(result["text"].encode("utf-8"))
    print("cli: chatml.multi_turn.expected.txt")

    features_path = ROOT / "tests" / "data" / "jinja" / "features.json"
    features = json.loads(features_path.read_text(encoding="utf-8"))
    results = {f["name"]: render(env, f["template"], f.get("variables", {}))
               for f in features["cases"]}
    write_json(features_path.with_name("features.expected.json"), results)
    print(f"features: {len(results)} renders, {sum('error' in r for r in results.values())} errors")


if __name__ == "__main__":
    main()
