// ChatView and MessageWidget: streamed pieces grow the last reply in place, markdown
// replies render lists and code, an edited message is resent with its index, regenerate
// sits on the last reply only, errors show without losing the conversation, and the
// no-model page tells the user how to get a model.
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QTextBlock>
#include <QTextList>
#include <QToolButton>
#include <QtTest>

#include "ui/chat_view.h"
#include "ui/markdown_view.h"
#include "ui/message_widget.h"
#include "ui/theme.h"

using namespace kvscope::ui;

namespace {

ChatMessage message(const QString& role, const QString& text) {
  ChatMessage m;
  m.role = role;
  m.text = text;
  return m;
}

ChatMessage reply(const QString& text) {
  ChatMessage m = message(QStringLiteral("assistant"), text);
  m.stats.generatedTokens = 3;
  m.stats.stop = StopReason::kEndOfGeneration;
  return m;
}

}  // namespace

class ChatViewTest : public QObject {
  Q_OBJECT

 private slots:
  void streamedPiecesGrowTheLastReply() {
    ChatView view;
    view.setModel(QStringLiteral("stories"));
    view.addMessage(0, message(QStringLiteral("user"), QStringLiteral("Hi")));
    view.setGenerating(true);
    view.addMessage(1, message(QStringLiteral("assistant"), QString()));
    MessageWidget* last = view.message(1);
    QVERIFY(last);

    view.appendReplyText(1, QStringLiteral("Hello "));
    view.appendReplyText(1, QStringLiteral("**world**"));
    QCOMPARE(view.messageCount(), 2);
    QCOMPARE(view.message(1), last);  // the same bubble, not a new one per piece
    QCOMPARE(last->text(), QStringLiteral("Hello **world**"));
    // Rendering is coalesced: nothing is laid out per piece, the timer renders both.
    QCOMPARE(last->markdownView()->toPlainText(), QString());
    QTRY_COMPARE(last->markdownView()->toPlainText(), QStringLiteral("Hello world"));
    QCOMPARE(view.message(0)->text(), QStringLiteral("Hi"));  // earlier messages untouched
  }

  void finishingFlushesAndShowsStats() {
    ChatView view;
    view.setModel(QStringLiteral("stories"));
    view.setMessages({message(QStringLiteral("user"), QStringLiteral("Hi"))});
    view.setGenerating(true);
    view.addMessage(1, message(QStringLiteral("assistant"), QString()));
    view.appendReplyText(1, QStringLiteral("Done."));
    ReplyStats stats;
    stats.generatedTokens = 42;
    stats.decodeTokensPerSecond = 12.5;
    stats.stop = StopReason::kEndOfGeneration;
    view.setGenerating(false);
    view.finishReply(1, stats);
    QCOMPARE(view.message(1)->markdownView()->toPlainText(), QStringLiteral("Done."));
    auto* statsLabel = view.message(1)->findChild<QLabel*>(QStringLiteral("replyStats"));
    QVERIFY(statsLabel);
    QCOMPARE(statsLabel->text(), replyStatsText(stats));
  }

  void statsLineNamesSpeedAndStop() {
    ReplyStats stats;
    stats.generatedTokens = 128;
    stats.decodeTokensPerSecond = 42.25;
    stats.promptTokens = 130;
    stats.reusedTokens = 30;
    stats.prefillTokensPerSecond = 312.4;
    stats.stop = StopReason::kStopRequested;
    QCOMPARE(replyStatsText(stats),
             QStringLiteral("128 tokens  ·  42.3 tok/s  ·  prompt 100 tokens at 312 tok/s  ·  "
                            "stopped"));
    stats = {};
    stats.generatedTokens = 1;
    stats.stop = StopReason::kEndOfGeneration;
    QCOMPARE(replyStatsText(stats), QStringLiteral("1 token"));
    // A reply that went past the end of the context says how often it shifted.
    stats.generatedTokens = 120;
    stats.contextShifts = 2;
    stats.shiftedTokens = 62;
    stats.stop = StopReason::kMaxTokens;
    QVERIFY2(replyStatsText(stats).contains(
                 QStringLiteral("context shifted 2 times, 62 oldest tokens dropped")),
             qPrintable(replyStatsText(stats)));
  }

