#include "ui/main_window.h"

#include <algorithm>
#include <utility>

#include <QApplication>
#include <QClipboard>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QIcon>
#include <QInputDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QScreen>
#include <QSplitter>
#include <QStatusBar>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/composer.h"
#include "ui/context_gauge.h"
#include "ui/kv_cache_dialog.h"
#include "ui/conversation_list.h"
#include "ui/conversation_store.h"
#include "ui/device_indicator.h"
#include "ui/engine_worker.h"
#include "ui/fidelity_lab.h"
#include "ui/inspector_dock.h"
#include "ui/local_server.h"
#include "ui/model_discovery.h"
#include "ui/model_picker.h"
#include "ui/model_settings.h"
#include "ui/resources.h"
#include "ui/scheme_panel.h"
#include "ui/settings_dialog.h"
#include "ui/theme.h"

namespace kvscope::ui {
namespace {

constexpr QSize kDefaultSize(1360, 840);
constexpr int kInspectorWidth = 420;
constexpr int kSidebarWidth = 230;
constexpr int kChatMaxWidth = 860;  // a readable line length for the conversation

QString modelSummary(const ModelInfo& info, const QString& policy) {
  QStringList parts{info.name};
  if (!info.architecture.isEmpty() && info.architecture != info.name) parts << info.architecture;
  parts << (info.backend == QStringLiteral("cpu") ? QObject::tr("CPU") : QObject::tr("Vulkan"));
  parts << QObject::tr("%1 ctx").arg(info.contextLimit);
  parts << QObject::tr("KV %1").arg(policy.isEmpty() ? QStringLiteral("f16") : policy);
  if (!info.templateWarning.isEmpty()) parts << QObject::tr("⚠ no chat template");
  return parts.join(QStringLiteral(" · "));
}

}  // namespace

MainWindow::MainWindow(EngineWorker* worker, QWidget* parent)
    : QMainWindow(parent),
      m_store(new ConversationStore({}, this)),
      m_settings(std::make_unique<ModelSettings>()),
      m_controller(new ChatController(worker, m_store, m_settings.get(), this)),
      m_discovery(new ModelDiscovery(this)),
      m_conversations(new ConversationList),
      m_chat(new ChatView),
      m_composer(new Composer),
      m_splitter(new QSplitter(Qt::Horizontal, this)),
      m_inspector(new InspectorDock(this)),
      m_server(new LocalServer(worker, m_controller, m_settings->serverPort(), this)) {
  registerResources();
  setObjectName(QStringLiteral("mainWindow"));
  setWindowTitle(QStringLiteral("kvscope"));
  setWindowIcon(QIcon(QStringLiteral(":/icons/kvscope-256.png")));

  m_splitter->setObjectName(QStringLiteral("mainSplitter"));
  m_splitter->setChildrenCollapsible(false);
  m_splitter->setHandleWidth(1);
  m_splitter->addWidget(m_conversations);
  m_splitter->addWidget(buildChatColumn());
  m_splitter->setStretchFactor(1, 1);
  m_splitter->setSizes({kSidebarWidth, kDefaultSize.width() - kSidebarWidth - kInspectorWidth});
  setCentralWidget(m_splitter);

  addDockWidget(Qt::RightDockWidgetArea, m_inspector);
  resizeDocks({m_inspector}, {kInspectorWidth}, Qt::Horizontal);
  m_inspector->schemePanel()->setAvailableSchemes(ChatController::kvSchemeNames());

  buildMenus();
  buildStatusBar();
  connectController();
  connectWidgets();

  const QRect available = screen()->availableGeometry();
  resize(kDefaultSize.boundedTo(available.size() * 0.92));

  // Queued in both directions: the worker lives on the engine thread.
  connect(this, &MainWindow::probeDevicesRequested, worker, &EngineWorker::probeDevices,
          Qt::QueuedConnection);
  connect(worker, &EngineWorker::devicesReady, this, &MainWindow::showDevices,
          Qt::QueuedConnection);
  connect(worker, &EngineWorker::deviceError, this, &MainWindow::showDeviceError,
          Qt::QueuedConnection);
  emit probeDevicesRequested();

  m_store->load();
  refreshConversations();
  discoverModels();
}

MainWindow::~MainWindow() {
  // The open chat's KV cache, while the engine still runs (served requests
  // cancelled first, so the save does not wait behind them).
  m_server->setOn(false);
  m_controller->saveKvCacheNow();
  // The controller saves through the store and settings; it goes first.
  delete m_controller;
}

// Centers the conversation and composer in wide windows, as chat apps do, under a bar
// naming the model (click to switch) with the chat settings at its right.
QWidget* MainWindow::buildChatColumn() {
  auto* column = new QWidget;
  column->setObjectName(QStringLiteral("chatColumn"));
  column->setAttribute(Qt::WA_StyledBackground);

  m_modelButton = new QToolButton;
  m_modelButton->setObjectName(QStringLiteral("modelButton"));
  m_modelButton->setProperty("role", "action");
  m_modelButton->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  m_modelButton->setIcon(themeIcon(QStringLiteral("model"), themeColors().accent));
  m_modelButton->setText(tr("Choose a model"));
  m_modelButton->setFont(scaledFont(1.05, true));
  m_modelButton->setToolTip(tr("Choose or load a model (Ctrl+L)"));
  m_modelButton->setCursor(Qt::PointingHandCursor);
  m_settingsButton = new QToolButton;
  m_settingsButton->setObjectName(QStringLiteral("settingsButton"));
  m_settingsButton->setProperty("role", "action");
  m_settingsButton->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  m_settingsButton->setIcon(themeIcon(QStringLiteral("settings")));
  m_settingsButton->setText(tr("System prompt && sampling"));
  m_settingsButton->hide();
  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(0, 10, 0, 0);
  bar->addWidget(m_modelButton);
  bar->addStretch(1);
  bar->addWidget(m_settingsButton);

  auto* inner = new QWidget(column);
  inner->setMaximumWidth(kChatMaxWidth);
  auto* stack = new QVBoxLayout(inner);
  stack->setContentsMargins(24, 0, 24, 18);
  stack->setSpacing(8);
  stack->addLayout(bar);
  stack->addWidget(m_chat, 1);
  stack->addWidget(m_composer);

  auto* row = new QHBoxLayout(column);
  row->setContentsMargins(0, 0, 0, 0);
  row->addStretch(1);
  row->addWidget(inner, 100);
  row->addStretch(1);
  return column;
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* openFile =
      file->addAction(tr("&Open Model…"), QKeySequence::Open, this, &MainWindow::openModelFile);
  openFile->setStatusTip(tr("Open a model stored as a GGUF file"));
  QAction* openFolder = file->addAction(tr("Open Model &Folder…"), QKeySequence(tr("Ctrl+Shift+O")),
                                        this, &MainWindow::openModelFolder);
  openFolder->setStatusTip(tr("Open a Hugging Face model folder (config.json and safetensors)"));
  file->addAction(tr("&Browse Models…"), QKeySequence(tr("Ctrl+L")), this,
                  &MainWindow::openModelPicker);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, qApp, &QApplication::quit);

