#include "ui/message_widget.h"

#include <QGraphicsOpacityEffect>

#include <QApplication>
#include <QClipboard>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLocale>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QStackedWidget>
#include <QTextDocument>
#include <QToolButton>
#include <QVBoxLayout>
#include <functional>

#include "tokenizer/reasoning.h"
#include "ui/markdown_view.h"
#include "ui/theme.h"

namespace kvscope::ui {
namespace {

constexpr int kBubbleMaxWidth = 560;

QString stopText(StopReason stop) {
  switch (stop) {
    case StopReason::kMaxTokens:
      return QObject::tr("length limit");
    case StopReason::kStopRequested:
      return QObject::tr("stopped");
    case StopReason::kContextFull:
      return QObject::tr("context full");
    case StopReason::kError:
      return QObject::tr("failed");
    case StopReason::kNone:
    case StopReason::kEndOfGeneration:
      break;
  }
  return {};
}

// Shift+Enter adds a line, Enter submits, Escape cancels: the composer's keys.
class EditorKeys : public QObject {
 public:
  EditorKeys(std::function<void()> submit, std::function<void()> cancel, QObject* parent)
      : QObject(parent), m_submit(std::move(submit)), m_cancel(std::move(cancel)) {}

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override {
    if (event->type() == QEvent::KeyPress) {
      auto* key = static_cast<QKeyEvent*>(event);
      const bool enter = key->key() == Qt::Key_Return || key->key() == Qt::Key_Enter;
      if (enter && !(key->modifiers() & Qt::ShiftModifier)) {
        m_submit();
        return true;
      }
      if (key->key() == Qt::Key_Escape) {
        m_cancel();
        return true;
      }
    }
    return QObject::eventFilter(watched, event);
  }

