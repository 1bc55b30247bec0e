#pragma once
// The KV cache as GET /v1/kv shows it: the KvSnapshot the inspector panels
// draw (per layer the K and V codec, bits per value, bytes by part, the f16
// equivalent, measured codec error, an auto policy's promotions) and, while
// the indexer is on, its last step (options, rows attended per KV head,
// captured attention mass where diagnostic mode measured it).
//
// Shape: {"rows","context_limit","used_bytes","allocated_bytes","f16_bytes",
//   "auto_status","layers":[{"layer","rows" (held: a window layer its last),
//   "window" (0: global),"ring","f16_bytes","key":PART,"value":PART}],
//   "indexer": null | {"selection","scorer","sparse_v","diagnostic","rows",
//                      "layers":[{"layer","captured_mass","rows_attended":[…]}]}}
// PART = {"scheme","bits_per_value","bytes":{"codes","scales","sidecar","tail",
//   "padding","unused"},"error","promotion"}; unmeasured values are null.

#include <nlohmann/json.hpp>

#include "runtime/indexer_snapshot.h"
#include "runtime/kv_snapshot.h"

namespace kvscope::server {

nlohmann::json kvJson(const runtime::KvSnapshot& kv, const runtime::IndexerSnapshot* indexer);

}  // namespace kvscope::server