  QMenu* chat = menuBar()->addMenu(tr("&Chat"));
  chat->addAction(tr("&New Chat"), QKeySequence::New, m_controller, &ChatController::newChat);
  chat->addAction(tr("&Stop Reply"), QKeySequence(Qt::Key_Escape), m_controller,
                  &ChatController::stop);
  chat->addAction(tr("&Regenerate Reply"), QKeySequence(tr("Ctrl+R")), m_controller,
                  &ChatController::regenerate);
  chat->addSeparator();
  chat->addAction(tr("&Compare Schemes on This Conversation…"), this, [this] { openComparison(); });
  chat->addAction(tr("System Prompt && &Sampling…"), QKeySequence(tr("Ctrl+,")), this,
                  &MainWindow::openSettings);
  chat->addAction(tr("Saved &KV Caches…"), this, [this] {
    KvCacheDialog dialog(m_store->kvCacheDirectory(), m_settings->kvCacheLimits(), this);
    if (dialog.exec() == QDialog::Accepted) m_settings->setKvCacheLimits(dialog.limits());
  });

  QMenu* serve = menuBar()->addMenu(tr("&Server"));
  m_serveAction = serve->addAction(tr("&Serve on Localhost"));
  m_serveAction->setObjectName(QStringLiteral("serveAction"));
  m_serveAction->setCheckable(true);
  m_serveAction->setShortcut(QKeySequence(tr("Ctrl+Shift+S")));
  m_serveAction->setStatusTip(
      tr("Serve the loaded model to OpenAI-compatible clients on this computer"));
  connect(m_serveAction, &QAction::toggled, m_server, &LocalServer::setOn);
  m_copyUrlAction = serve->addAction(tr("&Copy Server URL"), this, [this] {
    QGuiApplication::clipboard()->setText(m_server->url());
  });
  m_copyUrlAction->setEnabled(false);
  serve->addAction(tr("Server &Port…"), this, &MainWindow::chooseServerPort);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  QAction* toggleInspector = m_inspector->toggleViewAction();
  toggleInspector->setText(tr("&Inspector"));
  toggleInspector->setShortcut(QKeySequence(tr("Ctrl+I")));
  view->addAction(toggleInspector);

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About kvscope"), this, &MainWindow::showAbout);
  help->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt);
}

