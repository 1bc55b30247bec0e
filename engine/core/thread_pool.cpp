#include "core/thread_pool.h"

#include <algorithm>
#include <cassert>

namespace kvscope {

namespace {

constexpr int kPartsBits = 16;

std::pair<size_t, size_t> partRange(size_t n, unsigned parts, unsigned index) {
  const size_t base = n / parts, extra = n % parts;
  const size_t begin = index * base + std::min<size_t>(index, extra);
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

}  // namespace

ThreadPool::ThreadPool(unsigned threads, std::chrono::microseconds spin) : m_spin(spin) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  assert(threads < (1u << kPartsBits));
  for (unsigned i = 1; i < threads; ++i) m_workers.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
  m_stop.store(true);
  {
    std::lock_guard lock(m_mutex);
    m_job.fetch_add(uint64_t{1} << kPartsBits, std::memory_order_release);
  }
  m_start.notify_all();
  for (auto& t : m_workers) t.join();
}

void ThreadPool::parallelFor(size_t n, const std::function<void(size_t, size_t)>& fn,
                             size_t grain) {
  if (n == 0) return;
  const unsigned parts = static_cast<unsigned>(
      std::min<size_t>(size(), std::max<size_t>(1, n / std::max<size_t>(grain, 1))));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  m_fn = &fn;
  m_n = n;
  m_pending.store(parts - 1, std::memory_order_relaxed);
  {
    // Under the mutex, so a worker between its check and its wait cannot
    // miss the new loop.
    std::lock_guard lock(m_mutex);
    const uint64_t next = ((m_job.load(std::memory_order_relaxed) >> kPartsBits) + 1) << kPartsBits;
    m_job.store(next | parts, std::memory_order_release);
  }
  m_start.notify_all();
  const auto [b, e] = partRange(n, parts, 0);
  fn(b, e);
  const auto finished = [this] { return m_pending.load(std::memory_order_acquire) == 0; };
  if (!spinUntil(m_spin, finished)) {
    std::unique_lock lock(m_mutex);
    m_done.wait(lock, finished);
  }
  m_fn = nullptr;
}

void ThreadPool::workerLoop(unsigned index) {
  uint64_t seen = 0;
  for (;;) {
    const auto arrived = [&] { return m_job.load(std::memory_order_acquire) != seen; };
    if (!spinUntil(m_spin, arrived)) {
      std::unique_lock lock(m_mutex);
      m_start.wait(lock, arrived);
    }
    if (m_stop.load()) return;
    seen = m_job.load(std::memory_order_acquire);
    const auto parts = static_cast<unsigned>(seen & ((1u << kPartsBits) - 1));
    if (index >= parts) continue;  // this loop needs fewer threads
    const auto [b, e] = partRange(m_n, parts, index);
    (*m_fn)(b, e);
    if (m_pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Under the mutex, so the caller between its check and its wait
      // cannot miss the notification.
      std::lock_guard lock(m_mutex);
      m_done.notify_one();
    }
  }
}

}  // namespace kvscope
