#pragma once
// The tensors a forward pass reads, by role. model/description.h binds them
// from a file through the architecture's tensor table, checking presence and
// shape against the ModelConfig, so that a file whose tensors disagree with
// its metadata fails at load with the tensor's name and both shapes, not with
// garbage output later. Shapes are GGUF order ({in, out} for projections).

#include <deque>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "model/model_config.h"
#include "model/weight_source.h"

namespace kvscope::model {

// The roles a description's forward pass reads, the union over the
// architectures (as llama.cpp's llama_layer); an architecture's tensor table
// (model/description.h) says which it binds. Unbound roles are nullptr.
struct LayerWeights {
  const TensorView* attnNorm = nullptr;  // {nEmbd}
  const TensorView* wq = nullptr;        // {nEmbd, qDim}
  const TensorView* wk = nullptr;        // {nEmbd, kvDim}
  const TensorView* wv = nullptr;        // {nEmbd, kvDim}
  const TensorView* wo = nullptr;        // {qDim, nEmbd}
  const TensorView* bq = nullptr;        // {qDim}
  const TensorView* bk = nullptr;        // {kvDim}
  const TensorView* bv = nullptr;        // {kvDim}
  const TensorView* bo = nullptr;        // {nEmbd}: the output projection's bias
  const TensorView* attnSinks = nullptr;  // {nHead}: attention-sink logits (AttentionSpec)
  const TensorView* qNorm = nullptr;      // {the layer's head width}
  const TensorView* kNorm = nullptr;      // {the layer's head width}
  const TensorView* attnPostNorm = nullptr;  // {nEmbd}: the attention output's, before the residual
  const TensorView* ffnNorm = nullptr;   // {nEmbd}
  const TensorView* ffnPostNorm = nullptr;  // {nEmbd}: the FFN output's, before the residual
  const TensorView* gate = nullptr;         // {nEmbd, the layer's ffOf()}
  const TensorView* up = nullptr;           // {nEmbd, the layer's ffOf()}
  const TensorView* down = nullptr;         // {the layer's ffOf(), nEmbd}
  // A mixture-of-experts feed-forward instead of gate/up/down.
  const TensorView* gateInp = nullptr;   // {nEmbd, nExpert}: the router
  const TensorView* gateExps = nullptr;  // {nEmbd, nFfExp, nExpert}
  const TensorView* upExps = nullptr;    // {nEmbd, nFfExp, nExpert}
  const TensorView* downExps = nullptr;  // {nFfExp, nEmbd, nExpert}
  const TensorView* gateInpBias = nullptr;   // {nExpert}
  const TensorView* gateExpsBias = nullptr;  // {nFfExp, nExpert}
  const TensorView* upExpsBias = nullptr;    // {nFfExp, nExpert}
  const TensorView* downExpsBias = nullptr;  // {nEmbd, nExpert}
  // Gemma 4's experts run beside a dense FFN (gate/up/down), each half
  // normed before and after: ffnPreNorm2 is the experts' input norm,
  // ffnPostNorm1/2 the dense and expert outputs'. Its router reads the
  // unweighted RMS norm of the residual times gateInpScale / sqrt(nEmbd).
  const TensorView* gateUpExps = nullptr;        // {nEmbd, 2 nFfExp, nExpert}: gate, then up rows
  const TensorView* gateInpScale = nullptr;      // {nEmbd}
  const TensorView* downExpsScale = nullptr;     // {nExpert}: multiplies each expert's output
  const TensorView* ffnPreNorm2 = nullptr;       // {nEmbd}
  const TensorView* ffnPostNorm1 = nullptr;      // {nEmbd}
  const TensorView* ffnPostNorm2 = nullptr;      // {nEmbd}
  const TensorView* layerOutputScale = nullptr;  // {1}: multiplies the layer's residual output
  // Per-layer inputs (Gemma 4 E2B/E4B): gelu(perLayerGate x) * this layer's
  // input, projected back to the model width and normed, joins the residual.
  const TensorView* perLayerGate = nullptr;      // {nEmbd, nEmbdPerLayer}
  const TensorView* perLayerProj = nullptr;      // {nEmbdPerLayer, nEmbd}
  const TensorView* perLayerPostNorm = nullptr;  // {nEmbd}
  // Fused tensors as a file holds them; the description's split() replaces
  // them by views (wq/wk/wv, gate/up), and nothing reads or uploads them.
  const TensorView* wqkv = nullptr;      // {nEmbd, qDim + 2 kvDim}
  const TensorView* gateUp = nullptr;    // {nEmbd, 2 nFf}: gate rows, then up rows
};

struct ModelWeights {
  const TensorView* tokenEmbd = nullptr;   // {nEmbd, nVocab}
  const TensorView* outputNorm = nullptr;  // {nEmbd}
  const TensorView* output = nullptr;      // {nEmbd, nVocab}; == tokenEmbd when tied
  const TensorView* ropeFreqs = nullptr;   // {rope.dims / 2} when the file ships RoPE factors
  const TensorView* ropeLong = nullptr;    // {rope.dims / 2} LongRoPE factors beyond the
  const TensorView* ropeShort = nullptr;   //   original context, and within it
  // Per-layer inputs (Gemma 4 E2B/E4B): a token's row of every layer's input,
  // plus a projection of its embedding normed per layer.
  const TensorView* perLayerTokenEmbd = nullptr;  // {nEmbdPerLayer * nLayer, nVocab}
  const TensorView* perLayerModelProj = nullptr;  // {nEmbd, nEmbdPerLayer * nLayer}
  const TensorView* perLayerProjNorm = nullptr;   // {nEmbdPerLayer}
  std::vector<LayerWeights> layers;        // [nLayer]
  // Views made by split(), owned here (a deque never moves its elements).
  std::shared_ptr<std::deque<TensorView>> views = std::make_shared<std::deque<TensorView>>();
};


// How a forward pass reads a bound tensor, which decides the kernels that
// decode it: a matrix in products, the embedding one row per token, a vector
// (norm, bias) once, to floats, at load; RoPE factors only on the host, into
// the angle tables (model/description.h planForward).
enum class WeightRole { kMatrix, kEmbedding, kVector, kRopeFactors };

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
