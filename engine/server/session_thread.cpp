#include "server/session_thread.h"

namespace kvscope::server {

SessionThread::SessionThread(std::unique_ptr<runtime::Session> session)
    : m_session(std::move(session)), m_thread([this] { loop(); }) {}

SessionThread::~SessionThread() {
  {
    std::lock_guard lock(m_mutex);
    m_closing = true;
  }
  m_posted.notify_all();
  m_thread.join();
}

Expected<std::unique_ptr<runtime::Session>> SessionThread::makeSession() {
  if (!m_session)
    return makeError(ErrorCode::kInternal, "the served session was handed over already");
  return std::move(m_session);
}

void SessionThread::post(std::function<void()> job) {
  {
    std::lock_guard lock(m_mutex);
    m_jobs.push_back(std::move(job));
  }
  m_posted.notify_all();
}

void SessionThread::loop() {
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock lock(m_mutex);
      m_posted.wait(lock, [&] { return !m_jobs.empty() || m_closing; });
      if (m_jobs.empty()) return;  // closing, and every job has run
      job = std::move(m_jobs.front());
      m_jobs.pop_front();
    }
    job();
  }
}

}  // namespace kvscope::server
