#pragma once
// A fixed set of worker threads for data-parallel loops. parallelFor splits
// [0, n) into one contiguous range per thread (the caller's thread works too)
// and returns when all ranges are done. One parallelFor at a time; the pool is
// owned by one engine worker, like everything else in the engine.

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvscope {

class ThreadPool {
 public:
  // threads == 0: one per hardware thread.
  explicit ThreadPool(unsigned threads = 0);
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
  const std::function<void(size_t, size_t)>* m_fn = nullptr;
  size_t m_n = 0;
  unsigned m_parts = 0;
  unsigned m_pending = 0;
  uint64_t m_generation = 0;
  bool m_stop = false;
};

}  // namespace kvscope
