#include "ui/main_window.h"

#include <QApplication>
#include <QFileDialog>
#include <QFileInfo>
#include <QIcon>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QScreen>
#include <QSplitter>
#include <QStatusBar>
#include <QVBoxLayout>

#include "ui/chat_view.h"
#include "ui/composer.h"
#include "ui/conversation_list.h"
#include "ui/device_indicator.h"
#include "ui/engine_worker.h"
#include "ui/inspector_dock.h"
#include "ui/resources.h"

namespace kvscope::ui {
namespace {

constexpr QSize kDefaultSize(1280, 800);
constexpr int kInspectorWidth = 380;
constexpr int kSidebarWidth = 220;
constexpr int kChatMaxWidth = 860;  // a readable line length for the conversation

// Centers the conversation and composer in wide windows, as chat apps do.
QWidget* chatColumn(ChatView* chat, Composer* composer) {
  auto* column = new QWidget;
  column->setObjectName(QStringLiteral("chatColumn"));
  column->setAttribute(Qt::WA_StyledBackground);

  auto* inner = new QWidget(column);
  inner->setMaximumWidth(kChatMaxWidth);
  auto* stack = new QVBoxLayout(inner);
  stack->setContentsMargins(24, 0, 24, 20);
  stack->setSpacing(12);
  stack->addWidget(chat, 1);
  stack->addWidget(composer);

  auto* row = new QHBoxLayout(column);
  row->setContentsMargins(0, 0, 0, 0);
  row->addStretch(1);
  row->addWidget(inner, 100);
  row->addStretch(1);
  return column;
}

}  // namespace

MainWindow::MainWindow(EngineWorker* worker, QWidget* parent)
    : QMainWindow(parent),
      m_conversations(new ConversationList),
      m_chat(new ChatView),
      m_composer(new Composer),
      m_splitter(new QSplitter(Qt::Horizontal, this)),
      m_inspector(new InspectorDock(this)) {
  registerResources();
  setObjectName(QStringLiteral("mainWindow"));
  setWindowTitle(QStringLiteral("kvscope"));
  setWindowIcon(QIcon(QStringLiteral(":/icons/kvscope-256.png")));

  m_splitter->setObjectName(QStringLiteral("mainSplitter"));
  m_splitter->setChildrenCollapsible(false);
  m_splitter->setHandleWidth(1);
  m_splitter->addWidget(m_conversations);
  m_splitter->addWidget(chatColumn(m_chat, m_composer));
  m_splitter->setStretchFactor(1, 1);
  m_splitter->setSizes({kSidebarWidth, kDefaultSize.width() - kSidebarWidth - kInspectorWidth});
  setCentralWidget(m_splitter);

  addDockWidget(Qt::RightDockWidgetArea, m_inspector);
  resizeDocks({m_inspector}, {kInspectorWidth}, Qt::Horizontal);

  buildMenus();
  buildStatusBar();

  const QRect available = screen()->availableGeometry();
  resize(kDefaultSize.boundedTo(available.size() * 0.9));

  connect(m_chat, &ChatView::openModelFileRequested, this, &MainWindow::openModelFile);
  connect(m_chat, &ChatView::openModelFolderRequested, this, &MainWindow::openModelFolder);

  // Queued in both directions: the worker lives on the engine thread.
  connect(this, &MainWindow::probeDevicesRequested, worker, &EngineWorker::probeDevices,
          Qt::QueuedConnection);
  connect(worker, &EngineWorker::devicesReady, this, &MainWindow::showDevices,
          Qt::QueuedConnection);
  connect(worker, &EngineWorker::deviceError, this, &MainWindow::showDeviceError,
          Qt::QueuedConnection);
  emit probeDevicesRequested();
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* openFile =
      file->addAction(tr("&Open Model…"), QKeySequence::Open, this, &MainWindow::openModelFile);
  openFile->setStatusTip(tr("Open a model stored as a GGUF file"));
  QAction* openFolder = file->addAction(tr("Open Model &Folder…"), QKeySequence(tr("Ctrl+Shift+O")),
                                        this, &MainWindow::openModelFolder);
  openFolder->setStatusTip(tr("Open a Hugging Face model folder (config.json and safetensors)"));
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, qApp, &QApplication::quit);

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
  statusBar()->addWidget(m_modelStatus);
  statusBar()->addPermanentWidget(m_device);
  statusBar()->setSizeGripEnabled(false);
}

void MainWindow::showDevices(const QList<DeviceSummary>& devices, int chosen) {
  m_device->showDevices(devices, chosen);
  emit deviceProbeFinished();
}

void MainWindow::showDeviceError(const QString& message) {
  m_device->showError(message);
  emit deviceProbeFinished();
}

void MainWindow::openModelFile() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open Model"), QString(),
                                                    tr("GGUF models (*.gguf);;All files (*)"));
  if (!path.isEmpty()) reportModelChoice(path);
}

void MainWindow::openModelFolder() {
  const QString path = QFileDialog::getExistingDirectory(this, tr("Open Model Folder"));
  if (!path.isEmpty()) reportModelChoice(path);
}

void MainWindow::reportModelChoice(const QString& path) {
  // Loading arrives with the runtime; until then say so rather than ignore the choice.
  statusBar()->showMessage(
      tr("Cannot load “%1” yet: this build does not include the model runtime.")
          .arg(QFileInfo(path).fileName()),
      10000);
}

void MainWindow::showAbout() {
  QMessageBox::about(
      this, tr("About kvscope"),
      tr("<h3>kvscope %1</h3>"
         "<p>Chat with local language models on any Vulkan device, with the KV cache kept "
         "compressed — and see it live: memory per layer, the codec of each layer, the "
         "rows the sparse-attention indexer picks, and throughput.</p>")
          .arg(QApplication::applicationVersion()));
}

}  // namespace kvscope::ui
