#include "ui/conversation_list.h"

#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

namespace kvscope::ui {

ConversationList::ConversationList(QWidget* parent)
    : QWidget(parent), m_newChat(new QPushButton(tr("New Chat"), this)) {
  setObjectName(QStringLiteral("sidebar"));
  setAttribute(Qt::WA_StyledBackground);  // lets the style sheet paint the background
  setMinimumWidth(180);

  m_newChat->setObjectName(QStringLiteral("newChatButton"));
  m_newChat->setProperty("role", "secondary");
  m_newChat->setEnabled(false);

  auto* heading = new QLabel(tr("CHATS"), this);
  heading->setProperty("role", "section");
  QFont headingFont = heading->font();
  headingFont.setLetterSpacing(QFont::AbsoluteSpacing, 0.8);
  headingFont.setPointSizeF(headingFont.pointSizeF() * 0.85);
  heading->setFont(headingFont);

  auto* placeholder = new QLabel(tr("Your conversations will be listed here."), this);
  placeholder->setObjectName(QStringLiteral("conversationPlaceholder"));
  placeholder->setProperty("role", "muted");
  placeholder->setWordWrap(true);

  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(14, 14, 14, 14);
  column->setSpacing(10);
  column->addWidget(m_newChat);
  column->addSpacing(8);
  column->addWidget(heading);
  column->addWidget(placeholder);
  column->addStretch();
}

}  // namespace kvscope::ui
