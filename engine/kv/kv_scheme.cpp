#include "kv/kv_scheme.h"

#include "kv/scheme_f16.h"

namespace kvscope::kv {
namespace {

struct Entry {
  std::string_view name;
  std::shared_ptr<const KvScheme> (*make)();
};

// The scheme registry: one row per scheme.
const Entry kSchemes[] = {
    {"f16", [] { return std::shared_ptr<const KvScheme>(std::make_shared<F16Scheme>()); }},
};

}  // namespace

std::vector<std::string_view> schemeNames() {
  std::vector<std::string_view> names;
  for (const auto& e : kSchemes) names.push_back(e.name);
  return names;
}

Expected<std::shared_ptr<const KvScheme>> findScheme(std::string_view name) {
  for (const auto& e : kSchemes)
    if (e.name == name) return e.make();
  std::string known;
  for (const auto& e : kSchemes) known += (known.empty() ? "" : ", ") + std::string(e.name);
  return makeError(ErrorCode::kInvalidArgument, "unknown KV cache scheme '{}' (available: {})",
                   name, known);
}

}  // namespace kvscope::kv
