#pragma once
// The auto KV policy's plan (kv::AutoPlan) as JSON, for the CLI's --json
// output and the saved KV cache (runtime/kv_file.h): the budget, the average
// bits, how the plan was made and the candidates' trials, and per layer each
// part's scheme, bits, whether it was promoted and why, and its measured
// error per candidate scheme.

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "kv/auto_policy.h"

namespace kvscope::runtime {

nlohmann::json autoPlanJson(const kv::AutoPlan& plan);
// The plan autoPlanJson wrote; kBadFile naming the first field that is
// missing or of the wrong type. Scheme names are checked by the caller.
Expected<kv::AutoPlan> parseAutoPlanJson(const nlohmann::json& json);

}  // namespace kvscope::runtime