void MainWindow::buildStatusBar() {
  m_modelStatus = new QLabel(tr("No model loaded"));
  m_modelStatus->setObjectName(QStringLiteral("modelStatus"));
  m_modelStatus->setContentsMargins(8, 0, 0, 0);
  m_device = new DeviceIndicator;
  m_serverStatus = new QLabel;
  m_serverStatus->setObjectName(QStringLiteral("serverStatus"));
  m_serverStatus->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_serverStatus->hide();
  statusBar()->addWidget(m_modelStatus);
  statusBar()->addPermanentWidget(m_serverStatus);
  statusBar()->addPermanentWidget(m_device);
  statusBar()->setSizeGripEnabled(false);
}

void MainWindow::connectController() {
  ChatController* c = m_controller;
  connect(c, &ChatController::modelLoading, this, [this](const QString& path) {
    m_chat->setLoadStatus(tr("Loading %1…").arg(QFileInfo(path).fileName()), true);
    m_modelStatus->setText(tr("Loading %1…").arg(QFileInfo(path).fileName()));
    m_chat->clearError();
  });
  connect(c, &ChatController::loadProgress, this, [this](LoadStage stage, const QString& text) {
    m_chat->setLoadStatus(text, stage != LoadStage::kReady);
    if (m_picker) m_picker->showLoadProgress(stage, text);
  });
  connect(c, &ChatController::modelLoaded, this, &MainWindow::showModel);
  connect(c, &ChatController::modelLoadFailed, this, [this](const QString&, const QString& text) {
    m_chat->setLoadStatus(QString(), false);
    m_modelStatus->setText(
        m_controller->hasModel()
            ? modelSummary(m_controller->model(), m_controller->backendSettings().kvPolicy)
            : tr("No model loaded"));
    if (m_picker)
      m_picker->showLoadFailed(text);
    else
      m_chat->showError(text);
  });
  connect(c, &ChatController::modelUnloaded, this, [this] {
    m_chat->clearModel();
    m_composer->setModelLoaded(false);
    m_inspector->clearModel();
    m_settingsButton->hide();
    m_conversations->setNewChatEnabled(false);
    m_modelButton->setText(tr("Choose a model"));
    m_modelStatus->setText(tr("No model loaded"));
  });
  connect(c, &ChatController::memoryEstimated, this,
          [this](const QString& path, const runtime::MemoryEstimate& estimate) {
            if (m_picker) m_picker->showEstimate(path, estimate);
          });
  connect(c, &ChatController::memoryEstimateFailed, this,
          [this](const QString& path, const QString& text) {
            if (m_picker) m_picker->showEstimateError(path, text);
          });

  // A policy switch re-reads the conversation: the composer shows it as busy, so Stop
  // cancels it and nothing new is sent meanwhile.
  connect(c, &ChatController::policyChanging, this, [this](const QString& policy) {
    m_composer->setGenerating(true);
    m_inspector->setGenerating(true);
    m_inspector->schemePanel()->showProgress(0, m_controller->cachedTokens());
    m_modelStatus->setText(tr("Re-encoding the KV cache as %1…")
                               .arg(policy.isEmpty() ? QStringLiteral("f16") : policy));
  });
  connect(c, &ChatController::policyProgress, this, [this](quint32 done, quint32 total) {
    m_modelStatus->setText(tr("Re-encoding the KV cache: %1 of %2 tokens").arg(done).arg(total));
    m_inspector->schemePanel()->showProgress(done, total);
  });
  const auto policyEnded = [this] {
    m_inspector->schemePanel()->hideProgress();
    m_composer->setGenerating(false);
    m_inspector->setGenerating(false);
    const QString policy = m_controller->backendSettings().kvPolicy;
    m_inspector->setModel(m_controller->model(), policy, deviceBytes());
    m_modelStatus->setText(modelSummary(m_controller->model(), policy));
  };
  connect(c, &ChatController::policyChanged, this, policyEnded);
  connect(c, &ChatController::policyFailed, this, [this, policyEnded](const QString& text) {
    policyEnded();
    m_chat->showError(text);
  });
  connect(c, &ChatController::conversationReset, this, [this] {
    const QList<ChatMessage>& messages = m_controller->conversation().messages;
    m_chat->setMessages(messages);
    m_composer->setLeftOut(static_cast<int>(std::count_if(
        messages.begin(), messages.end(), [](const ChatMessage& m) { return m.leftOut; })));
    m_conversations->setCurrent(m_controller->conversation().id);
    // A too-long conversation's actions belong to it, not to the chat now shown.
    m_unansweredMessage.clear();
    m_chat->withdrawOverflowActions();
  });
  connect(c, &ChatController::messageAdded, this, [this](int index) {
    m_chat->addMessage(index, m_controller->conversation().messages.at(index));
  });
  connect(c, &ChatController::replyText, m_chat, &ChatView::appendReplyText);
  connect(c, &ChatController::replyFinished, m_chat, &ChatView::finishReply);
  connect(c, &ChatController::replyFailed, m_chat, &ChatView::failReply);
  connect(c, &ChatController::conversationTooLong, this, [this](const QString& unanswered) {
    m_unansweredMessage = unanswered;
    m_chat->offerOverflowActions();
  });
  connect(c, &ChatController::promptProgress, m_chat, &ChatView::setPromptProgress);
  connect(c, &ChatController::generatingChanged, this, [this](bool generating) {
    m_composer->setGenerating(generating);
    m_chat->setGenerating(generating);
    m_inspector->setGenerating(generating);
  });
  connect(c, &ChatController::contextUsageChanged, m_composer, &Composer::setContextUsage);
  connect(c, &ChatController::messagesLeftOut, this,
          [this](const QList<int>& indices, quint32 prefill) {
            m_chat->setLeftOut(indices);
            m_composer->setLeftOut(static_cast<int>(indices.size()));
            if (!indices.isEmpty()) {
              statusBar()->showMessage(
                  tr("The conversation outgrew the context: the model no longer sees %1; "
                     "re-reading %2 tokens")
                      .arg(messageCount(static_cast<int>(indices.size())))
                      .arg(prefill),
                  10000);
            }
          });
  connect(c, &ChatController::conversationsChanged, this, &MainWindow::refreshConversations);
  connect(c, &ChatController::stepReported, m_inspector, &InspectorDock::showStep);
  connect(c, &ChatController::kvReported, m_inspector, &InspectorDock::showKv);
  connect(c, &ChatController::indexerReported, m_inspector, &InspectorDock::showIndexer);
  connect(c, &ChatController::expertsReported, m_inspector, &InspectorDock::showExperts);
  connect(c, &ChatController::errorOccurred, m_chat, &ChatView::showError);
  connect(c, &ChatController::kvCacheNotice, this,
          [this](const QString& message) { statusBar()->showMessage(message, 10000); });
  connect(c, &ChatController::chatTemplateFailed, this, &MainWindow::chooseChatFormat);

  connect(m_server, &LocalServer::changed, this, &MainWindow::showServer);
  connect(m_server, &LocalServer::failed, this,
          [this](const QString& message) { m_chat->showError(message); });
  connect(m_server, &LocalServer::notice, this, [this](const QString& message) {
    statusBar()->showMessage(tr("Server: %1").arg(message), 10000);
  });
}

