#include "server/metrics.h"

#include <fmt/format.h>

namespace kvscope::server {
namespace {

// Label values may hold any text; the format escapes these three.
std::string escapeLabel(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

class Writer {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    m_text += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(std::string_view name, double value, std::string_view labels = {}) {
    m_text += labels.empty() ? fmt::format("{} {}\n", name, value)
                             : fmt::format("{}{{{}}} {}\n", name, labels, value);
  }
  void one(std::string_view name, std::string_view type, std::string_view help, double value) {
    family(name, type, help);
    sample(name, value);
  }
  std::string take() { return std::move(m_text); }

 private:
  std::string m_text;
};

void writeKv(Writer& w, const runtime::KvSnapshot& kv) {
  w.family("kvscope_kv_bytes", "gauge",
           "KV cache bytes by part (key, value) and kind; unused = reserved rows not yet filled");
  double keyBits = 0, valueBits = 0;
  kv::KvBytes key, value;
  for (const runtime::KvLayerSnapshot& l : kv.layers) {
    for (auto [sum, part] : {std::pair{&key, &l.key}, std::pair{&value, &l.value}}) {
      sum->codes += part->codes;
      sum->scales += part->scales;
      sum->sidecar += part->sidecar;
      sum->padding += part->padding;
      sum->unused += part->unused;
    }
    keyBits += l.keyBitsPerValue;
    valueBits += l.valueBitsPerValue;
  }
  for (auto [name, b] : {std::pair{"key", &key}, std::pair{"value", &value}}) {
    for (auto [kind, bytes] : {std::pair{"codes", b->codes}, std::pair{"scales", b->scales},
                               std::pair{"sidecar", b->sidecar}, std::pair{"padding", b->padding},
                               std::pair{"unused", b->unused}}) {
      w.sample("kvscope_kv_bytes", static_cast<double>(bytes),
               fmt::format("part=\"{}\",kind=\"{}\"", name, kind));
    }
  }
  w.one("kvscope_kv_f16_bytes", "gauge", "What the cached rows would take at f16",
        static_cast<double>(kv.f16Bytes()));
  if (!kv.layers.empty()) {
    // Every layer caches the same number of values, so the plain mean is the
    // cache's average.
    const double n = static_cast<double>(kv.layers.size());
    w.family("kvscope_kv_bits_per_value", "gauge", "Average bits per cached value by part");
    w.sample("kvscope_kv_bits_per_value", keyBits / n, "part=\"key\"");
    w.sample("kvscope_kv_bits_per_value", valueBits / n, "part=\"value\"");
  }
  w.one("kvscope_context_tokens", "gauge", "Tokens in the KV cache", kv.rows);
  w.one("kvscope_context_size", "gauge", "Tokens the context holds", kv.contextLimit);
}

void writeIndexer(Writer& w, const runtime::IndexerSnapshot& s) {
  if (!s.options.enabled() || s.step.layers.empty()) return;
  runtime::IndexerTally tally;
  tally.add(s.step);
  if (tally.rowsRead() >= 0)
    w.one("kvscope_indexer_rows_read_ratio", "gauge",
          "Share of the cached rows the indexer's last step attended", tally.rowsRead());
  if (tally.capturedMass() >= 0)
    w.one("kvscope_indexer_captured_mass", "gauge",
          "Share of dense attention's softmax mass the last step's selection captured",
          tally.capturedMass());
}

}  // namespace

void ServerMetrics::addGeneration(const runtime::StepStats& stats, uint32_t completion) {
  promptTokens += stats.promptTokens;
  cachedPromptTokens += stats.reusedTokens;
  completionTokens += completion;
  prefillSeconds += stats.prefillMs / 1e3;
  decodeSeconds += stats.decodeMs / 1e3;
  lastPrefillTokensPerSecond = stats.prefillTokensPerSecond();
  lastDecodeTokensPerSecond = stats.decodeTokensPerSecond();
}

std::string prometheusText(const ServerMetrics& m, std::string_view modelId,
                           size_t activeRequests) {
  Writer w;
  w.family("kvscope_model_info", "gauge", "The model served");
  w.sample("kvscope_model_info", 1, fmt::format("model=\"{}\"", escapeLabel(modelId)));
  w.family("kvscope_requests_total", "counter", "HTTP requests answered, by route and status");
  for (const auto& [key, count] : m.requests) {
    w.sample("kvscope_requests_total", static_cast<double>(count),
             fmt::format("route=\"{}\",status=\"{}\"", escapeLabel(key.first), key.second));
  }
  w.one("kvscope_requests_cancelled_total", "counter",
        "Generations stopped because their client disconnected", static_cast<double>(m.cancelled));
  w.one("kvscope_requests_active", "gauge", "Generations waiting or running",
        static_cast<double>(activeRequests));
  w.one("kvscope_prompt_tokens_total", "counter", "Prompt tokens of finished generations",
        static_cast<double>(m.promptTokens));
  w.one("kvscope_prompt_cached_tokens_total", "counter",
        "Prompt tokens reused from the KV cache instead of prefilled",
        static_cast<double>(m.cachedPromptTokens));
  w.one("kvscope_completion_tokens_total", "counter", "Generated tokens",
        static_cast<double>(m.completionTokens));
  w.one("kvscope_prefill_seconds_total", "counter", "Time spent prefilling prompts",
        m.prefillSeconds);
  w.one("kvscope_decode_seconds_total", "counter", "Time spent decoding", m.decodeSeconds);
  w.one("kvscope_prefill_tokens_per_second", "gauge", "Prefill speed of the last generation",
        m.lastPrefillTokensPerSecond);
  w.one("kvscope_decode_tokens_per_second", "gauge", "Decode speed of the last generation",
        m.lastDecodeTokensPerSecond);
  if (m.kv) writeKv(w, *m.kv);
  if (m.indexer) writeIndexer(w, *m.indexer);
  return w.take();
}

}  // namespace kvscope::server
