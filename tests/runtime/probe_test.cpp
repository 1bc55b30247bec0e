// The retrieval probe: its layout (the span at the asked depth, repeated at
// the end, the context filled exactly), its scoring on hand-made
// predictions, and a run on scripted backends: one that copies the span
// scores 1, one that always says the same token scores the share of span
// tokens equal to it.

#include <gtest/gtest.h>

#include <algorithm>

#include "model/default_model.h"
#include "model/model_tokenizer.h"
#include "runtime/probe.h"

namespace kvscope::runtime {
namespace {

tokenizer::Tokenizer demoTokenizer() {
  auto path = model::findDefaultModel();
  EXPECT_TRUE(path.ok());
  auto m = model::ModelFile::open(*path);
  EXPECT_TRUE(m.ok());
  auto t = model::loadTokenizer(**m);
  EXPECT_TRUE(t.ok());
  return std::move(t).value();
}

TEST(Probe, PlantsTheSpanAtItsDepthAndRepeatsItLast) {
  const auto tok = demoTokenizer();
  for (double depth : {0.0, 0.25, 0.5, 1.0}) {
    auto p = buildProbe(tok, {.context = 400, .depth = depth, .span = 20, .seed = 3});
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->tokens.size(), 400u);
    EXPECT_EQ(p->tokens[0], tok.vocab().bos);
    EXPECT_EQ(p->repeatAt, 380u);
    EXPECT_TRUE(std::equal(p->tokens.begin() + p->spanAt, p->tokens.begin() + p->spanAt + 20,
                           p->tokens.begin() + p->repeatAt));
    // 359 filler tokens; the span starts after depth * 359 of them.
    EXPECT_NEAR(p->spanAt, 1 + depth * 359, 1.0) << depth;
    for (uint32_t i = 0; i < 20; ++i)
      EXPECT_EQ(tok.vocab().tokens[p->tokens[p->repeatAt + i]].type, tokenizer::TokenType::kNormal);
  }
  auto a = buildProbe(tok, {.context = 400, .seed = 1}),
       b = buildProbe(tok, {.context = 400, .seed = 2});
  EXPECT_NE(a->tokens, b->tokens) << "the seed picks the span";
  EXPECT_EQ(a->tokens, buildProbe(tok, {.context = 400, .seed = 1})->tokens);
  EXPECT_FALSE(buildProbe(tok, {.context = 60, .span = 32}).ok()) << "no room";
  EXPECT_FALSE(buildProbe(tok, {.context = 400, .depth = 1.5}).ok());
  EXPECT_FALSE(buildProbe(tok, {.context = 400, .span = 1}).ok());
}

TEST(Probe, ScoresTheArgmaxAgainstTheNextSpanToken) {
  ProbeLayout layout;
  layout.tokens = {1, 50, 60, 70, 80, 9, 9, 50, 60, 70, 80};
  layout.spanAt = 1;
  layout.repeatAt = 7;
  layout.span = 4;
  // After 50 the span goes on with 60, after 60 with 70, after 70 with 80.
  const int32_t predictions[] = {60, 11, 80};
  const ProbeResult r = scoreProbe(layout, predictions);
  EXPECT_EQ(r.scored, 3u);
  EXPECT_EQ(r.correct, 2u);
  EXPECT_DOUBLE_EQ(r.accuracy, 2.0 / 3.0);
}

// A backend whose logits peak at a scripted token: the one after the first
// copy of the current token (a perfect copier) or always `fixed`.
class ScriptedBackend final : public backend::Backend {
 public:
  ScriptedBackend(const ProbeLayout& layout, int32_t fixed) : m_layout(layout), m_fixed(fixed) {
    m_config.nVocab = 600;
  }
  std::string_view name() const override { return "scripted"; }
  const model::ModelConfig& config() const override { return m_config; }
  Status forward(const backend::Batch& batch, backend::Logits& out) override {
    m_rows += static_cast<uint32_t>(batch.tokens.size());
    out.rows = 1;
    out.vocab = m_config.nVocab;
    out.values.assign(out.vocab, 0.0f);
    int32_t next = m_fixed;
    if (m_fixed < 0 && m_rows > m_layout.repeatAt) {
      const uint32_t i = m_rows - 1 - m_layout.repeatAt;  // repeat token just fed
      next = m_layout.tokens[m_layout.spanAt + i + 1];
    }
    out.values[std::max(next, 0)] = 1.0f;
    return okStatus();
  }
  uint32_t cachedTokens() const override { return m_rows; }
  uint32_t contextLimit() const override { return 4096; }
  Status trim(uint32_t n) override {
    m_rows = n;
    return okStatus();
  }
  std::vector<backend::KvLayerBytes> kvBytes() const override { return {}; }
  Expected<std::vector<float>> readKv(uint32_t, kv::KvPart) const override {
    return std::vector<float>{};
  }

 private:
  const ProbeLayout& m_layout;
  int32_t m_fixed;
  model::ModelConfig m_config;
  uint32_t m_rows = 0;
};

TEST(Probe, ACopierScoresOneAndAConstantScoresItsShare) {
  const auto tok = demoTokenizer();
  auto layout = buildProbe(tok, {.context = 300, .depth = 0.3, .span = 24, .seed = 5});
  ASSERT_TRUE(layout.ok());
  ScriptedBackend copier(*layout, -1);
  auto r = runProbe(copier, *layout);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->scored, 23u);
  EXPECT_DOUBLE_EQ(r->accuracy, 1.0);
  EXPECT_LT(r->capturedMass, 0.0) << "no indexer";
  const int32_t common = layout->tokens[layout->repeatAt + 3];
  const auto share =
      std::count(layout->tokens.begin() + layout->repeatAt + 1, layout->tokens.end(), common);
  ScriptedBackend constant(*layout, common);
  r = runProbe(constant, *layout);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->correct, static_cast<uint32_t>(share));
}

}  // namespace
}  // namespace kvscope::runtime