// The status bar says where the model is served and how busy the server is; its
// tooltip has what a client needs (URL, model id) and the last request's numbers.
void MainWindow::showServer() {
  const LocalServer& s = *m_server;
  const bool serving = s.state() == LocalServer::State::kServing;
  {
    const QSignalBlocker quiet(m_serveAction);
    m_serveAction->setChecked(s.isOn());
  }
  m_copyUrlAction->setEnabled(serving);
  m_serverStatus->setVisible(s.isOn());
  m_serverStatus->setText(QStringLiteral("<span style=\"color:%1\">●</span> %2")
                              .arg(serving ? themeColors().ok.name() : themeColors().muted.name(),
                                   s.statusText().toHtmlEscaped()));
  if (!serving) {
    m_serverStatus->setToolTip(tr("Serving starts once a model is loaded."));
    return;
  }
  QString tip = tr("OpenAI-compatible API at %1 for model \"%2\" (loopback only).\n"
                   "Requests show in the inspector like chat turns.")
                    .arg(s.url(), s.modelId());
  const ServedReport& last = s.lastServed();
  if (last.turnId != 0) {
    tip += tr("\nLast request: %1 prompt tokens (%2 cached), %3 generated at %4 tokens/s%5")
               .arg(last.promptTokens)
               .arg(last.reusedTokens)
               .arg(last.generatedTokens)
               .arg(last.decodeTokensPerSecond, 0, 'f', 1)
               .arg(last.cancelled ? tr(", cancelled by the client") : QString());
  }
  m_serverStatus->setToolTip(tip);
}

