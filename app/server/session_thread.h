#pragma once
// SessionThread: a SessionRunner for a process whose only user of the
// Session is the server (kvscope-cli serve): it owns the Session and runs the
// posted jobs on a thread of its own, in order. The destructor runs the jobs
// still queued (the server has cancelled them, so they return at once) and
// joins the thread.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "server/server.h"

namespace kvscope::server {

class SessionThread : public SessionRunner {
 public:
  explicit SessionThread(std::unique_ptr<runtime::Session> session);
  ~SessionThread() override;

  void post(std::function<void(runtime::Session&)> job) override;

 private:
  void loop();

  std::unique_ptr<runtime::Session> m_session;
  std::mutex m_mutex;
  std::condition_variable m_posted;
  std::deque<std::function<void(runtime::Session&)>> m_jobs;  // guarded by m_mutex
  bool m_closing = false;                                     // guarded by m_mutex
  std::thread m_thread;  // last: starts once the members above exist
};

}  // namespace kvscope::server
