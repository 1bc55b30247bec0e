#pragma once
// A fixed set of worker threads for data-parallel loops. parallelFor splits
// [0, n) into contiguous ranges (up to two per thread) and returns when all
// are done. Ranges are claimed from a shared counter by the caller and by the
// workers that are running, so a worker the OS has not scheduled (another
// process or the GUI thread holds its core) delays nothing: its ranges go to
// whoever is free, and a loaded machine degrades to fewer threads' speed
// instead of waiting a time slice per loop. One parallelFor at a time; the
// pool is owned by one engine worker, like everything else in the engine.
//
// A forward pass issues a parallelFor every few microseconds, and waking a
// blocked thread costs as much or more (6 us a loop on a busy 2-core VM,
// tens when the core idles; 2.7 us with polling), so an idle worker first
// polls for the next loop for `spin`, yielding its core to anything else
// runnable, and only then blocks; the caller likewise polls for the ranges
// still running before it blocks.

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
  void workerLoop();
  // Claims and runs ranges of loop `loop` until none is left.
  void runRanges(uint32_t loop);

  std::vector<std::thread> m_workers;
  std::mutex m_mutex;
  std::condition_variable m_start;
  std::condition_variable m_done;
  // The current loop: m_fn and m_n are written before the loop is published
  // in m_claim and stay until every range has completed, which the caller
  // waits for. Atomic because a worker holding a stale claim may read them
  // while the next loop writes them; its claim then fails and it uses
  // nothing it read.
  std::atomic<const std::function<void(size_t, size_t)>*> m_fn{nullptr};
  std::atomic<size_t> m_n{0};
  // Loop number << 32 | ranges << 16 | next range to claim: one word, so a
  // claim checks the loop and its range count together.
  std::atomic<uint64_t> m_claim{0};
  std::atomic<uint32_t> m_completed{0};
  std::atomic<bool> m_stop{false};
  std::chrono::microseconds m_spin;
};

}  // namespace kvscope