  void markdownRendersListsAndCode() {
    MessageWidget widget(1, reply(QStringLiteral("Steps:\n\n1. first\n2. second\n\n"
                                                 "```cpp\nint x = 1;\n```\n\nUse `x`.")));
    QTextDocument* doc = widget.markdownView()->document();
    int listItems = 0;
    QTextBlock code;
    QTextBlock inlineCode;
    for (QTextBlock block = doc->begin(); block.isValid(); block = block.next()) {
      if (block.textList()) ++listItems;
      if (block.text() == QStringLiteral("int x = 1;")) code = block;
      if (block.text() == QStringLiteral("Use x.")) inlineCode = block;
    }
    QCOMPARE(listItems, 2);
    QVERIFY(!doc->toPlainText().contains(QStringLiteral("```")));
    QVERIFY(code.isValid());
    QCOMPARE(code.blockFormat().background().color(), themeColors().sunken);
    QVERIFY(inlineCode.isValid());
    // "x" inside backticks is set in code style; "Use " is not.
    QTextCursor cursor(inlineCode);
    cursor.setPosition(inlineCode.position() + 5);
    QCOMPARE(cursor.charFormat().background().color(), themeColors().sunken);
    cursor.setPosition(inlineCode.position() + 2);
    QVERIFY(cursor.charFormat().background().style() == Qt::NoBrush);
  }

  void editResendsWithIndex() {
    ChatView view;
    view.setModel(QStringLiteral("stories"));
    view.setMessages({message(QStringLiteral("user"), QStringLiteral("first")), reply("a"),
                      message(QStringLiteral("user"), QStringLiteral("second")), reply("b")});
    QSignalSpy edits(&view, &ChatView::editRequested);
    MessageWidget* second = view.message(2);
    second->startEditing();
    auto* editor = second->findChild<QPlainTextEdit*>(QStringLiteral("messageEditor"));
    QVERIFY(editor);
    QCOMPARE(editor->toPlainText(), QStringLiteral("second"));
    editor->setPlainText(QStringLiteral("second, reworded"));
    QTest::mouseClick(second->findChild<QPushButton*>(QStringLiteral("submitEditButton")),
                      Qt::LeftButton);
    QCOMPARE(edits.count(), 1);
    QCOMPARE(edits.at(0).at(0).toInt(), 2);
    QCOMPARE(edits.at(0).at(1).toString(), QStringLiteral("second, reworded"));
  }

  void enterSubmitsAndEscapeCancelsAnEdit() {
    MessageWidget widget(0, message(QStringLiteral("user"), QStringLiteral("hello")));
    QSignalSpy edits(&widget, &MessageWidget::editSubmitted);
    auto* editor = widget.findChild<QPlainTextEdit*>(QStringLiteral("messageEditor"));
    widget.startEditing();
    QTest::keyClicks(editor, QStringLiteral(" there"));
    QTest::keyClick(editor, Qt::Key_Escape);
    QCOMPARE(edits.count(), 0);
    widget.startEditing();  // reopens with the original text
    QCOMPARE(editor->toPlainText(), QStringLiteral("hello"));
    QTest::keyClicks(editor, QStringLiteral(" again"));
    QTest::keyClick(editor, Qt::Key_Return);
    QCOMPARE(edits.count(), 1);
    QCOMPARE(edits.at(0).at(1).toString(), QStringLiteral("hello again"));
  }

  void noEditsOrRegenerateWhileGenerating() {
    ChatView view;
    view.setModel(QStringLiteral("stories"));
    view.setMessages({message(QStringLiteral("user"), QStringLiteral("first")), reply("a")});
    auto* regenerate = view.message(1)->findChild<QToolButton*>(QStringLiteral("regenerateButton"));
    QVERIFY(regenerate->isVisibleTo(view.message(1)));
    view.setGenerating(true);
    QVERIFY(!regenerate->isVisibleTo(view.message(1)));
    QSignalSpy edits(&view, &ChatView::editRequested);
    view.message(0)->startEditing();
    auto* editor = view.message(0)->findChild<QPlainTextEdit*>(QStringLiteral("messageEditor"));
    QVERIFY(!editor->isVisibleTo(view.message(0)));
  }

