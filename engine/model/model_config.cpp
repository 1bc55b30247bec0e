#include "model/model_config.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "model/description.h"

namespace kvscope::model {
namespace {

constexpr uint32_t kMaxDim = 1u << 20;  // far above any real model; stops absurd allocations

Expected<uint32_t> requiredUint(const gguf::GgufFile& f, const std::string& key) {
  auto v = f.getUint(key);
  if (!v)
    return makeError(ErrorCode::kBadFile, "metadata key '{}' is missing or not an unsigned integer",
                     key);
  if (*v > kMaxDim * 16ull)
    return makeError(ErrorCode::kBadFile, "metadata '{}' = {} is out of range", key, *v);
  return static_cast<uint32_t>(*v);
}

// A count that is one number for every layer or an array of one per layer
// (Gemma 4's head counts): the first layer's value, and the array when its
// entries differ (empty when they do not). nullopt: the key is absent.
Expected<std::optional<uint32_t>> perLayerUint(const gguf::GgufFile& f, const std::string& key,
                                               uint32_t nLayer, std::vector<uint32_t>& layers) {
  layers.clear();
  const gguf::Value* v = f.find(key);
  if (!v) return std::optional<uint32_t>{};
  if (v->type != gguf::ValueType::kArray) {
    KVS_ASSIGN_OR_RETURN(const uint32_t one, requiredUint(f, key));
    return std::optional<uint32_t>{one};
  }
  const auto values = f.getIntArray(key);
  if (!values || values->empty() || values->size() != nLayer) {
    return makeError(ErrorCode::kBadFile, "metadata '{}' is not one integer for each of {} layers",
                     key, nLayer);
  }
  for (const int64_t x : *values) {
    if (x <= 0 || x > int64_t{kMaxDim})
      return makeError(ErrorCode::kBadFile, "metadata '{}' holds {}, out of range", key, x);
    layers.push_back(static_cast<uint32_t>(x));
  }
  const uint32_t first = layers.front();
  if (std::all_of(layers.begin(), layers.end(), [&](uint32_t x) { return x == first; }))
    layers.clear();
  return std::optional<uint32_t>{first};
}

Status ropeScalingFromGguf(const gguf::GgufFile& f, const std::string& arch, ModelConfig& c) {
  const std::string type(f.getString(arch + ".rope.scaling.type").value_or("none"));
  if (f.findTensor("rope_freqs.weight")) {
    c.rope.scaling = RopeScaling::kFreqFactors;  // llama 3.1+: factors shipped as a tensor
    return okStatus();
  }
  if (f.findTensor("rope_factors_long.weight")) {  // Phi-3 128K: LongRoPE
    c.rope.scaling = RopeScaling::kLongRope;
    c.rope.originalContext = static_cast<uint32_t>(
        f.getUint(arch + ".rope.scaling.original_context_length").value_or(c.contextLength));
    c.rope.attnFactor =
        static_cast<float>(f.getFloat(arch + ".rope.scaling.attn_factor").value_or(1.0));
    return okStatus();
  }
  if (type == "none") return okStatus();
  if (type == "linear") {
    c.rope.scaling = RopeScaling::kLinear;
    c.rope.factor = static_cast<float>(f.getFloat(arch + ".rope.scaling.factor").value_or(1.0));
    return okStatus();
  }
  if (type == "yarn") {
    const auto get = [&](std::string_view key, double fallback) {
      return static_cast<float>(
          f.getFloat(fmt::format("{}.rope.scaling.{}", arch, key)).value_or(fallback));
    };
    if (get("yarn_log_multiplier", 0.0) != 0.0f)
      return makeError(ErrorCode::kUnsupported,
                       "YaRN with a log multiplier (DeepSeek's mscale) is not supported");
    c.rope.scaling = RopeScaling::kYarn;
    c.rope.factor = get("factor", 1.0);
    c.rope.originalContext = static_cast<uint32_t>(
        f.getUint(arch + ".rope.scaling.original_context_length").value_or(c.contextLength));
    c.rope.attnFactor = get("attn_factor", 1.0);
    c.rope.betaFast = get("yarn_beta_fast", 32.0);
    c.rope.betaSlow = get("yarn_beta_slow", 1.0);
    return okStatus();
  }
  return makeError(ErrorCode::kUnsupported,
                   "RoPE scaling '{}' is not supported (supported: none, linear, yarn, llama3 "
                   "frequency factors)",
                   type);
}

// Gemma 3's files say a period (or nothing: its architecture's default);
// Gemma 4's a bool per layer, true for a window layer.
Status slidingWindowFromGguf(const gguf::GgufFile& f, const std::string& arch, ModelConfig& c) {
  c.slidingWindow =
      static_cast<uint32_t>(f.getUint(arch + ".attention.sliding_window").value_or(0));
  if (c.slidingWindow == 0) return okStatus();
  c.ropeThetaWindow = static_cast<float>(
      f.getFloat(arch + ".rope.freq_base_swa")
          .value_or(c.arch->description->windowRopeScaled ? c.rope.theta : 10000.0));
  const std::string key = arch + ".attention.sliding_window_pattern";
  const gguf::Value* pattern = f.find(key);
  if (!pattern) {
    c.windowLayers = windowLayersOfPeriod(c.nLayer, c.arch->description->windowPeriod);
  } else if (pattern->type == gguf::ValueType::kArray &&
             pattern->elementType == gguf::ValueType::kBool) {
    if (pattern->array.size() != c.nLayer)
      return makeError(ErrorCode::kBadFile, "metadata '{}' has {} entries for {} layers", key,
                       pattern->array.size(), c.nLayer);
    for (const gguf::Value& v : pattern->array) c.windowLayers.push_back(v.u != 0);
  } else if (auto period = f.getUint(key); period && *period <= c.nLayer) {
    c.windowLayers = windowLayersOfPeriod(c.nLayer, static_cast<uint32_t>(*period));
  } else {
    return makeError(ErrorCode::kBadFile,
                     "metadata '{}' is neither a layer period nor one bool per layer", key);
  }
  return okStatus();
}

}  // namespace

std::vector<bool> windowLayersOfPeriod(uint32_t nLayer, uint32_t period) {
  std::vector<bool> layers(nLayer, true);
  if (period == 0) return layers;
  for (uint32_t l = 0; l < nLayer; ++l) layers[l] = l % period < period - 1;
  return layers;
}

std::optional<uint32_t> windowPeriodOf(const std::vector<bool>& layers) {
  const auto n = static_cast<uint32_t>(layers.size());
  for (uint32_t period = 0; period <= n; ++period)
    if (windowLayersOfPeriod(n, period) == layers) return period;
  return std::nullopt;
}

Expected<ModelConfig> configFromGguf(const gguf::GgufFile& f) {
  ModelConfig c;
  auto archName = f.getString("general.architecture");
  if (!archName)
    return makeError(ErrorCode::kBadFile, "metadata key 'general.architecture' is missing");
  c.architecture = std::string(*archName);
  KVS_ASSIGN_OR_RETURN(c.arch, findArchitecture(c.architecture));
  c.name = std::string(f.getString("general.name").value_or(""));
  const std::string a = c.architecture;
  KVS_ASSIGN_OR_RETURN(c.nLayer, requiredUint(f, a + ".block_count"));
  KVS_ASSIGN_OR_RETURN(c.nEmbd, requiredUint(f, a + ".embedding_length"));
  KVS_ASSIGN_OR_RETURN(const auto ff,
                       perLayerUint(f, a + ".feed_forward_length", c.nLayer, c.layerFf));
  if (!ff) {
    return makeError(ErrorCode::kBadFile, "metadata key '{}.feed_forward_length' is missing", a);
  }
  c.nFf = *ff;
  KVS_ASSIGN_OR_RETURN(const auto heads,
                       perLayerUint(f, a + ".attention.head_count", c.nLayer, c.layerHeads));
  if (!heads) {
    return makeError(ErrorCode::kBadFile, "metadata key '{}.attention.head_count' is missing", a);
  }
  c.nHead = *heads;
  KVS_ASSIGN_OR_RETURN(const auto headsKv,
                       perLayerUint(f, a + ".attention.head_count_kv", c.nLayer, c.layerHeadsKv));
  if (headsKv) {
    c.nHeadKv = *headsKv;
  } else {  // no KV head count: as many as query heads, per layer too
    c.nHeadKv = c.nHead;
    c.layerHeadsKv = c.layerHeads;
  }
  c.headDim = static_cast<uint32_t>(
      f.getUint(a + ".attention.key_length").value_or(c.nHead ? c.nEmbd / c.nHead : 0));
  c.headDimV = static_cast<uint32_t>(f.getUint(a + ".attention.value_length").value_or(c.headDim));
  c.contextLength = static_cast<uint32_t>(f.getUint(a + ".context_length").value_or(2048));
  c.rmsEps = static_cast<float>(f.getFloat(a + ".attention.layer_norm_rms_epsilon").value_or(1e-5));
  c.rope.style = c.arch->rope;
  c.rope.theta = static_cast<float>(f.getFloat(a + ".rope.freq_base").value_or(10000.0));
  c.rope.dims = static_cast<uint32_t>(f.getUint(a + ".rope.dimension_count").value_or(c.headDim));
  KVS_TRY(ropeScalingFromGguf(f, a, c));
  c.nExpert = static_cast<uint32_t>(f.getUint(a + ".expert_count").value_or(0));
  c.nExpertUsed = static_cast<uint32_t>(f.getUint(a + ".expert_used_count").value_or(0));
  // llama.cpp's fallback for files without the key: the dense width split
  // over the experts a token uses.
  c.nFfExp = static_cast<uint32_t>(f.getUint(a + ".expert_feed_forward_length")
                                       .value_or(c.nExpertUsed ? c.nFf / c.nExpertUsed : 0));
  c.expertWeightsScale = static_cast<float>(f.getFloat(a + ".expert_weights_scale").value_or(0.0));
  KVS_TRY(slidingWindowFromGguf(f, a, c));
  if (c.slidingWindow > 0) {  // Gemma 4: the window layers' own head width and rotation
    const auto optional = [&](const std::string& key, uint32_t fallback) -> Expected<uint32_t> {
      if (!f.find(key)) return fallback;
      return requiredUint(f, key);
    };
    KVS_ASSIGN_OR_RETURN(c.headDimWindow, optional(a + ".attention.key_length_swa", 0));
    KVS_ASSIGN_OR_RETURN(const uint32_t valueWindow,
                         optional(a + ".attention.value_length_swa", c.headDimWindow));
    if (valueWindow != c.headDimWindow) {
      return makeError(ErrorCode::kUnsupported,
                       "{} window layers with keys of {} and values of {} values per head are "
                       "not supported",
                       a, c.headDimWindow, valueWindow);
    }
    KVS_ASSIGN_OR_RETURN(c.ropeDimsWindow, optional(a + ".rope.dimension_count_swa", 0));
  }

  // Gemma 4's keys, read only for an architecture whose description runs
  // them (its tensor table's presence rules, its soft-cap default): any
  // other forward pass would ignore them and compute something else.
  const ArchDescription& d = *c.arch->description;
  const auto tableHas = [&](Presence p) {
    return std::ranges::any_of(d.layer, [&](const auto& r) { return r.presence == p; });
  };
  const auto count = [&](const std::string& key) -> Expected<uint32_t> {
    if (!f.find(key)) return 0u;
    return requiredUint(f, key);
  };
  if (tableHas(Presence::kStoresKv)) {
    KVS_ASSIGN_OR_RETURN(c.nKvShared, count(a + ".attention.shared_kv_layers"));
  }
  if (tableHas(Presence::kPerLayer)) {
    KVS_ASSIGN_OR_RETURN(c.nEmbdPerLayer, count(a + ".embedding_length_per_layer_input"));
  }
  if (d.defaultLogitSoftcap > 0.0f) {
    c.finalLogitSoftcap = static_cast<float>(
        f.getFloat(a + ".final_logit_softcapping").value_or(d.defaultLogitSoftcap));
  }
  // A global layer without attn_v takes its K projection as V (Gemma 4).
  for (uint32_t l = 0; tableHas(Presence::kValueProjection) && l < c.nLayer; ++l) {
    if (c.isWindowLayer(l)) continue;
    c.globalValueIsKey = !f.findTensor(fmt::format("blk.{}.attn_v.weight", l));
    break;
  }

  const gguf::TensorInfo* embd = f.findTensor("token_embd.weight");
  if (!embd || embd->shape.size() != 2) {
    return makeError(ErrorCode::kBadFile, "tensor 'token_embd.weight' is missing or not 2-D");
  }
  if (embd->shape[1] > kMaxDim * 4ull)
    return makeError(ErrorCode::kBadFile, "vocabulary of {} tokens is out of range",
                     embd->shape[1]);
  c.nVocab = static_cast<uint32_t>(embd->shape[1]);
  c.tiedEmbeddings = f.findTensor("output.weight") == nullptr;
  KVS_TRY(validateConfig(c));
  return c;
}

namespace {

// Hugging Face model_type values that name an architecture of the registry
// by another name.
constexpr std::pair<std::string_view, std::string_view> kHfModelTypes[] = {
    {"gemma3_text", "gemma3"},  // Gemma3ForCausalLM
    {"gemma4_text", "gemma4"},  // Gemma4ForCausalLM
    {"gpt_oss", "gpt-oss"},     // GptOssForCausalLM
};

// Gemma's sliding window: the window, which layers have it (layer_types, or
// every sliding_window_pattern-th layer global, or the architecture's
// default period) and their RoPE base.
Status slidingWindowFromHf(const nlohmann::json& j, ModelConfig& c) {
  const auto window = j.find("sliding_window");
  if (window == j.end() || !window->is_number_unsigned() || window->get<uint64_t>() == 0)
    return okStatus();
  if (window->get<uint64_t>() > (1u << 30))
    return makeError(ErrorCode::kBadFile, "config.json 'sliding_window' is out of range");
  c.slidingWindow = window->get<uint32_t>();
  c.ropeThetaWindow = j.value("rope_local_base_freq",
                              c.arch->description->windowRopeScaled ? c.rope.theta : 10000.0f);
  if (const auto types = j.find("layer_types"); types != j.end() && types->is_array()) {
    if (types->size() != c.nLayer)
      return makeError(ErrorCode::kBadFile,
                       "config.json 'layer_types' has {} entries for {} layers", types->size(),
                       c.nLayer);
    for (const auto& t : *types) c.windowLayers.push_back(t == "sliding_attention");
    return okStatus();
  }
  const auto pattern = j.find("sliding_window_pattern");
  const uint32_t period = pattern != j.end() && pattern->is_number_unsigned()
                              ? pattern->get<uint32_t>()
                              : c.arch->description->windowPeriod;
  c.windowLayers = windowLayersOfPeriod(c.nLayer, period);
  return okStatus();
}

// Gemma 4's own keys (after the common ones, which read its window layers'
// head width and KV heads): the global layers' head width, KV heads (when
// they take V from K) and proportional RoPE, KV-shared layers, per-layer
// inputs, the double-wide MLP, experts and the logit soft-cap.
Status gemma4FromHf(const nlohmann::json& j, ModelConfig& c) {
  const auto count = [&](const char* key, uint32_t fallback) -> Expected<uint32_t> {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_number_unsigned() || it->get<uint64_t>() > kMaxDim)
      return makeError(ErrorCode::kBadFile, "config.json '{}' must be a count in range", key);
    return it->get<uint32_t>();
  };
  c.headDimWindow = c.headDim;
  KVS_ASSIGN_OR_RETURN(c.headDim, count("global_head_dim", c.headDimWindow));
  c.headDimV = c.headDim;
  c.globalValueIsKey = j.value("attention_k_eq_v", false);
  KVS_ASSIGN_OR_RETURN(const uint32_t globalKv, count("num_global_key_value_heads", c.nHeadKv));
  if (c.globalValueIsKey && globalKv != c.nHeadKv) {
    for (uint32_t l = 0; l < c.nLayer; ++l)
      c.layerHeadsKv.push_back(c.isWindowLayer(l) ? c.nHeadKv : globalKv);
  }
  KVS_ASSIGN_OR_RETURN(c.nKvShared, count("num_kv_shared_layers", 0));
  KVS_ASSIGN_OR_RETURN(c.nEmbdPerLayer, count("hidden_size_per_layer_input", 0));
  if (j.value("use_double_wide_mlp", false)) {
    for (uint32_t l = 0; l < c.nLayer; ++l)
      c.layerFf.push_back(l + c.nKvShared >= c.nLayer ? 2 * c.nFf : c.nFf);
  }
  if (!j.value("enable_moe_block", c.nExpert > 0)) c.nExpert = 0;
  if (c.nExpert > 0) {
    KVS_ASSIGN_OR_RETURN(c.nExpertUsed, count("top_k_experts", c.nExpertUsed));
    KVS_ASSIGN_OR_RETURN(c.nFfExp, count("expert_intermediate_size", c.nFfExp));
  }
  const auto cap = j.find("final_logit_softcapping");
  c.finalLogitSoftcap = cap == j.end()     ? c.arch->description->defaultLogitSoftcap
                        : cap->is_number() ? cap->get<float>()
                                           : 0.0f;
  // rope_parameters: the global layers' base and share of turning pairs,
  // over their whole head; the window layers' base and rotated share.
  const auto rope = j.find("rope_parameters");
  if (rope == j.end() || !rope->is_object())
    return makeError(ErrorCode::kBadFile, "config.json lacks gemma4's 'rope_parameters'");
  const nlohmann::json global = rope->value("full_attention", nlohmann::json::object());
  const nlohmann::json window = rope->value("sliding_attention", nlohmann::json::object());
  c.rope.theta = global.value("rope_theta", c.rope.theta);
  c.rope.dims = c.headDim;
  // "default" turns every pair: proportional with a share of 1 (the plan
  // needs the factors, which GGUF files ship either way).
  const std::string type = global.value("rope_type", "default");
  if (type != "proportional" && type != "default")
    return makeError(ErrorCode::kUnsupported, "gemma4 global RoPE '{}' is not supported", type);
  c.rope.scaling = RopeScaling::kProportional;
  c.rope.partialRotary = global.value("partial_rotary_factor", 1.0f);
  const float windowShare = window.value("partial_rotary_factor", 1.0f);
  for (const float share : {c.rope.partialRotary, windowShare}) {
    if (!(share > 0.0f) || share > 1.0f)
      return makeError(ErrorCode::kBadFile, "config.json 'partial_rotary_factor' out of (0, 1]");
  }
  c.ropeThetaWindow = window.value("rope_theta", c.ropeThetaWindow);
  c.ropeDimsWindow = static_cast<uint32_t>(static_cast<float>(c.headDimWindow) * windowShare);
  return okStatus();
}

Expected<ModelConfig> configFromHfUnchecked(const nlohmann::json& outer) {
  if (!outer.is_object()) return makeError(ErrorCode::kBadFile, "config.json is not a JSON object");
  // A multimodal checkpoint (Gemma3ForConditionalGeneration) keeps the
  // language model's config in text_config; kvscope runs that model.
  const auto text = outer.find("text_config");
  const nlohmann::json& j = text != outer.end() && text->is_object() ? *text : outer;
  auto getU = [&](const char* key, uint64_t fallback, bool required) -> Expected<uint32_t> {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (required) return makeError(ErrorCode::kBadFile, "config.json lacks '{}'", key);
      return static_cast<uint32_t>(fallback);
    }
    if (!it->is_number_unsigned() || it->get<uint64_t>() > kMaxDim * 16ull) {
      return makeError(ErrorCode::kBadFile,
                       "config.json '{}' must be a non-negative integer in range", key);
    }
    return static_cast<uint32_t>(it->get<uint64_t>());
  };
  auto getF = [&](const char* key, double fallback) {
    auto it = j.find(key);
    return (it != j.end() && it->is_number()) ? it->get<double>() : fallback;
  };
  ModelConfig c;
  c.architecture = j.value("model_type", outer.value("model_type", std::string()));
  if (c.architecture.empty())
    return makeError(ErrorCode::kBadFile, "config.json lacks 'model_type'");
  for (const auto& [hf, name] : kHfModelTypes)
    if (c.architecture == hf) c.architecture = name;
  KVS_ASSIGN_OR_RETURN(c.arch, findArchitecture(c.architecture));
  KVS_ASSIGN_OR_RETURN(c.nLayer, getU("num_hidden_layers", 0, true));
  KVS_ASSIGN_OR_RETURN(c.nEmbd, getU("hidden_size", 0, true));
  KVS_ASSIGN_OR_RETURN(c.nFf, getU("intermediate_size", 0, true));
  KVS_ASSIGN_OR_RETURN(c.nHead, getU("num_attention_heads", 0, true));
  KVS_ASSIGN_OR_RETURN(c.nHeadKv, getU("num_key_value_heads", c.nHead, false));
  KVS_ASSIGN_OR_RETURN(c.headDim, getU("head_dim", c.nHead ? c.nEmbd / c.nHead : 0, false));
  c.headDimV = c.headDim;
  KVS_ASSIGN_OR_RETURN(c.nVocab, getU("vocab_size", 0, true));
  KVS_ASSIGN_OR_RETURN(c.contextLength, getU("max_position_embeddings", 2048, false));
  c.rmsEps = static_cast<float>(getF("rms_norm_eps", 1e-6));
  // Hugging Face stores q/k projections for rotate_half RoPE, which is the
  // NeoX pairing; GGUF converters permute llama weights to adjacent pairs
  // instead. Using NeoX here is the same math without touching the weights.
  c.rope.style = RopeStyle::kNeox;
  c.rope.theta = static_cast<float>(getF("rope_theta", 10000.0));
  c.rope.dims = c.headDim;
  c.tiedEmbeddings = j.value("tie_word_embeddings", false);
  KVS_ASSIGN_OR_RETURN(c.nExpert, getU("num_experts", 0, false));
  if (c.nExpert == 0) {  // gpt-oss's name for it
    KVS_ASSIGN_OR_RETURN(c.nExpert, getU("num_local_experts", 0, false));
  }
  KVS_ASSIGN_OR_RETURN(c.nExpertUsed, getU("num_experts_per_tok", 0, false));
  // gpt-oss's experts are intermediate_size wide (it has no dense FFN).
  KVS_ASSIGN_OR_RETURN(c.nFfExp, getU("moe_intermediate_size", c.nExpert ? c.nFf : 0, false));
  if (const auto limit = j.find("swiglu_limit");
      limit != j.end() && limit->is_number() && limit->get<float>() != kSwigluOaiLimit)
    return makeError(ErrorCode::kUnsupported,
                     "config.json 'swiglu_limit' {} is not gpt-oss's {}, the one kvscope runs",
                     limit->get<float>(), kSwigluOaiLimit);
  KVS_TRY(slidingWindowFromHf(j, c));
  if (c.architecture == "gemma4") KVS_TRY(gemma4FromHf(j, c));
  if (const auto scalar = j.find("query_pre_attn_scalar");
      scalar != j.end() && scalar->is_number() && scalar->get<double>() > 0.0)
    c.queryScale = 1.0f / std::sqrt(scalar->get<float>());
  if (auto rs = j.find("rope_scaling"); rs != j.end() && rs->is_object()) {
    const std::string type = rs->value("rope_type", rs->value("type", std::string("none")));
    if (type == "linear") {
      c.rope.scaling = RopeScaling::kLinear;
      c.rope.factor = rs->value("factor", 1.0f);
    } else if (type == "llama3") {
      c.rope.scaling = RopeScaling::kFreqFactors;
      c.rope.factor = rs->value("factor", 8.0f);
      c.rope.lowFreqFactor = rs->value("low_freq_factor", 1.0f);
      c.rope.highFreqFactor = rs->value("high_freq_factor", 4.0f);
      c.rope.originalContext = rs->value("original_max_position_embeddings", 8192u);
    } else if (type == "yarn") {
      if (rs->contains("mscale") || rs->contains("mscale_all_dim"))
        return makeError(ErrorCode::kUnsupported, "YaRN with mscale (DeepSeek's) is not supported");
      c.rope.scaling = RopeScaling::kYarn;
      c.rope.factor = rs->value("factor", 1.0f);
      c.rope.originalContext = rs->value("original_max_position_embeddings", c.contextLength);
      c.rope.attnFactor = rs->value("attention_factor", 0.0f);
      c.rope.betaFast = rs->value("beta_fast", 32.0f);
      c.rope.betaSlow = rs->value("beta_slow", 1.0f);
      c.rope.yarnTruncate = rs->value("truncate", true);
      // transformers' default attention factor is YaRN's own 1 + 0.1 ln(factor),
      // which planForward applies; a stated one replaces it.
      if (c.rope.attnFactor != 0.0f)
        c.rope.attnFactor /= 1.0f + 0.1f * std::log(c.rope.factor);
      else
        c.rope.attnFactor = 1.0f;
    } else if (type != "none" && type != "default") {
      return makeError(ErrorCode::kUnsupported,
                       "RoPE scaling '{}' is not supported (supported: none, linear, llama3, yarn)",
                       type);
    }
  }
  KVS_TRY(validateConfig(c));
  return c;
}

}  // namespace

