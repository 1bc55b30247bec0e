#include "core/prefault.h"

#include <sys/mman.h>
#include <unistd.h>

namespace kvscope {

bool prefaultForRead(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return true;
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page <= 0) return false;
  // madvise takes page-aligned ranges: round the start down to its page.
  const auto begin = reinterpret_cast<uintptr_t>(bytes.data());
  const uintptr_t start = begin - begin % static_cast<uintptr_t>(page);
  const size_t length = begin + bytes.size() - start;
#if defined(MADV_POPULATE_READ)
  return ::madvise(reinterpret_cast<void*>(start), length, MADV_POPULATE_READ) == 0;
#else
  (void)length;  // headers older than Linux 5.14: nothing to ask for
  return false;
#endif
}

bool worthPrefaulting(uint64_t bytes) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return false;
  const uint64_t physical = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  return bytes <= physical / 4 * 3;
}

}  // namespace kvscope
