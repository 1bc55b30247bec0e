#include "runtime/probe.h"

#include <algorithm>

#include "kv/splitmix.h"
#include "runtime/indexer_heads.h"
#include "runtime/indexer_snapshot.h"

namespace kvscope::runtime {
namespace {

// Plain prose for the filler: no spans, names or numbers a model could copy
// from, so the only thing worth retrieving is the planted span.
constexpr std::string_view kFiller =
    "The river ran slowly through the valley, and the people who lived along its banks "
    "rose early to work in the fields. In the spring the water was high and cold, and "
    "in the summer it was warm and low. The children walked to school along the road "
    "by the water, and in the evening they came home the same way, talking about the "
    "day and the games they had played. Nobody in the valley was in a hurry, and the "
    "seasons turned as they always had, one after another, year after year. ";

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

Expected<ProbeLayout> buildProbe(const tokenizer::Tokenizer& tokenizer,
                                 const ProbeOptions& options) {
  if (!(options.depth >= 0.0 && options.depth <= 1.0))
    return makeError(ErrorCode::kInvalidArgument, "the probe depth must be in [0, 1], got {}",
                     options.depth);
  if (options.span < 2 || options.span > 65536)
    return makeError(ErrorCode::kInvalidArgument,
                     "the probe span must be 2 to 65536 tokens, not {}", options.span);
  const tokenizer::Vocab& v = tokenizer.vocab();
  std::vector<int32_t> normal;
  for (size_t id = 0; id < v.tokens.size(); ++id)
    if (v.tokens[id].type == tokenizer::TokenType::kNormal)
      normal.push_back(static_cast<int32_t>(id));
  if (normal.empty())
    return makeError(ErrorCode::kInvalidArgument,
                     "the vocabulary has no normal tokens to probe with");
  const std::vector<int32_t> filler =
      tokenizer.encode(kFiller, {.addSpecial = false, .parseSpecial = false});
  const uint32_t bos = v.bos != tokenizer::kNoToken ? 1 : 0;
  const uint32_t fillerTokens =
      options.context > bos + 2 * options.span ? options.context - bos - 2 * options.span : 0;
  if (fillerTokens < 8 || filler.empty()) {
    return makeError(ErrorCode::kInvalidArgument,
                     "a probe context of {} tokens is too short for a span of {} twice (at least "
                     "{} tokens)",
                     options.context, options.span, bos + 2 * options.span + 8);
  }
  ProbeLayout p;
  p.span = options.span;
  kv::SplitMix64 random(options.seed);
  std::vector<int32_t> span(options.span);
  for (int32_t& t : span) t = normal[random.next() % normal.size()];
  const auto before = static_cast<uint32_t>(options.depth * fillerTokens + 0.5);
  if (bos) p.tokens.push_back(v.bos);
  for (uint32_t i = 0; i < fillerTokens; ++i) {
    if (i == before) {
      p.spanAt = static_cast<uint32_t>(p.tokens.size());
      p.tokens.insert(p.tokens.end(), span.begin(), span.end());
    }
    p.tokens.push_back(filler[i % filler.size()]);
  }
  if (before == fillerTokens) {
    p.spanAt = static_cast<uint32_t>(p.tokens.size());
    p.tokens.insert(p.tokens.end(), span.begin(), span.end());
  }
  p.repeatAt = static_cast<uint32_t>(p.tokens.size());
  p.tokens.insert(p.tokens.end(), span.begin(), span.end());
  return p;
}

ProbeResult scoreProbe(const ProbeLayout& layout, std::span<const int32_t> predictions) {
  ProbeResult r;
  for (uint32_t i = 0; i + 1 < layout.span && i < predictions.size(); ++i) {
    ++r.scored;
    if (predictions[i] == layout.tokens[layout.repeatAt + i + 1]) ++r.correct;
  }
  r.accuracy = r.scored ? static_cast<double>(r.correct) / r.scored : 0.0;
  return r;
}

Expected<ProbeResult> runProbe(backend::Backend& backend, const ProbeLayout& layout) {
  if (layout.tokens.size() > backend.contextLimit())
    return makeError(ErrorCode::kInvalidArgument,
                     "the probe needs {} tokens of context, the backend holds {}",
                     layout.tokens.size(), backend.contextLimit());
  KVS_TRY(backend.trim(0));
  const std::span<const int32_t> tokens(layout.tokens);
  backend::Logits logits;
  // Dense prefill in chunks, up to the repeat.
  for (uint32_t done = 0; done < layout.repeatAt;) {
    const uint32_t n = std::min<uint32_t>(512, layout.repeatAt - done);
    KVS_TRY(backend.forward({.tokens = tokens.subspan(done, n), .prompt = true}, logits));
    done += n;
  }
  std::string autoHeads;
  if (backend.indexer().autoDenseHeads &&
      layout.repeatAt >= autoHeadsMinTokens(backend.indexer())) {
    KVS_ASSIGN_OR_RETURN(
        const AutoHeads settled,
        settleAutoHeads(backend, tokens.first(layout.repeatAt), backend.indexer(), 512, logits));
    autoHeads = settled.describe();
  }
  // The repeat, one decode step per token; the last one predicts nothing.
  std::vector<int32_t> predictions;
  IndexerTally tally;
  for (uint32_t i = 0; i + 1 < layout.span; ++i) {
    KVS_TRY(backend.forward({tokens.subspan(layout.repeatAt + i, 1)}, logits));
    if (backend.indexer().enabled()) tally.add(backend.indexerStep());
    predictions.push_back(argmax(logits.last()));
  }
  ProbeResult r = scoreProbe(layout, predictions);
  r.rowsRead = tally.rowsRead();
  r.capturedMass = tally.capturedMass();
  r.autoHeads = std::move(autoHeads);
  return r;
}

}  // namespace kvscope::runtime
