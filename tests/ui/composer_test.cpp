// Composer: Send needs a model, an idle engine and some text; Enter sends, Shift+Enter
// does not; Stop is only available while generating.
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QtTest>

#include "ui/composer.h"
#include "ui/context_gauge.h"

using kvscope::ui::Composer;

class ComposerTest : public QObject {
  Q_OBJECT

  struct Parts {
    QPlainTextEdit* input;
    QPushButton* send;
    QPushButton* stop;
  };

  static Parts parts(Composer& composer) {
    return {composer.findChild<QPlainTextEdit*>(QStringLiteral("composerInput")),
            composer.findChild<QPushButton*>(QStringLiteral("sendButton")),
            composer.findChild<QPushButton*>(QStringLiteral("stopButton"))};
  }

 private slots:
  void sendNeedsModelAndText() {
    Composer composer;
    const Parts p = parts(composer);
    QVERIFY(p.input && p.send && p.stop);
    QVERIFY(!p.send->isEnabled());
    composer.setModelLoaded(true);
    QVERIFY(!p.send->isEnabled());  // nothing to send yet
    QTest::keyClicks(p.input, QStringLiteral("   "));
    QVERIFY(!p.send->isEnabled());  // blank is nothing
    QTest::keyClicks(p.input, QStringLiteral("hello"));
    QVERIFY(p.send->isEnabled());
    composer.setModelLoaded(false);
    QVERIFY(!p.send->isEnabled());
  }

  void enterSendsAndShiftEnterAddsALine() {
    Composer composer;
    composer.setModelLoaded(true);
    const Parts p = parts(composer);
    QSignalSpy sent(&composer, &Composer::sendRequested);
    QTest::keyClicks(p.input, QStringLiteral("first"));
    QTest::keyClick(p.input, Qt::Key_Return, Qt::ShiftModifier);
    QTest::keyClicks(p.input, QStringLiteral("second"));
    QCOMPARE(sent.count(), 0);
    QTest::keyClick(p.input, Qt::Key_Return);
    QCOMPARE(sent.count(), 1);
    QCOMPARE(sent.at(0).at(0).toString(), QStringLiteral("first\nsecond"));
    QVERIFY(p.input->toPlainText().isEmpty());
  }

  void stopOnlyWhileGenerating() {
    Composer composer;
    composer.setModelLoaded(true);
    const Parts p = parts(composer);
    QSignalSpy stopped(&composer, &Composer::stopRequested);
    QTest::keyClicks(p.input, QStringLiteral("next question"));
    QVERIFY(!p.stop->isEnabled());
    composer.setGenerating(true);
    QVERIFY(p.stop->isEnabled());
    QVERIFY(!p.send->isEnabled());  // one reply at a time
    QTest::mouseClick(p.stop, Qt::LeftButton);
    QCOMPARE(stopped.count(), 1);
    composer.setGenerating(false);
    QVERIFY(!p.stop->isEnabled());
    QVERIFY(p.send->isEnabled());
  }

  void stopShowsOnlyWhileGenerating() {
    Composer composer;
    composer.setModelLoaded(true);
    const Parts p = parts(composer);
    QVERIFY(!p.stop->isVisibleTo(&composer));
    composer.setGenerating(true);
    QVERIFY(p.stop->isVisibleTo(&composer));
  }

  void contextGaugeShowsUsage() {
    Composer composer;
    auto* gauge = composer.findChild<kvscope::ui::ContextGauge*>(QStringLiteral("contextGauge"));
    QVERIFY(gauge);
    QVERIFY(gauge->text().isEmpty());  // no model, no limit
    composer.setContextUsage(1234, 4096);
    QCOMPARE(gauge->used(), quint32{1234});
    QCOMPARE(gauge->text(), QStringLiteral("1.2k / 4.1k"));
    QVERIFY(gauge->toolTip().contains(QStringLiteral("1234 of 4096")));
    QCOMPARE(kvscope::ui::shortCount(950), QStringLiteral("950"));
    QCOMPARE(kvscope::ui::shortCount(32768), QStringLiteral("33k"));
  }
};

QTEST_MAIN(ComposerTest)
#include "composer_test.moc"
