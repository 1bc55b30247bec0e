#include "ui/conversation_list.h"

#include <QKeyEvent>
#include <QLabel>
#include <QListWidget>
#include <QLocale>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QVBoxLayout>

#include "ui/theme.h"

namespace kvscope::ui {
namespace {

constexpr int kIdRole = Qt::UserRole;
constexpr int kTitleRole = Qt::UserRole + 1;

}  // namespace

QString relativeDay(const QDateTime& time, const QDateTime& now) {
  const qint64 days = time.date().daysTo(now.date());
  if (days <= 0) return QObject::tr("Today");
  if (days == 1) return QObject::tr("Yesterday");
  if (days < 7) return QLocale().dayName(time.date().dayOfWeek(), QLocale::ShortFormat);
  return QLocale().toString(time.date(), QStringLiteral("d MMM"));
}

ConversationList::ConversationList(QWidget* parent)
    : QWidget(parent),
      m_newChat(new QPushButton(tr("New Chat"), this)),
      m_list(new QListWidget(this)),
      m_placeholder(new QLabel(tr("Your conversations will be listed here."), this)) {
  setObjectName(QStringLiteral("sidebar"));
  setAttribute(Qt::WA_StyledBackground);  // lets the style sheet paint the background
  setMinimumWidth(180);

  m_newChat->setObjectName(QStringLiteral("newChatButton"));
  m_newChat->setProperty("role", "secondary");
  m_newChat->setIcon(themeIcon(QStringLiteral("new-chat")));
  m_newChat->setEnabled(false);
  m_newChat->setToolTip(tr("Start a new conversation (Ctrl+N)"));

  auto* heading = new QLabel(tr("CHATS"), this);
  heading->setProperty("role", "section");

  m_list->setObjectName(QStringLiteral("conversationListView"));
  m_list->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
  m_list->setContextMenuPolicy(Qt::CustomContextMenu);
  m_list->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  m_list->setTextElideMode(Qt::ElideRight);
  m_list->setSpacing(1);
  m_list->installEventFilter(this);

  m_placeholder->setObjectName(QStringLiteral("conversationPlaceholder"));
  m_placeholder->setProperty("role", "muted");
  m_placeholder->setWordWrap(true);

  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(12, 14, 12, 14);
  column->setSpacing(10);
  column->addWidget(m_newChat);
  column->addSpacing(6);
  column->addWidget(heading);
  column->addWidget(m_placeholder);
  column->addWidget(m_list, 1);
  column->addStretch(0);  // takes the space only while the list is hidden
  m_list->hide();

  connect(m_newChat, &QPushButton::clicked, this, &ConversationList::newChatRequested);
  connect(m_list, &QListWidget::itemClicked, this, [this](QListWidgetItem* item) {
    const QString id = item->data(kIdRole).toString();
    if (id != m_current) emit openRequested(id);
  });
  connect(m_list, &QListWidget::itemChanged, this, &ConversationList::itemEdited);
  connect(m_list, &QListWidget::customContextMenuRequested, this, &ConversationList::showMenu);
}

void ConversationList::setConversations(const QList<Conversation>& conversations) {
  m_filling = true;
  m_list->clear();
  const QDateTime now = QDateTime::currentDateTime();
  for (const Conversation& conversation : conversations) {
    auto* item = new QListWidgetItem(conversation.title, m_list);
    item->setData(kIdRole, conversation.id);
    item->setData(kTitleRole, conversation.title);
    item->setFlags(item->flags() | Qt::ItemIsEditable);
    // Selection is tinted, not filled with the accent: the icon keeps a dark colour.
    item->setIcon(themeIcon(QStringLiteral("chat"), themeColors().muted, themeColors().accent));
    item->setToolTip(tr("%1 · %2 messages")
                         .arg(relativeDay(conversation.updated.toLocalTime(), now))
                         .arg(conversation.messages.size()));
  }
  m_filling = false;
  m_list->setVisible(!conversations.isEmpty());
  m_placeholder->setVisible(conversations.isEmpty());
  setCurrent(m_current);
}

void ConversationList::setCurrent(const QString& id) {
  m_current = id;
  m_list->clearSelection();
  for (int row = 0; row < m_list->count(); ++row) {
    if (m_list->item(row)->data(kIdRole).toString() == id) {
      m_list->setCurrentRow(row);
      break;
    }
  }
}

void ConversationList::setNewChatEnabled(bool enabled) {
  m_newChat->setEnabled(enabled);
}

int ConversationList::count() const {
  return m_list->count();
}

QString ConversationList::idAt(int row) const {
  QListWidgetItem* item = m_list->item(row);
  return item ? item->data(kIdRole).toString() : QString();
}

QString ConversationList::titleAt(int row) const {
  QListWidgetItem* item = m_list->item(row);
  return item ? item->text() : QString();
}

void ConversationList::renameAt(int row) {
  if (QListWidgetItem* item = m_list->item(row)) m_list->editItem(item);
}

void ConversationList::deleteAt(int row) {
  QListWidgetItem* item = m_list->item(row);
  if (!item) return;
  if (m_confirmDeletes) {
    QMessageBox ask(QMessageBox::Question, tr("Delete Conversation"),
                    tr("Delete “%1”? This cannot be undone.").arg(item->text()),
                    QMessageBox::Cancel, this);
    QAbstractButton* remove = ask.addButton(tr("Delete"), QMessageBox::DestructiveRole);
    ask.exec();
    if (ask.clickedButton() != remove) return;
  }
  emit deleteRequested(item->data(kIdRole).toString());
}

bool ConversationList::eventFilter(QObject* watched, QEvent* event) {
  if (watched == m_list && event->type() == QEvent::KeyPress &&
      static_cast<QKeyEvent*>(event)->key() == Qt::Key_Delete && m_list->currentRow() >= 0) {
    deleteAt(m_list->currentRow());
    return true;
  }
  return QWidget::eventFilter(watched, event);
}

void ConversationList::showMenu(const QPoint& position) {
  QListWidgetItem* item = m_list->itemAt(position);
  if (!item) return;
  const int row = m_list->row(item);
  QMenu menu(this);
  menu.addAction(themeIcon(QStringLiteral("edit")), tr("Rename"), this,
                 [this, row] { renameAt(row); });
  menu.addAction(themeIcon(QStringLiteral("delete"), themeColors().error), tr("Delete…"), this,
                 [this, row] { deleteAt(row); });
  menu.exec(m_list->viewport()->mapToGlobal(position));
}

void ConversationList::itemEdited(QListWidgetItem* item) {
  if (m_filling) return;
  const QString title = item->text().trimmed();
  const QString previous = item->data(kTitleRole).toString();
  if (title.isEmpty()) {
    // A blank title would leave an invisible row; keep the old one.
    QSignalBlocker block(m_list);
    item->setText(previous);
    return;
  }
  if (title == previous) return;
  item->setData(kTitleRole, title);
  emit renameRequested(item->data(kIdRole).toString(), title);
}

}  // namespace kvscope::ui
