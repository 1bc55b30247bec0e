#pragma once
// Writes an open model as a GGUF file (`kvscope-cli convert`): a Hugging Face
// folder becomes a GGUF that llama.cpp-style readers load, and a GGUF can be
// re-typed (e.g. F32 -> Q8_0).
//
// Metadata comes from the ModelConfig and from a Vocab, so any tokenizer
// kvscope loads can be stored with any weights. Tensors keep their GGUF names;
// 2-D weights are converted to `weightType` (F16 where a row does not fill
// whole blocks of that type), 1-D tensors (norms, biases) stay F32, as llama.cpp
// stores them. Hugging Face llama-family q/k projections are ordered for
// rotate-half RoPE; GGUF "llama" expects adjacent pairs, so their rows are
// permuted per head — the same model, no change in the numbers it computes.
// A tied output projection is stored once, as token_embd.weight.

#include <filesystem>
#include <string>

#include "core/error.h"
#include "gguf/gguf_writer.h"
#include "model/model_file.h"
#include "tokenizer/vocab.h"

namespace kvscope::model {

struct GgufExportOptions {
  gguf::TensorType weightType = gguf::TensorType::kF16;  // F32, F16, BF16, Q8_0, Q4_0, ...
  std::string name;                                      // general.name; empty keeps the model's
};

// Sets general.architecture, general.name (unless empty) and the
// <arch>.* hyperparameters of `config` (the inverse of configFromGguf).
void setConfigMetadata(gguf::GgufWriter& writer, const ModelConfig& config,
                       const std::string& name);

// Sets tokenizer.* keys describing `vocab` (the inverse of vocabFromGguf),
// plus kvscope's keys for a tokenizer.json pipeline (gguf_vocab.h).
// SentencePiece-style BPE (kBpe without byte-level, Gemma 3's) goes as
// llama.cpp's SentencePiece form plus kvscope's exact one (gguf_vocab.h).
Status setVocabMetadata(gguf::GgufWriter& writer, const tokenizer::Vocab& vocab);

// Builds the complete GGUF for `model` + `vocab`.
Expected<gguf::GgufWriter> ggufFromModel(const ModelFile& model, const tokenizer::Vocab& vocab,
                                         const GgufExportOptions& options);

}  // namespace kvscope::model
