// prefaultForRead against the kernel's own count of page faults: after it,
// reading every page of a mapping faults (almost) never; without it, the same
// reads fault (anonymous memory once per page; a cached file once per folio,
// which a recent kernel makes up to 2 MiB, so a handful of times for 16 MiB).

#include "core/prefault.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <vector>

namespace kvscope {
namespace {

constexpr size_t kFileBytes = size_t{16} << 20;

long minorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// A mapping of a fresh 16 MiB file (in the page cache, since just written).
class MappedFile {
 public:
  MappedFile() {
    static int made = 0;  // two mappings of one test must not share a file
    m_path =
        std::filesystem::temp_directory_path() /
        ("kvscope-prefault-" + std::to_string(::getpid()) + "-" + std::to_string(made++) + ".bin");
    std::vector<uint8_t> bytes(kFileBytes);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + 7);
    FILE* f = std::fopen(m_path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
    const int fd = ::open(m_path.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0);
    m_map = ::mmap(nullptr, kFileBytes, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    EXPECT_NE(m_map, MAP_FAILED);
  }
  ~MappedFile() {
    ::munmap(m_map, kFileBytes);
    std::filesystem::remove(m_path);
  }
  std::span<const uint8_t> bytes() const {
    return {static_cast<const uint8_t*>(m_map), kFileBytes};
  }

 private:
  std::filesystem::path m_path;
  void* m_map = nullptr;
};

// Reads one byte of every page; the faults that took.
long faultsReadingEveryPage(std::span<const uint8_t> bytes) {
  const long before = minorFaults();
  for (size_t i = 0; i < bytes.size(); i += 4096)
    (void)*static_cast<const volatile uint8_t*>(&bytes[i]);
  return minorFaults() - before;
}

TEST(Prefault, ReadsOfAMappedFileAfterwardsTakeNoPageFaults) {
  const MappedFile file;
  EXPECT_GT(faultsReadingEveryPage(file.bytes()), 2) << "without prefaulting";
  const MappedFile again;
  // A part not starting on a page, as a tensor inside a GGUF file.
  ASSERT_TRUE(prefaultForRead(again.bytes().subspan(100)));
  EXPECT_LE(faultsReadingEveryPage(again.bytes()), 2);
}

TEST(Prefault, ReadsOfAnonymousMemoryAfterwardsTakeNoPageFaults) {
  for (bool prefault : {false, true}) {
    void* map =
        ::mmap(nullptr, kFileBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(map, MAP_FAILED);
    const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(map), kFileBytes);
    if (prefault) {
      ASSERT_TRUE(prefaultForRead(bytes));
      EXPECT_LE(faultsReadingEveryPage(bytes), 2);
    } else {
      EXPECT_GE(faultsReadingEveryPage(bytes), static_cast<long>(kFileBytes / (2 << 20)));
    }
    ::munmap(map, kFileBytes);
  }
}

TEST(Prefault, AnEmptyRangeIsNothingToDo) {
  EXPECT_TRUE(prefaultForRead({}));
}

TEST(Prefault, WorthItOnlyForWhatFitsInMemory) {
  EXPECT_TRUE(worthPrefaulting(kFileBytes));
  EXPECT_FALSE(worthPrefaulting(uint64_t{1} << 60));
}

}  // namespace
}  // namespace kvscope
