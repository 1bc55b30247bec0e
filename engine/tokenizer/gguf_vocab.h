#pragma once
// Builds a Vocab from a GGUF file's tokenizer.* metadata, with llama.cpp's
// defaults and quirks (llama_vocab::impl::load) so that tokenization matches
// llama.cpp for the same file: default special ids per model, add_bos per
// pre-tokenizer, ignore_merges for llama3-style vocabularies, rstrip around
// Phi-3's special tokens. Fails with kBadFile for missing or inconsistent
// tokenizer data and kUnsupported for tokenizer kinds this build lacks.

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/vocab.h"

namespace kvscope::tokenizer {

Expected<Vocab> vocabFromGguf(const gguf::GgufFile& file);

}  // namespace kvscope::tokenizer
