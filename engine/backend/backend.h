#pragma once
// Backend: runs a llama-family model on one device. It owns the weights (in
// their GGUF types) and the KV cache on that device. forward() takes a batch
// of consecutive tokens that continue the cached sequence, appends their K/V
// rows, and returns logits. CpuBackend (float32 reference) and VulkanBackend
// implement it and must agree within the tolerances their tests state.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/codec_error.h"
#include "backend/expert_log.h"
#include "core/error.h"
#include "kv/indexer.h"
#include "kv/kv_cache.h"
#include "kv/kv_policy.h"
#include "model/description.h"
#include "model/model_config.h"

namespace kvscope::backend {

struct KernelTiming {
  std::string kernelClass;  // "matvec", "attention", "norm", …
  uint32_t dispatches = 0;
  double ms = 0.0;
  uint64_t bytes = 0;  // memory traffic the class's dispatches declared (read + written)
  uint64_t flops = 0;  // and their arithmetic operations (products: 2 per multiply-add)
};

struct Batch {
  std::span<const int32_t> tokens;  // consecutive tokens, n >= 1
  bool allLogits = false;           // logits for every token, else only for the last
  // Part of a prompt run in chunks: never a decode step, even one token long.
  bool prompt = false;
};

// A decode step: one token, not part of a prompt, after `cached` rows. A
// two-phase cache (kv::KvPolicy::twoPhase) encodes its f16 rows at the
// first one.
inline bool isDecodeStep(const Batch& batch, uint32_t cached) {
  return batch.tokens.size() == 1 && !batch.prompt && cached > 0;
}

// Logits of the batch: [rows, nVocab] row-major.
struct Logits {
  std::vector<float> values;
  uint32_t rows = 0;
  uint32_t vocab = 0;
  std::span<const float> row(uint32_t r) const {
    return {values.data() + size_t{r} * vocab, vocab};
  }
  std::span<const float> last() const { return row(rows - 1); }
};

// Rows one forward() step appends at most: a longer batch runs as steps of
// this many (a sliding-window layer's ring holds window - 1 + this many rows).
inline constexpr uint32_t kMaxStepRows = 512;

// The KV geometry of `c` for a context of contextLimit rows, growing pages of
// rowsPerPage rows, and steps of at most stepRows rows: the window layers in
// a ring of window - 1 + stepRows rows, unless that would not be smaller
// than the context (then they keep every row in the pages); a precision tail
// of tailRows rows (0: none) in a ring of tailRows + stepRows - 1 rows, both
// at most the context.
kv::KvGeometry kvGeometry(const model::ModelConfig& c, uint32_t rowsPerPage, uint32_t contextLimit,
                          uint32_t stepRows = kMaxStepRows, uint32_t tailRows = 0);

// Each layer's KV heads and head width (KvGeometry::layers of `c`).
std::vector<kv::KvLayerShape> kvLayerShapes(const model::ModelConfig& c);

// What a KV policy resolves against for `c`: its layers and head widths.
kv::KvTarget kvTarget(const model::ModelConfig& c);
// Ok when `options` (kv::IndexerOptions::checkHeads) fit the model's cache
// layers and their KV heads: both backends' setIndexer() check this.
Status checkIndexerFor(const model::ModelConfig& c, const kv::IndexerOptions& options);

// One layer of the KV cache as a backend holds it: the scheme of each part
// (the objects the cache encodes with, seed included; they live as long as
// the backend), the bytes its cached rows take, counted from the schemes'
// row layouts, and how many rows it holds.
struct KvLayerBytes {
  const kv::KvScheme* key = nullptr;
  const kv::KvScheme* value = nullptr;
  kv::KvBytes keyBytes, valueBytes;
  uint32_t rows = 0;    // rows held: every cached row, or a window layer's last ones
  uint32_t window = 0;  // a sliding-window layer's window; 0: a global layer
  bool ring = false;    // the window layer keeps its rows in a ring of fixed size
};

// Measured codec error of one layer: the relative RMS reconstruction error
// ||x - decode(encode(x))|| / ||x|| of the K and V rows written so far
// (backend/codec_error.h); negative where nothing was measured.
struct KvLayerError {
  double key = -1.0;
  double value = -1.0;
};

// What the indexer did in one decode step, per layer (kv/indexer.h).
struct IndexerLayerStep {
  // [nHeadKv]: the rows each KV head attended, in cache order; an empty list
  // means every row (the selection would have covered them all).
  std::vector<std::vector<kv::RowRun>> heads;
  // Diagnostic mode: the share of dense attention's softmax mass on those
  // rows, averaged over the query heads; negative when not measured.
  double capturedMass = -1.0;
  // Diagnostic mode, [nHeadKv]: that share per KV head, averaged over its
  // query heads (1 for a head attending every row); empty when not measured.
  std::vector<double> headMass;

