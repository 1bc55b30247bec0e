#include "runtime/eval.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "backend/backend.h"
#include "kv/kv_policy.h"
#include "runtime/indexer_heads.h"
#include "runtime/indexer_snapshot.h"
#include "runtime/kv_auto.h"

namespace kvscope::runtime {
namespace {

std::vector<double> logSoftmax(std::span<const float> logits) {
  double top = -INFINITY;
  for (float l : logits) top = std::max(top, double{l});
  double sum = 0.0;
  for (float l : logits) sum += std::exp(double{l} - top);
  const double logSum = top + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = double{logits[i]} - logSum;
  return out;
}

// KL(P || Q) from the log-probabilities of both.
double klFromLogProbs(std::span<const double> lp, std::span<const double> lq) {
  double kl = 0.0;
  for (size_t i = 0; i < lp.size(); ++i) {
    const double p = std::exp(lp[i]);
    if (p > 0.0) kl += p * (lp[i] - lq[i]);
  }
  // Rounding can leave a sum of tiny terms a hair below zero; KL is not negative.
  return std::max(kl, 0.0);
}

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// The logits before every forced step, [steps][vocab].
struct ForcedRun {
  std::vector<float> logits;
  uint32_t vocab = 0;
  IndexerTally indexer;  // the indexed steps
  std::string autoHeads;  // indexer_dense_heads=auto: what it measured on the prefill
  std::span<const float> step(size_t s) const { return {logits.data() + s * vocab, vocab}; }
};

// `onStep` runs after every step; an error from it (a cancel) ends the run.
Expected<ForcedRun> forcedRun(backend::Backend& b, std::span<const int32_t> tokens,
                              uint32_t prefill, const std::function<Status()>& onStep) {
  if (tokens.size() - 1 > b.contextLimit()) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the text has {} tokens and eval feeds all but the last, more than the "
                     "context of {} (raise -c)",
                     tokens.size(), b.contextLimit());
  }
  const size_t steps = tokens.size() - prefill;
  ForcedRun run;
  run.vocab = b.config().nVocab;
  run.logits.resize(steps * run.vocab);
  backend::Logits logits;
  KVS_TRY(b.forward({tokens.first(prefill)}, logits));
  // indexer_dense_heads=auto measures on the prefill, as a session does on a
  // prompt, when it is long enough.
  if (b.indexer().autoDenseHeads && prefill >= autoHeadsMinTokens(b.indexer())) {
    KVS_ASSIGN_OR_RETURN(const AutoHeads settled,
                         settleAutoHeads(b, tokens.first(prefill), b.indexer(), 512, logits));
    run.autoHeads = settled.describe();
  }
  for (size_t s = 0; s < steps; ++s) {
    std::copy(logits.last().begin(), logits.last().end(), run.logits.begin() + s * run.vocab);
    KVS_TRY(onStep());
    if (s + 1 == steps) break;
    KVS_TRY(b.forward({tokens.subspan(prefill + s, 1)}, logits));
    if (b.indexer().enabled()) run.indexer.add(b.indexerStep());
  }
  return run;
}

// sqrt(sum ||x - decode(encode(x))||^2 / sum ||x||^2) over the rows of `rows`.
double roundTripError(const kv::KvScheme& scheme, std::span<const float> rows) {
  const uint32_t dim = scheme.dim();
  std::vector<uint8_t> code(scheme.rowBytes());
  std::vector<float> back(dim);
  double error = 0.0, norm = 0.0;
  for (size_t at = 0; at + dim <= rows.size(); at += dim) {
    const auto x = rows.subspan(at, dim);
    scheme.encode(x, code);
    scheme.decode(code, back);
    for (uint32_t i = 0; i < dim; ++i) {
      const double d = double{x[i]} - back[i];
      error += d * d;
      norm += double{x[i]} * x[i];
    }
  }
  return norm > 0.0 ? std::sqrt(error / norm) : 0.0;
}

