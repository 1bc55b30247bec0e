// ConversationList: lists what it is given newest first as given, opens on click, renames
// in place (a blank title keeps the old one), deletes through its own request, and marks
// the current conversation.
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSignalSpy>
#include <QtTest>

#include "ui/conversation_list.h"

using namespace kvscope::ui;

namespace {

Conversation conversation(const QString& id, const QString& title) {
  Conversation c;
  c.id = id;
  c.title = title;
  c.updated = QDateTime::currentDateTime();
  return c;
}

}  // namespace

class ConversationListTest : public QObject {
  Q_OBJECT

 private slots:
  void listsAndOpens() {
    ConversationList list;
    list.setConversations({conversation("b", "Newest"), conversation("a", "Older")});
    QCOMPARE(list.count(), 2);
    QCOMPARE(list.titleAt(0), QStringLiteral("Newest"));
    QCOMPARE(list.idAt(1), QStringLiteral("a"));
    QSignalSpy opened(&list, &ConversationList::openRequested);
    auto* view = list.findChild<QListWidget*>(QStringLiteral("conversationListView"));
    list.show();
    QVERIFY(QTest::qWaitForWindowExposed(&list));
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {},
                      view->visualItemRect(view->item(1)).center());
    QCOMPARE(opened.count(), 1);
    QCOMPARE(opened.at(0).at(0).toString(), QStringLiteral("a"));
  }

  void currentIsSelectedAndNotReopened() {
    ConversationList list;
    list.setConversations({conversation("b", "Newest"), conversation("a", "Older")});
    list.setCurrent(QStringLiteral("a"));
    auto* view = list.findChild<QListWidget*>(QStringLiteral("conversationListView"));
    QCOMPARE(view->currentRow(), 1);
    QSignalSpy opened(&list, &ConversationList::openRequested);
    emit view->itemClicked(view->item(1));
    QCOMPARE(opened.count(), 0);
  }

  void renameInPlace() {
    ConversationList list;
    list.setConversations({conversation("a", "Cats")});
    QSignalSpy renamed(&list, &ConversationList::renameRequested);
    auto* view = list.findChild<QListWidget*>(QStringLiteral("conversationListView"));
    view->item(0)->setText(QStringLiteral("Cats and keys"));  // what the editor commits
    QCOMPARE(renamed.count(), 1);
    QCOMPARE(renamed.at(0).at(0).toString(), QStringLiteral("a"));
    QCOMPARE(renamed.at(0).at(1).toString(), QStringLiteral("Cats and keys"));
    view->item(0)->setText(QStringLiteral("   "));
    QCOMPARE(renamed.count(), 1);
    QCOMPARE(list.titleAt(0), QStringLiteral("Cats and keys"));
  }

  void deleteAsks() {
    ConversationList list;
    list.setConfirmDeletes(false);
    list.setConversations({conversation("a", "Cats"), conversation("b", "Dogs")});
    QSignalSpy deleted(&list, &ConversationList::deleteRequested);
    list.deleteAt(1);
    QCOMPARE(deleted.count(), 1);
    QCOMPARE(deleted.at(0).at(0).toString(), QStringLiteral("b"));
  }

  void newChatNeedsAModel() {
    ConversationList list;
    auto* newChat = list.findChild<QPushButton*>(QStringLiteral("newChatButton"));
    QVERIFY(!newChat->isEnabled());
    list.setNewChatEnabled(true);
    QSignalSpy requested(&list, &ConversationList::newChatRequested);
    QTest::mouseClick(newChat, Qt::LeftButton);
    QCOMPARE(requested.count(), 1);
  }

  void relativeDays() {
    const QDateTime now(QDate(2025, 3, 14), QTime(12, 0));
    QCOMPARE(relativeDay(now.addSecs(-3600), now), QStringLiteral("Today"));
    QCOMPARE(relativeDay(now.addDays(-1), now), QStringLiteral("Yesterday"));
    QCOMPARE(relativeDay(now.addDays(-30), now),
             QLocale().toString(QDate(2025, 2, 12), QStringLiteral("d MMM")));
  }
};

QTEST_MAIN(ConversationListTest)
#include "conversation_list_test.moc"
