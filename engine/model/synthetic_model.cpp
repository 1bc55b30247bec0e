#include "model/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "core/paths.h"
#include "core/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "gguf/quantize.h"
#include "model/architecture.h"
#include "model/description.h"
#include "model/gguf_export.h"

namespace kvscope::model {
namespace {

using gguf::TensorType;

// SplitMix64's finalizer: 64 well-mixed bits of a counter.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Seeded values for one tensor after another, each value a function of
// (seed, tensor, index) alone, so all cores fill a tensor and the bytes do not
// depend on how the work is split (a sequential generator made an 8B-shaped
// model take minutes). Integer sums, then one multiply and one add, each
// rounded: the same bytes on every machine.
class Filler {
 public:
  Filler(uint32_t seed, ThreadPool& pool) : m_seed(mix64(seed)), m_pool(pool) {}

  // mean + stddev * z, z of mean 0 and variance 1 and close to normal: the
  // centred sum of twelve 16-bit uniforms, the quarters of three hashes
  // (Irwin-Hall, so |z| <= 6).
  // The next tensor's key: a tensor's values are normal() or bytes() of it,
  // whenever they are made.
  uint64_t key() { return mix64(m_seed ^ mix64(++m_tensor)); }

  std::vector<float> normal(uint64_t key, size_t n, float stddev, float mean = 0.0f) {
    // Twelve uniforms on 0..65535 sum to mean 393210, variance 65536^2.
    const float scale = stddev * (1.0f / 65536.0f);
    std::vector<float> v(n);
    m_pool.parallelFor(
        n,
        [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) {
            int64_t sum = 0;
            for (uint64_t j = 0; j < 3; ++j) {
              const uint64_t h = mix64(key + 3 * i + j);
              sum += static_cast<int64_t>((h & 0xffff) + ((h >> 16) & 0xffff) +
                                          ((h >> 32) & 0xffff) + (h >> 48));
            }
            v[i] = scale * static_cast<float>(sum - 393210);
          }
        },
        kGrain);
    // The mean in a loop of its own: two roundings on every target, where
    // one expression could become a fused multiply-add and other bytes.
    if (mean != 0.0f)
      for (float& x : v) x += mean;
    return v;
  }

  std::vector<uint8_t> bytes(uint64_t key, size_t n) {
    std::vector<uint8_t> v(n);
    m_pool.parallelFor(
        n,
        [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i)
            v[i] = static_cast<uint8_t>(mix64(key + i / 8) >> (8 * (i % 8)));
        },
        kGrain);
    return v;
  }

  ThreadPool& pool() { return m_pool; }

 private:
  static constexpr size_t kGrain = size_t{1} << 16;  // values; smaller tensors stay on one core

  uint64_t m_seed;
  uint64_t m_tensor = 0;
  ThreadPool& m_pool;
};

// `values` (rows of `in` values) in `type`, rows quantized on all cores:
// blocks never span rows, so the bytes equal one quantize() of the whole.
Expected<std::vector<uint8_t>> quantizeRows(ThreadPool& pool, TensorType type, uint64_t in,
                                            std::span<const float> values) {
  const std::optional<uint64_t> rowBytes = gguf::byteSize(type, in);
  if (!rowBytes)
    return makeError(ErrorCode::kInvalidArgument, "rows of {} values are not whole {} blocks", in,
                     gguf::traits(type).name);
  const uint64_t rows = values.size() / in;
  std::vector<uint8_t> out(rows * *rowBytes);
  std::mutex failed;
  Status status = okStatus();
  pool.parallelFor(
      rows,
      [&](size_t begin, size_t end) {
        Status s =
            gguf::quantize(type, values.subspan(begin * in, (end - begin) * in),
                           std::span(out).subspan(begin * *rowBytes, (end - begin) * *rowBytes));
        if (!s.ok()) {
          std::lock_guard lock(failed);
          if (status.ok()) status = std::move(s);
        }
      },
      std::max<size_t>(1, (size_t{1} << 16) / in));
  KVS_TRY(status);
  return out;
}

std::vector<std::string> vocabulary(uint32_t n) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) tokens.push_back(fmt::format("<0x{:02X}>", b));
  // Printable pieces: single letters with and without the SentencePiece space mark, then pairs.
  const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
  for (char c : letters) tokens.push_back(std::string("\xE2\x96\x81") + c);
  for (char c : letters) tokens.push_back(std::string(1, c));
  for (size_t i = 0; tokens.size() < n; ++i) {
    tokens.push_back(std::string(1, letters[i % 26]) + letters[(i / 26) % 26] +
                     std::to_string(i / 676));
  }
  tokens.resize(n);
  return tokens;
}

