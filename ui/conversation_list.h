#pragma once
// ConversationList: the left sidebar that lists saved conversations and starts new ones.
// Conversations exist only once a model is loaded, so for now it explains that and keeps
// "New chat" disabled.

#include <QWidget>

class QPushButton;

namespace kvscope::ui {

class ConversationList : public QWidget {
  Q_OBJECT

 public:
  explicit ConversationList(QWidget* parent = nullptr);

 private:
  QPushButton* m_newChat;
};

}  // namespace kvscope::ui
