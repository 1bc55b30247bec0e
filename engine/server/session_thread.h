#pragma once
// SessionThread: a SessionRunner for a process whose only user of the
// model is the server (kvscope-cli serve): it runs the posted jobs on a thread
// of its own, in order, and hands the Session it was given to the server as
// its first slot (once; later calls fail). The destructor runs the jobs still
// queued (the server has cancelled them, so they return at once) and joins
// the thread.

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

  void post(std::function<void()> job) override;
  Expected<std::unique_ptr<runtime::Session>> makeSession() override;

 private:
  void loop();

  std::unique_ptr<runtime::Session> m_session;  // until the server takes it
  std::mutex m_mutex;
  std::condition_variable m_posted;
  std::deque<std::function<void()>> m_jobs;  // guarded by m_mutex
  bool m_closing = false;                    // guarded by m_mutex
  std::thread m_thread;                      // last: starts once the members above exist
};

}  // namespace kvscope::server
