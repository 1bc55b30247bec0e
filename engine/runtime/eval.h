#pragma once
// KV cache fidelity: how far a KV cache policy moves a model's predictions
// from the f16 cache on the same backend kind.
//
// Forced decoding, as llama.cpp's reference (shared/reference/
// stories260K.forced-f16.json): the first `prefill` tokens run as one batch,
// then every further token is fed alone, so each step attends over the rows
// the cache holds, encoded. Step s is the prediction for tokens[prefill + s]
// from the tokens before it: steps = tokens.size() - prefill, and the last
// token is predicted but never fed.
//
// Two runs, one after the other: the f16 run (the backend's default cache)
// first, keeping its logits and its cached K/V rows, then the test run under
// the asked policy. Only one copy of the weights is resident at a time. An
// auto policy chooses its schemes from the f16 run's rows (runtime/kv_auto.h)
// and the test run uses what it chose.
//
// Per step: KL(P_f16 || P_test) in nats (log-softmax in double), the argmax of
// both runs and the log-probability both give the true next token.
// Per layer, from the test backend's own accounting (Backend::kvBytes): the
// scheme of K and V and their bits per value, (codes + scales + padding) * 8
// / values cached. And the relative RMS round-trip error of each scheme,
// sqrt(sum ||x - decode(encode(x))||^2 / sum ||x||^2) over every row x the
// f16 run cached in that layer, through the test cache's own scheme objects
// (same seed, same rotation). The f16 rows stand in for the test run's inputs,
// which its cache does not keep: they are the same tokens at the same
// positions, off only by the error earlier layers pass on, and every policy
// is then measured on identical rows, so layers and schemes compare directly.
// Where the test backend measures its own rows as it writes them
// (Backend::kvErrors: the CPU backend), that error is reported beside it.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "kv/auto_policy.h"
#include "model/model_file.h"
#include "runtime/backend_factory.h"

namespace kvscope::runtime {

struct EvalOptions {
  uint32_t prefill = 16;  // tokens run as one batch before forced decoding, >= 1
  // After every forced step of every run (the f16 run, then each policy's):
  // steps done and the total; may be empty.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // When set and true, the runs stop at the next step with kCancelled.
  const std::atomic<bool>* cancel = nullptr;
};

struct EvalStep {
  double kld = 0.0;  // KL(P_f16 || P_test), nats
  int32_t top1F16 = 0, top1Test = 0;
  double logProbF16 = 0.0, logProbTest = 0.0;  // of the true next token
};

struct EvalLayer {
  std::string keyScheme, valueScheme;
  double keyBitsPerValue = 0.0, valueBitsPerValue = 0.0;
  double keyError = 0.0, valueError = 0.0;  // relative RMS round-trip error of the f16 rows
  // The same measure on the rows the test run itself cached, where its backend
  // measures it as it writes them (Backend::kvErrors); negative elsewhere.
  double keyRunError = -1.0, valueRunError = -1.0;
};

struct EvalResult {
  uint32_t tokens = 0, prefill = 0;
  std::vector<EvalStep> steps;
  std::vector<EvalLayer> layers;
  // The steps' KLD: mean, median and the tail (low-bit caches fail in the
  // tail first: a few tokens far off while the mean stays small).
  double kldMean = 0.0, kldMedian = 0.0, kldP99 = 0.0, kldP999 = 0.0;
  double top1 = 0.0;  // share of steps whose argmax agrees
  double ppl = 0.0, pplF16 = 0.0;
  double bitsPerValueK = 0.0, bitsPerValueV = 0.0;  // mean over layers
  // With the indexer on (forced steps are decode steps, so it runs on each):
  // the share of the rows each layer attended, and in diagnostic mode
  // (BackendChoice::indexerDiagnostic) the share of dense attention's mass
  // the selection captured, both averaged over steps and layers; negative
  // without the indexer.
  double rowsRead = -1.0;
  double capturedMass = -1.0;
  // An auto policy: what it measured on the f16 run's rows and chose; the
  // test run used the explicit `policy`.
  std::optional<kv::AutoPlan> autoPlan;
  std::string policy;  // the policy the test run used, as text
  // indexer_dense_heads=auto: what it measured on the prefill (runtime::
  // AutoHeads::describe; a prefill shorter than autoHeadsMinTokens leaves
  // every layer reading every row, and this empty).
  std::string autoHeads;
};

// Runs the f16 and the `test` policy on `tokens` (at least prefill + 2 ids,
// within test.contextLimit) with backends of kind test.kind and compares them.
Expected<EvalResult> evaluateKvPolicy(std::shared_ptr<const model::ModelFile> model,
                                      std::span<const int32_t> tokens, const BackendChoice& test,
                                      const EvalOptions& options = {});

// The same for several policies against one f16 run: one result per policy,
// in order (test.kvPolicy is not used). "Compare schemes on this
// conversation" in the app runs this over the conversation's tokens.
Expected<std::vector<EvalResult>> evaluateKvPolicies(std::shared_ptr<const model::ModelFile> model,
                                                     std::span<const int32_t> tokens,
                                                     const BackendChoice& test,
                                                     std::span<const kv::KvPolicy> policies,
                                                     const EvalOptions& options = {});

// KL(P || Q) in nats of the softmax distributions of two logit vectors of the
// same length, computed in double from log-softmax.
double klDivergence(std::span<const float> logitsP, std::span<const float> logitsQ);

// The q-quantile (0..1) of `values`, interpolating linearly between order
// statistics; 0 for no values.
double quantile(std::vector<double> values, double q);

}  // namespace kvscope::runtime
