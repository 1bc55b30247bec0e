#include "server/kv_json.h"

namespace kvscope::server {
namespace {

using nlohmann::json;

json measured(double value) {
  return value < 0 ? json(nullptr) : json(value);
}

json partJson(const std::string& scheme, double bits, const kv::KvBytes& b, double error,
              const std::string& promotion) {
  return {{"scheme", scheme},
          {"bits_per_value", bits},
          {"bytes",
           {{"codes", b.codes},
            {"scales", b.scales},
            {"sidecar", b.sidecar},
            {"tail", b.tail},
            {"padding", b.padding},
            {"unused", b.unused}}},
          {"error", measured(error)},
          {"promotion", promotion}};
}

json indexerJson(const runtime::IndexerSnapshot& s) {
  json layers = json::array();
  for (size_t l = 0; l < s.step.layers.size(); ++l) {
    const backend::IndexerLayerStep& layer = s.step.layers[l];
    json heads = json::array();
    // An empty run list means the head attended every row.
    for (const auto& runs : layer.heads)
      heads.push_back(runs.empty() ? s.step.rows : kv::rowCount(runs));
    layers.push_back(
        {{"layer", l}, {"captured_mass", measured(layer.capturedMass)}, {"rows_attended", heads}});
  }
  return {{"selection", s.options.selectionText()},
          {"scorer", s.options.scorerText()},
          {"sparse_v", s.options.sparseV},
          {"diagnostic", s.options.diagnostic},
          {"dense_layers", s.options.denseLayers},
          // The KV heads that read every row ("none"), and for
          // indexer_dense_heads=auto whether they are still to be measured
          // and what the session says about them.
          {"dense_heads", s.options.denseHeadsText()},
          {"dense_heads_measuring", s.options.autoDenseHeads},
          {"dense_heads_note", s.denseHeadsNote},
          {"rows", s.step.rows},
          {"layers", layers}};
}

}  // namespace

json kvJson(const runtime::KvSnapshot& kv, const runtime::IndexerSnapshot* indexer) {
  json layers = json::array();
  for (size_t l = 0; l < kv.layers.size(); ++l) {
    const runtime::KvLayerSnapshot& s = kv.layers[l];
    layers.push_back(
        {{"layer", l},
         {"rows", s.rows},
         {"window", s.window},
         {"ring", s.ring},
         {"f16_bytes", s.f16Bytes},
         {"key", partJson(s.keyScheme, s.keyBitsPerValue, s.key, s.keyError, s.keyPromotion)},
         {"value",
          partJson(s.valueScheme, s.valueBitsPerValue, s.value, s.valueError, s.valuePromotion)}});
  }
  return {
      {"rows", kv.rows},
      {"context_limit", kv.contextLimit},
      {"used_bytes", kv.usedBytes()},
      {"allocated_bytes", kv.allocatedBytes()},
      {"f16_bytes", kv.f16Bytes()},
      {"auto_status", kv.autoStatus},
      {"auto_measuring", kv.autoMeasuring},
      {"layers", layers},
      {"indexer", indexer && indexer->options.enabled() ? indexerJson(*indexer) : json(nullptr)}};
}

}  // namespace kvscope::server
