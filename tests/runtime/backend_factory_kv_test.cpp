// makeBackend turns a KV policy text into per-layer schemes on the backend,
// or a clear error before anything is loaded.
#include <gtest/gtest.h>

#include "backend/cpu_backend.h"
#include "runtime/backend_factory.h"
#include "support/test_support.h"

namespace kvscope::test {
namespace {

std::shared_ptr<const model::ModelFile> stories() {
  auto model = model::ModelFile::open(sharedFile("models/stories260K.gguf"));
  EXPECT_TRUE(model.ok()) << model.error().describe();
  return model.ok() ? std::shared_ptr<const model::ModelFile>(std::move(model).value()) : nullptr;
}

TEST(BackendFactory, ParsesKvPolicies) {
  KVS_REQUIRE_FIXTURE(sharedFile("models/stories260K.gguf"));
  auto m = stories();
  auto b = runtime::makeBackend(
      m, {.kind = "cpu", .threads = 2, .kvPolicy = "k=q8_0,v=turbo4,boundary=1,seed=3"});
  ASSERT_TRUE(b.ok()) << b.error().describe();
  const auto& cache = dynamic_cast<backend::CpuBackend&>(**b).cache();
  EXPECT_EQ(cache.cacheSeed(), 3u);
  EXPECT_EQ(cache.scheme(0, kv::KvPart::kKey).name(), "f16");
  EXPECT_EQ(cache.scheme(1, kv::KvPart::kKey).name(), "q8_0");
  EXPECT_EQ(cache.scheme(1, kv::KvPart::kValue).name(), "turbo4");
  for (auto bad : {"k=q9", "k@99=f16", "x=1"}) {
    auto r = runtime::makeBackend(m, {.kind = "cpu", .kvPolicy = bad});
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_TRUE(runtime::makeBackend(m, {.kind = "cpu", .kvPolicy = ""}).ok());
}

}  // namespace
}  // namespace kvscope::test
