#!/usr/bin/env bash
# Writes the seed files of tests/fuzz/seeds/ (committed; run again only to
# change them): tiny GGUF models from `kvscope-cli make-model`, a Hugging Face
# config.json and safetensors pair, saved KV caches of the demo model (from
# `kvscope-cli chat --session`) and a saved conversation.
#   tests/fuzz/make_seeds.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cli=${1:-$here/../../build}/app/kvscope-cli
seeds=$here/seeds
mkdir -p "$seeds"/{gguf,hf-config,safetensors,kv-cache,conversation}
# Saved KV caches: a short chat on the demo model under several policies (auto
# long enough to have chosen its schemes).
kvseed() {
  local name=$1 policy=$2 n=${3:-8} tmp
  tmp=$(mktemp -d)
  printf 'Tell me a story about a dog.\n' | "$cli" chat --backend cpu --temp 0 -n "$n" -c 512 \
    ${policy:+--kv-policy "$policy"} --session "$tmp/chat.json" >/dev/null 2>&1
  cp "$tmp/chat.json.kvcache" "$seeds/kv-cache/$name.kvcache"
  rm -rf "$tmp"
}
kvseed f16 ""
kvseed q8_0-turbo4 "k=q8_0,v=turbo4"
kvseed turbo3-indexer "k=turbo3,v=turbo3,indexer=16:8:2"
kvseed two-phase "k=q8_0,v=turbo4,two_phase"
kvseed auto "auto" 64
"$cli" make-model -o "$seeds/gguf/tiny-llama-f16.gguf" --layers 1 --dim 32 --ffn 32 --heads 1 \
  --kv-heads 1 --head-dim 32 --vocab 260 --ctx 64 --type F16
"$cli" make-model -o "$seeds/gguf/tiny-qwen3-q8_0.gguf" --arch qwen3 --layers 1 --dim 32 --ffn 64 \
  --heads 2 --kv-heads 1 --head-dim 32 --vocab 260 --ctx 64 --type Q8_0
"$cli" make-model -o "$seeds/gguf/tiny-qwen2-q4_0.gguf" --arch qwen2 --layers 1 --dim 32 --ffn 64 \
  --heads 2 --kv-heads 1 --head-dim 16 --vocab 260 --ctx 64 --type Q4_0
cd "$seeds"
python3 - <<'PY'
import json, random, struct
random.seed(7)
W, FF, H, KV, HD, V = 16, 32, 2, 1, 8, 64
config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": W,
          "intermediate_size": FF, "num_hidden_layers": 1, "num_attention_heads": H,
          "num_key_value_heads": KV, "head_dim": HD, "max_position_embeddings": 256,
          "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True,
          "torch_dtype": "float32", "vocab_size": V}
json.dump(config, open("hf-config/tiny-llama.json", "w"), indent=2)
qwen = dict(config, model_type="qwen2", architectures=["Qwen2ForCausalLM"],
            rope_scaling={"type": "linear", "factor": 2.0})
json.dump(qwen, open("hf-config/tiny-qwen2-rope-scaling.json", "w"), indent=2)
p = "model.layers.0."
tensors = [("model.embed_tokens.weight", [V, W]), (p + "input_layernorm.weight", [W]),
           (p + "self_attn.q_proj.weight", [H * HD, W]), (p + "self_attn.k_proj.weight", [KV * HD, W]),
           (p + "self_attn.v_proj.weight", [KV * HD, W]), (p + "self_attn.o_proj.weight", [W, H * HD]),
           (p + "post_attention_layernorm.weight", [W]), (p + "mlp.gate_proj.weight", [FF, W]),
           (p + "mlp.up_proj.weight", [FF, W]), (p + "mlp.down_proj.weight", [W, FF]),
           ("model.norm.weight", [W])]
def safetensors(path, dtype):
    header, blob = {}, b""
    for name, shape in tensors:
        n = 1
        for d in shape:
            n *= d
        begin = len(blob)
        if dtype == "F32":
            blob += struct.pack("<%df" % n, *[random.uniform(-.1, .1) for _ in range(n)])
        else:  # BF16: small random values (exponent bits kept low)
            blob += bytes(random.getrandbits(8) & 0x3F for _ in range(2 * n))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [begin, len(blob)]}
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + blob)
safetensors("safetensors/tiny-llama.safetensors", "F32")
safetensors("safetensors/tiny-llama-bf16.safetensors", "BF16")
stats = {"promptTokens": 32, "reusedTokens": 1, "generatedTokens": 14, "cachedTokens": 46,
         "contextLimit": 512, "prefillMs": 2.5, "decodeMs": 20.1, "stop": "endOfGeneration",
         "seed": 42}
conversation = {
    "version": 1, "id": "0b7e3c2a-5f0e-4a51-9d43-2f6a1c9e8b10", "title": "Tell me a story",
    "systemPrompt": "You are brief.", "modelPath": "/home/user/models/kvscope-demo.gguf",
    "created": "2026-11-24T10:00:00Z", "updated": "2026-11-24T10:01:00Z",
    "messages": [
        {"role": "user", "text": "Tell me a story about a dog.", "time": "2026-11-24T10:00:05Z"},
        {"role": "assistant", "text": "Once upon a time, there was a dog named Max. ✓ é 日本",
         "time": "2026-11-24T10:00:09Z", "stats": stats},
        {"role": "user", "text": "Another.", "time": "2026-11-24T10:00:30Z"},
        {"role": "assistant", "text": "", "error": "Out of memory.", "time": "2026-11-24T10:00:31Z"}]}
json.dump(conversation, open("conversation/story.json", "w"), indent=1, ensure_ascii=False)
PY
