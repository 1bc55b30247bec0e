#pragma once
// Builds a Vocab from a GGUF file's tokenizer.* metadata, with llama.cpp's
// defaults and quirks (llama_vocab::impl::load) so that tokenization matches
// llama.cpp for the same file: default special ids per model, add_bos per
// pre-tokenizer, ignore_merges for llama3-style vocabularies, rstrip around
// Phi-3's special tokens. Fails with kBadFile for missing or inconsistent
// tokenizer data and kUnsupported for tokenizer kinds this build lacks.
//
// A GGUF converted by kvscope from a tokenizer.json also carries that file's
// normalizer and pre-tokenizer (kPipelineKey), which is then run instead of
// the regexes of its tokenizer.ggml.pre name, so it tokenizes exactly as the
// tokenizer.json did. tokenizer.ggml.pre still names the llama.cpp
// pre-tokenizer the pipeline equals, for llama.cpp, or kCustomPreTokenizer,
// which llama.cpp refuses rather than split the text another way.

#include <string_view>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/vocab.h"

namespace kvscope::tokenizer {

// A JSON string in hf_pipeline.h's form: {"normalizer": ..., "pre_tokenizer": ...}.
inline constexpr std::string_view kPipelineKey = "kvscope.tokenizer.pipeline";
// The BPE model's ignore_merges, which GGUF otherwise only implies by pre name.
inline constexpr std::string_view kIgnoreMergesKey = "kvscope.tokenizer.ignore_merges";
// The BPE model's fuse_unk (consecutive unknown fallbacks become one <unk>).
inline constexpr std::string_view kFuseUnknownKey = "kvscope.tokenizer.fuse_unknown";
//
// A SentencePiece-style BPE tokenizer.json (Gemma 3's: merges over "\u2581"
// text with byte fallback) is written as llama.cpp's SentencePiece form
// ("llama"), each token scored by minus the rank of the first merge that makes
// it — the order SentencePiece's own BPE scores follow, which llama.cpp's
// tokenizer merges by — and with tokenizer.ggml.merges and kPipelineKey too,
// from which kvscope reads it back as the exact BPE.

Expected<Vocab> vocabFromGguf(const gguf::GgufFile& file);

}  // namespace kvscope::tokenizer
