#pragma once
// The auto KV policy at run time: makes kv::autoPlanCandidates from the rows
// a backend cached while it ran under the auto policy's measuring cache (f16
// in every layer, kv::KvPolicy::resolve), tries each, and turns the best into
// the explicit policy the backend is then rebuilt with.
//
// A trial, per candidate plan: a backend under the plan's policy takes the
// f16 rows of the calibration window's first tokens (reencodeKv, no forward
// pass) and runs its last n = min(kAutoTrialTokens, half the window) tokens
// as one batch; its logits against those of the same run on the f16 rows
// give the plan's mean KLD, and the lowest wins. The rows before the trial
// tokens come from the f16 run (a fresh prefill under the plan would carry
// its layers' errors up the stack): the trial ranks plans, it is not `eval`.
// The f16 start is the measured backend's rows, copied and trimmed, or where
// a copy cannot forget rows (a sliding-window layer's ring) the first tokens
// run again. Cost: up to six backends (the f16 start, the reference and one
// per candidate, at most four; they share the weights), each taking the window's rows and
// running n tokens. A candidate whose trial fails (a device that refuses its
// kernels) is left out; where no trial can run (no backend factory, out of
// memory), the first candidate is taken and the plan says why.

#include <atomic>
#include <cstdint>
#include <span>
#include <string>

#include "backend/backend.h"
#include "core/error.h"
#include "kv/auto_policy.h"
#include "kv/kv_policy.h"
#include "runtime/backend_factory.h"

namespace kvscope::runtime {

struct AutoChoice {
  kv::AutoPlan plan;
  kv::KvPolicy policy;  // explicit: the plan's schemes, the auto policy's seed and attention
};

// The most tokens a trial runs: the calibration window's last ones, at most
// half of it.
inline constexpr uint32_t kAutoTrialTokens = 64;

// What chooseAutoPolicy tries the candidates with; without a factory it
// takes the first candidate untried.
struct AutoTrials {
  const BackendFactory* factory = nullptr;    // builds a backend of the measured one's kind
  std::span<const int32_t> tokens;            // the tokens the measured backend cached, in order
  const std::atomic<bool>* cancel = nullptr;  // true: stop with kCancelled between trials
};

// Measures the first min(backend.cachedTokens(), kv::kAutoCalibrationTokens)
// cached tokens of every layer (Backend::readKv), makes the candidate plans
// within policy.autoBits and keeps the one the trials measure best.
// `policy` must be an auto policy.
Expected<AutoChoice> chooseAutoPolicy(const backend::Backend& backend, const kv::KvPolicy& policy,
                                      const AutoTrials& trials);

// The plan as text for a terminal: the budget, average and method, the
// trials, then one line per layer (K and V scheme, measured errors, why
// promoted).
std::string describeAutoPlan(const kv::AutoPlan& plan);

}  // namespace kvscope::runtime
