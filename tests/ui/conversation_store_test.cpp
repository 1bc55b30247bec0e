// ConversationStore: JSON files round-trip every field, a corrupt file is reported while
// the others load, writes leave no temporary files, and the default folder follows
// $XDG_DATA_HOME.
#include <QDir>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "ui/conversation_store.h"

using kvscope::ui::ChatMessage;
using kvscope::ui::Conversation;
using kvscope::ui::ConversationStore;
using kvscope::ui::StopReason;

namespace {

Conversation sample(const QString& id, const QDateTime& updated) {
  Conversation c;
  c.id = id;
  c.title = QStringLiteral("Tell me a story");
  c.systemPrompt = QStringLiteral("You are terse.");
  c.modelPath = QStringLiteral("/models/stories260K.gguf");
  c.created = QDateTime(QDate(2024, 5, 1), QTime(9, 30, 0, 125), Qt::UTC);
  c.updated = updated;
  ChatMessage user;
  user.role = QStringLiteral("user");
  user.text = QStringLiteral("Tell me a story about ünïcödé and \"quotes\"\nover two lines");
  user.time = c.created;
  user.leftOut = true;  // left out of the context by the overflow policy
  ChatMessage reply;
  reply.role = QStringLiteral("assistant");
  reply.text = QStringLiteral("Once upon a time…");
  reply.time = c.created.addSecs(2);
  reply.stats.promptTokens = 12;
  reply.stats.reusedTokens = 3;
  reply.stats.generatedTokens = 40;
  reply.stats.cachedTokens = 52;
  reply.stats.contextLimit = 512;
  reply.stats.prefillMs = 1.5;
  reply.stats.decodeMs = 80.25;
  reply.stats.prefillTokensPerSecond = 6000.0;
  reply.stats.decodeTokensPerSecond = 485.5;
  reply.stats.stop = StopReason::kStopRequested;
  reply.stats.seed = 0xfedcba9876543210ull;  // above 2^53: must survive JSON
  ChatMessage failed;
  failed.role = QStringLiteral("assistant");
  failed.error = QStringLiteral("the prompt has 600 tokens but the context holds 512");
  failed.stats.stop = StopReason::kError;
  failed.time = c.created.addSecs(5);
  c.messages = {user, reply, failed};
  return c;
}

void compareConversations(const Conversation& a, const Conversation& b) {
  QCOMPARE(a.id, b.id);
  QCOMPARE(a.title, b.title);
  QCOMPARE(a.systemPrompt, b.systemPrompt);
  QCOMPARE(a.modelPath, b.modelPath);
  QCOMPARE(a.created, b.created);
  QCOMPARE(a.updated, b.updated);
  QCOMPARE(a.messages.size(), b.messages.size());
  for (qsizetype i = 0; i < a.messages.size(); ++i) {
    const ChatMessage& x = a.messages[i];
    const ChatMessage& y = b.messages[i];
    QCOMPARE(x.role, y.role);
    QCOMPARE(x.text, y.text);
    QCOMPARE(x.error, y.error);
    QCOMPARE(x.time, y.time);
    QCOMPARE(x.leftOut, y.leftOut);
    QCOMPARE(x.stats.promptTokens, y.stats.promptTokens);
    QCOMPARE(x.stats.reusedTokens, y.stats.reusedTokens);
    QCOMPARE(x.stats.generatedTokens, y.stats.generatedTokens);
    QCOMPARE(x.stats.cachedTokens, y.stats.cachedTokens);
    QCOMPARE(x.stats.contextLimit, y.stats.contextLimit);
    QCOMPARE(x.stats.prefillMs, y.stats.prefillMs);
    QCOMPARE(x.stats.decodeMs, y.stats.decodeMs);
    QCOMPARE(x.stats.prefillTokensPerSecond, y.stats.prefillTokensPerSecond);
    QCOMPARE(x.stats.decodeTokensPerSecond, y.stats.decodeTokensPerSecond);
    QCOMPARE(x.stats.stop, y.stats.stop);
    QCOMPARE(x.stats.seed, y.stats.seed);
  }
}

}  // namespace

class ConversationStoreTest : public QObject {
  Q_OBJECT

