#include "model/description.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "gguf/dequant.h"

namespace kvscope::model {
namespace {

std::string shapeString(const std::vector<uint64_t>& s) {
  std::string out = "{";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "}";
}

// Looks up a rule's tensor and checks its shape (a layer rule's with the
// shapes of `layer`); an absent optional tensor is nullptr.
template <typename Owner>
Expected<const TensorView*> bindRule(const WeightSource& src, const ModelConfig& c,
                                     const TensorRule<Owner>& rule, uint32_t layer,
                                     const std::string& name) {
  // A tensor a layer does not use (a KV-shared layer's K/V projection) is
  // left unbound even where a file carries it.
  if (!isAllowed(c, rule, layer)) return static_cast<const TensorView*>(nullptr);
  const TensorView* t = src.find(name);
  if (!t) {
    if (!isRequired(c, rule, layer)) return static_cast<const TensorView*>(nullptr);
    return makeError(ErrorCode::kBadFile, "tensor '{}' is missing", name);
  }
  std::vector<uint64_t> shape{dimSize(rule.in, c, layer)};
  if (rule.out != Dim::kNone) shape.push_back(dimSize(rule.out, c, layer));
  if (rule.stack != Dim::kNone) shape.push_back(dimSize(rule.stack, c, layer));
  if (t->shape != shape) {
    return makeError(ErrorCode::kBadFile,
                     "tensor '{}' has shape {}, expected {} from the model's metadata", name,
                     shapeString(t->shape), shapeString(shape));
  }
  return t;
}

// A small tensor's values as floats (RoPE divisors, a layer scale).
Expected<std::vector<float>> floatsOf(const TensorView& t) {
  std::vector<float> v(t.elements());
  KVS_TRY(gguf::dequantize(t.type, t.data, v));
  return v;
}

// Meta's llama3 rule, from a Hugging Face config (GGUF files ship the result
// as rope_freqs.weight): long wavelengths are slowed by `factor`, short ones
// kept, and the band between is interpolated smoothly.
Expected<std::vector<float>> llama3Factors(const RopeConfig& r) {
  if (r.originalContext == 0 || !(r.highFreqFactor > r.lowFreqFactor)) {
    return makeError(ErrorCode::kBadFile,
                     "llama3 RoPE scaling needs original_max_position_embeddings and "
                     "high_freq_factor > low_freq_factor");
  }
  const double lowWavelen = r.originalContext / r.lowFreqFactor;
  const double highWavelen = r.originalContext / r.highFreqFactor;
  std::vector<float> factors(r.dims / 2);
  for (uint32_t i = 0; i < factors.size(); ++i) {
    const double freq = std::pow(static_cast<double>(r.theta), -2.0 * i / r.dims);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double divisor = 1.0;
    if (wavelen > lowWavelen) {
      divisor = r.factor;
    } else if (wavelen >= highWavelen) {
      const double smooth =
          (r.originalContext / wavelen - r.lowFreqFactor) / (r.highFreqFactor - r.lowFreqFactor);
      divisor = 1.0 / ((1.0 - smooth) / r.factor + smooth);
    }
    factors[i] = static_cast<float>(divisor);
  }
  return factors;
}

// The pair index where YaRN's ramp starts (beta rotations of the original
// context: faster ones keep their angle) or ends, as llama.cpp rounds it.
float yarnCorrection(const RopeConfig& r, float theta, float rotations) {
  return static_cast<float>(r.dims) *
         std::log(static_cast<float>(r.originalContext) /
                  (rotations * 2.0f * std::numbers::pi_v<float>)) /
         (2.0f * std::log(theta));
}

// YaRN of `r` on a RoPE of base `theta`.
void applyYarn(const RopeConfig& r, float theta, RopeSpec& spec) {
  spec.yarn = true;
  spec.positionScale = r.factor;
  float low = yarnCorrection(r, theta, r.betaFast), high = yarnCorrection(r, theta, r.betaSlow);
  if (r.yarnTruncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  spec.yarnLow = std::max(0.0f, low);
  spec.yarnHigh = std::min(static_cast<float>(r.dims - 1), high);
  spec.attnFactor = r.attnFactor * (1.0f + 0.1f * std::log(r.factor));
}

}  // namespace

template <typename Owner>
bool isRequired(const ModelConfig& c, const TensorRule<Owner>& rule, uint32_t layer) {
  switch (rule.presence) {
    case Presence::kRequired:
      return true;
    case Presence::kUnlessTied:
      return !c.tiedEmbeddings;
    case Presence::kStoresKv:
      return c.storesKv(layer);
    case Presence::kValueProjection:
      return c.storesKv(layer) && (c.isWindowLayer(layer) || !c.globalValueIsKey);
    case Presence::kExperts:
      return c.nExpert > 0;
    case Presence::kPerLayer:
      return c.nEmbdPerLayer > 0;
    case Presence::kUnlessRopeStated:
      return c.rope.scaling != RopeScaling::kProportional;
    case Presence::kOptional:
      break;
  }
  const auto& required = c.arch->description->required;
  return std::find(required.begin(), required.end(), rule.name) != required.end();
}
template bool isRequired(const ModelConfig&, const TensorRule<ModelWeights>&, uint32_t);
template bool isRequired(const ModelConfig&, const TensorRule<LayerWeights>&, uint32_t);

template <typename Owner>
bool isAllowed(const ModelConfig& c, const TensorRule<Owner>& rule, uint32_t layer) {
  switch (rule.presence) {
    case Presence::kStoresKv:
    case Presence::kValueProjection:
    case Presence::kExperts:
    case Presence::kPerLayer:
      return isRequired(c, rule, layer);
    default:
      return true;
  }
}
template bool isAllowed(const ModelConfig&, const TensorRule<ModelWeights>&, uint32_t);
template bool isAllowed(const ModelConfig&, const TensorRule<LayerWeights>&, uint32_t);

std::string OpName::str() const {
  return layer < 0 ? std::string(base) : fmt::format("blk.{}.{}", layer, base);
}

uint64_t dimSize(Dim d, const ModelConfig& c, uint32_t layer) {
  switch (d) {
    case Dim::kNone:
      return 1;
    case Dim::kEmbd:
      return c.nEmbd;
    case Dim::kFf:
      return c.ffOf(layer);  // nFf for kGlobalTensor, past every layer
    case Dim::kFf2:
      return uint64_t{2} * c.ffOf(layer);
    case Dim::kQ:
      return c.qDimOf(layer);
    case Dim::kKv:
      return c.kvDimOf(layer);
    case Dim::kQkv:
      return uint64_t{c.qDimOf(layer)} + 2 * uint64_t{c.kvDimOf(layer)};
    case Dim::kHeadDim:
      return c.headDimOf(layer);
    case Dim::kVocab:
      return c.nVocab;
    case Dim::kRopeHalf:
      return c.ropeDimsOf(layer) / 2;
    case Dim::kExpert:
      return c.nExpert;
    case Dim::kFfExp:
      return c.nFfExp;
    case Dim::kHead:
      return c.headsOf(layer);
    case Dim::kFfExp2:
      return uint64_t{2} * c.nFfExp;
    case Dim::kPerLayer:
      return c.nEmbdPerLayer;
    case Dim::kPerLayerAll:
      return uint64_t{c.nEmbdPerLayer} * c.nLayer;
  }
  return 0;
}

Expected<ModelWeights> bindWeights(const ModelConfig& c, const WeightSource& src) {
  const ArchDescription& d = *c.arch->description;
  if (d.mustHaveExperts() && c.nExpert == 0) {
    return makeError(ErrorCode::kBadFile,
                     "a {} model needs expert_count and expert_used_count in its metadata",
                     c.architecture);
  }
  if (!d.mayHaveExperts() && c.nExpert > 0) {  // Mixtral's GGUF files say "llama" and carry experts
    return makeError(ErrorCode::kUnsupported,
                     "this {} file has experts (expert_count {}), which kvscope runs only in "
                     "qwen3moe, gpt-oss and gemma4 models so far",
                     c.architecture, c.nExpert);
  }
  ModelWeights w;
  for (const auto& rule : d.globals) {
    KVS_ASSIGN_OR_RETURN(w.*rule.field,
                         bindRule(src, c, rule, kGlobalTensor, std::string(rule.name)));
  }
  if (!w.output) w.output = w.tokenEmbd;
  w.layers.resize(c.nLayer);
  for (uint32_t i = 0; i < c.nLayer; ++i) {
    for (const auto& rule : d.layer) {
      KVS_ASSIGN_OR_RETURN(w.layers[i].*rule.field,
                           bindRule(src, c, rule, i, fmt::format("blk.{}.{}", i, rule.name)));
    }
  }
  if (d.split) KVS_TRY(d.split(c, w));
  return w;
}

Expected<TensorView> rowRange(const TensorView& t, uint64_t first, uint64_t count,
                              std::string name) {
  if (t.shape.size() != 2 || first + count > t.shape[1] || t.data.size() % t.shape[1] != 0)
    return makeError(ErrorCode::kBadFile, "tensor '{}' cannot be split into {}", t.name, name);
  const uint64_t rowBytes = t.data.size() / t.shape[1];
  return TensorView{std::move(name),
                    t.type,
                    {t.shape[0], count},
                    t.data.subspan(first * rowBytes, count * rowBytes)};
}

TensorView expertMatrix(const TensorView& t, uint32_t e) {
  // bindWeights checked the shape, and whole rows are whole blocks.
  const size_t bytes = t.data.size() / t.shape[2];
  return TensorView{t.name, t.type, {t.shape[0], t.shape[1]}, t.data.subspan(e * bytes, bytes)};
}

AttentionSpec ForwardPlan::attention(uint32_t layer) const {
  const ModelConfig& c = *config;
  return {.layer = c.kvSourceOf(layer),
          .nHead = c.headsOf(layer),
          .nHeadKv = c.headsKvOf(layer),
          .headDim = c.headDimOf(layer),
          .scale = 1.0f / std::sqrt(static_cast<float>(c.headDimOf(layer))),
          .window = c.isWindowLayer(layer) ? c.slidingWindow : 0};
}

std::vector<float> proportionalRopeFactors(const RopeConfig& rope) {
  const uint32_t pairs = rope.dims / 2;
  const auto turning = std::min(pairs, static_cast<uint32_t>(rope.partialRotary * pairs));
  std::vector<float> factors(pairs, 1e30f);
  std::fill_n(factors.begin(), turning, 1.0f);
  return factors;
}

Expected<ForwardPlan> planForward(const ModelConfig& c, const ModelWeights& w,
                                  uint32_t contextLimit) {
  ForwardPlan p{.config = &c, .weights = &w};
  p.rope.style = c.rope.style;
  p.rope.dims = c.rope.dims;
  p.rope.theta = c.rope.theta;
  switch (c.rope.scaling) {
    case RopeScaling::kNone:
      break;
    case RopeScaling::kLinear:
      p.rope.positionScale = c.rope.factor;
      break;
    case RopeScaling::kFreqFactors:
      if (w.ropeFreqs) {
        KVS_ASSIGN_OR_RETURN(p.rope.freqFactors, floatsOf(*w.ropeFreqs));
      } else {
        KVS_ASSIGN_OR_RETURN(p.rope.freqFactors, llama3Factors(c.rope));
      }
      break;
    case RopeScaling::kLongRope: {
      if (!w.ropeLong || !w.ropeShort) {
        return makeError(ErrorCode::kBadFile,
                         "LongRoPE needs both rope_factors_long and rope_factors_short");
      }
      const TensorView* factors = contextLimit > c.rope.originalContext ? w.ropeLong : w.ropeShort;
      KVS_ASSIGN_OR_RETURN(p.rope.freqFactors, floatsOf(*factors));
      p.rope.attnFactor = c.rope.attnFactor;
      break;
    }
    case RopeScaling::kYarn:
      applyYarn(c.rope, c.rope.theta, p.rope);
      break;
    case RopeScaling::kProportional:
      p.rope.freqFactors = proportionalRopeFactors(c.rope);
      break;
  }
  for (uint32_t l = 0; l < c.nLayer && l < w.layers.size(); ++l) {
    const TensorView* s = w.layers[l].layerOutputScale;
    if (!s) continue;
    if (p.layerOutputScales.empty()) p.layerOutputScales.assign(c.nLayer, 1.0f);
    KVS_ASSIGN_OR_RETURN(const std::vector<float> value, floatsOf(*s));
    p.layerOutputScales[l] = value.at(0);
  }
  const uint32_t windowDims = c.windowRopeDims();
  if (c.arch->description->windowRopeScaled) {
    if (windowDims != c.rope.dims) {
      return makeError(ErrorCode::kUnsupported,
                       "{} window layers rotating {} dimensions, the global ones {}: not supported "
                       "with scaled window RoPE",
                       c.architecture, windowDims, c.rope.dims);
    }
    p.windowRope = p.rope;
    p.windowRope.theta = c.ropeThetaWindow;
    if (c.rope.scaling == RopeScaling::kYarn) applyYarn(c.rope, c.ropeThetaWindow, p.windowRope);
  } else {
    p.windowRope = {.style = c.rope.style, .dims = windowDims, .theta = c.ropeThetaWindow};
  }
  return p;
}

Status checkEpilogue(const Epilogue& e, uint32_t width) {
  if (e.accumulate && e.gate != Gate::kNone)
    return makeError(ErrorCode::kInternal, "a matmul epilogue both accumulates and gates");
  if (e.bias && e.bias->elements() != width) {
    return makeError(ErrorCode::kInternal, "bias '{}' has {} values for {} outputs", e.bias->name,
                     e.bias->elements(), width);
  }
  return okStatus();
}

Status checkAttentionSpec(const AttentionSpec& s, std::string_view backend) {
  if (s.softCap != 0.0f || !(s.scale > 0.0f)) {
    return makeError(ErrorCode::kUnsupported,
                     "the {} backend runs attention without soft-capping (layer {} asks for "
                     "soft-cap {}, scale {})",
                     backend, s.layer, s.softCap, s.scale);
  }
  return okStatus();
}

}  // namespace kvscope::model
