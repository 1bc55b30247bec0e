#pragma once
// ModelConfig: the hyper-parameters a forward pass needs, read from GGUF
// metadata (`{arch}.*` keys) or a Hugging Face config.json, and validated so
// later code may trust them (positive sizes, heads divisible by KV heads,
// even RoPE dimensions, supported RoPE scaling).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "model/architecture.h"

namespace kvscope::gguf {
class GgufFile;
}

namespace kvscope::model {

enum class RopeScaling {
  kNone,
  kLinear,       // positions divided by `factor`
  kFreqFactors,  // per-frequency divisors: GGUF `rope_freqs.weight`, or llama3 parameters
  kLongRope,     // Phi-3's: `rope_factors_long`/`_short` divisors by context, and attnFactor
  // YaRN (gpt-oss): low frequencies interpolated by `factor`, high ones kept,
  // a linear ramp between (betaFast / betaSlow rotations over the original
  // context bound it), magnitude attnFactor * (1 + 0.1 ln factor).
  kYarn,
  // Gemma 4's "proportional" RoPE of its global layers, from a Hugging Face
  // config: the first partialRotary * dims / 2 frequency pairs turn, the rest
  // stay (GGUF files ship the same as rope_freqs: 1, then 1e30).
  kProportional,
};

struct RopeConfig {
  RopeStyle style = RopeStyle::kNormal;
  float theta = 10000.0f;  // base frequency
  uint32_t dims = 0;       // rotated dimensions per head (<= head_dim, even)
  RopeScaling scaling = RopeScaling::kNone;
  float factor = 1.0f;
  // llama3-style scaling from a Hugging Face config (GGUF files carry the
  // resulting per-frequency factors as the `rope_freqs.weight` tensor instead).
  float lowFreqFactor = 1.0f;
  float highFreqFactor = 4.0f;
  uint32_t originalContext = 0;             // llama3, LongRoPE and YaRN: the context before scaling
  float attnFactor = 1.0f;                  // LongRoPE and YaRN: multiplies cos and sin
  float betaFast = 32.0f, betaSlow = 1.0f;  // YaRN's ramp bounds, in rotations
  // YaRN's ramp ends rounded out to whole frequency pairs (llama.cpp always;
  // a Hugging Face config's rope_scaling.truncate, gpt-oss's false).
  bool yarnTruncate = true;
  float partialRotary = 1.0f;  // kProportional: the share of the pairs that turn
};

struct ModelConfig {
  std::string architecture;  // general.architecture, e.g. "llama"
  const ArchitectureInfo* arch = nullptr;
  std::string name;  // general.name when present
  uint32_t nLayer = 0;
  uint32_t nEmbd = 0;     // model width
  uint32_t nFf = 0;       // feed-forward width (read per layer through ffOf())
  // [nLayer] from a GGUF array (Gemma 4's double-wide MLP of its KV-shared
  // layers), or empty: every layer nFf.
  std::vector<uint32_t> layerFf;
  // Attention shape of the layers that have no other (all layers but in a
  // model with per-layer shapes, below): read per layer through headsOf(),
  // headsKvOf() and headDimOf().
  uint32_t nHead = 0;     // query heads
  uint32_t nHeadKv = 0;   // key/value heads (GQA when < nHead)
  uint32_t headDim = 0;   // per-head K and Q width (may differ from nEmbd / nHead)
  uint32_t headDimV = 0;  // per-head V width
  // Per-layer shapes (Gemma 4: its global layers have fewer KV heads and
  // wider heads than its window layers). layerHeads/layerHeadsKv: [nLayer]
  // from GGUF arrays, or empty (every layer nHead/nHeadKv). headDimWindow:
  // the window layers' head width (key_length_swa; V the same), 0: headDim;
  // ropeDimsWindow likewise (rope.dimension_count_swa), 0: rope.dims.
  std::vector<uint32_t> layerHeads, layerHeadsKv;
  uint32_t headDimWindow = 0;
  uint32_t ropeDimsWindow = 0;
  uint32_t nVocab = 0;
  uint32_t contextLength = 0;  // trained context
  float rmsEps = 1e-5f;
  RopeConfig rope;
  bool tiedEmbeddings = false;  // output projection shares token_embd
  // Mixture of experts (0 experts: a dense feed-forward). Each token's router
  // picks nExpertUsed of nExpert experts of width nFfExp; their weights are
  // renormalised to sum to 1 where the architecture does, then multiplied by
  // expertWeightsScale (0 or 1: left as they are).
  uint32_t nExpert = 0;
  uint32_t nExpertUsed = 0;
  uint32_t nFfExp = 0;
  float expertWeightsScale = 0.0f;
  // Sliding-window attention (gemma3, gpt-oss): a window layer's query at
  // position p sees positions (p - slidingWindow, p] only, and rotates by
  // ropeThetaWindow (gemma3: without the global layers' scaling, gpt-oss: with
  // it; ArchDescription::windowRopeScaled); the other layers are global.
  uint32_t slidingWindow = 0;      // 0: every layer global
  std::vector<bool> windowLayers;  // [nLayer] when slidingWindow > 0
  float ropeThetaWindow = 10000.0f;
  // The queries' scale before attention where a config states it (Gemma's
  // 1/sqrt(query_pre_attn_scalar)); 0: the architecture's own rule.
  float queryScale = 0.0f;
  // KV-shared layers (Gemma 4 E2B/E4B): the last nKvShared layers store no
  // K/V rows; each attends the cache of the last storing layer of its own kind
  // (window or global), so the cache holds kvLayers() layers, the first ones.
  uint32_t nKvShared = 0;
  // Gemma 4 26B/31B: the global layers have no V projection; their V rows are
  // their K projection's (before the K norm). From the files: attn_v absent.
  bool globalValueIsKey = false;
  // Per-layer token embeddings (Gemma 4 E2B/E4B): each layer adds a gated
  // projection of its own nEmbdPerLayer-wide input (0: none).
  uint32_t nEmbdPerLayer = 0;
  // Logits become cap * tanh(logit / cap) (Gemma 4); 0: none.
  float finalLogitSoftcap = 0.0f;

