#pragma once
// The retrieval probe (`kvscope-cli probe`): can the model still find a span
// deep in its context when the cache is compressed or read sparsely? It needs
// no chat skills, so it runs on any language model:
//
//   [BOS] filler ... SPAN ... filler ... SPAN
//          ^ at relative depth D of the filler      ^ the last `span` tokens
//
// SPAN is `span` tokens drawn at random (seeded) from the vocabulary's normal
// tokens; the filler is a fixed English text cycled to length. The context
// up to the first token of the repeat is prefilled (dense), then the model is
// teacher-forced through the repeat one decode step at a time (so the
// indexer runs on each), and each step's argmax is compared with the next
// span token: copy accuracy = correct / (span - 1). A model that attends to
// the first copy predicts it; one that lost it guesses.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace kvscope::runtime {

struct ProbeOptions {
  uint32_t context = 0;  // tokens in all (0: the backend's context limit)
  double depth = 0.5;    // where the first copy starts, 0 (start) .. 1 (just before the repeat)
  uint32_t span = 32;    // tokens in the span, >= 2
  uint64_t seed = 1;
};

struct ProbeLayout {
  std::vector<int32_t> tokens;  // the whole context, the repeat last
  uint32_t spanAt = 0;          // first token of the first copy
  uint32_t repeatAt = 0;        // first token of the repeat (= tokens.size() - span)
  uint32_t span = 0;
};

// Errors: a depth outside [0, 1], a span < 2, a context too short for the
// BOS, two spans and some filler, a vocabulary without normal tokens.
Expected<ProbeLayout> buildProbe(const tokenizer::Tokenizer& tokenizer, const ProbeOptions& options);

struct ProbeResult {
  uint32_t correct = 0, scored = 0;  // steps whose argmax was the next span token
  double accuracy = 0.0;             // correct / scored
  // Averaged over the repeat's steps and layers when the indexer ran (mass
  // only in its diagnostic mode); negative otherwise.
  double rowsRead = -1.0;
  double capturedMass = -1.0;
  // indexer_dense_heads=auto: what it measured on the prompt (the part
  // before the repeat), AutoHeads::describe; empty otherwise.
  std::string autoHeads;
};

// The argmaxes of the repeat's steps, scored: predictions[i] is the argmax
// after feeding repeat token i (i < span - 1), compared with token i + 1.
ProbeResult scoreProbe(const ProbeLayout& layout, std::span<const int32_t> predictions);

// Runs the probe on an empty backend (trimmed to 0 first) and scores it.
// With indexer_dense_heads=auto the heads are measured on the prompt after
// its prefill, as a chat session does (settleAutoHeads), when it is long
// enough; the backend keeps them.
Expected<ProbeResult> runProbe(backend::Backend& backend, const ProbeLayout& layout);

}  // namespace kvscope::runtime
