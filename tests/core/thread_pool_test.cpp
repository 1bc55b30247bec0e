// ThreadPool: ranges cover [0, n) exactly once, the grain keeps small loops
// on the caller's thread, loops complete both when handed over by polling and
// when every hand-over blocks, and a stalled worker's share goes to others.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.h"

namespace kvscope {
namespace {

void expectCoversOnce(ThreadPool& pool, size_t n, size_t grain) {
  std::vector<std::atomic<int>> hits(n);
  pool.parallelFor(
      n,
      [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      },
      grain);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n " << n << " index " << i;
}

TEST(ThreadPool, RangesCoverEveryIndexOnce) {
  for (unsigned threads : {1u, 2u, 3u, 5u}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (size_t n : {1, 2, 3, 7, 64, 1001})
      for (size_t grain : {1, 4, 1000}) expectCoversOnce(pool, n, grain);
  }
}

TEST(ThreadPool, GrainKeepsSmallLoopsOnTheCallingThread) {
  ThreadPool pool(4);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> calls{0};
  std::atomic<bool> elsewhere{false};
  pool.parallelFor(
      100,
      [&](size_t begin, size_t end) {
        ++calls;
        EXPECT_EQ(begin, 0u);
        EXPECT_EQ(end, 100u);
        if (std::this_thread::get_id() != caller) elsewhere = true;
      },
      64);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_FALSE(elsewhere.load());
}

TEST(ThreadPool, ManyLoopsBackToBack) {
  ThreadPool pool(3);
  std::atomic<size_t> total{0};
  for (int k = 0; k < 20000; ++k)
    pool.parallelFor(3 + k % 5, [&](size_t begin, size_t end) { total += end - begin; });
  size_t expected = 0;
  for (int k = 0; k < 20000; ++k) expected += 3 + k % 5;
  EXPECT_EQ(total.load(), expected);
}

TEST(ThreadPool, WithoutPollingEveryHandOverBlocks) {
  // No polling: workers and caller always go through the condition
  // variables, the path a pool takes after an idle spell.
  ThreadPool pool(3, std::chrono::microseconds(0));
  for (int k = 0; k < 2000; ++k) expectCoversOnce(pool, 3 + k % 5, 1);
}

// A worker that stalls inside a range (as one the OS does not schedule would)
// holds up only that range: the caller claims every other one.
TEST(ThreadPool, AStalledWorkerLeavesItsOtherRangesToTheCaller) {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::atomic<int> onCaller{0}, onWorker{0};
    pool.parallelFor(400, [&](size_t, size_t) {
      if (std::this_thread::get_id() == caller) {
        ++onCaller;  // slow enough for the worker to wake and claim a range
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      } else if (onWorker.fetch_add(1) == 0) {
        // Long against the caller's 3 x 2 ms, so only a caller descheduled
        // for ~190 ms could leave the worker a second range.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
    // Four ranges (two per thread); if the worker took part, it stalled in
    // its first, and the caller ran the other three.
    if (onWorker.load() > 0) {
      EXPECT_EQ(onWorker.load(), 1);
      EXPECT_EQ(onCaller.load(), 3);
      return;
    }
  }
  GTEST_SKIP() << "the worker never took a range";
}

}  // namespace
}  // namespace kvscope