  void regenerateOnlyOnTheLastReply() {
    ChatView view;
    view.setModel(QStringLiteral("stories"));
    view.setMessages({message(QStringLiteral("user"), QStringLiteral("q1")), reply("a1"),
                      message(QStringLiteral("user"), QStringLiteral("q2")), reply("a2")});
    const auto button = [&](int index) {
      return view.message(index)->findChild<QToolButton*>(QStringLiteral("regenerateButton"));
    };
    QVERIFY(!button(1)->isVisibleTo(view.message(1)));
    QVERIFY(button(3)->isVisibleTo(view.message(3)));
    QSignalSpy regenerate(&view, &ChatView::regenerateRequested);
    QTest::mouseClick(button(3), Qt::LeftButton);
    QCOMPARE(regenerate.count(), 1);
  }

  void failedReplyKeepsTheConversation() {
    ChatView view;
    view.setModel(QStringLiteral("stories"));
    view.setMessages({message(QStringLiteral("user"), QStringLiteral("q"))});
    view.setGenerating(true);
    view.addMessage(1, message(QStringLiteral("assistant"), QString()));
    view.appendReplyText(1, QStringLiteral("partial"));
    view.setGenerating(false);
    view.failReply(1, QStringLiteral("Out of device memory"));
    QCOMPARE(view.messageCount(), 2);
    QCOMPARE(view.message(1)->text(), QStringLiteral("partial"));
    QCOMPARE(view.errorText(), QStringLiteral("Out of device memory"));
    auto* inline_ = view.message(1)->findChild<QLabel*>(QStringLiteral("replyError"));
    QVERIFY(inline_->isVisibleTo(view.message(1)));
    QVERIFY(inline_->text().contains(QStringLiteral("Out of device memory")));
    // The reply says at once that it ended: no "Generating…" left behind.
    auto* statsLabel = view.message(1)->findChild<QLabel*>(QStringLiteral("replyStats"));
    QCOMPARE(statsLabel->text(), QStringLiteral("Reply failed"));
    QTest::mouseClick(view.findChild<QToolButton*>(QStringLiteral("dismissErrorButton")),
                      Qt::LeftButton);
    QVERIFY(view.errorText().isEmpty());
  }

  // A reasoning model's thoughts (think tags) show collapsed above the answer;
  // only the answer is rendered as markdown. "Thinking…" while the block streams.
  void reasoningShowsCollapsedAboveTheAnswer() {
    MessageWidget qwen(1,
                       reply(QStringLiteral("<think>\nWeighing it.\n</think>\n\nThe **answer**.")));
    QCOMPARE(qwen.markdownView()->document()->toPlainText(), QStringLiteral("The answer."));
    QCOMPARE(qwen.reasoningText(), QStringLiteral("Weighing it.\n"));
    auto* toggle = qwen.findChild<QToolButton*>(QStringLiteral("reasoningToggle"));
    QVERIFY(toggle->isVisibleTo(&qwen));
    QCOMPARE(toggle->text(), QStringLiteral("Reasoning (2 words)"));
    QVERIFY(!qwen.reasoningExpanded());
    toggle->click();
    QVERIFY(qwen.reasoningExpanded());

    // DeepSeek-R1's prompt opens the block: the reply has only its end.
    MessageWidget r1(1, reply(QStringLiteral("Counting: 2 + 2.\n</think>\n\n4")));
    QCOMPARE(r1.reasoningText(), QStringLiteral("Counting: 2 + 2.\n"));
    QCOMPARE(r1.markdownView()->document()->toPlainText(), QStringLiteral("4"));

    MessageWidget plain(1, reply(QStringLiteral("No thoughts < here.")));
    QVERIFY(plain.reasoningText().isEmpty());
    QVERIFY(!plain.findChild<QToolButton*>(QStringLiteral("reasoningToggle"))->isVisibleTo(&plain));

    MessageWidget streaming(1, message(QStringLiteral("assistant"), QString()));
    streaming.setStreaming(true);
    streaming.appendText(QStringLiteral("<think>Let me see"));
    streaming.flush();
    auto* live = streaming.findChild<QToolButton*>(QStringLiteral("reasoningToggle"));
    QCOMPARE(live->text(), QStringLiteral("Thinking… (3 words)"));
    QVERIFY(streaming.markdownView()->document()->toPlainText().isEmpty());
  }

