#pragma once
// The JSON form of a TextPipeline (pipeline.h): the "normalizer" and
// "pre_tokenizer" members of a Hugging Face tokenizer.json.
//
// Read: Sequence (nested ones flattened), Split (pattern {"Regex": ...} or
// {"String": ...}; behavior Removed, Isolated, MergedWithPrevious,
// MergedWithNext, Contiguous; invert), ByteLevel (add_prefix_space,
// use_regex; it must come last, as later steps would see mapped bytes),
// Metaspace (replacement "▁", prepend_scheme or legacy add_prefix_space,
// split), Digits, Punctuation, Whitespace, WhitespaceSplit; normalizers
// Sequence, Replace, Prepend, NFC, NFD, NFKC, NFKD. Any other component, or
// an option outside these, is kUnsupported naming it: a pipeline is run as
// written or not at all. A malformed component is kBadFile.
//
// Written: the same components, so that a GGUF can carry the pipeline of the
// tokenizer.json it was converted from (kvscope.tokenizer.pipeline).

#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/pipeline.h"

namespace kvscope::tokenizer {

// `tokenizer` is a tokenizer.json object, or any object with those two members.
Expected<TextPipeline> pipelineFromHfJson(const nlohmann::json& tokenizer);

// {"normalizer": ..., "pre_tokenizer": ...}; pipelineFromHfJson reads it back.
nlohmann::json pipelineToHfJson(const TextPipeline& pipeline);

// "llama-bpe" or "qwen2" when the pre-tokenizer steps are exactly Llama 3's or
// Qwen 2/3's (their Split regex, then ByteLevel without prefix or regex), so
// llama.cpp splits text the same way under that `tokenizer.ggml.pre` name;
// empty otherwise. The normalizer is not compared: llama.cpp runs none, and
// Qwen's NFC changes only text that is not already NFC.
std::string llamaCppPreTokenizerName(const TextPipeline& pipeline);

}  // namespace kvscope::tokenizer
