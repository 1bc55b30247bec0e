#pragma once
// ChatView: the conversation area of the main window, in three states:
//   - no model: how to get one — open a GGUF file or a Hugging Face folder, pick one of
//     the models found on this computer, or where to download one;
//   - a model and an empty conversation: a short prompt to start;
//   - the transcript: one MessageWidget per message, streamed replies growing in place,
//     with an error banner above it for engine errors (the conversation stays).
// It renders what it is told (by MainWindow, from ChatController) and reports what the
// user asked for through signals; it owns no conversation state of its own.

#include <QList>
#include <QWidget>

#include "ui/engine_types.h"

class QLabel;
class QProgressBar;
class QScrollArea;
class QStackedLayout;
class QVBoxLayout;

namespace kvscope::ui {

class EmptyState;
class MessageWidget;

class ChatView : public QWidget {
  Q_OBJECT

 public:
  explicit ChatView(QWidget* parent = nullptr);

  // No model / model loaded (name shown in the start state).
  void setModel(const QString& modelName);
  void clearModel();
  // Loading progress on the no-model page; an empty text hides it.
  void setLoadStatus(const QString& text, bool busy);
  // Models found on disk, listed on the no-model page with a Load button each.
  void setDiscoveredModels(const QList<ModelEntry>& models);

  // Re-renders every message (new chat, opened conversation, edit, regenerate).
  void setMessages(const QList<ChatMessage>& messages);
  void addMessage(int index, const ChatMessage& message);
  void appendReplyText(int index, const QString& piece);
  void finishReply(int index, const ReplyStats& stats);
  void failReply(int index, const QString& message);
  void setPromptProgress(quint32 done, quint32 total);
  // Greys the messages at `indices` (left out of the model's context), ungreys the rest.
  void setLeftOut(const QList<int>& indices);
  void setGenerating(bool generating);

  // An error in the banner above the chat; a new one replaces it and its actions.
  void showError(const QString& message);
  // Adds to the error shown the actions for a conversation too long for the
  // context: newChatRequested() and leaveOutOldestTurnsRequested().
  void offerOverflowActions();
  // Clears the error when it is the one offering those actions.
  void withdrawOverflowActions();
  void clearError();
  QString errorText() const;

  int messageCount() const { return static_cast<int>(m_messages.size()); }
  MessageWidget* message(int index) const;

 signals:
  void openModelFileRequested();
  void openModelFolderRequested();
  void browseModelsRequested();
  void loadModelRequested(const QString& path);
  void editRequested(int index, const QString& text);
  void regenerateRequested();
  void newChatRequested();
  void leaveOutOldestTurnsRequested();

 private:
  QWidget* buildNoModelPage();
  QWidget* buildStartPage();
  QWidget* buildTranscriptPage();
  MessageWidget* createMessage(int index, const ChatMessage& message);
  void updatePage();
  void updateAffordances();
  void scrollToEndIfFollowing();

  QStackedLayout* m_pages;
  QWidget* m_noModelPage = nullptr;
  QWidget* m_startPage = nullptr;
  QWidget* m_transcriptPage = nullptr;
  EmptyState* m_startState = nullptr;
  QLabel* m_startTitle = nullptr;
  QWidget* m_discoveredCard = nullptr;
  QVBoxLayout* m_discoveredRows = nullptr;
  QLabel* m_loadText = nullptr;
  QProgressBar* m_loadBar = nullptr;
  QWidget* m_errorBanner = nullptr;
  QLabel* m_errorText = nullptr;
  QWidget* m_overflowActions = nullptr;  // in the banner: New Chat, Leave Out Oldest Turns
  QScrollArea* m_scroll = nullptr;
  QVBoxLayout* m_column = nullptr;
  QList<MessageWidget*> m_messages;
  bool m_hasModel = false;
  bool m_generating = false;
  bool m_following = true;  // the view sticks to the end while the user has not scrolled up
};

}  // namespace kvscope::ui
