// estimateMemory on stories260K: weights as stored, KV bytes per token from the schemes'
// row layouts (f16: 5 layers x 4 KV heads x (8 + 8) values x 2 bytes = 640), and the
// longest context that fits a given memory.
#include <gtest/gtest.h>

#include "runtime/memory_estimate.h"
#include "support/policy.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

class MemoryEstimateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf"));
    auto file = model::ModelFile::open(sharedFile("models/stories260K.gguf"));
    ASSERT_TRUE(file.ok()) << file.error().describe();
    m_model = std::move(file).value();
  }
  std::unique_ptr<model::ModelFile> m_model;
};

TEST_F(MemoryEstimateTest, F16AtTheTrainedContext) {
  const uint64_t trained = m_model->config().contextLength;
  auto e = runtime::estimateMemory(*m_model, 0, policyOf(""));
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_EQ(e->weightBytes, m_model->weightBytes());
  EXPECT_EQ(e->kvBytesPerToken, 640u);
  EXPECT_EQ(e->kvBytesPerToken, m_model->config().kvBytesPerTokenF16());
  EXPECT_EQ(e->contextLength, trained);
  EXPECT_EQ(e->kvBytes, trained * 640u);
  EXPECT_EQ(e->totalBytes(), e->weightBytes + trained * 640u);
  EXPECT_EQ(e->maxContextThatFits, trained) << "no memory limit given";
}

TEST_F(MemoryEstimateTest, ExplicitPolicyAndContext) {
  auto e = runtime::estimateMemory(*m_model, 100, policyOf("k=f16,v=f16"));
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_EQ(e->contextLength, 100u);
  EXPECT_EQ(e->kvBytes, 64000u);
}

// Rows of 8 values, from the layouts in kv_scheme.h, padded to 4 bytes: q8_0 = 2-byte
// scale + 8 codes = 10 -> 12; q4_0 = 2-byte scale + 4 bytes of nibbles = 6 -> 8.
TEST_F(MemoryEstimateTest, CompressedPolicyPerLayer) {
  auto e = runtime::estimateMemory(*m_model, 100, policyOf("k=q8_0,v=q4_0"));
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_EQ(e->kvBytesPerToken, 5u * 4 * (12 + 8));
  // boundary=1: the first and last layers stay f16 (16 + 16 bytes per KV head).
  e = runtime::estimateMemory(*m_model, 100, policyOf("k=q8_0,v=q4_0,boundary=1"));
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_EQ(e->kvBytesPerToken, 2u * 4 * (16 + 16) + 3u * 4 * (12 + 8));
  EXPECT_EQ(e->kvBytes, e->kvBytesPerToken * 100);
}

// A precision tail of 16 rows lives in a ring of 16 + 512 - 1 rows (a step's
// rows more), a fixed size: f16 rows (16 bytes per KV head) of K and V of
// the layers not stored wholly at f16, here the three inner layers (their
// f16 keys too); at a context shorter than the ring, the ring holds the
// context.
TEST_F(MemoryEstimateTest, APrecisionTailIsAFixedRingOfF16Rows) {
  auto e = runtime::estimateMemory(*m_model, 2048, policyOf("k=f16,v=q4_0,boundary=1,tail=16"));
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_EQ(e->kvBytesPerToken, 2u * 4 * (16 + 16) + 3u * 4 * (16 + 8));
  EXPECT_EQ(e->kvRingBytes, 2u * 3 * 4 * 16 * (16 + 512 - 1));
  EXPECT_EQ(e->kvBytes, e->kvBytesPerToken * 2048 + e->kvRingBytes);
  e = runtime::estimateMemory(*m_model, 100, policyOf("k=f16,v=q4_0,boundary=1,tail=16"));
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_EQ(e->kvRingBytes, 2u * 3 * 4 * 16 * 100);
}

// auto counts what it settles at, its budget per value: auto:10 over 5 layers x 4 KV
// heads x 16 values is 10 / 8 x 320 = 400 bytes; auto alone on head_dim 8 is raised to
// turbo3b's 8 bits (320 bytes); a budget below that is an error.
TEST_F(MemoryEstimateTest, AutoCountsItsBudget) {
  auto e = runtime::estimateMemory(*m_model, 100, policyOf("auto:10"));
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_EQ(e->kvBytesPerToken, 400u);
  e = runtime::estimateMemory(*m_model, 100, policyOf("auto"));
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_EQ(e->kvBytesPerToken, 320u);
  EXPECT_FALSE(runtime::estimateMemory(*m_model, 100, policyOf("auto:5")).ok());
}

