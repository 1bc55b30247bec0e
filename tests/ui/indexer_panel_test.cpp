// The Indexer panel from hand-built IndexerReports: the history's per-position shares
// (last step and frequency over the window, worked out by hand), token texts arriving in
// pieces and cut back on an edit, binning when there are more positions than pixels,
// the hover text (a dense layer's too), the captured-mass readout, the empty state when the indexer
// is off, and the Scheme panel's sparse-attention pickers (applied without Apply, codecs
// unchanged).
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QSignalSpy>
#include <QtTest>

#include "ui/indexer_heatmap.h"
#include "ui/indexer_panel.h"
#include "ui/scheme_panel.h"
#include "ui/theme.h"

using namespace kvscope::ui;

namespace {

// Two layers of two KV heads over `rows` rows. Layer 0: head 0 attends [0, 4) and
// [rows - 8, rows), head 1 every row. Layer 1: both heads [0, 4), [20, 36), [rows - 8, rows).
IndexerReport report(quint32 rows, double mass = -1.0) {
  IndexerReport r;
  r.turnId = 1;
  r.indexer.step.rows = rows;
  r.indexer.options.topK = 16;
  r.indexer.options.window = 8;
  r.indexer.options.sinks = 4;
  r.indexer.options.denseLayers = 0;
  kvscope::backend::IndexerLayerStep l0, l1;
  l0.heads = {{{0, 4}, {rows - 8, rows}}, {}};
  l1.heads = {{{0, 4}, {20, 36}, {rows - 8, rows}}, {{0, 4}, {20, 36}, {rows - 8, rows}}};
  l0.capturedMass = l1.capturedMass = mass;
  r.indexer.step.layers = {l0, l1};
  return r;
}

}  // namespace

class IndexerPanelTest : public QObject {
  Q_OBJECT

 private slots:
  void historyCountsHeadsAndSteps() {
    IndexerHistory h;
    h.add(report(100));
    QCOMPARE(h.rows(), 100u);
    QCOMPARE(h.layers(), 2);
    QCOMPARE(h.lastStep(0, 2), 1.0f);   // both heads
    QCOMPARE(h.lastStep(0, 50), 0.5f);  // head 1 only
    QCOMPARE(h.lastStep(1, 50), 0.0f);
    QCOMPARE(h.lastStep(1, 25), 1.0f);
    // Rows read: layer 0 12 + 100, layer 1 2 x 28, of 4 x 100.
    QCOMPARE(h.rowsRead(), (12.0 + 100.0 + 56.0) / 400.0);
    // A second step at 101 rows where layer 1 moved its page: [20, 36) picked once of two.
    IndexerReport next = report(101);
    next.indexer.step.layers[1].heads = {{{0, 4}, {60, 76}, {93, 101}},
                                         {{0, 4}, {60, 76}, {93, 101}}};
    h.add(next);
    QCOMPARE(h.steps(), 2);
    QCOMPARE(h.frequency(1, 25), 0.5f);
    QCOMPARE(h.frequency(1, 65), 0.5f);
    QCOMPARE(h.frequency(1, 2), 1.0f);
    QCOMPARE(h.frequency(1, 100), 0.5f);  // row 100 did not exist in the first step
    // The window forgets: after kSteps more steps of `next`, [20, 36) is gone.
    for (int i = 0; i < IndexerHistory::kSteps; ++i) h.add(next);
    QCOMPARE(h.steps(), IndexerHistory::kSteps);
    QCOMPARE(h.frequency(1, 25), 0.0f);
    QCOMPARE(h.frequency(1, 65), 1.0f);
    // No residue where nothing was ever picked, in any layer, as the rows grew.
    for (quint32 p : {10u, 19u, 40u, 50u, 80u, 92u})
      QCOMPARE(h.frequency(1, p), 0.0f);
    QCOMPARE(h.frequency(0, 50), 0.5f);
    // Fewer rows than before (an edit, a new chat) starts over.
    h.add(report(50));
    QCOMPARE(h.steps(), 1);
    QCOMPARE(h.rows(), 50u);
  }

  void tokenTextsArriveInPiecesAndFollowEdits() {
    IndexerHistory h;
    IndexerReport r = report(40);
    for (int i = 0; i < 40; ++i) r.tokenTexts << QStringLiteral("t%1").arg(i);
    h.add(r);
    QCOMPARE(h.tokenText(39), QStringLiteral("t39"));
    IndexerReport more = report(41);
    more.tokensFrom = 40;
    more.tokenTexts = {QStringLiteral(" next")};
    h.add(more);
    QCOMPARE(h.tokenText(40), QStringLiteral(" next"));
    QCOMPARE(h.tokenText(3), QStringLiteral("t3"));
    IndexerReport edited = report(42);
    edited.tokensFrom = 30;
    edited.tokenTexts = {QStringLiteral("e30")};
    h.add(edited);
    QCOMPARE(h.tokenText(30), QStringLiteral("e30"));
    QCOMPARE(h.tokenText(31), QString());  // texts past the edit are gone until sent
  }

