#include "kv/kv_policy.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kv/auto_policy.h"

namespace kvscope::kv {
namespace {

struct ArchitectureCache {
  std::string_view architecture;
  CacheLayout layout;
};

// Architectures whose cache is not K/V rows (see model/architecture.cpp).
constexpr ArchitectureCache kNonRowCaches[] = {
    {"deepseek2", CacheLayout::kLatent},         {"deepseek32", CacheLayout::kLatent},
    {"deepseek4", CacheLayout::kLatent},         {"glm-dsa", CacheLayout::kLatent},
    {"kimi-linear", CacheLayout::kLatent},       {"minicpm3", CacheLayout::kLatent},
    {"mamba", CacheLayout::kRecurrentState},     {"mamba2", CacheLayout::kRecurrentState},
    {"rwkv6", CacheLayout::kRecurrentState},     {"rwkv7", CacheLayout::kRecurrentState},
    {"jamba", CacheLayout::kRecurrentState},     {"falcon-h1", CacheLayout::kRecurrentState},
    {"qwen3next", CacheLayout::kRecurrentState}, {"qwen35", CacheLayout::kRecurrentState},
    {"qwen35moe", CacheLayout::kRecurrentState},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Error badItem(std::string_view item, std::string_view why) {
  return makeError(ErrorCode::kInvalidArgument, "KV cache policy item '{}': {}", item, why);
}

template <typename T>
bool parseNumber(std::string_view s, T& out) {
  int base = 10;
  if (s.starts_with("0x") || s.starts_with("0X")) {
    s.remove_prefix(2);
    base = 16;
  }
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

Status checkScheme(std::string_view item, std::string_view name) {
  if (isSchemeName(name)) return okStatus();
  return badItem(item, fmt::format("unknown scheme '{}' (available: {})", name,
                                   fmt::join(schemeNames(), ", ")));
}

// auto or auto:BITS.
Status parseAuto(std::string_view item, KvPolicy& p) {
  if (p.autoBits) return badItem(item, "given twice");
  if (item == "auto") {
    p.autoBits = 0.0;
    return okStatus();
  }
  const std::string number(item.substr(item.find(':') + 1));
  char* end = nullptr;
  const double bits = std::strtod(number.c_str(), &end);
  if (!item.starts_with("auto:") || number.empty() || end != number.c_str() + number.size() ||
      !(bits > 0.0 && bits <= 16.0)) {
    return badItem(item, "auto takes an average bits-per-value budget, e.g. auto or auto:4.5");
  }
  p.autoBits = bits;
  return okStatus();
}

}  // namespace

CacheLayout cacheLayoutOf(std::string_view architecture) {
  for (const auto& a : kNonRowCaches)
    if (a.architecture == architecture) return a.layout;
  return CacheLayout::kKvRows;
}

Status checkSchemeForArchitecture(std::string_view architecture, std::string_view scheme) {
  switch (cacheLayoutOf(architecture)) {
    case CacheLayout::kKvRows:
      return okStatus();
    // A latent carries the RoPE part and is read by both K and V through
    // absorbed projections; a state is rewritten every step. The row codecs
    // are built for neither, so only the exact f16 store is accepted.
    case CacheLayout::kLatent:
    case CacheLayout::kRecurrentState:
      if (scheme == "f16") return okStatus();
      return makeError(ErrorCode::kUnsupported,
                       "KV cache scheme '{}' cannot be used with architecture '{}': its cache is "
                       "{}, not K/V rows (only f16 is possible)",
                       scheme, architecture,
                       cacheLayoutOf(architecture) == CacheLayout::kLatent
                           ? "a compressed latent (MLA)"
                           : "a recurrent state");
  }
  return okStatus();
}

Expected<KvPolicy> KvPolicy::parse(std::string_view text) {
  KvPolicy p;
  std::set<std::string, std::less<>> seen;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = trim(text.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) {
      if (trim(text).empty()) break;
      return makeError(ErrorCode::kInvalidArgument, "KV cache policy '{}' has an empty item", text);
    }
    const size_t eq = item.find('=');
    const std::string_view key = trim(item.substr(0, eq));
    const std::string_view value = eq == std::string_view::npos ? "" : trim(item.substr(eq + 1));
    const size_t at = key.find('@');
    const std::string_view base = key.substr(0, at);
    if (key.starts_with("auto") && eq == std::string_view::npos) {
      KVS_TRY(parseAuto(item, p));
      continue;
    }
    if (base != "k" && base != "v" && base != "kv" && base != "boundary" && base != "two_phase" &&
        base != "seed" && base != "indexer" && base != "indexer_scorer" &&
        base != "indexer_dense" && base != "indexer_dense_heads" && base != "sparse_v" &&
        base != "tail") {
      return badItem(item,
                     "unknown key (known: auto[:BITS], k, v, kv, k@L, v@L, kv@L, boundary, "
                     "two_phase, tail, seed, indexer, indexer_scorer, indexer_dense, "
                     "indexer_dense_heads, sparse_v)");
    }
    if (at == std::string_view::npos && !seen.emplace(key).second)
      return badItem(item, "given twice");
    if (base == "two_phase") {
      if (eq != std::string_view::npos || at != std::string_view::npos)
        return badItem(item, "two_phase takes no value");
      p.twoPhase = true;
      continue;
    }
    if (eq == std::string_view::npos || value.empty()) return badItem(item, "missing '=value'");
    if (base == "indexer" || base == "indexer_scorer" || base == "sparse_v") {
      if (at != std::string_view::npos) return badItem(item, "applies to every layer");
      if (base != "sparse_v") {
        auto st = base == "indexer" ? IndexerOptions::parseInto(value, p.attention)
                                    : IndexerOptions::parseScorer(value, p.attention);
        if (!st.ok()) return badItem(item, st.error().message);
        continue;
      }
      const std::string number(value);
      char* end = nullptr;
      p.attention.sparseV = std::strtof(number.c_str(), &end);
      if (end != number.c_str() + number.size()) p.attention.sparseV = NAN;
      if (auto st = p.attention.check(); !st.ok()) return badItem(item, st.error().message);
      continue;
    }
    if (base == "indexer_dense_heads") {
      if (at != std::string_view::npos) return badItem(item, "names its layers in its value");
      if (auto st = IndexerOptions::parseDenseHeads(value, p.attention); !st.ok())
        return badItem(item, st.error().message);
      continue;
    }
    if (base == "indexer_dense") {
      if (at != std::string_view::npos || !parseNumber(value, p.attention.denseLayers))
        return badItem(item, "indexer_dense must be a layer count");
      continue;
    }
    if (base == "tail") {
      if (at != std::string_view::npos || !parseNumber(value, p.tail) || p.tail == 0 ||
          p.tail > kMaxTailRows)
        return badItem(item, fmt::format("tail must be a row count, 1 to {}", kMaxTailRows));
      continue;
    }
    if (base == "seed") {
      if (at != std::string_view::npos || !parseNumber(value, p.seed))
        return badItem(item, "seed must be an unsigned 64-bit number");
      continue;
    }
    if (base == "boundary") {
      if (at != std::string_view::npos) return badItem(item, "boundary has no per-layer form");
      const size_t colon = value.find(':');
      if (!parseNumber(value.substr(0, colon), p.boundary))
        return badItem(item, "boundary must be a layer count, optionally ':scheme'");
      if (colon != std::string_view::npos) {
        p.boundaryScheme = std::string(value.substr(colon + 1));
        KVS_TRY(checkScheme(item, p.boundaryScheme));
      }
      continue;
    }
    KVS_TRY(checkScheme(item, value));
    if (at == std::string_view::npos) {
      if (base != "v") p.key = std::string(value);
      if (base != "k") p.value = std::string(value);
      continue;
    }
    const std::string_view range = key.substr(at + 1);
    const size_t dash = range.find('-');
    Override o{.key = base != "v", .value = base != "k", .scheme = std::string(value)};
    if (!parseNumber(range.substr(0, dash), o.first) ||
        !parseNumber(
            dash == std::string_view::npos ? range.substr(0, dash) : range.substr(dash + 1),
            o.last) ||
        o.last < o.first) {
      return badItem(item, "a layer override is k@L=, v@L= or kv@L= with L a layer or A-B");
    }
    p.overrides.push_back(std::move(o));
  }
  if (p.autoBits) {
    const bool schemesGiven = seen.contains("k") || seen.contains("v") || seen.contains("kv") ||
                              !p.overrides.empty() || p.boundary != 0 || p.twoPhase || p.tail != 0;
    if (schemesGiven) {
      return makeError(ErrorCode::kInvalidArgument,
                       "KV cache policy '{}': auto chooses every layer's schemes itself, so it "
                       "takes no k, v, kv, per-layer, boundary, two_phase or tail items",
                       text);
    }
  }
  return p;
}

std::string KvPolicy::toString() const {
  std::string s = !autoBits         ? fmt::format("k={},v={}", key, value)
                  : *autoBits > 0.0 ? fmt::format("auto:{}", *autoBits)
                                    : std::string("auto");
  if (boundary) s += fmt::format(",boundary={}:{}", boundary, boundaryScheme);
  for (const auto& o : overrides) {
    const char* part = o.key && o.value ? "kv" : o.key ? "k" : "v";
    if (o.first == o.last)
      s += fmt::format(",{}@{}={}", part, o.first, o.scheme);
    else
      s += fmt::format(",{}@{}-{}={}", part, o.first, o.last, o.scheme);
  }
  if (twoPhase) s += ",two_phase";
  if (tail) s += fmt::format(",tail={}", tail);
  if (seed != kDefaultCacheSeed) s += fmt::format(",seed={:#x}", seed);
  return s + attention.policyItems();
}

bool KvPolicy::sameCache(const KvPolicy& other) const {
  const auto overridesEqual = [](const Override& a, const Override& b) {
    return a.first == b.first && a.last == b.last && a.key == b.key && a.value == b.value &&
           a.scheme == b.scheme;
  };
  return key == other.key && value == other.value && boundary == other.boundary &&
         (boundary == 0 || boundaryScheme == other.boundaryScheme) &&
         std::equal(overrides.begin(), overrides.end(), other.overrides.begin(),
                    other.overrides.end(), overridesEqual) &&
         twoPhase == other.twoPhase && tail == other.tail && autoBits == other.autoBits &&
         seed == other.seed;
}

Expected<std::vector<LayerSchemes>> KvPolicy::resolve(const KvTarget& target) const {
  if (autoBits) {
    KVS_TRY(autoBudget(*autoBits, target.headDims));
    return std::vector<LayerSchemes>(target.nLayer, LayerSchemes{"f16", "f16"});
  }
  std::vector<LayerSchemes> layers(target.nLayer, LayerSchemes{key, value});
  for (uint32_t l = 0; l < target.nLayer; ++l) {
    if (l < boundary || l + boundary >= target.nLayer) layers[l] = {boundaryScheme, boundaryScheme};
  }
  for (const auto& o : overrides) {
    if (o.last >= target.nLayer) {
      return makeError(ErrorCode::kInvalidArgument,
                       "KV cache policy names layer {}, but the model's cache has layers 0 to {}",
                       o.last, target.nLayer - 1);
    }
    for (uint32_t l = o.first; l <= o.last; ++l) {
      if (o.key) layers[l].key = o.scheme;
      if (o.value) layers[l].value = o.scheme;
    }
  }
  for (const auto& l : layers) {
    KVS_TRY(checkSchemeForArchitecture(target.architecture, l.key));
    KVS_TRY(checkSchemeForArchitecture(target.architecture, l.value));
  }
  return layers;
}

KvPolicy KvPolicy::withLayers(std::span<const LayerSchemes> layers) const {
  KvPolicy p;
  p.seed = seed;
  p.attention = attention;
  auto mostCommon = [&](bool isKey) {
    std::map<std::string, size_t> count;
    for (const auto& l : layers) ++count[isKey ? l.key : l.value];
    std::string best = "f16";
    size_t most = 0;
    for (const auto& [name, n] : count) {
      if (n > most) {
        most = n;
        best = name;
      }
    }
    return best;
  };
  p.key = mostCommon(true);
  p.value = mostCommon(false);
  for (uint32_t l = 0; l < layers.size(); ++l) {
    const bool k = layers[l].key != p.key, v = layers[l].value != p.value;
    if (k && v && layers[l].key == layers[l].value) {
      p.overrides.push_back(
          {.first = l, .last = l, .key = true, .value = true, .scheme = layers[l].key});
      continue;
    }
    if (k) p.overrides.push_back({.first = l, .last = l, .key = true, .scheme = layers[l].key});
    if (v) p.overrides.push_back({.first = l, .last = l, .value = true, .scheme = layers[l].value});
  }
  return p;
}

KvPolicy defaultKvPolicy() {
  KvPolicy p;
  p.autoBits = 0.0;
  return p;
}

}  // namespace kvscope::kv