double bitsPerValue(const kv::KvBytes& bytes, uint64_t values) {
  return values ? 8.0 * static_cast<double>(bytes.used()) / static_cast<double>(values) : 0.0;
}

void summarize(EvalResult& r) {
  const double n = static_cast<double>(r.steps.size());
  std::vector<double> kld;
  double nllTest = 0.0, nllF16 = 0.0, agree = 0.0;
  for (const EvalStep& s : r.steps) {
    kld.push_back(s.kld);
    nllTest -= s.logProbTest;
    nllF16 -= s.logProbF16;
    agree += s.top1F16 == s.top1Test ? 1.0 : 0.0;
  }
  double sum = 0.0;
  for (double k : kld) sum += k;
  r.kldMean = sum / n;
  r.kldMedian = quantile(kld, 0.5);
  r.kldP99 = quantile(kld, 0.99);
  r.kldP999 = quantile(kld, 0.999);
  r.top1 = agree / n;
  r.ppl = std::exp(nllTest / n);
  r.pplF16 = std::exp(nllF16 / n);
  for (const EvalLayer& l : r.layers) {
    r.bitsPerValueK += l.keyBitsPerValue / static_cast<double>(r.layers.size());
    r.bitsPerValueV += l.valueBitsPerValue / static_cast<double>(r.layers.size());
  }
}

}  // namespace

double klDivergence(std::span<const float> logitsP, std::span<const float> logitsQ) {
  return klFromLogProbs(logSoftmax(logitsP), logSoftmax(logitsQ));
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto below = static_cast<size_t>(std::floor(pos));
  const size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (values[above] - values[below]) * (pos - static_cast<double>(below));
}

Expected<EvalResult> evaluateKvPolicy(std::shared_ptr<const model::ModelFile> model,
                                      std::span<const int32_t> tokens, const BackendChoice& test,
                                      const EvalOptions& options) {
  KVS_ASSIGN_OR_RETURN(
      auto results, evaluateKvPolicies(std::move(model), tokens, test, {&test.kvPolicy, 1}, options));
  return std::move(results.front());
}

