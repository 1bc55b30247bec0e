#pragma once
// Builds a Vocab from a Hugging Face tokenizer.json, plus the
// tokenizer_config.json beside it when present (BOS/EOS, add_bos/add_eos and
// the chat templates), and chat_template.jinja, which replaces the config's
// template when present.
//
// Supported: model type "BPE", with the file's normalizer and pre-tokenizer
// run as written (hf_pipeline.h lists the components; e.g. Llama 3's and
// Qwen's Split regex before ByteLevel). The scheme follows from them:
//   - byte-level BPE when the pre-tokenizer has a ByteLevel step, or
//   - SentencePiece-style BPE (byte fallback, "▁" for spaces) when spaces
//     become "▁" by a Replace normalizer or a Metaspace pre-tokenizer — the
//     layout of Llama-2-style and TinyStories tokenizers.
// Added tokens become control tokens (special) or user-defined tokens, keeping
// their lstrip/rstrip. Any other model type or pipeline component is
// kUnsupported naming it; unreadable JSON is kBadFile.

#include <filesystem>

#include "core/error.h"
#include "tokenizer/vocab.h"

namespace kvscope::tokenizer {

Expected<Vocab> vocabFromHfTokenizerJson(const std::filesystem::path& tokenizerJson);

}  // namespace kvscope::tokenizer