  void textsOfAReportWithoutLayersAreKept() {
    IndexerHistory h;
    IndexerReport prefill;  // the report after a prefill: no step yet, every text
    prefill.tokenTexts = {QStringLiteral("a"), QStringLiteral("b")};
    h.add(prefill);
    QVERIFY(h.empty());
    QCOMPARE(h.tokenText(1), QStringLiteral("b"));
    IndexerReport step = report(3);
    step.tokensFrom = 2;  // both texts were sent
    h.add(step);
    h.restart();
    QCOMPARE(h.tokenText(0), QStringLiteral("a"));
  }

  void panelShowsSummaryMassAndHover() {
    IndexerPanel panel;
    panel.resize(420, 420);
    QVERIFY(!panel.hasContent());
    IndexerReport r = report(100, 0.8);
    for (int i = 0; i < 100; ++i) r.tokenTexts << QStringLiteral("w%1").arg(i);
    r.indexer.step.layers[1].capturedMass = 0.9;
    panel.showReport(r);
    QVERIFY(panel.hasContent());
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    auto* summary = panel.findChild<QLabel*>(QStringLiteral("indexerSummary"));
    QVERIFY(summary->text().contains(QStringLiteral("42.0%")));  // 168 of 400
    QCOMPARE(panel.findChild<QLabel*>(QStringLiteral("capturedMass"))->text(),
             QLocale().toString(85.0, 'f', 1) + QLatin1Char('%'));
    IndexerHeatmap* map = panel.heatmap();
    // 100 positions fit the plot: one per column. Find the column of position 25.
    int x = 0;
    while (x < map->width() && map->positionsAt(x).first != 25) ++x;
    QVERIFY(x < map->width());
    QCOMPARE(map->positionsAt(x).second, 25u);
    const int y = map->height() / 2 + 10;  // layer 1 (lower half of the plot)
    const QString text = map->describe({x, y});
    QVERIFY2(text.contains(QStringLiteral("Layer 1")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("w25")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("100%")), qPrintable(text));
    // The window's positions say so.
    int xw = 0;
    while (xw < map->width() && map->positionsAt(xw).first != 97) ++xw;
    QVERIFY(map->describe({xw, y}).contains(QStringLiteral("recent window")));
    // With the first layer kept dense, its positions say so; layer 1's do not.
    r.indexer.options.denseLayers = 1;
    panel.showReport(r);
    const QString dense = map->describe({x, map->height() / 4 + 10});
    QVERIFY2(dense.contains(QStringLiteral("Layer 0")), qPrintable(dense));
    QVERIFY2(dense.contains(QStringLiteral("indexer_dense=1")), qPrintable(dense));
    QVERIFY(!map->describe({x, y}).contains(QStringLiteral("indexer_dense")));
    QVERIFY2(summary->text().contains(QStringLiteral("layer 0 reads every row")),
             qPrintable(summary->text()));
    // Single KV heads kept dense are named in the summary.
    r.indexer.options.denseHeads = {{1, 0}, {1, 1}};
    panel.showReport(r);
    QVERIFY2(summary->text().contains(QStringLiteral("KV heads 1.0, 1.1 read every row")),
             qPrintable(summary->text()));
    // Both of layer 1's heads dense: the layer is drawn and described as dense.
    const QString headsDense = map->describe({x, y});
    QVERIFY2(headsDense.contains(QStringLiteral("indexer_dense_heads")), qPrintable(headsDense));
    // One head, measured by indexer_dense_heads=auto: the session's note follows.
    r.indexer.options.denseHeads = {{1, 1}};
    r.indexer.denseHeadsNote = "indexer_dense_heads=auto measured 64 decode steps";
    panel.showReport(r);
    QVERIFY2(summary->text().contains(QStringLiteral("KV head 1.1 reads every row")),
             qPrintable(summary->text()));
    QVERIFY2(summary->text().endsWith(
                 QStringLiteral("\nindexer_dense_heads=auto measured 64 decode steps")),
             qPrintable(summary->text()));
    // Still measuring: every layer reads every row, whatever indexer_dense says.
    r.indexer.options.autoDenseHeads = true;
    r.indexer.options.denseHeads.clear();
    panel.showReport(r);
    QVERIFY2(summary->text().contains(QStringLiteral("every layer reads every row")),
             qPrintable(summary->text()));
    QVERIFY2(map->describe({x, y}).contains(QStringLiteral("has not measured yet")),
             qPrintable(map->describe({x, y})));
    r.indexer.options.autoDenseHeads = false;
    r.indexer.denseHeadsNote.clear();
    // More dense layers than the model has: every layer, not "layers 0-4".
    r.indexer.options.denseLayers = 5;
    panel.showReport(r);
    QVERIFY2(summary->text().contains(QStringLiteral("every layer reads every row")),
             qPrintable(summary->text()));
    QVERIFY2(!summary->text().contains(QStringLiteral("KV heads")), qPrintable(summary->text()));
    // The indexer turned off: back to the empty state.
    panel.setIndexerEnabled(false);
    QVERIFY(!panel.hasContent());
  }