  // Sets headMass and capturedMass, their mean (every group has as many
  // query heads); an empty `perKvHead` is "not measured".
  void setMass(std::vector<double> perKvHead) {
    headMass = std::move(perKvHead);
    double sum = 0.0;
    for (double m : headMass) sum += m;
    capturedMass = headMass.empty() ? -1.0 : sum / static_cast<double>(headMass.size());
  }
};

struct IndexerStep {
  uint32_t rows = 0;                     // cached rows the step attended over
  std::vector<IndexerLayerStep> layers;  // [cache layers]; empty: no indexed step yet
};

// An intermediate of the description (model/forward_ops.h), captured as
// forward() computed it: the named op output, one row per batch token (per
// logit row for the result_* tensors), over every forward() since the target
// was set (a batch split into chunks appends each chunk's rows).
struct TensorDump {
  std::string name;  // "blk.3.ffn_inp"
  uint32_t width = 0;
  uint32_t rows = 0;
  std::vector<float> values;  // [rows, width]
  // With the target kListTensorNames: every op output's name, in step order.
  std::vector<std::string> names;

  // What an executor asks of every op output: whether to capture it (its
  // name is the target), having noted the name when the names are listed.
  bool wants(const model::OpName& op);
  // Appends captured rows of `rowWidth` floats.
  void append(std::span<const float> rows, uint32_t rowWidth);
};
inline constexpr std::string_view kListTensorNames = "*";

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual const model::ModelConfig& config() const = 0;

  // Tokens are placed at positions [cachedTokens(), cachedTokens() + n), in
  // steps of at most kMaxStepRows rows. Fails without side effects when the
  // batch would exceed contextLimit(); a step that fails leaves the cache as
  // it was before it, or empty where a window layer's ring had already moved
  // past that point.
  virtual Status forward(const Batch& batch, Logits& out) = 0;
  // forward() through another description over the same weights, cache and
  // executor than the model's: the op harness (tests/ops/test_ops.cpp)
  // runs single ops this way. forward() is forwardWith(…, model::runForward).
  using Description = std::function<Status(const model::ForwardPlan&, model::ForwardOps&)>;
  virtual Status forwardWith(const Batch&, Logits&, const Description&) {
    return makeError(ErrorCode::kUnsupported, "the {} backend runs only its model's description",
                     name());
  }

  virtual uint32_t cachedTokens() const = 0;
  virtual uint32_t contextLimit() const = 0;
  // Keeps the first n cached tokens (n <= cachedTokens(); n == 0 or
  // n >= trimFloor(), else kUnsupported).
  virtual Status trim(uint32_t n) = 0;
  // The fewest tokens trim() can keep short of none: sliding-window layers
  // keep only their last rows, so rewinding further needs the prompt again.
  virtual uint32_t trimFloor() const { return 0; }
  // Device time per kernel class of the last forward(), when the backend
  // measures it (GPU timestamp queries); empty otherwise.
  virtual std::vector<KernelTiming> kernelTimings() const { return {}; }

