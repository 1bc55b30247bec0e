#include "runtime/indexer_heads.h"

#include <algorithm>

#include <fmt/format.h>

namespace kvscope::runtime {
namespace {

Status measure(backend::Backend& b, std::span<const int32_t> tokens, uint32_t steps,
               uint32_t cached, IndexerHeadMass& out) {
  const model::ModelConfig& c = b.config();
  out.mass.assign(c.kvLayers(), {});
  for (uint32_t l = 0; l < c.kvLayers(); ++l) out.mass[l].assign(c.headsKvOf(l), 0.0);
  // Keep the prefill's rows where the cache holds them and the backend can
  // trim back to them (sliding-window layers keep only their last rows).
  const bool keep = cached >= out.prefill && out.prefill >= b.trimFloor();
  KVS_TRY(b.trim(keep ? out.prefill : 0));
  backend::Logits logits;
  if (!keep) KVS_TRY(b.forward({tokens.first(out.prefill)}, logits));
  for (uint32_t s = 0; s < steps; ++s) {
    KVS_TRY(b.forward({tokens.subspan(out.prefill + s, 1)}, logits));
    const backend::IndexerStep step = b.indexerStep();
    if (step.layers.size() != c.kvLayers())
      return makeError(ErrorCode::kInternal, "the {} backend reported no indexed step", b.name());
    for (uint32_t l = 0; l < c.kvLayers(); ++l) {
      const std::vector<double>& heads = step.layers[l].headMass;
      if (heads.size() != out.mass[l].size()) {
        return makeError(ErrorCode::kUnsupported,
                         "the {} backend does not measure the indexer's captured mass per head",
                         b.name());
      }
      for (size_t h = 0; h < heads.size(); ++h) out.mass[l][h] += heads[h] / steps;
    }
  }
  return okStatus();
}

}  // namespace

Expected<IndexerHeadMass> measureIndexerHeads(backend::Backend& backend,
                                              std::span<const int32_t> tokens,
                                              const kv::IndexerOptions& options, uint32_t steps,
                                              uint32_t cached) {
  if (!options.enabled())
    return makeError(ErrorCode::kInvalidArgument, "measuring the indexer's heads needs its top_k");
  if (steps == 0 || tokens.size() < size_t{steps} + 1) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the text has {} tokens; measuring {} decode steps needs at least {}",
                     tokens.size(), steps, size_t{steps} + 1);
  }
  if (tokens.size() > backend.contextLimit()) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the text has {} tokens, more than the context of {} (raise -c)",
                     tokens.size(), backend.contextLimit());
  }
  IndexerHeadMass out;
  out.options = options;
  out.options.denseLayers = 0;
  out.options.denseHeads.clear();
  out.options.autoDenseHeads = false;
  out.options.diagnostic = true;
  out.prefill = static_cast<uint32_t>(tokens.size()) - steps;
  out.steps = steps;
  if (kv::selectsAll(out.options, out.prefill + 1)) {
    return makeError(ErrorCode::kInvalidArgument,
                     "a selection of {} over {} rows reads every row: nothing to measure (a "
                     "longer text or a smaller top_k)",
                     out.options.selectionText(), out.prefill + 1);
  }
  const kv::IndexerOptions before = backend.indexer();
  KVS_TRY(backend.setIndexer(out.options));
  const Status measured = measure(backend, tokens, steps, cached, out);
  KVS_TRY(backend.setIndexer(before));
  KVS_TRY(measured);
  return out;
}

uint32_t IndexerHeadMass::kvHeads() const {
  size_t n = 0;
  for (const auto& layer : mass) n += layer.size();
  return static_cast<uint32_t>(n);
}

uint32_t autoHeadsMinTokens(const kv::IndexerOptions& options) {
  return 4 * (options.topK + options.window + options.sinks) + kAutoHeadSteps;
}

std::string AutoHeads::describe() const {
  if (!failure.empty())
    return fmt::format("indexer_dense_heads=auto could not measure ({}); every KV head selects",
                       failure);
  return fmt::format(
      "indexer_dense_heads=auto measured {} decode steps at {} cached tokens: {} of {} KV heads "
      "captured under {:.0f}% of the attention mass and read every row ({})",
      kAutoHeadSteps, measuredAt, heads.size(), kvHeads, 100.0 * kAutoHeadCut,
      kv::IndexerOptions{.denseHeads = heads}.denseHeadsText());
}

Expected<AutoHeads> settleAutoHeads(backend::Backend& backend, std::span<const int32_t> tokens,
                                    kv::IndexerOptions options, uint32_t chunk,
                                    backend::Logits& logits) {
  options.autoDenseHeads = false;
  options.denseHeads.clear();
  const auto cached = static_cast<uint32_t>(tokens.size());
  AutoHeads out;
  Expected<IndexerHeadMass> measured =
      measureIndexerHeads(backend, tokens, options, kAutoHeadSteps, cached);
  if (measured) {
    out.heads = headsBelow(*measured, kAutoHeadCut);
    out.measuredAt = measured->prefill;
    out.kvHeads = measured->kvHeads();
  } else {
    out.failure = measured.error().message;
  }
  options.denseHeads = out.heads;
  KVS_TRY(backend.setIndexer(options));
  // The measured steps ran under the selection: run them again as the
  // prompt ran them.
  uint32_t keep = std::min(backend.cachedTokens(), cached - std::min(cached, kAutoHeadSteps));
  if (keep < backend.trimFloor()) keep = 0;
  KVS_TRY(backend.trim(keep));
  for (uint32_t done = keep; done < cached;) {
    const uint32_t take = std::min(std::max(chunk, 1u), cached - done);
    KVS_TRY(backend.forward({.tokens = tokens.subspan(done, take), .prompt = true}, logits));
    done += take;
  }
  return out;
}

std::vector<kv::KvHeadRef> headsBelow(const IndexerHeadMass& measured, double threshold) {
  std::vector<kv::KvHeadRef> heads;
  for (uint32_t l = 0; l < measured.mass.size(); ++l)
    for (uint32_t h = 0; h < measured.mass[l].size(); ++h)
      if (measured.mass[l][h] < threshold) heads.push_back({l, h});
  return heads;
}

}  // namespace kvscope::runtime
