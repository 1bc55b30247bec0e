// ggufFromModel (kvscope-cli convert) against the model it converts: a Hugging
// Face folder written as GGUF must compute the same logits on the CPU backend
// (the q/k rows are permuted from rotate-half to adjacent-pair RoPE, so a wrong
// permutation changes every logit after the first position), and a vocabulary
// written as tokenizer.* metadata must read back unchanged.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "backend/cpu_backend.h"
#include "gguf/gguf_writer.h"
#include "model/gguf_export.h"
#include "model/model_tokenizer.h"
#include "support/test_support.h"
#include "tokenizer/gguf_vocab.h"

namespace kvscope::test {
namespace {

std::shared_ptr<const model::ModelFile> openModel(const std::filesystem::path& path) {
  auto m = model::ModelFile::open(path);
  EXPECT_TRUE(m.ok()) << m.error().describe();
  return m.ok() ? std::shared_ptr<const model::ModelFile>(std::move(m).value()) : nullptr;
}

// Logits of every step of a teacher-forced run: a prefill, then single tokens.
std::vector<std::vector<float>> runLogits(std::shared_ptr<const model::ModelFile> m,
                                          std::span<const int32_t> tokens, uint32_t prefill) {
  std::vector<std::vector<float>> out;
  auto cpu = backend::CpuBackend::create(std::move(m));
  EXPECT_TRUE(cpu.ok()) << cpu.error().describe();
  if (!cpu.ok()) return out;
  backend::Logits logits;
  for (size_t at = 0; at < tokens.size();) {
    const size_t n = at == 0 ? prefill : 1;
    EXPECT_TRUE((*cpu)->forward({tokens.subspan(at, n)}, logits).ok());
    const auto last = logits.last();
    out.emplace_back(last.begin(), last.end());
    at += n;
  }
  return out;
}

tokenizer::Vocab storiesVocab() {
  auto stories = openModel(sharedFile("models/stories260K.gguf"));
  auto tok = model::loadTokenizer(*stories);
  EXPECT_TRUE(tok.ok());
  return tok->vocab();
}

TEST(GgufExport, HuggingFaceFolderKeepsItsLogits) {
  const auto hfPath = sharedFile("models/tinystories-656k");
  KVS_REQUIRE_FIXTURE(hfPath);
  KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf"));
  auto hf = openModel(hfPath);
  ASSERT_TRUE(hf);
  // Any vocabulary no larger than the embedding will do: only logits are compared.
  auto writer = model::ggufFromModel(*hf, storiesVocab(), {gguf::TensorType::kF32, "test"});
  ASSERT_TRUE(writer.ok()) << writer.error().describe();
  const auto path = std::filesystem::temp_directory_path() / "kvscope-export-tinystories.gguf";
  ASSERT_TRUE(writer->writeFile(path).ok());
  auto gguf = openModel(path);
  ASSERT_TRUE(gguf);
  EXPECT_EQ(gguf->config().rope.style, model::RopeStyle::kNormal);
  EXPECT_TRUE(gguf->config().tiedEmbeddings);
  EXPECT_EQ(gguf->find("output.weight"), nullptr) << "a tied projection is stored once";

  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 24; ++i) tokens.push_back((i * 37 + 5) % 2048);
  tokens[0] = 1;
  const auto want = runLogits(hf, tokens, 8);
  const auto got = runLogits(gguf, tokens, 8);
  ASSERT_EQ(want.size(), got.size());
  for (size_t s = 0; s < want.size(); ++s) {
    const auto [lo, hi] = std::minmax_element(want[s].begin(), want[s].end());
    double worst = 0.0;
    for (size_t i = 0; i < want[s].size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(want[s][i] - got[s][i])));
    // Same floats, same math: only summation order may differ.
    EXPECT_LE(worst, 1e-4 * (*hi - *lo)) << "step " << s;
  }
  std::filesystem::remove(path);
}

TEST(GgufExport, VocabularyRoundTrips) {
  KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf"));
  tokenizer::Vocab vocab = storiesVocab();
  vocab.chatTemplate = "{{ bos_token }}[INST] x [/INST]";
  vocab.namedChatTemplates = {{"tool_use", "{{ tools | tojson }}"}, {"rag", "{{ documents }}"}};
  vocab.eot = 2;
  gguf::GgufWriter w;
  ASSERT_TRUE(model::setVocabMetadata(w, vocab).ok());
  auto bytes = w.toBytes();
  ASSERT_TRUE(bytes.ok());
  auto file = gguf::GgufFile::fromBytes(*bytes);
  ASSERT_TRUE(file.ok()) << file.error().describe();
  auto back = tokenizer::vocabFromGguf(**file);
  ASSERT_TRUE(back.ok()) << back.error().describe();
  ASSERT_EQ(back->tokens.size(), vocab.tokens.size());
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    EXPECT_EQ(back->tokens[i].text, vocab.tokens[i].text) << i;
    EXPECT_EQ(back->tokens[i].score, vocab.tokens[i].score) << i;
    EXPECT_EQ(back->tokens[i].type, vocab.tokens[i].type) << i;
  }
  EXPECT_EQ(back->kind, vocab.kind);
  EXPECT_EQ(back->bos, vocab.bos);
  EXPECT_EQ(back->eos, vocab.eos);
  EXPECT_EQ(back->eot, vocab.eot);
  EXPECT_EQ(back->unk, vocab.unk);
  EXPECT_EQ(back->addBos, vocab.addBos);
  EXPECT_EQ(back->addSpacePrefix, vocab.addSpacePrefix);
  EXPECT_EQ(back->chatTemplate, vocab.chatTemplate);
  EXPECT_EQ(back->namedChatTemplates, vocab.namedChatTemplates);
}

TEST(GgufExport, RefusesAVocabularyGgufCannotHold) {
  tokenizer::Vocab vocab;
  vocab.kind = tokenizer::VocabKind::kBpe;
  vocab.byteLevel = false;
  gguf::GgufWriter w;
  const Status s = model::setVocabMetadata(w, vocab);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace kvscope::test