  bool isWindowLayer(uint32_t layer) const {
    return slidingWindow > 0 && layer < windowLayers.size() && windowLayers[layer];
  }
  uint32_t headsOf(uint32_t layer) const {
    return layer < layerHeads.size() ? layerHeads[layer] : nHead;
  }
  uint32_t headsKvOf(uint32_t layer) const {
    return layer < layerHeadsKv.size() ? layerHeadsKv[layer] : nHeadKv;
  }
  // The window layers' head width and rotated dimensions.
  uint32_t windowHeadDim() const { return headDimWindow != 0 ? headDimWindow : headDim; }
  uint32_t windowRopeDims() const { return ropeDimsWindow != 0 ? ropeDimsWindow : rope.dims; }
  uint32_t headDimOf(uint32_t layer) const {
    return isWindowLayer(layer) ? windowHeadDim() : headDim;
  }
  uint32_t ropeDimsOf(uint32_t layer) const {
    return isWindowLayer(layer) ? windowRopeDims() : rope.dims;
  }
  uint32_t ffOf(uint32_t layer) const { return layer < layerFf.size() ? layerFf[layer] : nFf; }
  // The layers holding K/V rows, and the one whose rows `layer` attends
  // (itself where it stores its own).
  uint32_t kvLayers() const { return nLayer - nKvShared; }
  bool storesKv(uint32_t layer) const { return layer < kvLayers(); }
  uint32_t kvSourceOf(uint32_t layer) const {
    if (storesKv(layer)) return layer;
    for (uint32_t l = kvLayers(); l-- > 0;)
      if (isWindowLayer(l) == isWindowLayer(layer)) return l;
    return layer;  // validateConfig refuses a model where none is
  }
  uint32_t qDimOf(uint32_t layer) const { return headsOf(layer) * headDimOf(layer); }
  uint32_t kvDimOf(uint32_t layer) const { return headsKvOf(layer) * headDimOf(layer); }
  // Whether every layer has nHead, nHeadKv and headDim (code that has not
  // learnt per-layer shapes refuses other models).
  bool uniformAttention() const {
    for (uint32_t l = 0; l < nLayer; ++l) {
      if (headsOf(l) != nHead || headsKvOf(l) != nHeadKv || headDimOf(l) != headDim) return false;
    }
    return true;
  }
  // Bytes one token adds to an f16 KV cache, over the storing layers (K and
  // V rows alike wide: validateConfig).
  uint64_t kvBytesPerTokenF16() const {
    uint64_t bytes = 0;
    for (uint32_t l = 0; l < kvLayers(); ++l) bytes += uint64_t{kvDimOf(l)} * 2 * 2;
    return bytes;
  }
};

Expected<ModelConfig> configFromGguf(const gguf::GgufFile& file);
// `config` is a parsed Hugging Face config.json; `tied` from tie_word_embeddings.
Expected<ModelConfig> configFromHf(const nlohmann::json& config);

// The window layers of `nLayer` layers whose every `period`-th layer (the
// last of each period) is global, as Gemma 3 files state it; period 0: all
// window layers.
std::vector<bool> windowLayersOfPeriod(uint32_t nLayer, uint32_t period);
// The period whose windowLayersOfPeriod() equals `layers`, if one does.
std::optional<uint32_t> windowPeriodOf(const std::vector<bool>& layers);

// Checks the invariants later code relies on; names the offending field.
Status validateConfig(const ModelConfig& config);

}  // namespace kvscope::model