// While auto settles it holds its f16 measuring cache (640 bytes per token
// here) of up to the first 512 tokens beside the cache it settles on; no
// explicit policy does.
TEST_F(MemoryEstimateTest, AutoCountsItsMeasuringCacheWhileItSettles) {
  auto e = runtime::estimateMemory(*m_model, 100, policyOf("auto"));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->transientBytes, 100u * 640);
  EXPECT_EQ(e->transient, runtime::MemoryEstimate::Transient::kAutoMeasuring);
  EXPECT_EQ(e->totalBytes(), e->weightBytes + 100u * 320 + 100u * 640);
  e = runtime::estimateMemory(*m_model, 2000, policyOf("auto"));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->transientBytes, 512u * 640);
  e = runtime::estimateMemory(*m_model, 2000, policyOf("k=q8_0,v=turbo4"));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->transientBytes, 0u);
  // The longest context that fits leaves room for it (512 tokens of f16).
  const uint64_t memory = m_model->weightBytes() + 512 * 640 + 200 * 320 + 100;
  e = runtime::estimateMemory(*m_model, 0, policyOf("auto"), memory);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->maxContextThatFits, 200u);
}

// A two_phase cache is f16 through the prefill and holds those rows beside
// their compressed copies at the first decode step: 640 bytes per token of
// context more at the peak, and the longest context that fits leaves room
// for both.
TEST_F(MemoryEstimateTest, TwoPhaseCountsItsF16CacheBesideTheCompressedOne) {
  auto e = runtime::estimateMemory(*m_model, 100, policyOf("kv=q8_0,two_phase"));
  ASSERT_TRUE(e.ok()) << e.error().describe();
  const auto compressed = runtime::estimateMemory(*m_model, 100, policyOf("kv=q8_0"));
  ASSERT_TRUE(compressed.ok());
  EXPECT_EQ(e->kvBytes, compressed->kvBytes);
  EXPECT_EQ(e->transientBytes, 100u * 640);
  EXPECT_EQ(e->transient, runtime::MemoryEstimate::Transient::kTwoPhase);
  const uint64_t memory = m_model->weightBytes() + 300 * (640 + e->kvBytesPerToken) + 10;
  e = runtime::estimateMemory(*m_model, 0, policyOf("kv=q8_0,two_phase"), memory);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->maxContextThatFits, 300u);
  // checkFits names the same longest context, and what the f16 rows take.
  EXPECT_TRUE(
      runtime::checkFits(*m_model, 300, policyOf("kv=q8_0,two_phase"), memory, "test").ok());
  const Status tooLong =
      runtime::checkFits(*m_model, 400, policyOf("kv=q8_0,two_phase"), memory, "test memory");
  ASSERT_FALSE(tooLong.ok());
  EXPECT_NE(tooLong.error().message.find("the longest context that fits is 300 tokens"),
            std::string::npos)
      << tooLong.error().message;
  EXPECT_NE(tooLong.error().message.find("of f16 rows until the first decode step"),
            std::string::npos)
      << tooLong.error().message;
}

TEST_F(MemoryEstimateTest, LongestContextThatFits) {
  const uint64_t weights = m_model->weightBytes();
  auto e = runtime::estimateMemory(*m_model, 0, policyOf(""), weights + 100 * 640 + 639);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->maxContextThatFits, 100u);
  e = runtime::estimateMemory(*m_model, 0, policyOf(""), weights + 100000 * 640);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->maxContextThatFits, m_model->config().contextLength)
      << "capped at the trained context";
  e = runtime::estimateMemory(*m_model, 0, policyOf(""), weights / 2);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->maxContextThatFits, 0u) << "the weights alone do not fit";
}

// checkFits: 640 bytes per token (f16), so memory for the weights plus 100.5
// tokens holds a 100-token context and refuses 200 naming 100 as the longest.
TEST_F(MemoryEstimateTest, CheckFitsNamesTheLongestContextThatFits) {
  const uint64_t memory = m_model->weightBytes() + 100 * 640 + 320;
  EXPECT_TRUE(runtime::checkFits(*m_model, 100, policyOf(""), memory, "test memory").ok());
  const Status tooLong = runtime::checkFits(*m_model, 200, policyOf(""), memory, "test memory");
  ASSERT_FALSE(tooLong.ok());
  EXPECT_EQ(tooLong.error().code, ErrorCode::kOutOfMemory);
  EXPECT_NE(tooLong.error().message.find("a 200-token context needs"), std::string::npos)
      << tooLong.error().message;
  EXPECT_NE(tooLong.error().message.find("test memory is"), std::string::npos);
  EXPECT_NE(tooLong.error().message.find("the longest context that fits is 100 tokens"),
            std::string::npos)
      << tooLong.error().message;
  const Status noWeights = runtime::checkFits(*m_model, 10, policyOf(""), m_model->weightBytes() / 2, "x");
  ASSERT_FALSE(noWeights.ok());
  EXPECT_NE(noWeights.error().message.find("the weights alone do not fit"), std::string::npos);
}

// A policy the model cannot hold (a layer it does not have) is the policy's error.
TEST_F(MemoryEstimateTest, PoliciesTheModelCannotHoldAreErrors) {
  auto e = runtime::estimateMemory(*m_model, 0, policyOf("k@99=q8_0"));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.error().message.find("layer 99"), std::string::npos) << e.error().message;
}

}  // namespace
}  // namespace kvscope::test
