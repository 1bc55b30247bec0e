#include "model/model_weights.h"

namespace kvscope::model {

void forEachWeight(const ModelWeights& w,
                   const std::function<void(const TensorView&, WeightRole)>& fn) {
  const auto vector = [&](const TensorView* t) {
    if (t) fn(*t, WeightRole::kVector);
  };
  const auto matrix = [&](const TensorView* t) {
    if (t) fn(*t, WeightRole::kMatrix);
  };
  fn(*w.tokenEmbd, WeightRole::kEmbedding);
  if (w.perLayerTokenEmbd) fn(*w.perLayerTokenEmbd, WeightRole::kEmbedding);
  vector(w.outputNorm);
  vector(w.perLayerProjNorm);
  matrix(w.output);
  matrix(w.perLayerModelProj);
  for (const TensorView* t : {w.ropeFreqs, w.ropeLong, w.ropeShort})
    if (t) fn(*t, WeightRole::kRopeFactors);
  for (const LayerWeights& l : w.layers) {
    for (const TensorView* t : {l.attnNorm,
                                l.bq,
                                l.bk,
                                l.bv,
                                l.bo,
                                l.attnSinks,
                                l.qNorm,
                                l.kNorm,
                                l.attnPostNorm,
                                l.ffnNorm,
                                l.ffnPostNorm,
                                l.gateInpBias,
                                l.gateExpsBias,
                                l.upExpsBias,
                                l.downExpsBias,
                                l.gateInpScale,
                                l.downExpsScale,
                                l.ffnPreNorm2,
                                l.ffnPostNorm1,
                                l.ffnPostNorm2,
                                l.layerOutputScale,
                                l.perLayerPostNorm})
      vector(t);
    for (const TensorView* t : {l.wq, l.wk, l.wv, l.wo, l.gate, l.up, l.down, l.gateInp, l.gateExps,
                                l.upExps, l.downExps, l.gateUpExps, l.perLayerGate, l.perLayerProj})
      matrix(t);
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
                     : role == WeightRole::kVector    ? "norm and bias vectors"
                                                      : "RoPE factors";
  return makeError(ErrorCode::kUnsupported,
                   "tensor '{}' has type {}, which the {} backend cannot decode; its {} may be {}",
                   refused->name, gguf::typeName(static_cast<uint32_t>(refused->type)), backend,
                   what, runs);
}

}  // namespace kvscope::model