void MainWindow::chooseServerPort() {
  bool ok = false;
  const int port =
      QInputDialog::getInt(this, tr("Server Port"), tr("Port for the local server (on 127.0.0.1):"),
                           m_server->port(), 1, 65535, 1, &ok);
  if (!ok) return;
  m_settings->setServerPort(static_cast<quint16>(port));
  m_server->setPort(static_cast<quint16>(port));
}

// The model's template could not render this conversation (it raised, e.g. a
// system message it does not support, or it does not parse): never fall back
// silently — the user picks the built-in format or plain completion, which is
// remembered for the model, and the reply is generated again with it.
void MainWindow::chooseChatFormat(const QString& message) {
  const ModelInfo& model = m_controller->model();
  QMessageBox box(QMessageBox::Warning, tr("Chat template failed"),
                  tr("This model's chat template could not turn the conversation into a prompt."),
                  QMessageBox::Cancel, this);
  box.setObjectName(QStringLiteral("chatTemplateFailed"));
  box.setInformativeText(message + QStringLiteral("\n\n") +
                         tr("Render it another way? The choice is remembered for this model "
                            "(Chat › System Prompt & Sampling)."));
  QPushButton* builtin = nullptr;
  if (!model.builtinFormat.isEmpty()) {
    builtin = box.addButton(tr("Use the built-in %1 format").arg(model.builtinFormat),
                            QMessageBox::AcceptRole);
  }
  QPushButton* plain = box.addButton(tr("Plain completion"), QMessageBox::AcceptRole);
  box.exec();
  SamplingSettings sampling = m_controller->sampling();
  if (builtin && box.clickedButton() == builtin) {
    sampling.chatRenderer = tokenizer::ChatRenderer::kBuiltin;
  } else if (box.clickedButton() == plain) {
    sampling.chatRenderer = tokenizer::ChatRenderer::kPlain;
  } else {
    return;
  }
  m_controller->setSampling(sampling);
  m_controller->regenerate();
}