  // KV cache accounting, one entry per layer in layer order.
  virtual std::vector<KvLayerBytes> kvBytes() const = 0;
  // The rows one layer and part holds, decoded to floats through the part's
  // scheme (KvScheme::decode, so in the original, unrotated space):
  // [kvBytes()[layer].rows][the layer's nHeadKv][its headDim], the last cached rows (all of
  // them but for a window layer). For inspection and eval, not a hot path.
  virtual Expected<std::vector<float>> readKv(uint32_t layer, kv::KvPart part) const = 0;
  // The saved form of the cache (runtime/kv_file.h). kvLayout(): the schemes,
  // seeds and geometry of the cached rows (its rowsPerPage is this backend's;
  // null for a backend that cannot save its cache).
  // exportKv hands the cached rows to `write` in kv::KvCache's canonical
  // order; importKv fills an empty cache with `rows` rows in that order,
  // encoded under `layout` (which must store what kvLayout() stores, or, for
  // a two-phase cache not yet compressed, what it will store), and
  // rebuilds the indexer's sidecar from them. Any error, `read`'s included,
  // leaves the cache empty.
  virtual const kv::KvLayout* kvLayout() const { return nullptr; }
  virtual Status exportKv(const std::function<Status(std::span<const uint8_t>)>& write) const;
  virtual Status importKv(const kv::KvLayout& layout, uint32_t rows,
                          const std::function<Status(std::span<uint8_t>)>& read);
  // The precision tail's part of the saved form (kv::KvCache's tail*: the
  // last rows it holds, their bytes in a cache of `rows` rows, and the bytes
  // themselves); importKvTail fills the tail of a cache importKv has just
  // filled. A backend without a tail holds none and takes none.
  virtual uint32_t kvTailHeld() const { return 0; }
  virtual uint64_t kvTailBytes(uint32_t /*rows*/, uint32_t /*held*/) const { return 0; }
  virtual Status exportKvTail(const std::function<Status(std::span<const uint8_t>)>&) const {
    return okStatus();
  }
  virtual Status importKvTail(uint32_t held, const std::function<Status(std::span<uint8_t>)>&) {
    if (held == 0) return okStatus();
    return makeError(ErrorCode::kUnsupported, "the {} backend keeps no precision tail", name());
  }
  // Measured codec error, one entry per layer in layer order; empty when the
  // backend does not measure it.
  virtual std::vector<KvLayerError> kvErrors() const { return {}; }
  // What kvErrors() is computed from; null when the backend does not measure.
  virtual const CodecErrorMeter* kvErrorMeter() const { return nullptr; }
  // The codec error of rows importKv took from a caller that measured them
  // (runtime::reencodeKv); a backend that does not measure ignores it.
  virtual void setKvErrors(const CodecErrorMeter&) {}

  // The indexer and sparse V, changed between steps without touching the
  // cached rows (the sidecar is built from them when the indexer turns on).
  // A backend without an indexer accepts only options that turn it off.
  virtual Status setIndexer(const kv::IndexerOptions& options) {
    if (!options.enabled() && options.sparseV == 0.0f) return okStatus();
    return makeError(ErrorCode::kUnsupported,
                     "the {} backend has no sparse attention (indexer, sparse_v) yet", name());
  }
  virtual kv::IndexerOptions indexer() const { return {}; }
  // The last decode step the indexer ran on (empty when it has not).
  virtual IndexerStep indexerStep() const { return {}; }
  // What the mixture-of-experts routers picked over the cached rows (empty
  // for a model without experts, or a backend that does not log them).
  virtual ExpertUsage expertUsage() const { return {}; }
  // The log expertUsage() reads (null: none), and taking over another
  // backend's for the same rows (runtime::reencodeKv copies the cache).
  virtual const ExpertLog* expertLog() const { return nullptr; }
  virtual void setExpertLog(const ExpertLog&) {}

  // Captures the op output called `name` in the next forward() calls (empty:
  // none; kListTensorNames: only the names); dumped() holds what was
  // captured (no rows: no op has that name).
  void setDumpTarget(std::string name) { m_dump = {std::move(name)}; }
  const TensorDump& dumped() const { return m_dump; }

 protected:
  TensorDump m_dump;
};

}  // namespace kvscope::backend
