#pragma once
// MessageWidget: one message of the transcript.
//   - user: a tinted bubble on the right with the text as typed; on hover an Edit button
//     turns it into an inline editor whose Send emits editSubmitted(index, text).
//   - assistant: a full-width block with the reply rendered as markdown, a line of stats
//     under it (tokens, tokens/s, why it stopped), Copy and, on the last reply,
//     Regenerate. While the reply streams, appendText() adds to it and the markdown is
//     re-rendered at most every kRenderInterval, so a fast stream costs a handful of
//     layouts a second, not one per token; prompt progress shows until the first text.

#include <QTimer>
#include <QWidget>

#include "ui/engine_types.h"

class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QStackedWidget;
class QToolButton;

namespace kvscope::ui {

class MarkdownView;

class MessageWidget : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kRenderInterval = 50;  // ms between markdown renders while streaming

  MessageWidget(int index, const ChatMessage& message, QWidget* parent = nullptr);

  int index() const { return m_index; }
  bool isUser() const { return m_user; }
  // The raw text (markdown source for replies), including pieces not yet rendered.
  QString text() const { return m_text; }
  // The reply's rendered document; nullptr for user messages.
  MarkdownView* markdownView() const { return m_markdown; }

  // Streaming: appends to the reply; renders now or within kRenderInterval.
  void appendText(const QString& piece);
  // Renders pending text immediately (end of a reply; tests).
  void flush();
  void setStreaming(bool streaming);
  void setPromptProgress(quint32 done, quint32 total);
  void setStats(const ReplyStats& stats);
  void setError(const QString& message);
  // Edit and Regenerate are offered only while nothing is generating; Regenerate only on
  // the last reply.
  void setActionsEnabled(bool enabled);
  void setCanRegenerate(bool can);
  // Opens the inline editor of a user message (what the Edit button does).
  void startEditing();
  // Greyed, with a tooltip saying so, when the context overflow policy left the
  // message out of the model's prompt.
  void setLeftOut(bool leftOut);
  bool isLeftOut() const { return m_leftOut; }

 signals:
  void editSubmitted(int index, const QString& text);
  void regenerateRequested();

 protected:
  void enterEvent(QEnterEvent* event) override;
  void leaveEvent(QEvent* event) override;

 private:
  void buildUser();
  void buildAssistant();
  void render();
  void submitEdit();
  void cancelEdit();
  void updateActions();
  QToolButton* actionButton(const QString& icon, const QString& toolTip, const char* name);

  int m_index;
  bool m_user;
  QString m_text;
  bool m_streaming = false;
  bool m_actionsEnabled = true;
  bool m_canRegenerate = false;
  bool m_hovered = false;
  bool m_dirty = false;
  QTimer m_renderTimer;

  // User parts.
  QStackedWidget* m_userPages = nullptr;
  QLabel* m_userText = nullptr;
  QPlainTextEdit* m_editor = nullptr;
  QToolButton* m_edit = nullptr;

  // Assistant parts.
  MarkdownView* m_markdown = nullptr;
  QWidget* m_progressRow = nullptr;
  QLabel* m_progressText = nullptr;
  QProgressBar* m_progress = nullptr;
  QLabel* m_stats = nullptr;
  QLabel* m_error = nullptr;
  QToolButton* m_copy = nullptr;
  QToolButton* m_regenerate = nullptr;
  bool m_leftOut = false;
};

// One line of reply statistics: "128 tokens · 42.3 tok/s · prompt 312 tok/s · stopped".
QString replyStatsText(const ReplyStats& stats);

}  // namespace kvscope::ui