 private:
  std::function<void()> m_submit;
  std::function<void()> m_cancel;
};

}  // namespace

QString replyStatsText(const ReplyStats& stats) {
  QStringList parts;
  const QLocale locale;
  parts << (stats.generatedTokens == 1
                ? QObject::tr("1 token")
                : QObject::tr("%1 tokens").arg(locale.toString(stats.generatedTokens)));
  if (stats.decodeTokensPerSecond > 0)
    parts << QObject::tr("%1 tok/s").arg(locale.toString(stats.decodeTokensPerSecond, 'f', 1));
  const quint32 prompted = stats.promptTokens - qMin(stats.reusedTokens, stats.promptTokens);
  if (prompted > 0 && stats.prefillTokensPerSecond > 0) {
    parts << QObject::tr("prompt %1 tokens at %2 tok/s")
                 .arg(prompted)
                 .arg(locale.toString(stats.prefillTokensPerSecond, 'f', 0));
  }
  if (stats.contextShifts > 0) {
    parts << (stats.contextShifts == 1
                  ? QObject::tr("context shifted once, %1 oldest tokens dropped")
                        .arg(locale.toString(stats.shiftedTokens))
                  : QObject::tr("context shifted %1 times, %2 oldest tokens dropped")
                        .arg(stats.contextShifts)
                        .arg(locale.toString(stats.shiftedTokens)));
  }
  const QString stop = stopText(stats.stop);
  if (!stop.isEmpty()) parts << stop;
  return parts.join(QStringLiteral("  ·  "));
}

MessageWidget::MessageWidget(int index, const ChatMessage& message, QWidget* parent)
    : QWidget(parent),
      m_index(index),
      m_user(message.role == QStringLiteral("user")),
      m_text(message.text) {
  m_renderTimer.setSingleShot(true);
  connect(&m_renderTimer, &QTimer::timeout, this, &MessageWidget::flush);
  if (m_user) {
    buildUser();
  } else {
    buildAssistant();
    render();
    if (message.stats.valid()) setStats(message.stats);
    if (!message.error.isEmpty()) setError(message.error);
  }
  updateActions();
  if (message.leftOut) setLeftOut(true);
}

void MessageWidget::setLeftOut(bool leftOut) {
  if (leftOut == m_leftOut) return;
  m_leftOut = leftOut;
  if (!leftOut) {
    setGraphicsEffect(nullptr);
    setToolTip({});
    return;
  }
  auto* fade = new QGraphicsOpacityEffect(this);
  fade->setOpacity(0.4);
  setGraphicsEffect(fade);
  setToolTip(
      tr("Left out of the model's context: the conversation outgrew it, and the "
         "context overflow setting drops older messages"));
}

QToolButton* MessageWidget::actionButton(const QString& icon, const QString& toolTip,
                                         const char* name) {
  auto* button = new QToolButton(this);
  button->setObjectName(QString::fromLatin1(name));
  button->setProperty("role", "action");
  button->setIcon(themeIcon(icon, themeColors().muted));
  button->setIconSize({16, 16});
  button->setToolTip(toolTip);
  button->setCursor(Qt::PointingHandCursor);
  button->setAutoRaise(true);
  return button;
}

void MessageWidget::buildUser() {
  setObjectName(QStringLiteral("userMessage"));
  auto* bubble = new QFrame(this);
  bubble->setObjectName(QStringLiteral("userBubble"));
  bubble->setMaximumWidth(kBubbleMaxWidth);
  m_userText = new QLabel(m_text, bubble);
  m_userText->setObjectName(QStringLiteral("userText"));
  m_userText->setTextFormat(Qt::PlainText);
  m_userText->setWordWrap(true);
  m_userText->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // A word-wrapped label asks for little width; give short messages their natural width.
  int textWidth = 0;
  for (const QString& line : m_text.split(QLatin1Char('\n')))
    textWidth = qMax(textWidth, m_userText->fontMetrics().horizontalAdvance(line));
  m_userText->setMinimumWidth(qMin(textWidth + 2, kBubbleMaxWidth - 28));
  auto* bubbleLayout = new QVBoxLayout(bubble);
  bubbleLayout->setContentsMargins(14, 9, 14, 9);
  bubbleLayout->addWidget(m_userText);

  m_edit = actionButton(QStringLiteral("edit"), tr("Edit and resend"), "editButton");
  connect(m_edit, &QToolButton::clicked, this, &MessageWidget::startEditing);

  auto* viewPage = new QWidget(this);
  auto* viewRow = new QHBoxLayout(viewPage);
  viewRow->setContentsMargins(0, 0, 0, 0);
  viewRow->setSpacing(6);
  viewRow->addStretch(1);
  viewRow->addWidget(m_edit, 0, Qt::AlignVCenter);
  viewRow->addWidget(bubble);

  auto* editPage = new QWidget(this);
  m_editor = new QPlainTextEdit(editPage);
  m_editor->setObjectName(QStringLiteral("messageEditor"));
  m_editor->setTabChangesFocus(true);
  m_editor->setFixedHeight(m_editor->fontMetrics().lineSpacing() * 4 + 16);
  m_editor->installEventFilter(
      new EditorKeys([this] { submitEdit(); }, [this] { cancelEdit(); }, m_editor));
  auto* cancel = new QPushButton(tr("Cancel"), editPage);
  cancel->setObjectName(QStringLiteral("cancelEditButton"));
  cancel->setProperty("role", "secondary");
  auto* resend = new QPushButton(tr("Send"), editPage);
  resend->setObjectName(QStringLiteral("submitEditButton"));
  resend->setProperty("role", "primary");
  connect(cancel, &QPushButton::clicked, this, &MessageWidget::cancelEdit);
  connect(resend, &QPushButton::clicked, this, &MessageWidget::submitEdit);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(new QLabel(tr("Later messages are replaced by the new reply."), editPage));
  buttons->itemAt(0)->widget()->setProperty("role", "caption");
  buttons->addStretch(1);
  buttons->addWidget(cancel);
  buttons->addWidget(resend);
  auto* editColumn = new QVBoxLayout(editPage);
  editColumn->setContentsMargins(0, 0, 0, 0);
  editColumn->setSpacing(6);
  editColumn->addWidget(m_editor);
  editColumn->addLayout(buttons);

  m_userPages = new QStackedWidget(this);
  m_userPages->addWidget(viewPage);
  m_userPages->addWidget(editPage);
  connect(m_userPages, &QStackedWidget::currentChanged, this, [this](int page) {
    // The stack is as tall as its tallest page unless told otherwise.
    for (int i = 0; i < m_userPages->count(); ++i) {
      m_userPages->widget(i)->setSizePolicy(
          QSizePolicy::Preferred, i == page ? QSizePolicy::Preferred : QSizePolicy::Ignored);
    }
    m_userPages->adjustSize();
  });
  emit m_userPages->currentChanged(0);

  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(0, 4, 0, 4);
  column->addWidget(m_userPages);
}

void MessageWidget::buildAssistant() {
  setObjectName(QStringLiteral("assistantMessage"));
  auto* avatar = new QLabel(this);
  avatar->setPixmap(themeIcon(QStringLiteral("model"), themeColors().accent).pixmap(18, 18));
  avatar->setFixedSize(28, 28);
  avatar->setAlignment(Qt::AlignCenter);
  avatar->setStyleSheet(
      QStringLiteral("background: %1; border-radius: 14px;").arg(themeColors().accentSoft.name()));

  m_reasoningToggle = new QToolButton(this);
  m_reasoningToggle->setObjectName(QStringLiteral("reasoningToggle"));
  m_reasoningToggle->setCheckable(true);
  m_reasoningToggle->setAutoRaise(true);
  m_reasoningToggle->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  m_reasoningToggle->setArrowType(Qt::RightArrow);
  m_reasoningToggle->setToolTip(tr("Show or hide what the model wrote before its answer"));
  m_reasoningToggle->hide();
  m_reasoning = new QLabel(this);
  m_reasoning->setObjectName(QStringLiteral("reasoningText"));
  m_reasoning->setWordWrap(true);
  m_reasoning->setTextFormat(Qt::PlainText);
  m_reasoning->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_reasoning->setContentsMargins(2, 0, 0, 0);
  m_reasoning->setStyleSheet(QStringLiteral("QLabel { color: %1; border-left: 2px solid %2; "
                                            "padding-left: 10px; }")
                                 .arg(themeColors().muted.name(), themeColors().border.name()));
  m_reasoning->hide();
  connect(m_reasoningToggle, &QToolButton::toggled, this,
          [this](bool on) { setReasoningExpanded(on); });

  m_markdown = new MarkdownView(this);

  m_progressRow = new QWidget(this);
  m_progressText = new QLabel(m_progressRow);
  m_progressText->setProperty("role", "muted");
  m_progress = new QProgressBar(m_progressRow);
  m_progress->setObjectName(QStringLiteral("promptProgress"));
  m_progress->setTextVisible(false);
  m_progress->setMaximumWidth(220);
  auto* progressLayout = new QHBoxLayout(m_progressRow);
  progressLayout->setContentsMargins(0, 4, 0, 4);
  progressLayout->setSpacing(10);
  progressLayout->addWidget(m_progressText);
  progressLayout->addWidget(m_progress, 1);
  progressLayout->addStretch(1);
  m_progressRow->hide();

  m_error = new QLabel(this);
  m_error->setObjectName(QStringLiteral("replyError"));
  m_error->setWordWrap(true);
  m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_error->hide();

  m_stats = new QLabel(this);
  m_stats->setObjectName(QStringLiteral("replyStats"));
  m_stats->setProperty("role", "caption");
  m_copy = actionButton(QStringLiteral("copy"), tr("Copy reply"), "copyButton");
  m_regenerate =
      actionButton(QStringLiteral("regenerate"), tr("Regenerate reply"), "regenerateButton");
  connect(m_copy, &QToolButton::clicked, this,
          [this] { QApplication::clipboard()->setText(splitReply(m_text).answer); });
  connect(m_regenerate, &QToolButton::clicked, this, &MessageWidget::regenerateRequested);
  auto* footer = new QHBoxLayout;
  footer->setSpacing(2);
  footer->addWidget(m_stats);
  footer->addSpacing(8);
  footer->addWidget(m_copy);
  footer->addWidget(m_regenerate);
  footer->addStretch(1);

  auto* body = new QVBoxLayout;
  body->setSpacing(6);
  body->setContentsMargins(0, 4, 0, 0);
  body->addWidget(m_progressRow);
  body->addWidget(m_reasoningToggle, 0, Qt::AlignLeft);
  body->addWidget(m_reasoning);
  body->addWidget(m_markdown);
  body->addWidget(m_error);
  body->addLayout(footer);

  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(0, 6, 0, 6);
  row->setSpacing(12);
  row->addWidget(avatar, 0, Qt::AlignTop);
  row->addLayout(body, 1);
}

void MessageWidget::appendText(const QString& piece) {
  if (piece.isEmpty()) return;
  m_text += piece;
  if (m_user) {
    m_userText->setText(m_text);
    return;
  }
  m_dirty = true;
  m_progressRow->hide();
  if (!m_renderTimer.isActive()) m_renderTimer.start(kRenderInterval);
}

void MessageWidget::flush() {
  m_renderTimer.stop();
  if (m_dirty) render();
}

void MessageWidget::render() {
  m_dirty = false;
  if (!m_markdown) return;
  const ReplyParts parts = splitReply(m_text);
  const bool reasoned = !parts.reasoning.isEmpty() || parts.open;
  m_reasoningToggle->setVisible(reasoned);
  if (reasoned) {
    const qsizetype words =
        parts.reasoning.split(QRegularExpression(QStringLiteral("\\s+")), Qt::SkipEmptyParts)
            .size();
    m_reasoningToggle->setText(parts.open && m_streaming ? tr("Thinking… (%n words)", "", words)
                                                         : tr("Reasoning (%n words)", "", words));
    m_reasoning->setText(parts.reasoning);
  }
  if (parts.answer != m_answer || m_markdown->document()->isEmpty()) {
    m_answer = parts.answer;
    m_markdown->setMarkdownText(m_answer);
  }
}

QString MessageWidget::reasoningText() const {
  return m_reasoning && !m_reasoningToggle->isHidden() ? m_reasoning->text() : QString();
}

bool MessageWidget::reasoningExpanded() const {
  return m_reasoning && m_reasoning->isVisibleTo(this);
}

void MessageWidget::setReasoningExpanded(bool expanded) {
  if (!m_reasoning) return;
  m_reasoningToggle->setChecked(expanded);
  m_reasoningToggle->setArrowType(expanded ? Qt::DownArrow : Qt::RightArrow);
  m_reasoning->setVisible(expanded);
}

ReplyParts splitReply(const QString& text) {
  const std::string utf8 = text.toStdString();
  const size_t open = utf8.find("<think>"), close = utf8.find("</think>");
  const bool startsInside =
      close != std::string::npos && (open == std::string::npos || close < open);
  tokenizer::ReasoningSplitter splitter(tokenizer::ReasoningFormat::kThinkTags, startsInside);
  const tokenizer::ReasoningParts parts = splitter.push(utf8);
  const tokenizer::ReasoningParts rest = splitter.finish();
  ReplyParts out;
  out.reasoning = QString::fromStdString(parts.reasoning + rest.reasoning);
  out.answer = QString::fromStdString(parts.content + rest.content);
  out.open = tokenizer::promptOpensThinking(utf8);
  return out;
}

void MessageWidget::setStreaming(bool streaming) {
  m_streaming = streaming;
  if (!streaming) {
    flush();
    if (m_progressRow) m_progressRow->hide();
  } else if (m_stats) {
    m_stats->setText(tr("Generating…"));
  }
  updateActions();
}

void MessageWidget::setPromptProgress(quint32 done, quint32 total) {
  if (m_user || !m_text.isEmpty() || total == 0) return;
  m_progressText->setText(tr("Reading the prompt · %1 of %2 tokens").arg(done).arg(total));
  m_progress->setRange(0, static_cast<int>(total));
  m_progress->setValue(static_cast<int>(done));
  m_progressRow->setVisible(done < total);
}

void MessageWidget::setStats(const ReplyStats& stats) {
  if (m_stats) m_stats->setText(replyStatsText(stats));
}

void MessageWidget::setError(const QString& message) {
  // The reply ended: "Generating…" goes at once, whatever it was replaced by.
  if (!message.isEmpty() && m_stats) m_stats->setText(tr("Reply failed"));
  if (!m_error) return;
  m_error->setText(message.isEmpty() ? QString() : tr("⚠ %1").arg(message));
  m_error->setVisible(!message.isEmpty());
}

void MessageWidget::setActionsEnabled(bool enabled) {
  m_actionsEnabled = enabled;
  updateActions();
}

void MessageWidget::setCanRegenerate(bool can) {
  m_canRegenerate = can;
  updateActions();
}

void MessageWidget::startEditing() {
  if (!m_user || !m_actionsEnabled) return;
  m_editor->setPlainText(m_text);
  m_editor->moveCursor(QTextCursor::End);
  m_userPages->setCurrentIndex(1);
  m_editor->setFocus();
}

void MessageWidget::submitEdit() {
  const QString text = m_editor->toPlainText().trimmed();
  if (text.isEmpty() || !m_actionsEnabled) return;
  m_userPages->setCurrentIndex(0);
  emit editSubmitted(m_index, text);
}

void MessageWidget::cancelEdit() {
  m_userPages->setCurrentIndex(0);
}

void MessageWidget::enterEvent(QEnterEvent* event) {
  m_hovered = true;
  updateActions();
  QWidget::enterEvent(event);
}

void MessageWidget::leaveEvent(QEvent* event) {
  m_hovered = false;
  updateActions();
  QWidget::leaveEvent(event);
}

void MessageWidget::updateActions() {
  if (m_user) {
    // Hidden but still taking its space, so the bubble does not jump on hover.
    QSizePolicy policy = m_edit->sizePolicy();
    policy.setRetainSizeWhenHidden(true);
    m_edit->setSizePolicy(policy);
    m_edit->setVisible(m_hovered && m_actionsEnabled);
    return;
  }
  m_copy->setVisible(!m_streaming && !m_text.isEmpty());
  m_regenerate->setVisible(!m_streaming && m_canRegenerate && m_actionsEnabled);
}

}  // namespace kvscope::ui
