#include "model/gguf_export.h"

#include <algorithm>
#include <unordered_map>

#include "gguf/dequant.h"
#include "gguf/quantize.h"
#include "model/description.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/hf_pipeline.h"

namespace kvscope::model {
namespace {

using tokenizer::kNoToken;
using tokenizer::TokenId;
using tokenizer::Vocab;
using tokenizer::VocabKind;

}  // namespace

void setConfigMetadata(gguf::GgufWriter& w, const ModelConfig& c, const std::string& name) {
  const std::string& a = c.architecture;
  w.set("general.architecture", gguf::stringValue(a));
  if (!name.empty()) w.set("general.name", gguf::stringValue(name));
  w.set(a + ".block_count", gguf::uint32Value(c.nLayer));
  w.set(a + ".context_length", gguf::uint32Value(c.contextLength));
  w.set(a + ".embedding_length", gguf::uint32Value(c.nEmbd));
  // Per-layer counts as arrays (Gemma 4's form), else one number.
  const auto counts = [&](const std::vector<uint32_t>& layers, uint32_t one) {
    if (layers.empty()) return gguf::uint32Value(one);
    std::vector<gguf::Value> values;
    for (const uint32_t n : layers) values.push_back(gguf::uint32Value(n));
    return gguf::arrayValue(gguf::ValueType::kUint32, std::move(values));
  };
  w.set(a + ".feed_forward_length", counts(c.layerFf, c.nFf));
  w.set(a + ".attention.head_count", counts(c.layerHeads, c.nHead));
  w.set(a + ".attention.head_count_kv", counts(c.layerHeadsKv, c.nHeadKv));
  w.set(a + ".attention.key_length", gguf::uint32Value(c.headDim));
  w.set(a + ".attention.value_length", gguf::uint32Value(c.headDimV));
  w.set(a + ".attention.layer_norm_rms_epsilon", gguf::float32Value(c.rmsEps));
  w.set(a + ".rope.freq_base", gguf::float32Value(c.rope.theta));
  w.set(a + ".rope.dimension_count", gguf::uint32Value(c.rope.dims));
  if (c.nExpert > 0) {
    w.set(a + ".expert_count", gguf::uint32Value(c.nExpert));
    w.set(a + ".expert_used_count", gguf::uint32Value(c.nExpertUsed));
    w.set(a + ".expert_feed_forward_length", gguf::uint32Value(c.nFfExp));
    if (c.expertWeightsScale != 0.0f)
      w.set(a + ".expert_weights_scale", gguf::float32Value(c.expertWeightsScale));
  }
  if (c.slidingWindow > 0) {
    w.set(a + ".attention.sliding_window", gguf::uint32Value(c.slidingWindow));
    w.set(a + ".rope.freq_base_swa", gguf::float32Value(c.ropeThetaWindow));
    if (c.headDimWindow != 0) {
      w.set(a + ".attention.key_length_swa", gguf::uint32Value(c.headDimWindow));
      w.set(a + ".attention.value_length_swa", gguf::uint32Value(c.headDimWindow));
    }
    if (c.ropeDimsWindow != 0)
      w.set(a + ".rope.dimension_count_swa", gguf::uint32Value(c.ropeDimsWindow));
    // A period where one describes the layers of an architecture whose files
    // state one (Gemma 3's loaders read it), else a flag per layer (Gemma 4's).
    const auto period = windowPeriodOf(c.windowLayers);
    if (period && c.arch->description->windowPeriod != 0) {
      w.set(a + ".attention.sliding_window_pattern", gguf::uint32Value(*period));
    } else {
      std::vector<gguf::Value> flags;
      for (bool window : c.windowLayers) flags.push_back(gguf::boolValue(window));
      w.set(a + ".attention.sliding_window_pattern",
            gguf::arrayValue(gguf::ValueType::kBool, std::move(flags)));
    }
  }
  if (c.nKvShared > 0) w.set(a + ".attention.shared_kv_layers", gguf::uint32Value(c.nKvShared));
  // Gemma 4's loaders read the per-layer width also where it is 0.
  const auto& layerRules = c.arch->description->layer;
  if (std::ranges::any_of(layerRules,
                          [](const auto& r) { return r.presence == Presence::kPerLayer; }))
    w.set(a + ".embedding_length_per_layer_input", gguf::uint32Value(c.nEmbdPerLayer));
  if (c.finalLogitSoftcap > 0.0f || c.arch->description->defaultLogitSoftcap > 0.0f)
    w.set(a + ".final_logit_softcapping", gguf::float32Value(c.finalLogitSoftcap));
  if (c.rope.scaling == RopeScaling::kLinear) {
    w.set(a + ".rope.scaling.type", gguf::stringValue("linear"));
    w.set(a + ".rope.scaling.factor", gguf::float32Value(c.rope.factor));
  }
  if (c.rope.scaling == RopeScaling::kYarn) {
    w.set(a + ".rope.scaling.type", gguf::stringValue("yarn"));
    w.set(a + ".rope.scaling.factor", gguf::float32Value(c.rope.factor));
    w.set(a + ".rope.scaling.original_context_length", gguf::uint32Value(c.rope.originalContext));
    if (c.rope.attnFactor != 1.0f)
      w.set(a + ".rope.scaling.attn_factor", gguf::float32Value(c.rope.attnFactor));
    if (c.rope.betaFast != 32.0f || c.rope.betaSlow != 1.0f) {
      w.set(a + ".rope.scaling.yarn_beta_fast", gguf::float32Value(c.rope.betaFast));
      w.set(a + ".rope.scaling.yarn_beta_slow", gguf::float32Value(c.rope.betaSlow));
    }
  }
  if (c.rope.scaling == RopeScaling::kLongRope) {
    w.set(a + ".rope.scaling.original_context_length", gguf::uint32Value(c.rope.originalContext));
    w.set(a + ".rope.scaling.attn_factor", gguf::float32Value(c.rope.attnFactor));
  }
}

namespace {

// Hugging Face rotate-half order -> adjacent pairs: within each head, GGUF row
// 2i + j is Hugging Face row j * headDim/2 + i.
std::vector<float> halvesToPairs(std::span<const float> v, uint64_t rowLength, uint32_t headDim) {
  std::vector<float> out(v.size());
  const uint64_t rows = v.size() / rowLength;
  const uint32_t half = headDim / 2;
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t k = r % headDim;
    const uint64_t src = r - k + (k % 2) * half + k / 2;
    std::copy_n(v.begin() + static_cast<ptrdiff_t>(src * rowLength), rowLength,
                out.begin() + static_cast<ptrdiff_t>(r * rowLength));
  }
  return out;
}

bool isRotatedProjection(std::string_view name) {
  for (std::string_view suffix :
       {".attn_q.weight", ".attn_k.weight", ".attn_q.bias", ".attn_k.bias"})
    if (name.ends_with(suffix)) return true;
  return false;
}

// The type a tensor is stored as: `wanted` for 2-D weights whose rows fill
// whole blocks, F16 for other 2-D weights, F32 for everything else.
gguf::TensorType storedType(const TensorView& t, gguf::TensorType wanted) {
  if (t.shape.size() != 2) return gguf::TensorType::kF32;
  return t.shape[0] % gguf::traits(wanted).blockElements == 0 ? wanted : gguf::TensorType::kF16;
}

Status addTensor(gguf::GgufWriter& w, const TensorView& t, bool permute, const ModelConfig& c,
                 gguf::TensorType wanted) {
  if (!gguf::canDequantize(t.type)) {
    return makeError(ErrorCode::kUnsupported, "tensor '{}' has type {}, which cannot be converted",
                     t.name, gguf::traits(t.type).name);
  }
  std::vector<float> values(t.elements());
  KVS_TRY(gguf::dequantize(t.type, t.data, values));
  if (permute && isRotatedProjection(t.name)) {
    const uint64_t rowLength = t.shape.size() == 2 ? t.shape[0] : 1;
    values = halvesToPairs(values, rowLength, c.headDim);
  }
  return w.addQuantizedTensor(t.name, t.shape, storedType(t, wanted), values);
}

// SentencePiece scores of a SentencePiece-style BPE vocabulary for llama.cpp
// (tokenizer/gguf_vocab.h): minus the rank of the first merge making each
// token; a token no merge makes (a character, a byte, an added token) scores
// below every merge.
std::vector<float> mergeRankScores(const Vocab& vocab) {
  std::unordered_map<std::string, size_t> ids;
  for (size_t i = 0; i < vocab.tokens.size(); ++i) ids.emplace(vocab.tokens[i].text, i);
  std::vector<float> scores(vocab.tokens.size(), -static_cast<float>(vocab.merges.size() + 1));
  std::vector<bool> made(vocab.tokens.size(), false);
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& m = vocab.merges[rank];
    const size_t space = m.find(' ');
    if (space == std::string::npos) continue;
    const auto it = ids.find(m.substr(0, space) + m.substr(space + 1));
    if (it == ids.end() || made[it->second]) continue;
    made[it->second] = true;
    scores[it->second] = -static_cast<float>(rank);
  }
  return scores;
}

}  // namespace

