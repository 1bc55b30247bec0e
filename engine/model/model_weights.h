#pragma once
// Binds a WeightSource's tensors to the roles a llama-family forward pass
// uses, checking presence and shape against the ModelConfig, so that a file
// whose tensors disagree with its metadata fails at load with the tensor's
// name and both shapes, not with garbage output later.
// Shapes are GGUF order ({in, out} for projections).

#include <functional>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "model/model_config.h"
#include "model/weight_source.h"

namespace kvscope::model {

struct LayerWeights {
  const TensorView* attnNorm = nullptr;  // {nEmbd}
  const TensorView* wq = nullptr;        // {nEmbd, qDim}
  const TensorView* wk = nullptr;        // {nEmbd, kvDim}
  const TensorView* wv = nullptr;        // {nEmbd, kvDim}
  const TensorView* wo = nullptr;        // {qDim, nEmbd}
  const TensorView* bq = nullptr;        // {qDim}   qwen2 only
  const TensorView* bk = nullptr;        // {kvDim}  qwen2 only
  const TensorView* bv = nullptr;        // {kvDim}  qwen2 only
  const TensorView* qNorm = nullptr;     // {headDim} qwen3 only
  const TensorView* kNorm = nullptr;     // {headDim} qwen3 only
  const TensorView* ffnNorm = nullptr;   // {nEmbd}
  const TensorView* gate = nullptr;      // {nEmbd, nFf}
  const TensorView* up = nullptr;        // {nEmbd, nFf}
  const TensorView* down = nullptr;      // {nFf, nEmbd}
};

struct ModelWeights {
  const TensorView* tokenEmbd = nullptr;   // {nEmbd, nVocab}
  const TensorView* outputNorm = nullptr;  // {nEmbd}
  const TensorView* output = nullptr;      // {nEmbd, nVocab}; == tokenEmbd when tied
  const TensorView* ropeFreqs = nullptr;   // {rope.dims / 2} when the file ships RoPE factors
  std::vector<LayerWeights> layers;        // [nLayer]
};

Expected<ModelWeights> bindWeights(const ModelConfig& config, const WeightSource& source);

// How a forward pass reads a bound tensor, which decides the kernels that
// decode it: a matrix in products, the embedding one row per token, a vector
// (norm, bias, RoPE factors) once, to floats, at load.
enum class WeightRole { kMatrix, kEmbedding, kVector };

// Calls `fn` for every bound tensor in load order, with its role; a tied
// output matrix comes once as the embedding and once as a matrix.
void forEachWeight(const ModelWeights& weights,
                   const std::function<void(const TensorView&, WeightRole)>& fn);

// Whether a backend decodes `type` in `role`.
using DecodesType = bool (*)(gguf::TensorType type, WeightRole role);

// The check every backend makes when it is created, before it reads any
// weight: the first bound tensor whose type `decodes` refuses is kUnsupported,
// naming the tensor, its type and `backend`, and listing the types it does run.
Status checkWeightTypes(const ModelWeights& weights, std::string_view backend, DecodesType decodes);

}  // namespace kvscope::model
