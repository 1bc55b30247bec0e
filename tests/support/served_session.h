#pragma once
// What the server tests share: a demo-model session on the CPU backend with a
// backend factory (so a server can open more slots: Session::sibling), and a
// SessionRunner that holds the posted jobs until the test runs them, so the
// queue's state is exactly what the test made it.
// Header-only: only the test binaries that link kvscope_server include it.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include <gtest/gtest.h>

#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "server/server.h"
#include "support/demo_model.h"

namespace kvscope::test {

// `context` 0 keeps the trained context.
inline std::unique_ptr<runtime::Session> openServedDemoSession(uint32_t context = 0) {
  auto model = openDemoModel();
  if (!model) return nullptr;
  auto tokenizer = model::loadTokenizer(*model);
  EXPECT_TRUE(tokenizer.ok());
  const runtime::BackendChoice choice{.kind = "cpu", .contextLimit = context, .threads = 1};
  auto backend = runtime::makeBackend(model, choice);
  EXPECT_TRUE(backend.ok()) << backend.error().describe();
  if (!tokenizer.ok() || !backend.ok()) return nullptr;
  return std::make_unique<runtime::Session>(model, std::move(*backend), std::move(*tokenizer),
                                            runtime::makeBackendFactory(model, choice));
}

class ManualRunner : public server::SessionRunner {
 public:
  explicit ManualRunner(std::unique_ptr<runtime::Session> session)
      : m_session(std::move(session)) {}
  Expected<std::unique_ptr<runtime::Session>> makeSession() override {
    if (!m_session) return makeError(ErrorCode::kInternal, "handed over already");
    return std::move(m_session);
  }
  void post(std::function<void()> job) override {
    {
      std::lock_guard lock(m_mutex);
      m_jobs.push_back(std::move(job));
    }
    m_posted.notify_all();
  }
  // Whether `n` jobs wait, within a bound never expected to pass.
  bool waitForPosted(size_t n) {
    std::unique_lock lock(m_mutex);
    return m_posted.wait_for(lock, std::chrono::seconds(60), [&] { return m_jobs.size() >= n; });
  }
  void runAll() {
    std::deque<std::function<void()>> jobs;
    {
      std::lock_guard lock(m_mutex);
      jobs.swap(m_jobs);
    }
    for (auto& job : jobs) job();
  }

 private:
  std::unique_ptr<runtime::Session> m_session;
  std::mutex m_mutex;
  std::condition_variable m_posted;
  std::deque<std::function<void()>> m_jobs;
};

}  // namespace kvscope::test
