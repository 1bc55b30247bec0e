#include "kv/kv_scheme.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kv/scheme_affine4.h"
#include "kv/scheme_f16.h"
#include "kv/scheme_fp8.h"
#include "kv/scheme_q4_0.h"
#include "kv/scheme_q8_0.h"
#include "kv/scheme_rotated.h"
#include "kv/scheme_turbo.h"
#include "kv/splitmix.h"

namespace kvscope::kv {
namespace {

using Made = std::shared_ptr<const KvScheme>;

struct Entry {
  std::string_view name;
  uint32_t minDim;
  Made (*make)(const SchemeParams&);
};

template <typename T>
Made makePlain(const SchemeParams& p) {
  return std::make_shared<T>(p);
}

// A block format in rotated space (scheme_rotated.h).
template <typename T>
Made makeRotated(const SchemeParams& p) {
  return std::make_shared<RotatedScheme>(p, std::make_shared<T>(p));
}

// q8_0r: q8_0's bytes with the scale of least error (scheme_q8_0.h).
Made makeQ8_0r(const SchemeParams& p) {
  return std::make_shared<RotatedScheme>(p, std::make_shared<Q8_0Scheme>(p, Q8Scale::kSearched));
}

template <uint32_t kBits, TurboScale kScale>
Made makeTurbo(const SchemeParams& p) {
  return std::make_shared<TurboScheme>(p, kBits, kScale);
}

// The scheme registry: one row per scheme.
const Entry kSchemes[] = {
    {"f16", 1, makePlain<F16Scheme>},
    {"q8_0", 1, makePlain<Q8_0Scheme>},
    {"q4_0", 1, makePlain<Q4_0Scheme>},
    {"fp8", 1, makePlain<Fp8Scheme>},
    {"affine4", 1, makePlain<Affine4Scheme>},
    {"turbo4", kMinTurboDim, makeTurbo<4, TurboScale::kRow>},
    {"turbo3", kMinTurboDim, makeTurbo<3, TurboScale::kRow>},
    {"turbo2", kMinTurboDim, makeTurbo<2, TurboScale::kRow>},
    {"turbo4g", kMinTurboDim, makeTurbo<4, TurboScale::kGroup>},
    {"turbo3g", kMinTurboDim, makeTurbo<3, TurboScale::kGroup>},
    {"turbo2g", kMinTurboDim, makeTurbo<2, TurboScale::kGroup>},
    {"turbo4b", kMinTurboDim, makeTurbo<4, TurboScale::kBlock>},
    {"turbo3b", kMinTurboDim, makeTurbo<3, TurboScale::kBlock>},
    {"turbo2b", kMinTurboDim, makeTurbo<2, TurboScale::kBlock>},
    {"turbo6b", kMinTurboDim, makeTurbo<6, TurboScale::kBlock>},
    {"turbo5b", kMinTurboDim, makeTurbo<5, TurboScale::kBlock>},
    {"q8_0r", 1, makeQ8_0r},
    {"q4_0r", 1, makeRotated<Q4_0Scheme>},
    {"fp8r", 1, makeRotated<Fp8Scheme>},
    {"affine4r", 1, makeRotated<Affine4Scheme>},
};

const Entry* findEntry(std::string_view name) {
  for (const auto& e : kSchemes)
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

std::vector<std::string_view> schemeNames() {
  std::vector<std::string_view> names;
  for (const auto& e : kSchemes) names.push_back(e.name);
  return names;
}

bool isSchemeName(std::string_view name) {
  return findEntry(name) != nullptr;
}

Expected<std::shared_ptr<const KvScheme>> makeScheme(std::string_view name,
                                                     const SchemeParams& params) {
  const Entry* e = findEntry(name);
  if (!e) {
    return makeError(ErrorCode::kInvalidArgument, "unknown KV cache scheme '{}' (available: {})",
                     name, fmt::join(schemeNames(), ", "));
  }
  if (params.dim < e->minDim || params.dim > kMaxKvDim) {
    return makeError(ErrorCode::kUnsupported,
                     "KV cache scheme '{}' needs a head dimension of {} to {}, not {}", name,
                     e->minDim, kMaxKvDim, params.dim);
  }
  return e->make(params);
}

uint64_t streamSeed(uint64_t cacheSeed, uint32_t layer, uint32_t part) {
  return splitmixMix(splitmixMix(cacheSeed ^ 0x9e3779b97f4a7c15ull) +
                     (uint64_t{layer} << 1 | (part & 1)));
}

}  // namespace kvscope::kv
