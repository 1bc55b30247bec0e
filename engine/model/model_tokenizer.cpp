#include "model/model_tokenizer.h"

#include "tokenizer/gguf_vocab.h"
#include "tokenizer/hf_vocab.h"

namespace kvscope::model {

Expected<tokenizer::Tokenizer> loadTokenizer(const ModelFile& model) {
  tokenizer::Vocab vocab;
  if (model.gguf()) {
    KVS_ASSIGN_OR_RETURN(vocab, tokenizer::vocabFromGguf(*model.gguf()));
  } else if (!model.tokenizerJson().empty()) {
    KVS_ASSIGN_OR_RETURN(vocab, tokenizer::vocabFromHfTokenizerJson(model.tokenizerJson()));
  } else {
    return makeError(ErrorCode::kNotFound, "{} has no tokenizer.json", model.path().string());
  }
  // Embeddings are often padded past the vocabulary (Qwen: 151936 rows for
  // ~151.6k tokens); only a token without an embedding row is an error.
  if (vocab.tokens.size() > model.config().nVocab) {
    return makeError(ErrorCode::kBadFile,
                     "the tokenizer has {} tokens but the model's embedding has only {} rows",
                     vocab.tokens.size(), model.config().nVocab);
  }
  return tokenizer::Tokenizer::create(std::move(vocab));
}

}  // namespace kvscope::model
