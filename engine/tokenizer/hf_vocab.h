#pragma once
// Builds a Vocab from a Hugging Face tokenizer.json, plus the
// tokenizer_config.json beside it when present (BOS/EOS, add_bos/add_eos and
// the chat template).
//
// Supported: model type "BPE" either
//   - byte-level (a ByteLevel pre-tokenizer, GPT-2 style), split like
//     llama.cpp's "gpt-2" pre-tokenizer, or
//   - SentencePiece-style: a normalizer that replaces " " with "▁" (optionally
//     prepending "▁") and no pre-tokenizer, with byte fallback — the layout of
//     Llama-2-style and TinyStories tokenizers.
// Added tokens become control tokens (special) or user-defined tokens, keeping
// their lstrip/rstrip. Anything else is kUnsupported with a message that says
// to convert the model to GGUF; unreadable JSON is kBadFile.

#include <filesystem>

#include "core/error.h"
#include "tokenizer/vocab.h"

namespace kvscope::tokenizer {

Expected<Vocab> vocabFromHfTokenizerJson(const std::filesystem::path& tokenizerJson);

}  // namespace kvscope::tokenizer
