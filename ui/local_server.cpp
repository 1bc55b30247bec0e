#include "ui/local_server.h"

#include "ui/chat_controller.h"
#include "ui/engine_worker.h"

namespace kvscope::ui {

LocalServer::LocalServer(EngineWorker* worker, ChatController* chat, quint16 port, QObject* parent)
    : QObject(parent), m_chat(chat), m_port(port) {
  registerEngineTypes();
  connect(this, &LocalServer::startRequested, worker, &EngineWorker::startServer);
  connect(this, &LocalServer::stopRequested, worker, &EngineWorker::stopServer);

  connect(worker, &EngineWorker::serverStarted, this,
          [this](const QString& url, const QString& modelId) {
            // A start answered after the user turned serving off: the stop queued
            // behind it ends that server. While serving, a port change restarted it.
            if (m_state != State::kStarting && m_state != State::kServing) return;
            m_url = url;
            m_modelId = modelId;
            setState(State::kServing);
          });
  connect(worker, &EngineWorker::serverFailed, this, [this](const QString& message) {
    if (m_state != State::kStarting && m_state != State::kServing) return;
    setState(State::kOff);
    emit failed(message);
  });
  connect(worker, &EngineWorker::serverStopped, this, [this](const QString& reason) {
    // Stopped by the worker because the model went: serve the next one.
    if (!reason.isEmpty() && m_state == State::kServing) setState(State::kWaitingForModel);
  });
  connect(worker, &EngineWorker::serverActivity, this, [this](quint32 active) {
    // Counts sent from the server's threads may arrive after it stopped.
    if (m_state != State::kServing || active == m_active) return;
    m_active = active;
    emit changed();
  });
  connect(worker, &EngineWorker::requestServed, this, [this](const ServedReport& report) {
    ++m_served;
    m_last = report;
    emit changed();
  });
  connect(worker, &EngineWorker::serverNotice, this, &LocalServer::notice);
  connect(chat, &ChatController::modelLoaded, this, [this] {
    if (m_state == State::kWaitingForModel) start();
  });
}

void LocalServer::setOn(bool on) {
  if (on == isOn()) return;
  if (!on) {
    setState(State::kOff);
    emit stopRequested();
    return;
  }
  if (m_chat->hasModel())
    start();
  else
    setState(State::kWaitingForModel);
}

void LocalServer::setPort(quint16 port) {
  if (port == m_port) return;
  m_port = port;
  if (m_state == State::kServing || m_state == State::kStarting) start();
}

void LocalServer::start() {
  setState(State::kStarting);
  emit startRequested({.port = m_port, .sampling = m_chat->sampling()});
}

void LocalServer::setState(State state) {
  if (state != State::kServing) {
    m_url.clear();
    m_modelId.clear();
    m_active = 0;
  }
  m_state = state;
  emit changed();
}

QString LocalServer::statusText() const {
  switch (m_state) {
    case State::kOff:
      return {};
    case State::kStarting:
      return tr("Starting the server…");
    case State::kWaitingForModel:
      return tr("Server waits for a model");
    case State::kServing:
      break;
  }
  return tr("Serving %1 · %2 active · %3 served").arg(m_url).arg(m_active).arg(m_served);
}

}  // namespace kvscope::ui
