#include "model/model_weights.h"

#include <string>

namespace kvscope::model {
namespace {

std::string shapeString(const std::vector<uint64_t>& s) {
  std::string out = "{";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "}";
}

// Looks up `name` and checks its shape; an absent optional tensor is nullptr.
Expected<const TensorView*> bind(const WeightSource& src, const std::string& name,
                                 std::vector<uint64_t> shape, bool required = true) {
  const TensorView* t = src.find(name);
  if (!t) {
    if (!required) return static_cast<const TensorView*>(nullptr);
    return makeError(ErrorCode::kBadFile, "tensor '{}' is missing", name);
  }
  if (t->shape != shape) {
    return makeError(ErrorCode::kBadFile,
                     "tensor '{}' has shape {}, expected {} from the model's metadata", name,
                     shapeString(t->shape), shapeString(shape));
  }
  return t;
}

}  // namespace

Expected<ModelWeights> bindWeights(const ModelConfig& c, const WeightSource& src) {
  ModelWeights w;
  KVS_ASSIGN_OR_RETURN(w.tokenEmbd, bind(src, "token_embd.weight", {c.nEmbd, c.nVocab}));
  KVS_ASSIGN_OR_RETURN(w.outputNorm, bind(src, "output_norm.weight", {c.nEmbd}));
  KVS_ASSIGN_OR_RETURN(w.output,
                       bind(src, "output.weight", {c.nEmbd, c.nVocab}, !c.tiedEmbeddings));
  if (!w.output) w.output = w.tokenEmbd;
  KVS_ASSIGN_OR_RETURN(w.ropeFreqs, bind(src, "rope_freqs.weight", {c.rope.dims / 2}, false));
  const bool bias = c.arch->qkvBias, qkNorm = c.arch->qkNorm;
  for (uint32_t i = 0; i < c.nLayer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights l;
    KVS_ASSIGN_OR_RETURN(l.attnNorm, bind(src, p + "attn_norm.weight", {c.nEmbd}));
    KVS_ASSIGN_OR_RETURN(l.wq, bind(src, p + "attn_q.weight", {c.nEmbd, c.qDim()}));
    KVS_ASSIGN_OR_RETURN(l.wk, bind(src, p + "attn_k.weight", {c.nEmbd, c.kvDim()}));
    KVS_ASSIGN_OR_RETURN(l.wv, bind(src, p + "attn_v.weight", {c.nEmbd, c.nHeadKv * c.headDimV}));
    KVS_ASSIGN_OR_RETURN(l.wo,
                         bind(src, p + "attn_output.weight", {c.nHead * c.headDimV, c.nEmbd}));
    KVS_ASSIGN_OR_RETURN(l.bq, bind(src, p + "attn_q.bias", {c.qDim()}, bias));
    KVS_ASSIGN_OR_RETURN(l.bk, bind(src, p + "attn_k.bias", {c.kvDim()}, bias));
    KVS_ASSIGN_OR_RETURN(l.bv, bind(src, p + "attn_v.bias", {c.nHeadKv * c.headDimV}, bias));
    KVS_ASSIGN_OR_RETURN(l.qNorm, bind(src, p + "attn_q_norm.weight", {c.headDim}, qkNorm));
    KVS_ASSIGN_OR_RETURN(l.kNorm, bind(src, p + "attn_k_norm.weight", {c.headDim}, qkNorm));
    KVS_ASSIGN_OR_RETURN(l.ffnNorm, bind(src, p + "ffn_norm.weight", {c.nEmbd}));
    KVS_ASSIGN_OR_RETURN(l.gate, bind(src, p + "ffn_gate.weight", {c.nEmbd, c.nFf}));
    KVS_ASSIGN_OR_RETURN(l.up, bind(src, p + "ffn_up.weight", {c.nEmbd, c.nFf}));
    KVS_ASSIGN_OR_RETURN(l.down, bind(src, p + "ffn_down.weight", {c.nFf, c.nEmbd}));
    w.layers.push_back(l);
  }
  return w;
}

void forEachWeight(const ModelWeights& w,
                   const std::function<void(const TensorView&, WeightRole)>& fn) {
  const auto vector = [&](const TensorView* t) {
    if (t) fn(*t, WeightRole::kVector);
  };
  fn(*w.tokenEmbd, WeightRole::kEmbedding);
  vector(w.outputNorm);
  fn(*w.output, WeightRole::kMatrix);
  vector(w.ropeFreqs);
  for (const LayerWeights& l : w.layers) {
    for (const TensorView* t : {l.attnNorm, l.bq, l.bk, l.bv, l.qNorm, l.kNorm, l.ffnNorm})
      vector(t);
    for (const TensorView* t : {l.wq, l.wk, l.wv, l.wo, l.gate, l.up, l.down})
      fn(*t, WeightRole::kMatrix);
  }
}

Status checkWeightTypes(const ModelWeights& weights, std::string_view backend,
                        DecodesType decodes) {
  const TensorView* refused = nullptr;
  WeightRole role = WeightRole::kMatrix;
  forEachWeight(weights, [&](const TensorView& t, WeightRole r) {
    if (refused || decodes(t.type, r)) return;
    refused = &t;
    role = r;
  });
  if (!refused) return okStatus();
  std::string runs;
  for (uint32_t raw = 0; raw < 64; ++raw) {
    if (!gguf::typeTraits(raw) || !decodes(static_cast<gguf::TensorType>(raw), role)) continue;
    runs += (runs.empty() ? "" : ", ") + gguf::typeName(raw);
  }
  const char* what = role == WeightRole::kMatrix      ? "weight matrices"
                     : role == WeightRole::kEmbedding ? "token embeddings"
                                                      : "norm and bias vectors";
  return makeError(ErrorCode::kUnsupported,
                   "tensor '{}' has type {}, which the {} backend cannot decode; its {} may be {}",
                   refused->name, gguf::typeName(static_cast<uint32_t>(refused->type)), backend,
                   what, runs);
}

}  // namespace kvscope::model