void addVocab(gguf::GgufWriter& w, uint32_t n) {
  auto tokens = vocabulary(n);
  std::vector<float> scores(n);
  std::vector<int32_t> types(n, 1);                          // normal
  types[0] = 2;                                              // unknown
  types[1] = types[2] = 3;                                   // control
  for (uint32_t i = 3; i < 259 && i < n; ++i) types[i] = 6;  // byte
  for (uint32_t i = 0; i < n; ++i) scores[i] = i < 259 ? 0.0f : -static_cast<float>(i);
  w.set("tokenizer.ggml.model", gguf::stringValue("llama"));
  w.set("tokenizer.ggml.tokens", gguf::stringArrayValue(tokens));
  w.set("tokenizer.ggml.scores", gguf::float32ArrayValue(scores));
  w.set("tokenizer.ggml.token_type", gguf::int32ArrayValue(types));
  w.set("tokenizer.ggml.bos_token_id", gguf::uint32Value(1));
  w.set("tokenizer.ggml.eos_token_id", gguf::uint32Value(2));
  w.set("tokenizer.ggml.unknown_token_id", gguf::uint32Value(0));
}

// A weight {in, out} (or {in, out, experts}, experts stacked) of the spec's
// type for `name`, made when the file is written: a writer holds one
// weight's floats and bytes at a time, not a 12 GB model's.
// llama.cpp's quantizer's type for rows of `in` values that are not whole
// blocks of `type` (SyntheticModelSpec::quantFallback).
TensorType fallbackType(TensorType type, uint64_t in) {
  if (in % gguf::traits(type).blockElements == 0) return type;
  TensorType to = TensorType::kF16;
  switch (type) {
    case TensorType::kQ4_K:
      to = TensorType::kQ5_0;
      break;
    case TensorType::kQ5_K:
      to = TensorType::kQ5_1;
      break;
    case TensorType::kQ6_K:
      to = TensorType::kQ8_0;
      break;
    case TensorType::kIQ4_XS:
      to = TensorType::kIQ4_NL;
      break;
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
      to = TensorType::kQ4_0;
      break;
    default:
      return type;  // no fall-back: the caller's error names the tensor
  }
  return in % gguf::traits(to).blockElements == 0 ? to : TensorType::kF16;
}

Status addWeight(gguf::GgufWriter& w, Filler& f, const SyntheticModelSpec& s,
                 const std::string& name, std::vector<uint64_t> shape) {
  const auto it = s.tensorTypes.find(name);
  TensorType type = it == s.tensorTypes.end() ? s.weightType : it->second;
  if (s.quantFallback) type = fallbackType(type, shape[0]);
  uint64_t count = 1;
  for (uint64_t d : shape) count *= d;
  const uint64_t key = f.key(), in = shape[0];
  if (!gguf::canQuantize(type)) {
    const std::optional<uint64_t> size = gguf::byteSize(type, count);
    if (!size)
      return makeError(ErrorCode::kInvalidArgument, "{} values are not whole {} blocks", count,
                       gguf::traits(type).name);
    return w.addLazyTensor(
        name, std::move(shape), type,
        [&f, key, size = *size]() -> Expected<std::vector<uint8_t>> { return f.bytes(key, size); });
  }
  return w.addLazyTensor(name, std::move(shape), type,
                         [&f, key, type, count, in, name]() -> Expected<std::vector<uint8_t>> {
                           auto values =
                               f.normal(key, count, 1.0f / std::sqrt(static_cast<float>(in)));
                           if (type == TensorType::kF32) {
                             std::vector<uint8_t> bytes(values.size() * 4);
                             std::memcpy(bytes.data(), values.data(), bytes.size());
                             return bytes;
                           }
                           auto bytes = quantizeRows(f.pool(), type, in, values);
                           if (!bytes.ok()) {
                             Error e = bytes.takeError();
                             e.message = fmt::format("tensor '{}': {}", name, e.message);
                             return e;
                           }
                           return bytes;
                         });
}

// F32 values of `shape` (a vector, or experts' vectors stacked {n, experts}).
Status addVector(gguf::GgufWriter& w, const std::vector<float>& v, const std::string& name,
                 std::vector<uint64_t> shape = {}) {
  std::vector<uint8_t> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  if (shape.empty()) shape = {v.size()};
  return w.addTensor(name, std::move(shape), TensorType::kF32, std::move(bytes));
}

}  // namespace

