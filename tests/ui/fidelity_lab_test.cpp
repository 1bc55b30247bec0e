// "Compare schemes on this conversation" (FidelityLab, SchemeComparison): the Pareto
// front on hand-made points; on stories260K a comparison run from the window gives each
// policy the figures runtime::evaluateKvPolicy gives it alone, plots one point per policy
// (the current one ringed) and the front, asks for a policy when its point is clicked,
// and a cancel stops it with the window usable.
#include <QChart>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QScatterSeries>
#include <QSignalSpy>
#include <QTableWidget>
#include <QtTest>

#include "model/model_file.h"
#include "model/model_tokenizer.h"
#include "runtime/eval.h"
#include "ui/fidelity_lab.h"
#include "ui/scheme_panel.h"
#include "ui_fixtures.h"

namespace kvscope::ui {

class FidelityLabTest : public QObject {
  Q_OBJECT

 private:
  // The story's tokens as the model's tokenizer gives them (BOS first).
  static QList<qint32> storyTokens() {
    auto file = model::ModelFile::open(test::storiesModel().toStdString());
    if (!file.ok()) return {};
    auto tokenizer = model::loadTokenizer(**file);
    if (!tokenizer.ok()) return {};
    const auto ids = tokenizer->encode(
        "Once upon a time, there was a little girl named Lily. She loved to play outside in "
        "the park with her friends. One day, she saw a big red ball under a tree.",
        {.addSpecial = true});
    return QList<qint32>(ids.begin(), ids.end());
  }

  static QList<PolicyPreset> presets() {
    return {{QStringLiteral("8-bit"), QStringLiteral("k=q8_0,v=q8_0")},
            {QStringLiteral("4-bit block"), QStringLiteral("k=turbo4b,v=turbo4b")},
            {QStringLiteral("3-bit block"), QStringLiteral("k=turbo3b,v=turbo3b")},
            {QStringLiteral("not ticked"), QStringLiteral("k=turbo2,v=turbo2")}};
  }

 private slots:
  void paretoFrontKeepsTheUnbeatenPoints() {
    const QList<ComparisonPoint> points = {
        {.policy = QStringLiteral("a"), .bitsPerValue = 8.5, .kld = 1e-5},
        {.policy = QStringLiteral("b"), .bitsPerValue = 4.5, .kld = 4e-3},
        {.policy = QStringLiteral("c"), .bitsPerValue = 4.5, .kld = 6e-3},  // b beats it
        {.policy = QStringLiteral("d"), .bitsPerValue = 6.5, .kld = 5e-3},  // b beats it
        {.policy = QStringLiteral("e"), .bitsPerValue = 5.5, .kld = 1e-3},
        {.policy = QStringLiteral("f"), .bitsPerValue = 3.5, .kld = 3e-2},
        {.policy = QStringLiteral("g"), .bitsPerValue = 5.5, .kld = 1e-3},  // ties with e
    };
    QCOMPARE(paretoFront(points), (QList<int>{5, 1, 4, 6, 0}));
    QVERIFY(paretoFront({}).isEmpty());
  }

  void comparisonEqualsEvalAndAppliesAClickedPoint() {
    KVS_REQUIRE_UI_FIXTURE(test::storiesModel());
    const QList<qint32> tokens = storyTokens();
    QVERIFY(tokens.size() > 30);
    FidelityLab lab;
    lab.setPolicies(presets(),
                    {QStringLiteral("k=q8_0,v=q8_0"), QStringLiteral("k=turbo4b,v=turbo4b"),
                     QStringLiteral("k=turbo3b,v=turbo3b")});
    lab.setCurrentPolicy(QStringLiteral("k=turbo4b,v=turbo4b,indexer=64"));
    QSignalSpy finished(&lab, &FidelityLab::comparisonFinished);
    lab.setConversation(test::storiesModel(), tokens, /*runNow=*/true);
    QVERIFY(finished.wait(60000));
    QCOMPARE(lab.points().size(), 3);

    auto file = model::ModelFile::open(test::storiesModel().toStdString());
    QVERIFY(file.ok());
    std::shared_ptr<const model::ModelFile> m(std::move(file).value());
    const std::vector<int32_t> ids(tokens.begin(), tokens.end());
    for (const ComparisonPoint& p : lab.points()) {
      auto policy = kv::KvPolicy::parse(p.policy.toStdString());
      QVERIFY(policy.ok());
      auto alone = runtime::evaluateKvPolicy(m, ids, {.kind = "cpu", .kvPolicy = *policy});
      QVERIFY(alone.ok());
      QCOMPARE(p.kld, alone->kldMean);
      QCOMPARE(p.top1, alone->top1);
      QCOMPARE(p.bitsPerValue, (alone->bitsPerValueK + alone->bitsPerValueV) / 2);
    }

    // One point per policy plus the front; the current policy's point is the ringed one.
    int scatter = 0;
    QScatterSeries* current = nullptr;
    for (QAbstractSeries* s : lab.chart()->series()) {
      if (auto* points = qobject_cast<QScatterSeries*>(s)) {
        ++scatter;
        if (points->name().endsWith(QStringLiteral("(current)"))) current = points;
      }
    }
    QCOMPARE(scatter, 3);
    QVERIFY(current);
    QVERIFY(current->name().startsWith(QStringLiteral("4-bit block")));
    QCOMPARE(lab.chart()->series().size(), 4);

    QSignalSpy apply(&lab, &FidelityLab::applyRequested);
    emit current->clicked(current->at(0));
    QCOMPARE(apply.size(), 1);
    QCOMPARE(apply.at(0).at(0).toString(), QStringLiteral("k=turbo4b,v=turbo4b"));
    auto* table = lab.findChild<QTableWidget*>(QStringLiteral("labTable"));
    QCOMPARE(table->rowCount(), 3);
    auto* rowApply = qobject_cast<QPushButton*>(table->cellWidget(0, 4));
    QVERIFY(rowApply && rowApply->isEnabled());  // not the current policy
    rowApply->click();
    QCOMPARE(apply.at(1).at(0).toString(), QStringLiteral("k=q8_0,v=q8_0"));
  }

  void cancelStopsAndTheWindowStaysUsable() {
    KVS_REQUIRE_UI_FIXTURE(test::storiesModel());
    FidelityLab lab;
    lab.setPolicies(presets(),
                    {QStringLiteral("k=q8_0,v=q8_0"), QStringLiteral("k=turbo4b,v=turbo4b"),
                     QStringLiteral("k=turbo3b,v=turbo3b")});
    auto* run = lab.findChild<QPushButton*>(QStringLiteral("labRun"));
    auto* cancel = lab.findChild<QPushButton*>(QStringLiteral("labCancel"));
    lab.setConversation(test::storiesModel(), storyTokens());
    QVERIFY(run->isEnabled());
    run->click();
    QVERIFY(!run->isEnabled());
    QVERIFY(cancel->isEnabled());
    cancel->click();
    QTRY_VERIFY_WITH_TIMEOUT(run->isEnabled(), 30000);
    QVERIFY(lab.points().isEmpty());
    auto* summary = lab.findChild<QLabel*>(QStringLiteral("labSummary"));
    QVERIFY2(summary->text().contains(QStringLiteral("stopped")), qPrintable(summary->text()));

    lab.setConversation(test::storiesModel(), storyTokens().mid(0, 10));
    QVERIFY(!run->isEnabled());  // too short to compare on
  }
};

}  // namespace kvscope::ui

QTEST_MAIN(kvscope::ui::FidelityLabTest)
#include "fidelity_lab_test.moc"
