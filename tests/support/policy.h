#pragma once
// The KV cache policy a test writes as text (kv/kv_policy.h): tests state
// policies the way users type them; the engine takes them parsed.

#include <string_view>

#include <gtest/gtest.h>

#include "kv/kv_policy.h"

namespace kvscope::test {

// `text` parsed; a text that does not parse fails the test and gives f16.
inline kv::KvPolicy policyOf(std::string_view text) {
  auto p = kv::KvPolicy::parse(text);
  EXPECT_TRUE(p.ok()) << "'" << text << "': " << (p.ok() ? "" : p.error().message);
  return p.ok() ? std::move(p).value() : kv::KvPolicy{};
}

}  // namespace kvscope::test