Status setVocabMetadata(gguf::GgufWriter& w, const Vocab& vocab) {
  const bool spmBpe = vocab.kind == VocabKind::kBpe && !vocab.byteLevel;
  if (spmBpe && !vocab.pipeline) {
    return makeError(ErrorCode::kUnsupported,
                     "this SentencePiece-style BPE tokenizer has no pipeline to store; give a "
                     "GGUF tokenizer instead");
  }
  std::vector<std::string> texts;
  std::vector<float> scores = spmBpe ? mergeRankScores(vocab) : std::vector<float>{};
  std::vector<int32_t> types;
  for (const auto& t : vocab.tokens) {
    texts.push_back(t.text);
    if (!spmBpe) scores.push_back(t.score);
    types.push_back(static_cast<int32_t>(t.type));
  }
  const bool spm = vocab.kind == VocabKind::kSpm;
  w.set("tokenizer.ggml.model", gguf::stringValue(spm || spmBpe ? "llama" : "gpt2"));
  if (!spm && !spmBpe) w.set("tokenizer.ggml.pre", gguf::stringValue(vocab.preTokenizer));
  w.set("tokenizer.ggml.tokens", gguf::stringArrayValue(texts));
  w.set("tokenizer.ggml.scores", gguf::float32ArrayValue(scores));
  w.set("tokenizer.ggml.token_type", gguf::int32ArrayValue(types));
  if (!spm) w.set("tokenizer.ggml.merges", gguf::stringArrayValue(vocab.merges));
  if (!spm && vocab.pipeline) {
    w.set(std::string(tokenizer::kPipelineKey),
          gguf::stringValue(tokenizer::pipelineToHfJson(*vocab.pipeline).dump()));
    w.set(std::string(tokenizer::kIgnoreMergesKey), gguf::boolValue(vocab.ignoreMerges));
    w.set(std::string(tokenizer::kFuseUnknownKey), gguf::boolValue(vocab.fuseUnknown));
  }
  const std::pair<const char*, TokenId> ids[] = {
      {"tokenizer.ggml.bos_token_id", vocab.bos},
      {"tokenizer.ggml.eos_token_id", vocab.eos},
      {"tokenizer.ggml.eot_token_id", vocab.eot},
      {"tokenizer.ggml.unknown_token_id", vocab.unk},
      {"tokenizer.ggml.padding_token_id", vocab.pad},
  };
  for (const auto& [key, id] : ids)
    if (id != kNoToken) w.set(key, gguf::uint32Value(static_cast<uint32_t>(id)));
  w.set("tokenizer.ggml.add_bos_token", gguf::boolValue(vocab.addBos));
  w.set("tokenizer.ggml.add_eos_token", gguf::boolValue(vocab.addEos));
  w.set("tokenizer.ggml.add_space_prefix", gguf::boolValue(vocab.addSpacePrefix));
  if (!vocab.chatTemplate.empty())
    w.set("tokenizer.chat_template", gguf::stringValue(vocab.chatTemplate));
  if (!vocab.namedChatTemplates.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, source] : vocab.namedChatTemplates) {
      names.push_back(name);
      w.set("tokenizer.chat_template." + name, gguf::stringValue(source));
    }
    w.set("tokenizer.chat_templates", gguf::stringArrayValue(names));
  }
  return okStatus();
}

