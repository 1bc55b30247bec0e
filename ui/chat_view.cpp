#include "ui/chat_view.h"

#include <QFileInfo>
#include <QHBoxLayout>
#include <QIcon>
#include <QKeySequence>
#include <QLabel>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QStackedLayout>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/empty_state.h"
#include "ui/message_widget.h"
#include "ui/resources.h"
#include "ui/theme.h"

namespace kvscope::ui {
namespace {

constexpr int kMaxDiscoveredShown = 5;

QWidget* appMark() {
  registerResources();
  auto* mark = new QLabel;
  mark->setPixmap(QIcon(QStringLiteral(":/icons/kvscope-256.png")).pixmap(80, 80));
  return mark;
}

QWidget* iconArt(const QString& icon) {
  auto* art = new QLabel;
  art->setPixmap(themeIcon(icon, themeColors().accent).pixmap(40, 40));
  art->setFixedSize(72, 72);
  art->setAlignment(Qt::AlignCenter);
  art->setStyleSheet(
      QStringLiteral("background: %1; border-radius: 36px;").arg(themeColors().accentSoft.name()));
  return art;
}

QString sourceName(ModelSource source) {
  switch (source) {
    case ModelSource::kHuggingFace:
      return QObject::tr("Hugging Face cache");
    case ModelSource::kLmStudio:
      return QObject::tr("LM Studio");
    case ModelSource::kGpt4All:
      return QObject::tr("GPT4All");
    case ModelSource::kModelsFolder:
      return QObject::tr("models folder");
    case ModelSource::kUserFolder:
      return QObject::tr("your folder");
    case ModelSource::kRecent:
      return QObject::tr("recent");
  }
  return {};
}

QString entryDetails(const ModelEntry& entry) {
  QStringList parts;
  if (entry.sizeBytes > 0) parts << formatBytes(entry.sizeBytes);
  parts << (entry.isFolder ? QObject::tr("safetensors") : QStringLiteral("GGUF"));
  if (!entry.quantization.isEmpty()) parts << entry.quantization;
  if (!entry.architecture.isEmpty()) parts << entry.architecture;
  parts << sourceName(entry.source);
  return parts.join(QStringLiteral(" · "));
}

// The banner: an icon, the message with `actions` (hidden unless an error
// offers them) beneath it, and a dismiss button.
QFrame* errorBanner(QLabel* text, QWidget* actions, QToolButton* dismiss) {
  auto* banner = new QFrame;
  banner->setObjectName(QStringLiteral("errorBanner"));
  auto* icon = new QLabel(banner);
  icon->setPixmap(themeIcon(QStringLiteral("warning"), themeColors().error).pixmap(18, 18));
  text->setParent(banner);
  text->setObjectName(QStringLiteral("errorBannerText"));
  text->setWordWrap(true);
  text->setTextInteractionFlags(Qt::TextSelectableByMouse);
  dismiss->setParent(banner);
  dismiss->setObjectName(QStringLiteral("dismissErrorButton"));
  dismiss->setProperty("role", "action");
  dismiss->setIcon(themeIcon(QStringLiteral("close"), themeColors().muted));
  dismiss->setToolTip(QObject::tr("Dismiss"));
  auto* body = new QVBoxLayout;
  body->setSpacing(8);
  body->addWidget(text);
  body->addWidget(actions);
  auto* row = new QHBoxLayout(banner);
  row->setContentsMargins(12, 8, 8, 8);
  row->setSpacing(10);
  row->addWidget(icon, 0, Qt::AlignTop);
  row->addLayout(body, 1);
  row->addWidget(dismiss, 0, Qt::AlignTop);
  return banner;
}

}  // namespace

ChatView::ChatView(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("chatView"));
  m_errorText = new QLabel;
  // What a conversation too long for the context offers (offerOverflowActions).
  m_overflowActions = new QWidget;
  auto* newChat = new QPushButton(tr("New Chat"), m_overflowActions);
  newChat->setObjectName(QStringLiteral("overflowNewChatButton"));
  newChat->setProperty("role", "secondary");
  newChat->setToolTip(tr("Start an empty chat, with the unanswered message in the composer"));
  auto* leaveOut = new QPushButton(tr("Leave Out Oldest Turns"), m_overflowActions);
  leaveOut->setObjectName(QStringLiteral("overflowLeaveOutButton"));
  leaveOut->setProperty("role", "primary");
  leaveOut->setToolTip(tr("Answer again, leaving out the oldest turns after the first exchange "
                          "whenever the context is full (System prompt & sampling › When the "
                          "context is full)"));
  auto* actionRow = new QHBoxLayout(m_overflowActions);
  actionRow->setContentsMargins(0, 0, 0, 0);
  actionRow->addWidget(leaveOut);
  actionRow->addWidget(newChat);
  actionRow->addStretch(1);
  m_overflowActions->hide();
  connect(newChat, &QPushButton::clicked, this, [this] {
    clearError();
    emit newChatRequested();
  });
  connect(leaveOut, &QPushButton::clicked, this, [this] {
    clearError();
    emit leaveOutOldestTurnsRequested();
  });
  auto* dismiss = new QToolButton;
  m_errorBanner = errorBanner(m_errorText, m_overflowActions, dismiss);
  m_errorBanner->hide();
  connect(dismiss, &QToolButton::clicked, this, &ChatView::clearError);

  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(0, 12, 0, 0);
  column->setSpacing(8);
  column->addWidget(m_errorBanner);
  m_pages = new QStackedLayout;
  column->addLayout(m_pages, 1);

