#pragma once
// MessageWidget: one message of the transcript.
//   - user: a tinted bubble on the right with the text as typed; on hover an Edit button
//     turns it into an inline editor whose Send emits editSubmitted(index, text).
//   - assistant: a full-width block with the reply rendered as markdown, a line of stats
//     under it (tokens, tokens/s, why it stopped), Copy and, on the last reply,
//     Regenerate. While the reply streams, appendText() adds to it and the markdown is
//     re-rendered at most every kRenderInterval, so a fast stream costs a handful of
//     layouts a second, not one per token; prompt progress shows until the first text.
//     A reply's reasoning (think tags: Qwen3, QwQ, DeepSeek-R1) shows apart, collapsed
//     above the answer behind a "Reasoning" toggle ("Thinking…" while it streams); the
//     answer alone is rendered and copied.

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
  // The reasoning split from the reply as rendered (empty: none), and whether its
  // block is shown expanded.
  QString reasoningText() const;
  bool reasoningExpanded() const;
  void setReasoningExpanded(bool expanded);

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
  QToolButton* m_reasoningToggle = nullptr;
  QLabel* m_reasoning = nullptr;
  QString m_answer;  // the reply without its reasoning, as last rendered
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

// A reply split into its reasoning and its answer (think tags; a reply whose
// "</think>" comes before any "<think>" started inside the block, as DeepSeek-R1's
// prompt opens it); `open`: the block has not closed yet.
struct ReplyParts {
  QString reasoning, answer;
  bool open = false;
};
ReplyParts splitReply(const QString& text);

// One line of reply statistics: "128 tokens · 42.3 tok/s · prompt 312 tok/s · stopped".
QString replyStatsText(const ReplyStats& stats);

}  // namespace kvscope::ui