Expected<gguf::GgufWriter> ggufFromModel(const ModelFile& model, const Vocab& vocab,
                                         const GgufExportOptions& options) {
  const ModelConfig& c = model.config();
  if (vocab.tokens.size() > c.nVocab) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the tokenizer has {} tokens but the model's embedding has only {} rows",
                     vocab.tokens.size(), c.nVocab);
  }
  const bool permute = model.format() == ModelFormat::kHuggingFace &&
                       c.rope.style == RopeStyle::kNeox && c.arch->rope == RopeStyle::kNormal;
  if (permute && c.rope.dims != c.headDim) {
    return makeError(ErrorCode::kUnsupported,
                     "partial rotary embeddings ({} of {} dimensions) cannot be converted",
                     c.rope.dims, c.headDim);
  }
  if (model.format() == ModelFormat::kHuggingFace && c.rope.scaling == RopeScaling::kFreqFactors) {
    return makeError(ErrorCode::kUnsupported,
                     "llama3 RoPE scaling cannot be converted yet (GGUF needs rope_freqs.weight)");
  }
  gguf::GgufWriter w;
  setConfigMetadata(w, c, options.name.empty() ? c.name : options.name);
  KVS_TRY(setVocabMetadata(w, vocab));
  for (const TensorView& t : model.all()) {
    if (c.tiedEmbeddings && t.name == "output.weight") continue;  // token_embd.weight holds it
    KVS_TRY(addTensor(w, t, permute, c, options.weightType));
  }
  if (c.rope.scaling == RopeScaling::kProportional) {  // GGUF carries it as a tensor
    const std::vector<float> factors = proportionalRopeFactors(c.rope);
    KVS_TRY(w.addQuantizedTensor("rope_freqs.weight", {factors.size()}, gguf::TensorType::kF32,
                                 factors));
  }
  return w;
}

}  // namespace kvscope::model
