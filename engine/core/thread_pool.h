#pragma once
// A fixed set of worker threads for data-parallel loops. parallelFor splits
// [0, n) into one contiguous range per thread (the caller's thread works too)
// and returns when all ranges are done. One parallelFor at a time; the pool is
// owned by one engine worker, like everything else in the engine.
//
// A forward pass issues a parallelFor every few microseconds, and waking a
// blocked thread costs as much or more (6 us a loop on a busy 2-core VM,
// tens when the core idles; 2.7 us with polling), so an idle worker first
// polls for the next loop for `spin`, yielding its core to anything else
// runnable, and only then blocks; the caller likewise polls for the last
// range before it blocks.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvscope {

class ThreadPool {
 public:
  static constexpr std::chrono::microseconds kSpin{100};

  // threads == 0: one per hardware thread.
  explicit ThreadPool(unsigned threads = 0, std::chrono::microseconds spin = kSpin);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned size() const { return static_cast<unsigned>(m_workers.size()) + 1; }

  // fn(begin, end) over disjoint ranges covering [0, n). Ranges smaller than
  // `grain` are not split further, so tiny loops stay on the calling thread.
  void parallelFor(size_t n, const std::function<void(size_t, size_t)>& fn, size_t grain = 1);

 private:
  void workerLoop(unsigned index);

  std::vector<std::thread> m_workers;
  std::mutex m_mutex;
  std::condition_variable m_start;
  std::condition_variable m_done;
  // The current loop: m_fn and m_n are written before m_job is published and
  // read only by the workers it names, each of which the caller waits for
  // (m_pending) before it can write the next loop.
  const std::function<void(size_t, size_t)>* m_fn = nullptr;
  size_t m_n = 0;
  std::atomic<uint64_t> m_job{0};  // loop number << 16 | number of ranges
  std::atomic<unsigned> m_pending{0};
  std::atomic<bool> m_stop{false};
  std::chrono::microseconds m_spin;
};

}  // namespace kvscope