  void promptProgressShowsUntilTheFirstText() {
    ChatView view;
    view.setModel(QStringLiteral("stories"));
    view.setMessages({message(QStringLiteral("user"), QStringLiteral("long prompt"))});
    view.setGenerating(true);
    view.addMessage(1, message(QStringLiteral("assistant"), QString()));
    view.setPromptProgress(256, 1024);
    auto* bar = view.message(1)->findChild<QProgressBar*>(QStringLiteral("promptProgress"));
    QVERIFY(bar->isVisibleTo(view.message(1)));
    QCOMPARE(bar->value(), 256);
    QCOMPARE(bar->maximum(), 1024);
    view.appendReplyText(1, QStringLiteral("Once"));
    QVERIFY(!bar->isVisibleTo(view.message(1)));
  }

  void noModelPageExplainsHowToGetOne() {
    ChatView view;
    auto* empty = view.findChild<QWidget*>(QStringLiteral("chatEmptyState"));
    QVERIFY(empty && empty->isVisibleTo(&view));
    for (const char* name : {"openModelFileButton", "openModelFolderButton", "browseModelsButton"})
      QVERIFY2(view.findChild<QPushButton*>(QString::fromLatin1(name)), name);
    auto* hint = view.findChild<QLabel*>(QStringLiteral("downloadHint"));
    QVERIFY(hint->text().contains(QStringLiteral(".gguf")));
    QVERIFY(hint->text().contains(QStringLiteral("huggingface.co")));

    QSignalSpy openFile(&view, &ChatView::openModelFileRequested);
    QTest::mouseClick(view.findChild<QPushButton*>(QStringLiteral("openModelFileButton")),
                      Qt::LeftButton);
    QCOMPARE(openFile.count(), 1);
  }

  void discoveredModelsLoadWithOneClick() {
    ChatView view;
    auto* card = view.findChild<QWidget*>(QStringLiteral("discoveredModels"));
    QVERIFY(!card->isVisibleTo(&view));
    ModelEntry entry;
    entry.path = QStringLiteral("/models/tiny.gguf");
    entry.name = QStringLiteral("Tiny Chat Q8_0");
    entry.sizeBytes = 600u << 20;
    view.setDiscoveredModels({entry});
    QVERIFY(card->isVisibleTo(&view));
    QSignalSpy load(&view, &ChatView::loadModelRequested);
    auto* row = view.findChild<QWidget*>(QStringLiteral("discoveredModelRow"));
    QTest::mouseClick(row->findChild<QPushButton*>(), Qt::LeftButton);
    QCOMPARE(load.count(), 1);
    QCOMPARE(load.at(0).at(0).toString(), entry.path);
  }

  void pagesFollowModelAndMessages() {
    ChatView view;
    auto* start = view.findChild<QWidget*>(QStringLiteral("chatStartState"));
    auto* transcript = view.findChild<QWidget*>(QStringLiteral("transcript"));
    view.setModel(QStringLiteral("TinyLlama"));
    QVERIFY(start->isVisibleTo(&view));
    auto* title = start->findChild<QLabel*>(QStringLiteral("emptyStateTitle"));
    QVERIFY(title->text().contains(QStringLiteral("TinyLlama")));
    view.addMessage(0, message(QStringLiteral("user"), QStringLiteral("hello")));
    QVERIFY(transcript->isVisibleTo(&view));
    view.setMessages({});
    QVERIFY(start->isVisibleTo(&view));
  }
};

QTEST_MAIN(ChatViewTest)
#include "chat_view_test.moc"