  m_noModelPage = buildNoModelPage();
  m_startPage = buildStartPage();
  m_transcriptPage = buildTranscriptPage();
  m_pages->addWidget(m_noModelPage);
  m_pages->addWidget(m_startPage);
  m_pages->addWidget(m_transcriptPage);
  updatePage();
}

QWidget* ChatView::buildNoModelPage() {
  auto* empty = new EmptyState(
      appMark(), tr("No model loaded"),
      tr("Open a GGUF file or a Hugging Face model folder to start chatting. The model runs "
         "locally, on the CPU or on a GPU through Vulkan, and the inspector on the right "
         "shows its KV cache as it fills."));
  empty->setObjectName(QStringLiteral("chatEmptyState"));
  empty->setMaximumTextWidth(480);

  auto* openFile = new QPushButton(tr("Open GGUF File…"));
  openFile->setObjectName(QStringLiteral("openModelFileButton"));
  openFile->setProperty("role", "primary");
  openFile->setIcon(themeIcon(QStringLiteral("file"), Qt::white));
  auto* openFolder = new QPushButton(tr("Open Model Folder…"));
  openFolder->setObjectName(QStringLiteral("openModelFolderButton"));
  openFolder->setProperty("role", "secondary");
  openFolder->setIcon(themeIcon(QStringLiteral("folder")));
  auto* browse = new QPushButton(tr("Browse Models…"));
  browse->setObjectName(QStringLiteral("browseModelsButton"));
  browse->setProperty("role", "secondary");
  browse->setIcon(themeIcon(QStringLiteral("model")));
  empty->addButton(openFile);
  empty->addButton(openFolder);
  empty->addButton(browse);
  connect(openFile, &QPushButton::clicked, this, &ChatView::openModelFileRequested);
  connect(openFolder, &QPushButton::clicked, this, &ChatView::openModelFolderRequested);
  connect(browse, &QPushButton::clicked, this, &ChatView::browseModelsRequested);

  auto* load = new QWidget;
  m_loadText = new QLabel(load);
  m_loadText->setObjectName(QStringLiteral("loadStatusText"));
  m_loadText->setProperty("role", "muted");
  m_loadText->setAlignment(Qt::AlignHCenter);
  m_loadText->setWordWrap(true);
  m_loadBar = new QProgressBar(load);
  m_loadBar->setRange(0, 0);
  m_loadBar->setTextVisible(false);
  m_loadBar->setMaximumWidth(260);
  auto* loadColumn = new QVBoxLayout(load);
  loadColumn->setContentsMargins(0, 0, 0, 0);
  loadColumn->addWidget(m_loadText);
  loadColumn->addWidget(m_loadBar, 0, Qt::AlignHCenter);
  load->setMaximumWidth(480);
  m_loadText->hide();
  m_loadBar->hide();
  empty->addWidget(load);

  m_discoveredCard = new QFrame;
  m_discoveredCard->setObjectName(QStringLiteral("discoveredModels"));
  m_discoveredCard->setProperty("role", "card");
  m_discoveredCard->setMaximumWidth(520);
  auto* cardColumn = new QVBoxLayout(m_discoveredCard);
  cardColumn->setContentsMargins(14, 12, 14, 12);
  cardColumn->setSpacing(8);
  auto* heading = new QLabel(tr("FOUND ON THIS COMPUTER"), m_discoveredCard);
  heading->setProperty("role", "section");
  cardColumn->addWidget(heading);
  m_discoveredRows = new QVBoxLayout;
  m_discoveredRows->setSpacing(6);
  cardColumn->addLayout(m_discoveredRows);
  m_discoveredCard->hide();
  empty->addWidget(m_discoveredCard);

  auto* download = new QLabel(
      tr("Need a model? Download a <b>.gguf</b> file from "
         "<a href=\"https://huggingface.co/models?library=gguf\">Hugging Face</a> "
         "(search “GGUF”). Small chat models such as Qwen2.5 0.5B Instruct (Q8_0, 0.5 GB) or "
         "Llama 3.2 1B Instruct (Q4_K_M, 0.8 GB) are a good first download; kvscope also finds "
         "the models LM Studio and GPT4All downloaded."));
  download->setObjectName(QStringLiteral("downloadHint"));
  download->setProperty("role", "muted");
  download->setWordWrap(true);
  download->setAlignment(Qt::AlignHCenter);
  download->setOpenExternalLinks(true);
  download->setMaximumWidth(480);
  empty->addWidget(download);
  empty->setFootnote(tr("Open a model at any time with %1")
                         .arg(QKeySequence(QKeySequence::Open).toString(QKeySequence::NativeText)));
  return empty;
}

