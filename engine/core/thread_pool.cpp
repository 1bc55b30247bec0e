#include "core/thread_pool.h"

#include <algorithm>

namespace kvscope {

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < threads; ++i) m_workers.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_start.notify_all();
  for (auto& t : m_workers) t.join();
}

namespace {
std::pair<size_t, size_t> partRange(size_t n, unsigned parts, unsigned index) {
  const size_t base = n / parts, extra = n % parts;
  const size_t begin = index * base + std::min<size_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}
}  // namespace

void ThreadPool::parallelFor(size_t n, const std::function<void(size_t, size_t)>& fn,
                             size_t grain) {
  if (n == 0) return;
  const unsigned parts = static_cast<unsigned>(
      std::min<size_t>(size(), std::max<size_t>(1, n / std::max<size_t>(grain, 1))));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard lock(m_mutex);
    m_fn = &fn;
    m_n = n;
    m_parts = parts;
    m_pending = parts - 1;
    ++m_generation;
  }
  m_start.notify_all();
  const auto [b, e] = partRange(n, parts, 0);
  fn(b, e);
  std::unique_lock lock(m_mutex);
  m_done.wait(lock, [this] { return m_pending == 0; });
  m_fn = nullptr;
}

void ThreadPool::workerLoop(unsigned index) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock lock(m_mutex);
    m_start.wait(lock, [&] { return m_stop || m_generation != seen; });
    if (m_stop) return;
    seen = m_generation;
    if (index >= m_parts) continue;  // this loop needs fewer threads
    const auto* fn = m_fn;
    const auto [b, e] = partRange(m_n, m_parts, index);
    lock.unlock();
    (*fn)(b, e);
    lock.lock();
    if (--m_pending == 0) m_done.notify_one();
  }
}

}  // namespace kvscope
