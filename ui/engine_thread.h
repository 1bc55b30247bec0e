#pragma once
// EngineThread: owns the engine's thread and the EngineWorker that lives on it. Connect
// to worker() with queued connections only. Destruction stops any reply, asks the thread
// to finish and waits for the call in progress to return; the worker is deleted on its
// own thread.

#include <QThread>

#include "ui/engine_worker.h"

namespace kvscope::ui {

class EngineThread {
 public:
  explicit EngineThread(EngineWorker::DeviceLister lister = {});
  ~EngineThread();
  EngineThread(const EngineThread&) = delete;
  EngineThread& operator=(const EngineThread&) = delete;

  EngineWorker* worker() const { return m_worker; }

 private:
  QThread m_thread;
  EngineWorker* m_worker;  // owned by m_thread's finished() -> deleteLater()
};

}  // namespace kvscope::ui