void MainWindow::connectWidgets() {
  connect(m_chat, &ChatView::openModelFileRequested, this, &MainWindow::openModelFile);
  connect(m_chat, &ChatView::openModelFolderRequested, this, &MainWindow::openModelFolder);
  connect(m_chat, &ChatView::browseModelsRequested, this, &MainWindow::openModelPicker);
  connect(m_chat, &ChatView::loadModelRequested, m_controller, &ChatController::loadModel);
  connect(m_chat, &ChatView::editRequested, m_controller, &ChatController::editMessage);
  connect(m_chat, &ChatView::regenerateRequested, m_controller, &ChatController::regenerate);
  // The actions a conversation too long for the context offers.
  connect(m_chat, &ChatView::newChatRequested, this, [this] {
    const QString unanswered = std::exchange(m_unansweredMessage, {});
    m_controller->newChat();
    if (m_composer->text().trimmed().isEmpty()) m_composer->setText(unanswered);  // not over a draft
  });
  connect(m_chat, &ChatView::leaveOutOldestTurnsRequested, this, [this] {
    SamplingSettings sampling = m_controller->sampling();
    sampling.contextOverflow = runtime::ContextOverflow::kTruncateMiddle;
    m_controller->setSampling(sampling);
    m_controller->regenerate();
  });
  connect(m_composer, &Composer::sendRequested, this, [this](const QString& text) {
    m_chat->clearError();
    m_controller->send(text);
  });
  connect(m_composer, &Composer::stopRequested, m_controller, &ChatController::stop);
  connect(m_conversations, &ConversationList::newChatRequested, m_controller,
          &ChatController::newChat);
  connect(m_conversations, &ConversationList::openRequested, m_controller,
          &ChatController::openConversation);
  connect(m_conversations, &ConversationList::deleteRequested, m_controller,
          &ChatController::deleteConversation);
  connect(m_conversations, &ConversationList::renameRequested, this,
          &MainWindow::renameConversation);
  connect(m_inspector, &InspectorDock::policyRequested, this, &MainWindow::applyPolicy);
  connect(m_inspector, &InspectorDock::compareRequested, this, [this] { openComparison(); });
  connect(m_controller, &ChatController::comparisonInputReady, this,
          [this](const QString& path, const QList<qint32>& tokens) {
            if (m_lab) m_lab->setConversation(path, tokens, std::exchange(m_runComparison, false));
          });
  connect(m_controller, &ChatController::comparisonInputFailed, this,
          [this](const QString& message) {
            if (m_lab) m_lab->setUnavailable(message);
          });
  connect(m_controller, &ChatController::policyChanged, this, [this](const QString& policy) {
    if (m_lab) m_lab->setCurrentPolicy(policy);
  });
  connect(m_inspector, &InspectorDock::indexerDiagnosticRequested, m_controller,
          &ChatController::setIndexerDiagnostic);
  connect(m_modelButton, &QToolButton::clicked, this, &MainWindow::openModelPicker);
  connect(m_settingsButton, &QToolButton::clicked, this, &MainWindow::openSettings);
  connect(m_discovery, &ModelDiscovery::finished, this, [this](const QList<ModelEntry>& models) {
    m_discovered = models;
    m_chat->setDiscoveredModels(models);
    if (m_picker) m_picker->setModels(models);
    emit modelsDiscovered();
  });
}