  void manyPositionsAreBinned() {
    IndexerPanel panel;
    panel.resize(400, 400);
    panel.showReport(report(32768));
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    IndexerHeatmap* map = panel.heatmap();
    const auto [first, last] = map->positionsAt(map->width() / 2);
    QVERIFY(last > first);                   // a bin of positions
    QVERIFY(last - first + 1 < 32768 / 100);  // a few hundred at most
    const QString text = map->describe({map->width() / 2, map->height() / 2});
    QVERIFY2(text.contains(QStringLiteral("Positions")), qPrintable(text));
    QImage image(map->size(), QImage::Format_ARGB32);
    map->render(&image);  // paints without dividing by zero or touching past the data
  }

  void diagnosticToggleIsRequested() {
    IndexerPanel panel;
    QSignalSpy spy(&panel, &IndexerPanel::diagnosticRequested);
    panel.findChild<QCheckBox*>(QStringLiteral("indexerDiagnostic"))->setChecked(true);
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).toBool(), true);
  }

  void schemePanelAppliesSparseAttentionAtOnce() {
    SchemePanel panel;
    panel.setAvailableSchemes({QStringLiteral("f16"), QStringLiteral("q8_0"),
                               QStringLiteral("turbo4")});
    panel.setLayerCount(4);
    panel.setPolicy(QStringLiteral("k=q8_0,v=turbo4"));
    panel.setEditable(true);
    QSignalSpy spy(&panel, &SchemePanel::policyRequested);
    // A codec picked but not applied stays out of the sparse-attention request.
    panel.findChild<QComboBox*>(QStringLiteral("keySchemePicker"))->setCurrentText(QStringLiteral("f16"));
    auto* indexer = panel.findChild<QComboBox*>(QStringLiteral("indexerPicker"));
    const int top512 = indexer->findData(QStringLiteral("512"));
    QVERIFY(top512 > 0);
    indexer->setCurrentIndex(top512);
    emit indexer->activated(top512);
    QCOMPARE(spy.count(), 1);
    // With the heads it would miss measured and kept dense (auto).
    QCOMPARE(spy.at(0).at(0).toString(),
             QStringLiteral("k=q8_0,v=turbo4,indexer=512,indexer_dense_heads=auto"));
    // Every other item of the active policy is kept as written.
    panel.setPolicy(QStringLiteral("k=q8_0,v=turbo3,seed=7,indexer=256:32:2,indexer_scorer=bounds64"));
    auto* sparseV = panel.findChild<QComboBox*>(QStringLiteral("sparseVPicker"));
    const int tau = sparseV->findData(QStringLiteral("0.001"));
    sparseV->setCurrentIndex(tau);
    emit sparseV->activated(tau);
    QCOMPARE(spy.at(1).at(0).toString(),
             QStringLiteral("k=q8_0,v=turbo3,seed=7,indexer=256:32:2,indexer_scorer=bounds64,"
                            "sparse_v=0.001"));
    indexer->setCurrentIndex(0);
    emit indexer->activated(0);
    QCOMPARE(spy.at(2).at(0).toString(),
             QStringLiteral("k=q8_0,v=turbo3,seed=7,indexer_scorer=bounds64"));
    // Heads the policy names stay with another top_k, and go with the indexer.
    panel.setPolicy(QStringLiteral("k=q8_0,v=turbo3,indexer=64,indexer_dense_heads=2.0"));
    const int top128 = indexer->findData(QStringLiteral("128"));
    indexer->setCurrentIndex(top128);
    emit indexer->activated(top128);
    QCOMPARE(spy.at(3).at(0).toString(),
             QStringLiteral("k=q8_0,v=turbo3,indexer=128,indexer_dense_heads=2.0"));
    indexer->setCurrentIndex(0);
    emit indexer->activated(0);
    QCOMPARE(spy.at(4).at(0).toString(), QStringLiteral("k=q8_0,v=turbo3"));
    panel.setPolicy(QStringLiteral("k=f16,v=f16,indexer=off"));
    QCOMPARE(indexer->currentIndex(), 0);  // "off" is the Off item
    // The active policy read back selects the pickers.
    panel.setPolicy(QStringLiteral("k=q8_0,v=turbo4,indexer=128:64:4"));
    QCOMPARE(indexer->currentData().toString(), QStringLiteral("128"));
    QCOMPARE(sparseV->currentData().toString(), QString());
  }
};

QTEST_MAIN(IndexerPanelTest)
#include "indexer_panel_test.moc"