 private slots:
  void roundTripThroughANewStore() {
    QTemporaryDir dir;
    const QDateTime t0(QDate(2024, 5, 2), QTime(10, 0), Qt::UTC);
    const Conversation older = sample(QStringLiteral("older-1"), t0);
    const Conversation newer = sample(QStringLiteral("newer-2"), t0.addDays(1));
    {
      ConversationStore store(dir.path());
      QSignalSpy changed(&store, &ConversationStore::changed);
      QVERIFY(store.save(older));
      QVERIFY(store.save(newer));
      QCOMPARE(changed.size(), 2);
      QCOMPARE(store.conversations().size(), 2);
    }
    // One file per conversation, named by id, and no temporary files left behind.
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files),
             QStringList({QStringLiteral("newer-2.json"), QStringLiteral("older-1.json")}));

    ConversationStore reread(dir.path());
    reread.load();
    QVERIFY(reread.loadErrors().isEmpty());
    QCOMPARE(reread.conversations().size(), 2);
    compareConversations(reread.conversations()[0], newer);  // most recent first
    compareConversations(reread.conversations()[1], older);
  }

  void saveReplacesTheSameId() {
    QTemporaryDir dir;
    ConversationStore store(dir.path());
    Conversation c = sample(QStringLiteral("abc"), QDateTime::currentDateTimeUtc());
    QVERIFY(store.save(c));
    c.messages.removeLast();
    c.title = QStringLiteral("Renamed");
    QVERIFY(store.save(c));
    QCOMPARE(store.conversations().size(), 1);

    ConversationStore reread(dir.path());
    reread.load();
    QCOMPARE(reread.conversations().size(), 1);
    QCOMPARE(reread.find(QStringLiteral("abc"))->title, QStringLiteral("Renamed"));
    QCOMPARE(reread.find(QStringLiteral("abc"))->messages.size(), 2);
  }

  void corruptFilesAreReportedAndSkipped() {
    QTemporaryDir dir;
    {
      ConversationStore store(dir.path());
      QVERIFY(store.save(sample(QStringLiteral("good"), QDateTime::currentDateTimeUtc())));
    }
    auto write = [&dir](const QString& name, const QByteArray& bytes) {
      QFile f(QDir(dir.path()).filePath(name));
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(bytes);
    };
    write(QStringLiteral("broken.json"), "{\"version\": 1, \"messages\": [");
    write(QStringLiteral("wrong-role.json"),
          R"({"version": 1, "id": "wrong-role", "messages": [{"role": "robot", "text": "x"}]})");
    write(QStringLiteral("future.json"), R"({"version": 7, "id": "future", "messages": []})");
    write(QStringLiteral("array.json"), "[1, 2]");

    ConversationStore store(dir.path());
    store.load();
    QCOMPARE(store.conversations().size(), 1);
    QCOMPARE(store.conversations()[0].id, QStringLiteral("good"));
    const QStringList errors = store.loadErrors();
    QCOMPARE(errors.size(), 4);
    QVERIFY(errors[0].startsWith(QStringLiteral("array.json: ")));
    QVERIFY(errors[1].startsWith(QStringLiteral("broken.json: ")));
    QVERIFY2(errors[2].contains(QStringLiteral("version 7")), qPrintable(errors[2]));
    QVERIFY2(errors[3].contains(QStringLiteral("robot")), qPrintable(errors[3]));
  }

  void idsThatAreNotFileNamesAreRefused() {
    QTemporaryDir dir;
    ConversationStore store(dir.path());
    QSignalSpy error(&store, &ConversationStore::errorOccurred);
    QVERIFY(!store.save(sample(QStringLiteral("../escape"), QDateTime::currentDateTimeUtc())));
    QCOMPARE(error.size(), 1);
    QVERIFY(store.conversations().isEmpty());
    QVERIFY(QDir(dir.path()).entryList(QDir::Files).isEmpty());
  }

  void removeDeletesTheFile() {
    QTemporaryDir dir;
    ConversationStore store(dir.path());
    QVERIFY(store.save(sample(QStringLiteral("gone"), QDateTime::currentDateTimeUtc())));
    QVERIFY(store.remove(QStringLiteral("gone")));
    QVERIFY(store.conversations().isEmpty());
    QVERIFY(!QFile::exists(QDir(dir.path()).filePath(QStringLiteral("gone.json"))));
  }

  void defaultDirectoryFollowsXdgDataHome() {
    QTemporaryDir dir;
    const QByteArray saved = qgetenv("XDG_DATA_HOME");
    qputenv("XDG_DATA_HOME", dir.path().toUtf8());
    const QString directory = ConversationStore::defaultDirectory();
    if (saved.isNull()) {
      qunsetenv("XDG_DATA_HOME");
    } else {
      qputenv("XDG_DATA_HOME", saved);
    }
    QCOMPARE(directory, QDir(dir.path()).filePath(QStringLiteral("kvscope/conversations")));
  }
};

QTEST_MAIN(ConversationStoreTest)
#include "conversation_store_test.moc"
