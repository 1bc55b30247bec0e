#include "ui/engine_thread.h"

namespace kvscope::ui {

EngineThread::EngineThread(EngineWorker::DeviceLister lister)
    : m_worker(new EngineWorker(std::move(lister))) {
  m_thread.setObjectName(QStringLiteral("kvscope-engine"));
  m_worker->moveToThread(&m_thread);
  QObject::connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
  m_thread.start();
}

EngineThread::~EngineThread() {
  // A reply in progress would otherwise run to its end before the thread can finish.
  m_worker->requestStop(EngineWorker::kAllTurns);
  m_thread.quit();
  m_thread.wait();
}

}  // namespace kvscope::ui