void MainWindow::discoverModels() {
  m_discovery->start(defaultPlaces(m_settings->userFolders(), m_settings->recentModels()));
}

void MainWindow::showModel(const ModelInfo& info) {
  // The demo is introduced for what it is: a tiny model trained on children's stories.
  m_chat->setModel(info.demo ? tr("the kvscope demo model (0.9M parameters)") : info.name);
  m_composer->setModelLoaded(true);
  const QString policy = m_controller->backendSettings().kvPolicy;
  m_inspector->setModel(info, policy, deviceBytes());
  m_settingsButton->show();
  m_conversations->setNewChatEnabled(true);
  m_modelButton->setText(info.demo ? tr("Demo model · 0.9M parameters") : info.name);
  m_modelStatus->setText(modelSummary(info, policy));
  m_modelStatus->setToolTip(info.templateWarning.isEmpty()
                                ? info.path
                                : QStringLiteral("%1\n%2").arg(info.path, info.templateWarning));
  if (m_picker) m_picker->showLoaded();
  if (!info.backendNotice.isEmpty()) m_chat->showError(info.backendNotice);
  discoverModels();  // the model joins the recent list
}

void MainWindow::refreshConversations() {
  m_conversations->setConversations(m_store->conversations());
  m_conversations->setCurrent(m_controller->conversation().id);
}

// The controller keeps its own copy of the open conversation and saves it after every
// turn, so the open one is renamed in the store and then re-read from it; while its reply
// runs the rename waits, since re-reading would stop the reply.
void MainWindow::renameConversation(const QString& id, const QString& title) {
  const Conversation* stored = m_store->find(id);
  if (!stored) return;
  const bool open = id == m_controller->conversation().id;
  if (open && m_controller->isGenerating()) {
    m_chat->showError(tr("Rename this chat once its reply has finished."));
    refreshConversations();
    return;
  }
  Conversation renamed = *stored;
  renamed.title = title;
  if (m_store->save(renamed) && open) m_controller->openConversation(id);
}

FidelityLab* MainWindow::openComparison(bool runNow) {
  if (!m_lab) {
    m_lab = new FidelityLab(this);
    m_lab->setAttribute(Qt::WA_DeleteOnClose);
    // The schemes users compare: every preset, plus llama.cpp's 4-bit layout.
    QList<PolicyPreset> presets = policyPresets(ChatController::kvSchemeNames());
    presets.append({tr("q4_0 K and V (llama.cpp's 4-bit)"), QStringLiteral("k=q4_0,v=q4_0")});
    m_lab->setPolicies(
        presets, {QStringLiteral("auto"), QStringLiteral("auto:4.5"),
                  QStringLiteral("k=q8_0r,v=q8_0r"), QStringLiteral("k=q8_0,v=q8_0"),
                  QStringLiteral("k=turbo6b,v=turbo6b"), QStringLiteral("k=turbo5b,v=turbo5b"),
                  QStringLiteral("k=turbo4b,v=turbo4b"), QStringLiteral("k=q4_0,v=q4_0")});
    connect(m_lab, &FidelityLab::applyRequested, this, [this](const QString& policy) {
      applyPolicy(policy + m_inspector->schemePanel()->attentionItems());
    });
  }
  m_lab->setCurrentPolicy(m_controller->backendSettings().kvPolicy);
  m_runComparison = runNow;
  m_lab->setUnavailable(tr("Reading the conversation…"));
  m_controller->requestComparisonInput();
  m_lab->show();
  m_lab->raise();
  return m_lab;
}