QWidget* ChatView::buildStartPage() {
  m_startState = new EmptyState(
      iconArt(QStringLiteral("chat")), QString(),
      tr("Ask anything. Replies stream in here, with their speed under each one; the "
         "inspector on the right shows the KV cache filling as the model reads and writes."));
  m_startState->setObjectName(QStringLiteral("chatStartState"));
  m_startState->setMaximumTextWidth(440);
  return m_startState;
}

QWidget* ChatView::buildTranscriptPage() {
  m_scroll = new QScrollArea;
  m_scroll->setObjectName(QStringLiteral("transcript"));
  m_scroll->setWidgetResizable(true);
  m_scroll->setFrameShape(QFrame::NoFrame);
  m_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* content = new QWidget;
  content->setObjectName(QStringLiteral("transcriptContent"));
  m_column = new QVBoxLayout(content);
  m_column->setContentsMargins(4, 8, 12, 16);
  m_column->setSpacing(14);
  m_column->addStretch(1);
  m_scroll->setWidget(content);

  QScrollBar* bar = m_scroll->verticalScrollBar();
  connect(bar, &QScrollBar::valueChanged, this,
          [this, bar](int value) { m_following = value >= bar->maximum() - 24; });
  connect(bar, &QScrollBar::rangeChanged, this, [this] { scrollToEndIfFollowing(); });
  return m_scroll;
}

void ChatView::setModel(const QString& modelName) {
  m_hasModel = true;
  m_startState->setTitle(tr("Chat with %1").arg(modelName));
  setLoadStatus(QString(), false);
  updatePage();
}

void ChatView::clearModel() {
  m_hasModel = false;
  updatePage();
}

void ChatView::setLoadStatus(const QString& text, bool busy) {
  m_loadText->setText(text);
  m_loadText->setVisible(!text.isEmpty());
  m_loadBar->setVisible(busy);
}

void ChatView::setDiscoveredModels(const QList<ModelEntry>& models) {
  while (QLayoutItem* item = m_discoveredRows->takeAt(0)) {
    delete item->widget();
    delete item;
  }
  const int shown = qMin(static_cast<int>(models.size()), kMaxDiscoveredShown);
  for (int i = 0; i < shown; ++i) {
    const ModelEntry& entry = models.at(i);
    auto* row = new QWidget;
    row->setObjectName(QStringLiteral("discoveredModelRow"));
    auto* icon = new QLabel(row);
    icon->setPixmap(themeIcon(entry.isFolder ? QStringLiteral("folder") : QStringLiteral("model"),
                              themeColors().muted)
                        .pixmap(18, 18));
    auto* name = new QLabel(entry.name, row);
    name->setFont(scaledFont(1.0, true));
    auto* details = new QLabel(entryDetails(entry), row);
    details->setProperty("role", "caption");
    auto* text = new QVBoxLayout;
    text->setSpacing(1);
    text->addWidget(name);
    text->addWidget(details);
    auto* load = new QPushButton(tr("Load"), row);
    load->setProperty("role", "secondary");
    load->setToolTip(entry.path);
    connect(load, &QPushButton::clicked, this,
            [this, path = entry.path] { emit loadModelRequested(path); });
    auto* layout = new QHBoxLayout(row);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(10);
    layout->addWidget(icon);
    layout->addLayout(text, 1);
    layout->addWidget(load);
    m_discoveredRows->addWidget(row);
  }
  if (models.size() > shown) {
    auto* more = new QPushButton(tr("Show all %1 models…").arg(models.size()));
    more->setFlat(true);
    more->setCursor(Qt::PointingHandCursor);
    more->setStyleSheet(QStringLiteral("color: %1; text-align: left; border: none;")
                            .arg(themeColors().accent.name()));
    connect(more, &QPushButton::clicked, this, &ChatView::browseModelsRequested);
    m_discoveredRows->addWidget(more);
  }
  m_discoveredCard->setVisible(!models.isEmpty());
}

