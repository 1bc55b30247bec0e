// KvPolicy: parsing good and bad texts, resolution per layer, the
// per-architecture check.
#include <gtest/gtest.h>

#include "kv/auto_policy.h"
#include "kv/kv_policy.h"

namespace kvscope::kv {
namespace {

std::vector<LayerSchemes> resolve(std::string_view text, uint32_t nLayer,
                                  std::string_view arch = "llama") {
  auto p = KvPolicy::parse(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.error().describe();
  if (!p.ok()) return {};
  auto r = p->resolve({arch, nLayer});
  EXPECT_TRUE(r.ok()) << text << ": " << r.error().describe();
  return r.ok() ? *r : std::vector<LayerSchemes>{};
}

TEST(KvPolicy, EmptyIsF16) {
  EXPECT_EQ(resolve("", 3), std::vector<LayerSchemes>(3));
  EXPECT_EQ(resolve("  ", 2), std::vector<LayerSchemes>(2));
  auto p = KvPolicy::parse("");
  EXPECT_FALSE(p->twoPhase);
  EXPECT_EQ(p->seed, kDefaultCacheSeed);
}

TEST(KvPolicy, KeysValuesBoundaryOverrides) {
  using L = LayerSchemes;
  EXPECT_EQ(resolve("k=fp8,v=turbo3", 2), (std::vector<L>{{"fp8", "turbo3"}, {"fp8", "turbo3"}}));
  EXPECT_EQ(resolve("kv=q4_0", 1), (std::vector<L>{{"q4_0", "q4_0"}}));
  EXPECT_EQ(
      resolve("k=q8_0, v=turbo4, boundary=1", 4),
      (std::vector<L>{{"f16", "f16"}, {"q8_0", "turbo4"}, {"q8_0", "turbo4"}, {"f16", "f16"}}));
  EXPECT_EQ(resolve("k=q8_0,v=turbo2,boundary=1:q8_0", 3),
            (std::vector<L>{{"q8_0", "q8_0"}, {"q8_0", "turbo2"}, {"q8_0", "q8_0"}}));
  // Overrides beat the boundary; later overrides beat earlier ones.
  EXPECT_EQ(resolve("k=turbo3,boundary=1,k@0=fp8,v@1-2=affine4,kv@2=turbo4g", 4),
            (std::vector<L>{
                {"fp8", "f16"}, {"turbo3", "affine4"}, {"turbo4g", "turbo4g"}, {"f16", "f16"}}));
  EXPECT_EQ(resolve("boundary=5", 3), std::vector<L>(3));
}

TEST(KvPolicy, FlagsAndSeed) {
  auto p = KvPolicy::parse("two_phase,seed=0x10,k=q8_0");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->twoPhase);
  EXPECT_EQ(p->seed, 16u);
  EXPECT_EQ(KvPolicy::parse("seed=42")->seed, 42u);
  EXPECT_EQ(KvPolicy::parse("kv=q4_0,tail=128")->tail, 128u);
  EXPECT_EQ(KvPolicy::parse("kv=q4_0")->tail, 0u);
  // The tail is part of what the cache holds.
  EXPECT_FALSE(KvPolicy::parse("kv=q4_0,tail=128")->sameCache(*KvPolicy::parse("kv=q4_0")));
  EXPECT_FALSE(KvPolicy::parse("kv=q4_0,tail=128")->sameCache(*KvPolicy::parse("kv=q4_0,tail=64")));
}

TEST(KvPolicy, ToStringParsesBack) {
  for (auto text : {"", "k=q8_0,v=turbo4", "k=fp8,v=turbo3,boundary=2,two_phase,seed=7",
                    "kv=q4_0r,tail=96", "kv=turbo2g,k@3=f16,v@1-4=q4_0,boundary=1:q8_0"}) {
    auto p = KvPolicy::parse(text);
    ASSERT_TRUE(p.ok()) << text;
    auto again = KvPolicy::parse(p->toString());
    ASSERT_TRUE(again.ok()) << p->toString();
    EXPECT_EQ(again->toString(), p->toString());
    EXPECT_EQ(*again->resolve({"llama", 6}), *p->resolve({"llama", 6})) << text;
  }
  EXPECT_EQ(defaultKvPolicy().toString(), "auto");
}

TEST(KvPolicy, BadTextsAreClearErrors) {
  const std::pair<std::string_view, std::string_view> kBad[] = {
      {"k=q3_k", "unknown scheme 'q3_k'"},
      {"x=f16", "unknown key"},
      {"k", "missing '=value'"},
      {"k=", "missing '=value'"},
      {"k=f16,k=q8_0", "given twice"},
      {"k=f16,,v=f16", "empty item"},
      {"boundary=two", "layer count"},
      {"boundary=1:nope", "unknown scheme 'nope'"},
      {"two_phase=1", "takes no value"},
      {"seed=-1", "seed"},
      {"k@x=f16", "layer override"},
      {"k@3-1=f16", "layer override"},
      {"k@1=turbo9", "unknown scheme"},
      {"boundary@1=2", "no per-layer form"},
      {"tail=0", "1 to 65536"},
      {"tail=65537", "1 to 65536"},
      {"tail=x", "row count"},
      {"tail@1=8", "row count"},
      {"auto,tail=8", "no k, v, kv, per-layer, boundary, two_phase or tail"},
  };
  for (const auto& [text, why] : kBad) {
    auto p = KvPolicy::parse(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(p.error().message.find(why), std::string::npos) << text << ": " << p.error().message;
  }
}

TEST(KvPolicy, ResolveChecksLayersAndArchitecture) {
  auto p = KvPolicy::parse("k@4=f16");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->resolve({"llama", 4}).ok());
  EXPECT_TRUE(p->resolve({"llama", 5}).ok());

  EXPECT_EQ(cacheLayoutOf("qwen3"), CacheLayout::kKvRows);
  EXPECT_EQ(cacheLayoutOf("deepseek2"), CacheLayout::kLatent);
  EXPECT_EQ(cacheLayoutOf("mamba"), CacheLayout::kRecurrentState);
  auto turbo = KvPolicy::parse("v=turbo3");
  auto refused = turbo->resolve({"deepseek2", 4});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("deepseek2"), std::string::npos);
  EXPECT_NE(refused.error().message.find("turbo3"), std::string::npos);
  EXPECT_TRUE(KvPolicy::parse("")->resolve({"deepseek2", 4}).ok());
  EXPECT_FALSE(turbo->resolve({"rwkv7", 2}).ok());
  EXPECT_TRUE(turbo->resolve({"qwen2", 2}).ok());
}

TEST(KvPolicy, AutoParsesAndMeasuresInF16) {
  auto plain = KvPolicy::parse("auto");
  ASSERT_TRUE(plain.ok()) << plain.error().describe();
  EXPECT_EQ(plain->autoBits, 0.0);  // the default budget (kv::autoBudget)
  EXPECT_EQ(plain->toString(), "auto");
  auto budget = KvPolicy::parse("indexer=128, auto:4.5 ,seed=7");
  ASSERT_TRUE(budget.ok()) << budget.error().describe();
  EXPECT_EQ(budget->autoBits, 4.5);
  EXPECT_EQ(budget->seed, 7u);
  // Until it has measured, an auto policy caches f16.
  EXPECT_EQ(resolve("auto:6", 3), std::vector<LayerSchemes>(3));
  // A budget below the cheapest candidate at the model's head_dim fails
  // early; auto alone takes the default raised to that candidate.
  EXPECT_FALSE(KvPolicy::parse("auto:4")->resolve({"llama", 2, {8}}).ok());
  EXPECT_TRUE(KvPolicy::parse("auto:4")->resolve({"llama", 2, {64}}).ok());
  // Per-layer widths: each is checked (one narrow layer fails the budget).
  EXPECT_FALSE(KvPolicy::parse("auto:4")->resolve({"llama", 2, {64, 8}}).ok());
  EXPECT_TRUE(plain->resolve({"llama", 2, {8}}).ok());
  EXPECT_EQ(*autoBudget(0.0, 64), kDefaultAutoBits);
  EXPECT_EQ(*autoBudget(0.0, 8), 8.0);
  EXPECT_EQ(*autoBudget(4.0, 64), 4.0);
  auto back = KvPolicy::parse(budget->toString());
  ASSERT_TRUE(back.ok()) << budget->toString();
  EXPECT_EQ(back->autoBits, 4.5);
  EXPECT_TRUE(back->sameCache(*budget));
  EXPECT_FALSE(KvPolicy::parse("auto:5")->sameCache(*budget));
  EXPECT_FALSE(KvPolicy::parse("k=f16,v=f16")->sameCache(*plain));
  for (const char* bad :
       {"auto:", "auto:x", "auto:0", "auto:17", "auto5", "auto,auto:4", "auto,k=q8_0",
        "v=turbo4,auto", "auto,boundary=1", "auto,two_phase", "auto,kv@1=f16"}) {
    auto p = KvPolicy::parse(bad);
    EXPECT_FALSE(p.ok()) << bad;
    if (!p.ok()) {
      EXPECT_NE(p.error().message.find("auto"), std::string::npos) << p.error().message;
    }
  }
}

// withLayers writes a policy that resolves to exactly the layers it was
// given, keeping the seed and the attention options.
TEST(KvPolicy, WithLayersResolvesToThoseLayers) {
  using L = LayerSchemes;
  const std::vector<std::vector<L>> cases = {
      {{"turbo4b", "turbo4b"}, {"q8_0", "turbo4b"}, {"turbo4b", "turbo4b"}},
      {{"f16", "f16"}},
      {{"q8_0", "turbo3b"}, {"turbo3b", "q8_0"}, {"turbo3b", "turbo3b"}, {"q8_0", "q8_0"}},
  };
  auto base = KvPolicy::parse("auto:5,seed=9,indexer=64,sparse_v=0.01");
  ASSERT_TRUE(base.ok());
  for (const auto& layers : cases) {
    const KvPolicy p = base->withLayers(layers);
    EXPECT_FALSE(p.autoBits);
    EXPECT_EQ(p.seed, 9u);
    EXPECT_EQ(p.attention.policyItems(), base->attention.policyItems());
    EXPECT_EQ(resolve(p.toString(), static_cast<uint32_t>(layers.size())), layers) << p.toString();
  }
}

}  // namespace
}  // namespace kvscope::kv