void MainWindow::applyPolicy(const QString& policy) {
  m_chat->clearError();
  m_controller->setKvPolicy(policy);
}

quint64 MainWindow::deviceBytes() const {
  const int wanted = m_controller->backendSettings().device;
  for (const DeviceSummary& device : m_devices)
    if (device.index == wanted) return device.deviceLocalBytes;
  return m_chosenDevice >= 0 && m_chosenDevice < m_devices.size()
             ? m_devices.at(m_chosenDevice).deviceLocalBytes
             : 0;
}

void MainWindow::showDevices(const QList<DeviceSummary>& devices, int chosen) {
  m_devices = devices;
  m_chosenDevice = chosen;
  m_device->showDevices(devices, chosen);
  if (m_picker) m_picker->setDevices(devices, chosen);
  if (m_controller->hasModel()) {
    m_inspector->setModel(m_controller->model(), m_controller->backendSettings().kvPolicy,
                          deviceBytes());
  }
  emit deviceProbeFinished();
}

void MainWindow::showDeviceError(const QString& message) {
  m_device->showError(message);
  emit deviceProbeFinished();
}

void MainWindow::openModelPicker() {
  if (!m_picker) {
    m_picker = new ModelPicker(this);
    m_picker->setAttribute(Qt::WA_DeleteOnClose);
    QStringList names;
    QStringList policies;
    for (const PolicyPreset& preset : policyPresets(ChatController::kvSchemeNames())) {
      names << preset.name;
      policies << preset.policy;
    }
    m_picker->setAvailablePolicies(names, policies);
    m_picker->setDevices(m_devices, m_chosenDevice);
    m_picker->setSettings(m_controller->backendSettings());
    m_picker->setModels(m_discovered);
    connect(m_picker, &ModelPicker::estimateRequested, this,
            [this](const QString& path, const BackendSettings& settings) {
              m_controller->estimateMemory(path, settings, 0);
            });
    connect(m_picker, &ModelPicker::loadRequested, m_controller, &ChatController::loadModelWith);
    connect(m_picker, &ModelPicker::addFolderRequested, this, [this](const QString& folder) {
      m_settings->addUserFolder(folder);
      discoverModels();
    });
  }
  m_picker->show();
  m_picker->raise();
}

void MainWindow::openSettings() {
  if (!m_controller->hasModel()) return;
  const ModelInfo& model = m_controller->model();
  SettingsDialog dialog(model.name, m_controller->conversation().systemPrompt,
                        m_controller->sampling(),
                        {model.builtinFormat, model.templateReadsThinking}, this);
  if (dialog.exec() != QDialog::Accepted) return;
  m_controller->setSystemPrompt(dialog.systemPrompt());
  m_controller->setSampling(dialog.sampling());
}

void MainWindow::openModelFile() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open Model"), QString(),
                                                    tr("GGUF models (*.gguf);;All files (*)"));
  if (!path.isEmpty()) m_controller->loadModel(path);
}

void MainWindow::openModelFolder() {
  const QString path = QFileDialog::getExistingDirectory(this, tr("Open Model Folder"));
  if (!path.isEmpty()) m_controller->loadModel(path);
}

void MainWindow::showAbout() {
  QMessageBox::about(
      this, tr("About kvscope"),
      tr("<h3>kvscope %1</h3>"
         "<p>Chat with local language models on the CPU or a Vulkan device, with the KV "
         "cache kept compressed — and see it live: memory per layer, the codec of each "
         "layer and its measured error, and throughput.</p>"
         "<p>The Vulkan path has been tested on Mesa's lavapipe only; on first use of "
         "any other device kvscope checks it against the CPU backend and falls back to "
         "the CPU when the check fails.</p>")
          .arg(QApplication::applicationVersion()));
}

}  // namespace kvscope::ui
