#pragma once
// ScreenshotScript: drives a MainWindow through a scripted conversation and saves a PNG
// of it, for tools/screenshot.sh and the README's pictures. Without a model it captures
// the window once the device probe and the scan for models on disk have answered (the
// empty state). With one it loads the
// model, sends each prompt in turn (every reply but the last runs to its end), and
// captures the window while the last reply streams: once it has `minTokens` tokens and
// the inspector has a KV report (on the Indexer tab, an indexer report too), so the
// picture shows a conversation mid-flight. With `compare`, every reply runs to its end,
// then the scheme comparison runs on the conversation and its window is captured. With
// `servePort`, every reply runs to its end, then "Serve on localhost" starts on that port
// and the window is captured once an outside client's two requests were answered (their
// step and KV reports in the inspector, the status bar counting them). With `reopen`,
// every reply runs to its end, then a new chat is started (which saves the conversation's
// KV cache) with a short exchange of its own, the conversation is reopened, and the window
// is captured once its cache was restored from disk (the status bar saying so). Exits
// the application with 0 when the picture was saved, 1 on any failure (with a message).

#include <QObject>
#include <QStringList>
#include <QTimer>

#include "ui/engine_types.h"

namespace kvscope::ui {

class MainWindow;

struct ScreenshotPlan {
  QString output;     // PNG path
  QString modelPath;  // empty: the empty window
  BackendSettings backend;
  QStringList prompts;
  QString systemPrompt;
  int maxTokens = 0;        // reply length limit; 0: the model's remembered setting
  // Unset: the remembered setting. kStop: capture once a turn fails because
  // the conversation no longer fits (its banner and actions).
  std::optional<runtime::ContextOverflow> contextOverflow;
  int minTokens = 24;
  int inspectorTab = 0;            // KV memory, Scheme, Indexer, Throughput, Experts
  bool indexerDiagnostic = false;  // the Indexer panel's "Measure captured mass"
  bool compare = false;            // capture "Compare schemes on this conversation"
  quint16 servePort = 0;           // capture the app serving on this port (0: no)
  bool reopen = false;             // capture the conversation reopened from its saved cache
  int timeoutMs = 180000;
};

class ScreenshotScript : public QObject {
  Q_OBJECT

 public:
  ScreenshotScript(MainWindow& window, ScreenshotPlan plan);

 private:
  void start();
  void sendNext();
  void checkReady();
  void capture();
  void compare();
  void serve();
  void reopen();
  void fail(const QString& message);

  MainWindow& m_window;
  ScreenshotPlan m_plan;
  int m_next = 0;  // the next prompt to send
  bool m_lastTurn = false;
  bool m_sawKv = false;
  bool m_sawIndexer = false;
  quint32 m_tokens = 0;
  bool m_serving = false;
  QString m_reopenId;  // reopen: the conversation to go back to, once set  // the served requests' reports are the ones awaited
  bool m_tooLong = false;  // a turn failed because the conversation no longer fits
  bool m_capturing = false;
  bool m_probed = false;
  bool m_discovered = false;
  bool m_started = false;
  QTimer m_timeout;
};

}  // namespace kvscope::ui
