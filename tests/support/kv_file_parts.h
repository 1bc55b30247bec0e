#pragma once
// The three sections of a saved KV cache file (runtime/kv_file.h), taken
// apart and put back together by the tests' own reading of the format, so a
// test or the fuzzer can change a section and still present a file whose
// sizes and checksums agree: what the reader must then refuse is the content.
// Header-only: the tests and kvscope-fuzz include it.

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>

#include "core/checksum.h"

namespace kvscope::test {

struct KvFileParts {
  std::string meta, tokens, rows;
};

namespace kvfile {
inline constexpr size_t kHeader = 64, kEntry = 24, kSections = 3;
inline uint64_t u64(const std::string& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}
inline uint32_t crc(const std::string& s) {
  return crc32c({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}
}  // namespace kvfile

// The sections as the table places them; nullopt when the table points
// outside the file.
inline std::optional<KvFileParts> splitKvFile(const std::string& b) {
  using namespace kvfile;
  if (b.size() < kHeader + kSections * kEntry) return std::nullopt;
  std::string parts[kSections];
  for (size_t i = 0; i < kSections; ++i) {
    const size_t entry = kHeader + i * kEntry;
    const uint64_t offset = u64(b, entry + 8), bytes = u64(b, entry + 16);
    if (offset > b.size() || bytes > b.size() - offset) return std::nullopt;
    parts[i] = b.substr(offset, bytes);
  }
  return KvFileParts{parts[0], parts[1], parts[2]};
}

// A file of these sections with the header `like` has (magic, version), its
// sizes, offsets and checksums made to agree.
inline std::string joinKvFile(const KvFileParts& p, const std::string& like) {
  using namespace kvfile;
  std::string head = like.substr(0, kHeader + kSections * kEntry);
  const std::string* sections[kSections] = {&p.meta, &p.tokens, &p.rows};
  const uint32_t tags[kSections] = {0x4154454D, 0x4E4B4F54, 0x53574F52};  // META TOKN ROWS
  uint64_t offset = head.size();
  for (size_t i = 0; i < kSections; ++i) {
    const size_t entry = kHeader + i * kEntry;
    const uint32_t c = crc(*sections[i]);
    const uint64_t bytes = sections[i]->size();
    std::memcpy(&head[entry], &tags[i], 4);
    std::memcpy(&head[entry + 4], &c, 4);
    std::memcpy(&head[entry + 8], &offset, 8);
    std::memcpy(&head[entry + 16], &bytes, 8);
    offset += bytes;
  }
  std::memcpy(&head[16], &offset, 8);
  std::memset(&head[24], 0, 4);
  const uint32_t headerCrc = crc(head);
  std::memcpy(&head[24], &headerCrc, 4);
  return head + p.meta + p.tokens + p.rows;
}

}  // namespace kvscope::test
