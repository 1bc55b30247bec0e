#include "ui/screenshot_script.h"

#include <QApplication>
#include <QPixmap>

#include <QCheckBox>

#include "ui/chat_controller.h"
#include "ui/composer.h"
#include "ui/engine_worker.h"
#include "ui/fidelity_lab.h"
#include "ui/indexer_panel.h"
#include "ui/inspector_dock.h"
#include "ui/local_server.h"
#include "ui/main_window.h"

namespace kvscope::ui {
namespace {

// Layout settles over a few event-loop passes after the last change (status bar, word
// wrap); a short pause makes the picture show the settled window. Mid-reply the pause is
// shorter, so the reply is still streaming when the picture is taken.
constexpr int kSettleMs = 400;
constexpr int kStreamingSettleMs = 150;
// The requests tools/screenshot.sh's client sends in `serve` mode.
constexpr quint64 kServedForPicture = 2;

}  // namespace

ScreenshotScript::ScreenshotScript(MainWindow& window, ScreenshotPlan plan)
    : QObject(&window), m_window(window), m_plan(std::move(plan)) {
  ChatController* c = window.controller();
  m_timeout.setSingleShot(true);
  connect(&m_timeout, &QTimer::timeout, this,
          [this] { fail(QStringLiteral("timed out before the window was ready")); });
  m_timeout.start(m_plan.timeoutMs);

  connect(&window, &MainWindow::deviceProbeFinished, this, [this] {
    m_probed = true;
    start();
  });
  connect(&window, &MainWindow::modelsDiscovered, this, [this] {
    m_discovered = true;
    start();
  });
  connect(c, &ChatController::modelLoaded, this, [this, c] {
    // Again: a tab the model brings (Experts) shows only once it is loaded.
    m_window.inspector()->showTab(m_plan.inspectorTab);
    if (!m_plan.systemPrompt.isEmpty()) c->setSystemPrompt(m_plan.systemPrompt);
    SamplingSettings sampling = c->sampling();
    if (m_plan.maxTokens > 0) sampling.maxTokens = m_plan.maxTokens;
    if (m_plan.contextOverflow) sampling.contextOverflow = *m_plan.contextOverflow;
    if (sampling != c->sampling()) c->setSampling(sampling);
    sendNext();
  });
  connect(c, &ChatController::modelLoadFailed, this,
          [this](const QString&, const QString& message) { fail(message); });
  connect(c, &ChatController::replyFailed, this, [this](int, const QString& message) {
    // Under "stop" the failure the picture is of comes with conversationTooLong, just after.
    QTimer::singleShot(0, this, [this, message] {
      if (!m_tooLong) fail(message);
    });
  });
  connect(c, &ChatController::conversationTooLong, this, [this] {
    if (m_plan.contextOverflow != runtime::ContextOverflow::kStop) return;
    m_tooLong = true;
    QTimer::singleShot(kSettleMs, this, &ScreenshotScript::capture);
  });
  connect(c, &ChatController::replyFinished, this, [this] {
    if (!m_lastTurn)
      sendNext();
    else if (m_plan.compare)
      compare();
    else if (m_plan.servePort != 0)
      serve();
    else if (m_plan.reopen)
      reopen();
  });
  connect(c, &ChatController::stepReported, this, [this](const StepReport& report) {
    m_tokens = report.stats.generatedTokens;
    checkReady();
  });
  connect(c, &ChatController::kvReported, this, [this] {
    m_sawKv = true;
    checkReady();
  });
  connect(c, &ChatController::indexerReported, this, [this] {
    m_sawIndexer = true;
    checkReady();
  });
}

void ScreenshotScript::start() {
  if (!m_probed || !m_discovered || m_started) return;
  m_started = true;
  if (m_plan.modelPath.isEmpty()) {
    QTimer::singleShot(kSettleMs, this, &ScreenshotScript::capture);
    return;
  }
  m_window.inspector()->showTab(m_plan.inspectorTab);
  if (m_plan.indexerDiagnostic) {
    m_window.inspector()
        ->indexerPanel()
        ->findChild<QCheckBox*>(QStringLiteral("indexerDiagnostic"))
        ->setChecked(true);
  }
  m_window.controller()->loadModelWith(m_plan.modelPath, m_plan.backend);
}

void ScreenshotScript::sendNext() {
  if (m_next >= m_plan.prompts.size()) {
    QTimer::singleShot(kSettleMs, this, &ScreenshotScript::capture);
    return;
  }
  m_lastTurn = m_next == m_plan.prompts.size() - 1;
  m_sawKv = false;
  m_sawIndexer = false;
  m_tokens = 0;
  m_window.controller()->send(m_plan.prompts.at(m_next++));
}

void ScreenshotScript::checkReady() {
  if (m_plan.compare || m_plan.reopen) return;  // captured after the replies instead
  if (m_plan.servePort != 0) {
    // Both of the client's requests answered (a small model streams faster than a
    // picture can be taken mid-request); they ran in the server's own slots, so the
    // status bar counts them and the chat's panels stay as they were.
    if (!m_serving || m_capturing || m_window.localServer()->servedRequests() < kServedForPicture)
      return;
    m_capturing = true;
    m_window.inspector()->flush();
    QTimer::singleShot(kStreamingSettleMs, this, &ScreenshotScript::capture);
    return;
  }
  if (!m_lastTurn || m_capturing || !m_sawKv || m_tokens < quint32(m_plan.minTokens)) return;
  if (m_plan.inspectorTab == 2 && !m_sawIndexer) return;
  m_capturing = true;
  m_window.inspector()->flush();
  QTimer::singleShot(kStreamingSettleMs, this, &ScreenshotScript::capture);
}

void ScreenshotScript::compare() {
  FidelityLab* lab = m_window.openComparison(true);
  connect(lab, &FidelityLab::comparisonFinished, this, [this, lab] {
    QTimer::singleShot(kSettleMs, this, [this, lab] {
      m_timeout.stop();
      if (!lab->grab().save(m_plan.output, "PNG")) {
        fail(QStringLiteral("could not write %1").arg(m_plan.output));
        return;
      }
      QApplication::exit(0);
    });
  });
}

// The client is tools/screenshot.sh, which sends requests once the port answers.
void ScreenshotScript::serve() {
  m_serving = true;
  LocalServer* server = m_window.localServer();
  connect(server, &LocalServer::failed, this, &ScreenshotScript::fail);
  connect(server, &LocalServer::changed, this, &ScreenshotScript::checkReady);
  server->setPort(m_plan.servePort);
  server->setOn(true);
}

void ScreenshotScript::reopen() {
  ChatController* c = m_window.controller();
  if (m_reopenId.isEmpty()) {
    // Another chat takes the engine's cache, so reopening reads the saved one.
    m_reopenId = c->conversation().id;
    c->newChat();
    c->send(QStringLiteral("Say hello."));
    return;
  }
  connect(c, &ChatController::kvCacheNotice, this, [this](const QString& message) {
    if (message.contains(QStringLiteral("was not used"))) fail(message);
    if (message.startsWith(QStringLiteral("Restored")))
      QTimer::singleShot(kSettleMs, this, &ScreenshotScript::capture);
  });
  c->openConversation(m_reopenId);
}

void ScreenshotScript::capture() {
  m_timeout.stop();
  m_window.inspector()->flush();
  const bool saved = m_window.grab().save(m_plan.output, "PNG");
  if (!saved) {
    fail(QStringLiteral("could not write %1").arg(m_plan.output));
    return;
  }
  m_window.controller()->stop();
  QApplication::exit(0);
}

void ScreenshotScript::fail(const QString& message) {
  qCritical("screenshot: %s", qPrintable(message));
  QApplication::exit(1);
}

}  // namespace kvscope::ui
