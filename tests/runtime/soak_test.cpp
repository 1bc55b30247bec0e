// Soak: 100 chat turns on the demo model in one Session — ten conversations of
// ten turns, the first five each opened under another KV policy (the cache
// re-encoded while it still holds the previous conversation), the last six in
// one backend, with an edit of an earlier turn in each — and the process's
// resident memory and all Vulkan device memory after turn 100 stay within a
// small margin of turns 10 and 50. Turns 10, 50 and 100 end conversations run
// under the same policy with the same prompts, so a cache that is released and
// rebuilt as it should has the same footprint at each; anything kept per turn
// or per switch (pages, snapshots, staging buffers, buffers of replaced
// backends) shows as growth. The figures are printed for docs/RESULTS.md.
#include <malloc.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpu/buffer.h"
#include "gpu/device_info.h"
#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "runtime/session.h"
#include "support/demo_model.h"
#include "support/policy.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

constexpr int kConversations = 10;
constexpr int kTurnsEach = 10;
// Conversations 1-4 switch codecs (the cache re-encoded each time: f16, an
// asymmetric pair, the indexer, back); 4-9 keep the first policy in one
// backend, so turns 50 to 100 show growth per turn and turns 10 to 100 growth
// per switch. Turns 10, 50 and 100 end conversations under the same policy.
constexpr std::array<const char*, kConversations> kPolicies = {
    "k=q8_0,v=turbo4", "",
    "k=turbo3,v=q4_0", "k=turbo4,v=turbo4,indexer=16:8:2",
    "k=q8_0,v=turbo4", "k=q8_0,v=turbo4",
    "k=q8_0,v=turbo4", "k=q8_0,v=turbo4",
    "k=q8_0,v=turbo4", "k=q8_0,v=turbo4"};
// Allowed growth from turn 10 to turn 100. Resident memory moves by a few
// hundred KB with malloc's arenas and the run's first-use pages.
constexpr uint64_t kRssMarginBytes = 4u << 20;
constexpr uint64_t kDeviceMarginBytes = 0;

uint64_t residentBytes() {
  malloc_trim(0);  // what malloc holds freed is not growth
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

struct Footprint {
  int turn = 0;
  uint64_t rss = 0;
  uint64_t device = 0;  // what all Vulkan buffers of the process hold; 0 on the CPU backend
  uint32_t cached = 0;
};

std::vector<Footprint> soak(std::string_view kind) {
  auto model = openDemoModel();
  if (!model) return {};
  auto tok = model::loadTokenizer(*model);
  EXPECT_TRUE(tok.ok());
  const runtime::BackendFactory factory = runtime::makeBackendFactory(
      model, {.kind = std::string(kind), .threads = 2, .timing = false, .vetDevice = false});
  auto first = factory(policyOf(kPolicies[0]));
  EXPECT_TRUE(first.ok()) << first.error().describe();
  if (!first.ok() || !tok.ok()) return {};
  runtime::Session session(model, std::move(first).value(), std::move(tok).value(), factory,
                           policyOf(kPolicies[0]));
  runtime::GenerateOptions options;
  options.maxTokens = 12;
  options.sampler.temperature = 0.0f;

  // A warm-up conversation under each policy first (not counted): every
  // codec's kernels are compiled, the driver's caches filled and the scratch
  // buffers sized for a re-encode before the first mark, so each counted
  // conversation starts as the ones before it did.
  std::vector<Footprint> marks;
  int turn = 0;
  for (int c = -kConversations; c < kConversations; ++c) {
    const char* policy = kPolicies[static_cast<size_t>((c + kConversations) % kConversations)];
    const Status switched = session.setKvPolicy(policyOf(policy));
    EXPECT_TRUE(switched.ok()) << policy << ": " << switched.error().describe();
    EXPECT_TRUE(session.trim(0).ok());  // a new conversation
    std::vector<tokenizer::ChatMessage> messages;
    for (int t = 0; t < kTurnsEach; ++t) {
      messages.push_back({"user", fmt::format("Tell me about the number {}.", t + 1)});
      // An edit: turn 6 rewrites the second question, so the cache is trimmed
      // back to where the conversations differ and prefilled from there.
      if (t == 5) messages[2].content = "Tell me about a red ball instead.";
      auto prompt = session.renderChat(messages);
      EXPECT_TRUE(prompt.ok());
      if (!prompt.ok()) return {};
      auto reply = session.generate(session.tokenizeChat(*prompt), options);
      EXPECT_TRUE(reply.ok()) << "turn " << turn + 1 << ": " << reply.error().describe();
      if (!reply.ok()) return {};
      messages.push_back({"assistant", reply->text});
      if (c >= 0) ++turn;
    }
    if (c >= 0 && (turn == 10 || turn == 50 || turn == 100)) {
      Footprint f{.turn = turn,
                  .rss = residentBytes(),
                  .cached = static_cast<uint32_t>(session.history().size())};
      // Every Vulkan context's buffers, those of replaced backends included.
      f.device = gpu::Buffer::liveBytes();
      marks.push_back(f);
    }
  }
  return marks;
}

void expectNoGrowth(std::string_view kind) {
  const std::vector<Footprint> marks = soak(kind);
  ASSERT_EQ(marks.size(), 3u);
  for (const Footprint& f : marks) {
    // One line per mark, for docs/RESULTS.md (tools/results.sh reads them).
    std::printf("soak %.*s: turn %d rss %.1f MiB device %.2f MiB cached %u tokens\n",
                static_cast<int>(kind.size()), kind.data(), f.turn, f.rss / 1048576.0,
                f.device / 1048576.0, f.cached);
  }
  const Footprint& at10 = marks[0];
  const Footprint& at100 = marks[2];
  EXPECT_LE(at100.rss, at10.rss + kRssMarginBytes);
  EXPECT_LE(at100.device, at10.device + kDeviceMarginBytes);
  // Turns 50 to 100 ran in one backend: no growth per turn.
  EXPECT_LE(at100.rss, marks[1].rss + kRssMarginBytes);
  EXPECT_LE(at100.device, marks[1].device + kDeviceMarginBytes);
  if (kind == "vulkan") {
    EXPECT_GT(at10.device, 0u) << "the device allocations were counted";
  }
}

TEST(Soak, HundredTurnsOnTheCpuBackendDoNotGrowMemory) {
  expectNoGrowth("cpu");
}

TEST(Soak, HundredTurnsOnVulkanDoNotGrowHostOrDeviceMemory) {
  auto devices = gpu::listDevices();
  if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no Vulkan device";
  expectNoGrowth("vulkan");
}

}  // namespace
}  // namespace kvscope::test