Expected<ModelConfig> configFromHf(const nlohmann::json& j) {
  try {
    return configFromHfUnchecked(j);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong JSON type
    return makeError(ErrorCode::kBadFile, "config.json: {}", e.what());
  }
}

Status validateConfig(const ModelConfig& c) {
  auto bad = [&](std::string_view what) {
    return makeError(ErrorCode::kBadFile, "invalid {} model: {}", c.architecture, what);
  };
  if (c.nLayer == 0 || c.nLayer > 4096) return bad(fmt::format("{} layers", c.nLayer));
  if (c.nEmbd == 0 || c.nEmbd > kMaxDim) return bad(fmt::format("width {}", c.nEmbd));
  if (c.nFf == 0 || c.nFf > kMaxDim) return bad(fmt::format("feed-forward width {}", c.nFf));
  if (!c.layerFf.empty() && c.layerFf.size() != c.nLayer)
    return bad("per-layer feed-forward widths do not cover every layer");
  for (uint32_t l = 0; l < c.nLayer; ++l)
    if (c.ffOf(l) == 0 || c.ffOf(l) > kMaxDim)
      return bad(fmt::format("layer {}: feed-forward width {}", l, c.ffOf(l)));
  if ((!c.layerHeads.empty() && c.layerHeads.size() != c.nLayer) ||
      (!c.layerHeadsKv.empty() && c.layerHeadsKv.size() != c.nLayer))
    return bad("per-layer head counts do not cover every layer");
  if (c.headDimV != c.headDim) return bad("different K and V head sizes are not supported");
  // The global layers' head width and RoPE, also where every layer is a
  // window layer (query scales and the global RoPE derive from them).
  if (c.headDim == 0 || c.headDim > 4096) return bad(fmt::format("head size {}", c.headDim));
  if (c.rope.dims == 0 || c.rope.dims > c.headDim || c.rope.dims % 2 != 0)
    return bad(fmt::format("RoPE over {} of {} head dimensions", c.rope.dims, c.headDim));
  for (uint32_t l = 0; l < c.nLayer; ++l) {
    const uint32_t heads = c.headsOf(l), headsKv = c.headsKvOf(l), dim = c.headDimOf(l);
    const uint32_t rot = c.ropeDimsOf(l);
    if (heads == 0 || headsKv == 0 || heads > 4096)
      return bad(fmt::format("layer {}: {} heads over {} KV heads", l, heads, headsKv));
    if (heads % headsKv != 0) {
      return bad(
          fmt::format("layer {}: {} heads are not a multiple of {} KV heads", l, heads, headsKv));
    }
    if (dim == 0 || dim > 4096) return bad(fmt::format("layer {}: head size {}", l, dim));
    if (rot == 0 || rot > dim || rot % 2 != 0)
      return bad(fmt::format("layer {}: RoPE over {} of {} head dimensions", l, rot, dim));
  }
  if (c.nKvShared > 0) {
    if (c.nKvShared >= c.nLayer)
      return bad(fmt::format("{} KV-shared layers of {}", c.nKvShared, c.nLayer));
    for (uint32_t l = c.kvLayers(); l < c.nLayer; ++l) {
      const uint32_t from = c.kvSourceOf(l);
      if (from == l) {
        return bad(fmt::format("KV-shared layer {} has no earlier {} layer to read", l,
                               c.isWindowLayer(l) ? "window" : "global"));
      }
      if (c.headsKvOf(from) != c.headsKvOf(l) || c.headDimOf(from) != c.headDimOf(l)) {
        return bad(
            fmt::format("KV-shared layer {} has another K/V shape than layer {}, whose rows "
                        "it reads",
                        l, from));
      }
    }
  }
  if (uint64_t{c.nEmbdPerLayer} * c.nLayer > kMaxDim)
    return bad(fmt::format("per-layer inputs of {} x {} layers", c.nEmbdPerLayer, c.nLayer));
  if (!(c.finalLogitSoftcap >= 0.0f) || c.finalLogitSoftcap > 1e6f)
    return bad("final logit soft-cap out of range");
  if (!(c.rope.theta > 0.0f)) return bad("RoPE base must be positive");
  if (!(c.rmsEps > 0.0f) || c.rmsEps > 1.0f) return bad("RMSNorm epsilon out of range");
  if (c.nVocab == 0) return bad("empty vocabulary");
  if (c.nExpert > 0) {
    if (c.nExpert > 4096) return bad(fmt::format("{} experts", c.nExpert));
    if (c.nExpertUsed == 0 || c.nExpertUsed > c.nExpert)
      return bad(fmt::format("{} of {} experts used per token", c.nExpertUsed, c.nExpert));
    if (c.nFfExp == 0 || c.nFfExp > kMaxDim)
      return bad(fmt::format("expert feed-forward width {}", c.nFfExp));
    if (!(c.expertWeightsScale >= 0.0f) || c.expertWeightsScale > 1e3f)
      return bad("expert weights scale out of range");
  }
  if (c.slidingWindow > 0) {
    if (c.windowLayers.size() != c.nLayer)
      return bad(fmt::format("{} window flags for {} layers", c.windowLayers.size(), c.nLayer));
    if (!(c.ropeThetaWindow > 0.0f)) return bad("window layers' RoPE base must be positive");
  }
  if (c.rope.scaling == RopeScaling::kLinear && !(c.rope.factor > 0.0f))
    return bad("RoPE scaling factor must be positive");
  if (c.rope.scaling == RopeScaling::kYarn &&
      (!(c.rope.factor > 0.0f) || c.rope.factor > 1e4f || c.rope.originalContext == 0 ||
       !(c.rope.attnFactor > 0.0f) || c.rope.attnFactor > 16.0f ||
       !(c.rope.betaFast > c.rope.betaSlow) || !(c.rope.betaSlow > 0.0f)))
    return bad(
        "YaRN needs a factor, an original context, an attention factor in (0, 16] and "
        "beta_fast > beta_slow > 0");
  if (c.rope.scaling == RopeScaling::kLongRope &&
      (c.rope.originalContext == 0 || !(c.rope.attnFactor > 0.0f) || c.rope.attnFactor > 16.0f))
    return bad("LongRoPE needs an original context and an attention factor in (0, 16]");
  return okStatus();
}

}  // namespace kvscope::model