Expected<std::vector<EvalResult>> evaluateKvPolicies(std::shared_ptr<const model::ModelFile> model,
                                                     std::span<const int32_t> tokens,
                                                     const BackendChoice& test,
                                                     std::span<const kv::KvPolicy> policies,
                                                     const EvalOptions& options) {
  if (options.prefill < 1)
    return makeError(ErrorCode::kInvalidArgument, "the prefill must be at least 1 token");
  if (tokens.size() < size_t{options.prefill} + 2) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the text has {} tokens; eval needs at least {} (a prefill of {} and two "
                     "forced steps)",
                     tokens.size(), options.prefill + 2, options.prefill);
  }
  const auto& c = model->config();
  for (int32_t t : tokens) {
    if (t < 0 || static_cast<uint32_t>(t) >= c.nVocab) {
      return makeError(ErrorCode::kInvalidArgument, "token id {} is outside the vocabulary of {}",
                       t, c.nVocab);
    }
  }
  // A policy the model cannot hold fails here rather than after the f16 run.
  for (const kv::KvPolicy& policy : policies) KVS_TRY(policy.resolve(backend::kvTarget(c)));
  // Progress over every forced step of every run, the f16 run first.
  const uint64_t steps = tokens.size() - options.prefill;
  const uint64_t total = steps * (1 + policies.size());
  uint64_t done = 0;
  const std::function<Status()> onStep = [&]() -> Status {
    if (options.cancel && options.cancel->load())
      return makeError(ErrorCode::kCancelled, "the comparison was stopped");
    ++done;
    if (options.progress) options.progress(done, total);
    return okStatus();
  };

  ForcedRun f16;
  std::vector<std::vector<float>> f16Rows[2];  // [part][layer]
  std::vector<EvalResult> results(policies.size());
  std::vector<BackendChoice> tested(policies.size(), test);
  {
    BackendChoice reference = test;
    reference.kvPolicy = {};
    KVS_ASSIGN_OR_RETURN(auto b, makeBackend(model, reference));
    KVS_ASSIGN_OR_RETURN(f16, forcedRun(*b, tokens, options.prefill, onStep));
    const BackendFactory factory = makeBackendFactory(model, test);
    for (uint32_t l = 0; l < c.kvLayers(); ++l) {
      for (kv::KvPart part : {kv::KvPart::kKey, kv::KvPart::kValue}) {
        KVS_ASSIGN_OR_RETURN(auto rows, b->readKv(l, part));
        f16Rows[static_cast<int>(part)].push_back(std::move(rows));
      }
    }
    // An auto policy chooses from the f16 run's rows, as a session does: not
    // below kv::kAutoMinTokens, where it stays f16.
    for (size_t i = 0; i < policies.size(); ++i) {
      results[i].policy = policies[i].toString();
      tested[i].kvPolicy = policies[i];
      if (!policies[i].autoBits || b->cachedTokens() < kv::kAutoMinTokens) continue;
      KVS_ASSIGN_OR_RETURN(
          AutoChoice chosen,
          chooseAutoPolicy(*b, policies[i],
                           {.factory = &factory, .tokens = tokens, .cancel = options.cancel}));
      results[i].policy = chosen.policy.toString();
      tested[i].kvPolicy = chosen.policy;
      results[i].autoPlan = std::move(chosen.plan);
    }
  }

  for (size_t i = 0; i < policies.size(); ++i) {
    EvalResult& r = results[i];
    r.tokens = static_cast<uint32_t>(tokens.size());
    r.prefill = options.prefill;
    KVS_ASSIGN_OR_RETURN(auto b, makeBackend(model, tested[i]));
    KVS_ASSIGN_OR_RETURN(const ForcedRun run, forcedRun(*b, tokens, options.prefill, onStep));
    r.autoHeads = run.autoHeads;
    for (size_t s = 0; s < tokens.size() - options.prefill; ++s) {
      const auto p = f16.step(s), q = run.step(s);
      const auto lp = logSoftmax(p), lq = logSoftmax(q);
      const auto next = static_cast<size_t>(tokens[options.prefill + s]);
      r.steps.push_back({.kld = klFromLogProbs(lp, lq),
                         .top1F16 = argmax(p),
                         .top1Test = argmax(q),
                         .logProbF16 = lp[next],
                         .logProbTest = lq[next]});
    }

    const auto layers = b->kvBytes();
    if (layers.size() != c.kvLayers()) {
      return makeError(ErrorCode::kInternal, "the {} backend accounts {} KV layers of {}",
                       b->name(), layers.size(), c.kvLayers());
    }
    const auto runErrors = b->kvErrors();
    for (uint32_t l = 0; l < c.kvLayers(); ++l) {
      const uint64_t values = uint64_t{b->cachedTokens()} * c.kvDimOf(l);
      const backend::KvLayerBytes& kvl = layers[l];
      r.layers.push_back({.keyScheme = std::string(kvl.key->name()),
                          .valueScheme = std::string(kvl.value->name()),
                          .keyBitsPerValue = bitsPerValue(kvl.keyBytes, values),
                          .valueBitsPerValue = bitsPerValue(kvl.valueBytes, values),
                          .keyError = roundTripError(*kvl.key, f16Rows[0][l]),
                          .valueError = roundTripError(*kvl.value, f16Rows[1][l])});
      if (runErrors.size() == c.kvLayers()) {
        r.layers.back().keyRunError = runErrors[l].key;
        r.layers.back().valueRunError = runErrors[l].value;
      }
    }
    r.rowsRead = run.indexer.rowsRead();
    r.capturedMass = run.indexer.capturedMass();
    summarize(r);
  }
  return results;
}

}  // namespace kvscope::runtime
