#include "core/thread_pool.h"

#include <algorithm>
#include <cassert>

namespace kvscope {

namespace {

std::pair<size_t, size_t> partRange(size_t n, size_t parts, size_t index) {
  const size_t base = n / parts, extra = n % parts;
  const size_t begin = index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

// Polls `done` for up to `spin`; true when it came true.
template <class Done>
bool spinUntil(std::chrono::microseconds spin, const Done& done) {
  const auto deadline = std::chrono::steady_clock::now() + spin;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// The claim word: loop number << 32 | number of ranges << 16 | next range.
uint32_t loopOf(uint64_t claim) {
  return static_cast<uint32_t>(claim >> 32);
}
uint32_t partsOf(uint64_t claim) {
  return static_cast<uint32_t>(claim >> 16) & 0xffffu;
}
uint32_t nextOf(uint64_t claim) {
  return static_cast<uint32_t>(claim) & 0xffffu;
}

}  // namespace

ThreadPool::ThreadPool(unsigned threads, std::chrono::microseconds spin) : m_spin(spin) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < threads; ++i) m_workers.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(m_mutex);
    m_stop.store(true);
    m_claim.fetch_add(uint64_t{1} << 32);  // a loop number the workers have not seen
  }
  m_start.notify_all();
  for (auto& t : m_workers) t.join();
}

void ThreadPool::runRanges(uint32_t loop) {
  uint64_t claim = m_claim.load(std::memory_order_acquire);
  for (;;) {
    const uint32_t parts = partsOf(claim);
    if (loopOf(claim) != loop || nextOf(claim) >= parts) return;
    // The claim succeeds only while `loop` is still current, and the loop
    // cannot end before the claimed range does, so m_fn and m_n read below
    // belong to it.
    if (!m_claim.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel)) continue;
    const auto [b, e] = partRange(m_n.load(std::memory_order_relaxed), parts, nextOf(claim));
    (*m_fn.load(std::memory_order_relaxed))(b, e);
    if (m_completed.fetch_add(1, std::memory_order_acq_rel) + 1 == parts) {
      // Under the mutex, so a caller between its check and its wait cannot
      // miss the notification.
      std::lock_guard lock(m_mutex);
      m_done.notify_one();
    }
    claim = m_claim.load(std::memory_order_acquire);
  }
}

void ThreadPool::parallelFor(size_t n, const std::function<void(size_t, size_t)>& fn,
                             size_t grain) {
  if (n == 0) return;
  const size_t parts = std::min<size_t>(m_workers.empty() ? 1 : std::min(2 * size(), 0xffffu),
                                        std::max<size_t>(1, n / std::max<size_t>(grain, 1)));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  m_fn.store(&fn, std::memory_order_relaxed);
  m_n.store(n, std::memory_order_relaxed);
  m_completed.store(0, std::memory_order_relaxed);
  uint32_t loop;
  {
    // Under the mutex, so a worker between its check and its wait cannot
    // miss the new loop.
    std::lock_guard lock(m_mutex);
    loop = loopOf(m_claim.load(std::memory_order_relaxed)) + 1;
    m_claim.store(uint64_t{loop} << 32 | uint64_t{parts} << 16, std::memory_order_release);
  }
  m_start.notify_all();
  runRanges(loop);
  const auto finished = [&] { return m_completed.load(std::memory_order_acquire) == parts; };
  if (!spinUntil(m_spin, finished)) {
    std::unique_lock lock(m_mutex);
    m_done.wait(lock, finished);
  }
}

void ThreadPool::workerLoop() {
  uint32_t seen = 0;
  for (;;) {
    const auto arrived = [&] { return loopOf(m_claim.load(std::memory_order_acquire)) != seen; };
    if (!spinUntil(m_spin, arrived)) {
      std::unique_lock lock(m_mutex);
      m_start.wait(lock, arrived);
    }
    // The loop number first: if it is the destructor's, its acquire makes
    // m_stop visible; read the other way round, a worker could miss both.
    seen = loopOf(m_claim.load(std::memory_order_acquire));
    if (m_stop.load()) return;
    runRanges(seen);
  }
}

}  // namespace kvscope
