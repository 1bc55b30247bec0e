#pragma once
// A cheap identity of a model's weights, for files that are only valid with
// the model that made them (a saved KV cache): FNV-1a 64 over the
// architecture, each tensor's name, type and shape, and the first and last
// 4 KiB of its data. Another quantization, another architecture or another
// fine-tune of the same shapes gives another value; reading ~8 KiB per tensor
// keeps it fast on a mapped multi-GiB file. Not a guard against tampering.

#include <cstdint>
#include <string>

#include "model/weight_source.h"

namespace kvscope::model {

uint64_t modelFingerprint(const std::string& architecture, const WeightSource& weights);

}  // namespace kvscope::model
