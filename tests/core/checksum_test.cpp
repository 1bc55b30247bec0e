// Checksums against their published check values.

#include "core/checksum.h"

#include <gtest/gtest.h>

#include <string_view>

namespace kvscope {
namespace {

std::span<const uint8_t> bytesOf(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(Crc32c, MatchesTheStandardCheckValues) {
  // The CRC catalogue's check value of "123456789" for CRC-32/ISCSI, and
  // RFC 3720 B.4's 32 zero bytes.
  EXPECT_EQ(crc32c(bytesOf("123456789")), 0xE3069283u);
  const uint8_t zeros[32] = {};
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c({}), 0u);
}

TEST(Crc32c, ContinuesAcrossChunks) {
  EXPECT_EQ(crc32c(bytesOf("6789"), crc32c(bytesOf("12345"))), 0xE3069283u);
}

TEST(Fnv1a64, MatchesThePublishedTestVectors) {
  // From the FNV reference test suite (Fowler, Noll, Vo).
  EXPECT_EQ(Fnv1a64().value(), 0xcbf29ce484222325ull);
  Fnv1a64 a;
  a.add(std::string_view("a"));
  EXPECT_EQ(a.value(), 0xaf63dc4c8601ec8cull);
  Fnv1a64 foobar;
  foobar.add(std::string_view("foobar"));
  EXPECT_EQ(foobar.value(), 0x85944171f73967e8ull);
}

}  // namespace
}  // namespace kvscope
