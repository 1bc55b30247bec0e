#pragma once
// The tokenizer of a model on disk: from the GGUF metadata, or from an HF
// folder's tokenizer.json (+ tokenizer_config.json for the chat template).

#include "core/error.h"
#include "model/model_file.h"
#include "tokenizer/tokenizer.h"

namespace kvscope::model {

Expected<tokenizer::Tokenizer> loadTokenizer(const ModelFile& model);

}  // namespace kvscope::model