namespace {

// The writer of spec `s`, its weights made by a Filler when `finish` writes
// it (the Filler and its pool live until finish returns).
Status withSyntheticWriter(const SyntheticModelSpec& s,
                           const std::function<Status(const gguf::GgufWriter&)>& finish) {
  if (s.nVocab < 259)
    return makeError(ErrorCode::kInvalidArgument, "vocabulary must hold at least 259 tokens");
  if (s.nHeadKv == 0 || s.nHead % s.nHeadKv != 0) {
    return makeError(ErrorCode::kInvalidArgument, "heads must be a multiple of KV heads");
  }
  KVS_ASSIGN_OR_RETURN(const ArchitectureInfo* arch, findArchitecture(s.architecture));
  const uint32_t ropeDims = s.ropeDims ? s.ropeDims : s.headDim;
  if (ropeDims > s.headDim || ropeDims % 2 != 0)
    return makeError(ErrorCode::kInvalidArgument, "RoPE dims must be even and at most head_dim");
  const bool canMoe = arch->description->mayHaveExperts();
  const bool moe = arch->description->mustHaveExperts() || (canMoe && s.nExpert != 0);
  if (!canMoe && (s.nExpert != 0 || s.nExpertUsed != 0 || s.nFfExp != 0))
    return makeError(ErrorCode::kInvalidArgument, "a {} model has no experts", s.architecture);
  if (moe && (s.nExpert == 0 || s.nExpertUsed == 0 || s.nExpertUsed > s.nExpert || s.nFfExp == 0))
    return makeError(ErrorCode::kInvalidArgument,
                     "a {} model needs experts, experts used (at most the experts) and an expert "
                     "width",
                     s.architecture);
  const bool gemma4Options =
      s.nKvShared != 0 || s.nEmbdPerLayer != 0 || s.globalValueIsKey || s.finalLogitSoftcap != 0.0f;
  const bool sharesKv = std::ranges::any_of(
      arch->description->layer, [](const auto& r) { return r.presence == Presence::kStoresKv; });
  if (gemma4Options && !sharesKv) {
    return makeError(ErrorCode::kInvalidArgument,
                     "KV-shared layers, per-layer inputs, V from K and a logit soft-cap are "
                     "gemma4's; a {} model has none",
                     s.architecture);
  }
  gguf::GgufWriter w;
  ModelConfig c;
  c.architecture = s.architecture;
  c.arch = arch;
  c.nVocab = s.nVocab;
  c.tiedEmbeddings = s.tiedEmbeddings;
  c.nLayer = s.nLayer;
  c.contextLength = s.contextLength;
  c.nEmbd = s.nEmbd;
  c.nFf = s.nFf;
  c.layerFf = s.layerFf;
  c.nKvShared = s.nKvShared;
  c.nEmbdPerLayer = s.nEmbdPerLayer;
  c.globalValueIsKey = s.globalValueIsKey;
  c.finalLogitSoftcap = s.finalLogitSoftcap;
  c.nHead = s.nHead;
  c.nHeadKv = s.nHeadKv;
  c.headDim = c.headDimV = s.headDim;
  c.layerHeads = s.layerHeads;
  c.layerHeadsKv = s.layerHeadsKv;
  c.rmsEps = 1e-5f;
  c.nExpert = s.nExpert;
  c.nExpertUsed = s.nExpertUsed;
  c.nFfExp = s.nFfExp;
  c.rope.theta = s.ropeTheta;
  c.rope.dims = ropeDims;
  if (s.slidingWindow > 0) {
    c.slidingWindow = s.slidingWindow;
    c.windowLayers = windowLayersOfPeriod(s.nLayer, s.windowPeriod);
    c.ropeThetaWindow = s.ropeThetaWindow;
    c.headDimWindow = s.headDimWindow;
    c.ropeDimsWindow = s.ropeDimsWindow;
  }
  if (s.ropeLinearFactor > 1.0f && s.ropeYarnFactor > 1.0f)
    return makeError(ErrorCode::kInvalidArgument, "RoPE scaling is linear or YaRN, not both");
  if (s.ropeLinearFactor > 1.0f) {
    c.rope.scaling = RopeScaling::kLinear;
    c.rope.factor = s.ropeLinearFactor;
  }
  if (s.ropeYarnFactor > 1.0f) {
    c.rope.scaling = RopeScaling::kYarn;
    c.rope.factor = s.ropeYarnFactor;
    c.rope.originalContext = std::max<uint32_t>(
        1, static_cast<uint32_t>(static_cast<float>(s.contextLength) / s.ropeYarnFactor));
  }
  const bool longRope =
      s.ropeFreqFactors && std::ranges::any_of(arch->description->globals, [](const auto& r) {
        return r.field == &ModelWeights::ropeLong;
      });
  if (longRope) {
    // Phi-3 128K's shape: trained on twice the original context, and the
    // magnitude factor its config derives, sqrt(1 + ln(scale) / ln(original)).
    c.rope.scaling = RopeScaling::kLongRope;
    c.rope.originalContext = std::max<uint32_t>(1, s.contextLength / 2);
    c.rope.attnFactor = std::sqrt(
        1.0f + std::log(static_cast<float>(s.contextLength) / c.rope.originalContext) /
                   std::log(static_cast<float>(c.rope.originalContext)));
  }
  KVS_TRY(validateConfig(c));
  setConfigMetadata(
      w, c, fmt::format("synthetic-{}-{}", s.architecture, gguf::traits(s.weightType).name));
  addVocab(w, s.nVocab);

  ThreadPool pool;
  Filler f(s.seed, pool);
  const ArchDescription& d = *arch->description;
  // Every tensor the architecture's table requires, in table order; RoPE
  // factor tensors when asked for. Weights ~ N(0, 1/in), norms ~ N(1, 0.1),
  // biases ~ N(0, 0.1), attention sinks ~ N(0, 1).
  uint32_t factorTensors = 0;
  const auto add = [&](const auto& rule, uint32_t layer, const std::string& name) -> Status {
    const bool factors = rule.kind == TensorKind::kRopeFactors;
    const bool wanted = factors ? s.ropeFreqFactors || rule.presence != Presence::kOptional
                                : isRequired(c, rule, layer);
    if (!wanted) return okStatus();
    const uint64_t in = dimSize(rule.in, c, layer), out = dimSize(rule.out, c, layer);
    switch (rule.kind) {
      case TensorKind::kEmbedding:
      case TensorKind::kMatrix:
        if (rule.stack != Dim::kNone)
          return addWeight(w, f, s, name, {in, out, dimSize(rule.stack, c, layer)});
        return addWeight(w, f, s, name, {in, out});
      case TensorKind::kNorm:
        return addVector(w, f.normal(f.key(), in, 0.1f, 1.0f), name);
      case TensorKind::kBias:
        if (rule.out != Dim::kNone)
          return addVector(w, f.normal(f.key(), in * out, 0.1f), name, {in, out});
        return addVector(w, f.normal(f.key(), in, 0.1f), name);
      case TensorKind::kSinks:
        return addVector(w, f.normal(f.key(), in, 1.0f), name);
      case TensorKind::kRopeFactors: {
        // Gemma 4's proportional RoPE: a quarter of the pairs turn (its
        // partial_rotary_factor), the rest keep an angle of 0.
        if (rule.presence == Presence::kUnlessRopeStated)
          return addVector(
              w, proportionalRopeFactors({.dims = c.rope.dims, .partialRotary = 0.25f}), name);
        // Divisors >= 1 growing towards the low frequencies, like llama
        // 3.1's; a second tensor (LongRoPE's short factors) grows less.
        const float top = factorTensors++ == 0 ? 7.0f : 1.5f;
        std::vector<float> v(in);
        for (size_t i = 0; i < v.size(); ++i)
          v[i] = 1.0f + top * static_cast<float>(i) / static_cast<float>(v.size());
        return addVector(w, v, name);
      }
    }
    return okStatus();
  };
  for (const auto& rule : d.globals) KVS_TRY(add(rule, kGlobalTensor, std::string(rule.name)));
  for (uint32_t i = 0; i < s.nLayer; ++i)
    for (const auto& rule : d.layer) KVS_TRY(add(rule, i, fmt::format("blk.{}.{}", i, rule.name)));
  return finish(w);
}

}  // namespace

Expected<std::vector<uint8_t>> syntheticModelBytes(const SyntheticModelSpec& spec) {
  std::vector<uint8_t> image;
  KVS_TRY(withSyntheticWriter(spec, [&](const gguf::GgufWriter& w) -> Status {
    KVS_ASSIGN_OR_RETURN(image, w.toBytes());
    return okStatus();
  }));
  return image;
}

Status writeSyntheticModel(const SyntheticModelSpec& spec, const std::filesystem::path& path) {
  return withSyntheticWriter(spec, [&](const gguf::GgufWriter& w) { return w.writeFile(path); });
}

}  // namespace kvscope::model
