#pragma once
// ConversationList: the left sidebar. "New chat" on top, then the saved conversations,
// newest first, the current one highlighted. Click opens one; double-click or F2 renames
// it in place; the context menu (and Delete) removes it after a confirmation. It shows
// what it is given and reports what the user asked for; the store and the controller
// do the work.

#include <QList>
#include <QWidget>

#include "ui/engine_types.h"

class QLabel;
class QListWidget;
class QListWidgetItem;
class QPushButton;

namespace kvscope::ui {

class ConversationList : public QWidget {
  Q_OBJECT

 public:
  explicit ConversationList(QWidget* parent = nullptr);

  // Only id, title and updated are read.
  void setConversations(const QList<Conversation>& conversations);
  void setCurrent(const QString& id);
  void setNewChatEnabled(bool enabled);
  // Asks before deleting; tests turn it off.
  void setConfirmDeletes(bool confirm) { m_confirmDeletes = confirm; }

  int count() const;
  QString idAt(int row) const;
  QString titleAt(int row) const;
  // Starts the in-place editor of `row`'s title.
  void renameAt(int row);
  void deleteAt(int row);

 signals:
  void newChatRequested();
  void openRequested(const QString& id);
  void renameRequested(const QString& id, const QString& title);
  void deleteRequested(const QString& id);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void showMenu(const QPoint& position);
  void itemEdited(QListWidgetItem* item);

  QPushButton* m_newChat;
  QListWidget* m_list;
  QLabel* m_placeholder;
  QString m_current;
  bool m_filling = false;  // itemChanged during setConversations is not a rename
  bool m_confirmDeletes = true;
};

// "Today", "Yesterday", "Mon", "12 Mar": when a conversation was last used.
QString relativeDay(const QDateTime& time, const QDateTime& now);

}  // namespace kvscope::ui