MessageWidget* ChatView::createMessage(int index, const ChatMessage& message) {
  auto* widget = new MessageWidget(index, message);
  connect(widget, &MessageWidget::editSubmitted, this, &ChatView::editRequested);
  connect(widget, &MessageWidget::regenerateRequested, this, &ChatView::regenerateRequested);
  return widget;
}

void ChatView::setMessages(const QList<ChatMessage>& messages) {
  qDeleteAll(m_messages);
  m_messages.clear();
  for (int i = 0; i < messages.size(); ++i) {
    MessageWidget* widget = createMessage(i, messages.at(i));
    m_column->insertWidget(m_column->count() - 1, widget);
    m_messages.append(widget);
  }
  m_following = true;
  updateAffordances();
  updatePage();
}

void ChatView::addMessage(int index, const ChatMessage& message) {
  // The controller appends only; its indices match ours.
  Q_ASSERT(index == m_messages.size());
  MessageWidget* widget = createMessage(index, message);
  m_column->insertWidget(m_column->count() - 1, widget);
  m_messages.append(widget);
  if (!widget->isUser() && m_generating) widget->setStreaming(true);
  m_following = true;
  updateAffordances();
  updatePage();
}

void ChatView::setLeftOut(const QList<int>& indices) {
  for (MessageWidget* m : m_messages) m->setLeftOut(indices.contains(m->index()));
}

MessageWidget* ChatView::message(int index) const {
  return index >= 0 && index < m_messages.size() ? m_messages.at(index) : nullptr;
}

void ChatView::appendReplyText(int index, const QString& piece) {
  if (MessageWidget* widget = message(index)) widget->appendText(piece);
}

void ChatView::finishReply(int index, const ReplyStats& stats) {
  if (MessageWidget* widget = message(index)) {
    widget->setStreaming(false);
    widget->setStats(stats);
  }
}

void ChatView::failReply(int index, const QString& message) {
  if (MessageWidget* widget = this->message(index)) {
    widget->setStreaming(false);
    widget->setError(message);
  }
  showError(message);
}

void ChatView::setPromptProgress(quint32 done, quint32 total) {
  if (!m_messages.isEmpty()) m_messages.last()->setPromptProgress(done, total);
}

void ChatView::setGenerating(bool generating) {
  m_generating = generating;
  if (generating && !m_messages.isEmpty() && !m_messages.last()->isUser())
    m_messages.last()->setStreaming(true);
  if (!generating) {
    for (MessageWidget* widget : m_messages) widget->setStreaming(false);
  }
  updateAffordances();
}

void ChatView::showError(const QString& message) {
  m_errorText->setText(message);
  m_errorBanner->setVisible(!message.isEmpty());
  m_overflowActions->hide();
}

void ChatView::offerOverflowActions() {
  if (!m_errorBanner->isHidden()) m_overflowActions->show();
}

void ChatView::withdrawOverflowActions() {
  if (!m_overflowActions->isHidden()) clearError();
}

void ChatView::clearError() {
  showError(QString());
}

QString ChatView::errorText() const {
  return m_errorBanner->isHidden() ? QString() : m_errorText->text();
}

void ChatView::updatePage() {
  if (!m_hasModel && m_messages.isEmpty())
    m_pages->setCurrentWidget(m_noModelPage);
  else if (m_messages.isEmpty())
    m_pages->setCurrentWidget(m_startPage);
  else
    m_pages->setCurrentWidget(m_transcriptPage);
}

void ChatView::updateAffordances() {
  // Regenerate belongs to the last reply only; edits and regenerate wait for the engine.
  const int last = static_cast<int>(m_messages.size()) - 1;
  for (MessageWidget* widget : m_messages) {
    widget->setActionsEnabled(!m_generating && m_hasModel);
    widget->setCanRegenerate(widget->index() == last && !widget->isUser());
  }
}

void ChatView::scrollToEndIfFollowing() {
  if (m_following)
    m_scroll->verticalScrollBar()->setValue(m_scroll->verticalScrollBar()->maximum());
}

}  // namespace kvscope::ui
