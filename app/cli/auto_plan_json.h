#pragma once
// The auto KV policy's plan (kv::AutoPlan) as JSON, for the subcommands'
// --json output: the budget, the average bits and per layer each part's
// scheme, bits, whether it was promoted and why, and its measured error per
// candidate scheme.

#include <nlohmann/json.hpp>

#include "kv/auto_policy.h"

namespace kvscope::cli {

nlohmann::json autoPlanJson(const kv::AutoPlan& plan);

}  // namespace kvscope::cli
