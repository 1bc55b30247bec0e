#pragma once
// Prefaulting memory-mapped weights before the first forward step.
//
// A mapped model file costs a page fault on the first touch of every page
// (the kernel maps 64 KiB around each); a mixture-of-experts decode meets
// new experts for many steps, so a fresh process's first tokens paid ~0.5 s
// of faults on a 12 GB gpt-oss-20b-shaped file (decode of 32 tokens
// 11.3 tok/s, of 128 tokens 13.4). llama.cpp maps with MAP_POPULATE for the
// same reason.

#include <cstdint>
#include <span>

namespace kvscope {

// Fills the page tables of the pages under `bytes` for reading
// (MADV_POPULATE_READ), reading them from disk where they are not cached.
// Best effort: false where the kernel refuses (before Linux 5.14, or memory
// that is not a mapping), and nothing is lost but the speed-up.
bool prefaultForRead(std::span<const uint8_t> bytes);

// Whether prefaulting `bytes` bytes is worth it on this machine: they fit in
// three quarters of its physical memory (prefaulting more would evict the
// first pages to read the last ones).
bool worthPrefaulting(uint64_t bytes);

}  // namespace kvscope
