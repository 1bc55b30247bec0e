#pragma once
// LocalServer: the GUI thread's side of "Serve on localhost", the app's OpenAI-compatible
// server (server/server.h) for the loaded model. The server runs inside EngineWorker, next
// to the Session it serves; this object asks for it with queued signals and keeps what the
// window shows: whether serving is on, the URL, the requests waiting or running, and the
// requests served.
//
// Serving is the user's choice and outlives a model: while it is on, the worker stops the
// server before the model is released (kWaitingForModel) and it starts again, on the same
// port, once the next model has loaded. A start that fails (port in use) turns it off and
// says why with failed().
//
// Requests that leave sampling out get the chat's settings for the model (temperature,
// max tokens, chat format) as they were when serving started.

#include <QObject>
#include <QString>

#include "ui/engine_types.h"

namespace kvscope::ui {

class ChatController;
class EngineWorker;

class LocalServer : public QObject {
  Q_OBJECT

 public:
  enum class State { kOff, kStarting, kServing, kWaitingForModel };

  // `worker` lives on the engine thread; `chat` (GUI thread) says whether a model is
  // loaded and supplies its sampling settings. Both outlive this object.
  LocalServer(EngineWorker* worker, ChatController* chat, quint16 port, QObject* parent = nullptr);

  State state() const { return m_state; }
  bool isOn() const { return m_state != State::kOff; }
  quint16 port() const { return m_port; }
  // While serving: "http://127.0.0.1:PORT/v1" and the model id clients send.
  QString url() const { return m_url; }
  QString modelId() const { return m_modelId; }
  quint32 activeRequests() const { return m_active; }
  quint64 servedRequests() const { return m_served; }
  // The last request served (turnId 0 before the first).
  const ServedReport& lastServed() const { return m_last; }
  // One line for the status bar; empty when off.
  QString statusText() const;

 public slots:
  void setOn(bool on);
  // The port of the next start (0: any free port); a running server moves to it.
  void setPort(quint16 port);

 signals:
  // To the worker (queued).
  void startRequested(const kvscope::ui::ServeRequest& request);
  void stopRequested();

  // state(), url(), the request counts or lastServed() changed.
  void changed();
  // Serving could not start; it is off again.
  void failed(const QString& message);
  // Something the user should know about serving (a chat template the server
  // warns about).
  void notice(const QString& message);

 private:
  void start();
  void setState(State state);

  ChatController* m_chat;
  quint16 m_port;
  State m_state = State::kOff;
  QString m_url;
  QString m_modelId;
  quint32 m_active = 0;
  quint64 m_served = 0;
  ServedReport m_last;
};

}  // namespace kvscope::ui
