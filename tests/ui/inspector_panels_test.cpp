// Inspector panels from hand-built reports whose numbers are worked out by hand:
// KV memory (ratio, bits per value, longest context, per-layer tooltips), throughput
// (chart points per reply, kernel bars longest first), scheme (per-layer codecs, presets,
// boundary, policy requests, re-encode progress), the measured codec error per layer, the
// experts of a mixture-of-experts model (summary, hover, the dock's tab and the throughput
// tile), and the dock's coalescing of bursts of reports.
#include <QComboBox>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QtTest>

#include "ui/expert_panel.h"
#include "ui/inspector_dock.h"
#include "ui/kv_memory_panel.h"
#include "ui/scheme_panel.h"
#include "ui/stat_tile.h"
#include "ui/theme.h"
#include "ui/throughput_panel.h"

using namespace kvscope::ui;

namespace {

// Two layers, 100 cached rows of 64 values per stream (one KV head of dimension 64):
// f16 is 100 * 64 * 2 B = 12800 B per stream. K: 4-bit codes (3200 B) + scales (400 B);
// V: 8-bit codes (6400 B) + scales (400 B) + padding (200 B).
KvReport twoLayerReport() {
  KvReport report;
  report.turnId = 1;
  report.kv.rows = 100;
  report.kv.contextLimit = 2048;
  for (int i = 0; i < 2; ++i) {
    kvscope::runtime::KvLayerSnapshot layer;
    layer.keyScheme = "q4_0";
    layer.valueScheme = "q8_0";
    layer.keyBitsPerValue = 4.5;
    layer.valueBitsPerValue = 8.75;
    layer.key = {.codes = 3200, .scales = 400};
    layer.value = {.codes = 6400, .scales = 400, .padding = 200};
    layer.f16Bytes = 25600;
    report.kv.layers.push_back(layer);
  }
  return report;
}

StepReport step(quint64 turn, quint32 generated, double decodeMs, quint32 cached) {
  StepReport r;
  r.turnId = turn;
  r.stats.promptTokens = 40;
  r.stats.reusedTokens = 10;
  r.stats.prefillMs = 100;  // 30 new tokens: 300 tok/s
  r.stats.generatedTokens = generated;
  r.stats.decodeSteps = generated;
  r.stats.decodeMs = decodeMs;
  r.stats.cachedTokens = cached;
  r.stats.lastStepMs = 20;
  r.stats.kernels = {{"norm", 10, 0.5}, {"matvec", 40, 6.0}, {"attention", 20, 3.5}};
  return r;
}

QString tileValue(QWidget& panel, const char* name) {
  auto* tile = panel.findChild<StatTile*>(QString::fromLatin1(name));
  return tile ? tile->value() : QStringLiteral("<missing %1>").arg(QString::fromLatin1(name));
}

QString tileDetail(QWidget& panel, const char* name) {
  auto* tile = panel.findChild<StatTile*>(QString::fromLatin1(name));
  return tile ? tile->detail() : QString();
}

}  // namespace

class InspectorPanelsTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { QLocale::setDefault(QLocale::c()); }

  void bytesReadAtAGlance() {
    QCOMPARE(formatBytes(812), QStringLiteral("812 B"));
    QCOMPARE(formatBytes(48ull << 20), QStringLiteral("48.0 MiB"));
    QCOMPARE(formatBytes(531ull << 20), QStringLiteral("531 MiB"));
    QCOMPARE(formatBytes(3661913948ull), QStringLiteral("3.41 GiB"));
  }

  void summaryArithmetic() {
    const KvSummary s = summarizeKv(twoLayerReport(), 1000000, 100000, 100000);
    QCOMPARE(s.bytes, quint64{21200});
    QCOMPARE(s.f16Bytes, quint64{51200});
    QCOMPARE(s.keyBytes, quint64{7200});
    QCOMPARE(s.valueBytes, quint64{14000});
    QCOMPARE(s.ratio, 51200.0 / 21200.0);
    QCOMPARE(s.bitsPerValue, 6.625);      // 21200 B * 8 over 25600 values
    QCOMPARE(s.keyBitsPerValue, 4.5);     // 7200 B * 8 over 12800 values
    QCOMPARE(s.valueBitsPerValue, 8.75);  // 14000 B * 8 over 12800 values
    QCOMPARE(s.bytesPerToken, quint64{212});
    QCOMPARE(s.maxContext, quint64{900000 / 212});
    QCOMPARE(s.maxContextF16, quint64{900000 / 512});
    // 900000 free bytes / 212 per token = 4245 tokens, under the 100000 trained.
    QCOMPARE(s.usableContext, quint64{4245});
    QVERIFY(!s.trainedContextBinds);
  }

  void trainedContextBoundsTheLongestContext() {
    // The device fits 4245 tokens; a model trained for 512 can use only those.
    const KvSummary s = summarizeKv(twoLayerReport(), 1000000, 100000, 512);
    QCOMPARE(s.maxContext, quint64{4245});
    QCOMPARE(s.usableContext, quint64{512});
    QVERIFY(s.trainedContextBinds);
    // Device memory unknown: the trained context alone.
    QCOMPARE(summarizeKv(twoLayerReport(), 0, 0, 512).usableContext, quint64{512});
    // The weights alone do not fit: nothing is usable, whatever the model was trained for.
    QCOMPARE(summarizeKv(twoLayerReport(), 50000, 100000, 512).usableContext, quint64{0});
  }

  void summaryWithoutDeviceOrRows() {
    KvReport report = twoLayerReport();
    QCOMPARE(summarizeKv(report, 0, 0, 0).maxContext, quint64{0});
    QCOMPARE(summarizeKv(report, 50000, 100000, 0).maxContext, quint64{0});  // weights too big
    report.kv.rows = 0;
    QCOMPARE(summarizeKv(report, 1000000, 0, 0).bytesPerToken, quint64{0});
    QCOMPARE(summarizeKv(KvReport{}, 1000000, 0, 0).ratio, 1.0);
  }

  void kvPanelShowsTheSummary() {
    KvMemoryPanel panel;
    QVERIFY(!panel.hasContent());  // the explanatory empty state first
    panel.setModelLimits(1000000, 100000, 100000);
    panel.showReport(twoLayerReport());
    QVERIFY(panel.hasContent());
    QCOMPARE(tileValue(panel, "kvRatio"), QStringLiteral("2.42×"));
    QCOMPARE(tileValue(panel, "kvBits"), QLocale().toString(6.625, 'f', 2));
    QCOMPARE(tileDetail(panel, "kvBits"), QStringLiteral("K 4.50 · V 8.75"));
    QCOMPARE(tileValue(panel, "kvFits"), QStringLiteral("4245 tokens"));
    QVERIFY(tileDetail(panel, "kvFits").startsWith(QStringLiteral("limited by")));
    QVERIFY(tileDetail(panel, "kvTotal").startsWith(QStringLiteral("100 tokens")));
    // A Gemma 4 model's KV-shared layers, which the per-layer bars do not list.
    KvReport shared = twoLayerReport();
    shared.kv.sharedLayers = {{2, 1}, {3, 1}, {4, 0}};
    panel.showReport(shared);
    auto* allocation = panel.findChild<QLabel*>(QStringLiteral("kvAllocation"));
    QVERIFY(allocation);
    QVERIFY2(allocation->text().contains(
                 QStringLiteral("layers 2–4 store no rows: they attend the rows of L1 and L0")),
             qPrintable(allocation->text()));
    panel.showReport(twoLayerReport());
    QVERIFY(!allocation->text().contains(QStringLiteral("store no rows")));
    panel.setModelLimits(1000000, 100000, 512);
    QCOMPARE(tileValue(panel, "kvFits"), QStringLiteral("512 tokens"));
    QVERIFY(tileDetail(panel, "kvFits").startsWith(QStringLiteral("the model's trained context")));
    panel.clear();
    QVERIFY(!panel.hasContent());
  }

  void layerTooltipsNameCodecsAndBytes() {
    KvLayerChart chart;
    chart.resize(360, chart.sizeHint().height());
    chart.setLayers(twoLayerReport().kv.layers);
    QCOMPARE(chart.layerAt(QPoint(100, 3)), 0);
    QCOMPARE(chart.layerAt(QPoint(100, chart.height() - 3)), 1);
    QCOMPARE(chart.layerAt(QPoint(100, chart.height() + 40)), -1);
    const QString tip = chart.layerToolTip(1);
    QVERIFY(tip.contains(QStringLiteral("Layer 1")));
    QVERIFY(tip.contains(QStringLiteral("q4_0")));
    QVERIFY(tip.contains(QStringLiteral("q8_0")));
    QVERIFY2(tip.contains(QStringLiteral("3.56×")), qPrintable(tip));  // K: 12800 / 3600
  }

  void throughputPlotsEachReplyAndPrefill() {
    ThroughputPanel panel;
    QVERIFY(!panel.hasContent());
    panel.showStep(step(1, 10, 100, 50));
    panel.showStep(step(1, 20, 300, 60));  // 10 tokens in 200 ms: 50 tok/s
    panel.showStep(step(1, 20, 300, 60));  // nothing new: no point
    QCOMPARE(panel.decodePointCount(), 2);
    QCOMPARE(panel.prefillPointCount(), 1);
    QCOMPARE(tileValue(panel, "decodeRate"), QStringLiteral("66.7"));  // 20 / 0.3 s
    QCOMPARE(tileValue(panel, "msPerToken"), QStringLiteral("20.0 ms"));
    QCOMPARE(tileDetail(panel, "prefillRate"), QStringLiteral("tok/s · 30 new, 10 reused"));
    panel.showStep(step(2, 5, 50, 80));  // the next reply: its own line and prefill point
    QCOMPARE(panel.decodePointCount(), 3);
    QCOMPARE(panel.prefillPointCount(), 2);
    auto* bars = panel.findChild<KernelBars*>();
    QCOMPARE(bars->kernels().size(), size_t{3});
    QCOMPARE(QString::fromStdString(bars->kernels().front().kernelClass), QStringLiteral("matvec"));
    QCOMPARE(QString::fromStdString(bars->kernels().back().kernelClass), QStringLiteral("norm"));
    panel.clear();
    QCOMPARE(panel.decodePointCount(), 0);
  }

  void schemePanelListsLayersAndRequestsPolicies() {
    SchemePanel panel;
    panel.setAvailableSchemes(
        {QStringLiteral("f16"), QStringLiteral("q8_0"), QStringLiteral("q4_0")});
    panel.setPolicy(QString());
    panel.setEditable(true);
    panel.showReport(twoLayerReport());
    auto* table = panel.findChild<QTableWidget*>(QStringLiteral("schemeTable"));
    QCOMPARE(table->rowCount(), 2);
    QCOMPARE(table->item(1, 1)->text(), QStringLiteral("q4_0"));
    QCOMPARE(table->item(1, 3)->text(), QStringLiteral("q8_0"));

    auto* apply = panel.findChild<QPushButton*>(QStringLiteral("applyPolicyButton"));
    QVERIFY(!apply->isEnabled());  // nothing changed yet
    auto* values = panel.findChild<QComboBox*>(QStringLiteral("valueSchemePicker"));
    values->setCurrentText(QStringLiteral("q4_0"));
    QVERIFY(apply->isEnabled());
    QSignalSpy requested(&panel, &SchemePanel::policyRequested);
    QTest::mouseClick(apply, Qt::LeftButton);
    QCOMPARE(requested.count(), 1);
    QCOMPARE(requested.at(0).at(0).toString(), QStringLiteral("k=f16,v=q4_0"));
    panel.setEditable(false);  // generating
    QVERIFY(!apply->isEnabled());
  }

  void presetsNeedTheirSchemes() {
    const auto names = [](const QList<PolicyPreset>& presets) {
      QStringList policies;
      for (const PolicyPreset& p : presets) policies << p.policy;
      return policies;
    };
    QCOMPARE(names(policyPresets({QStringLiteral("f16")})), QStringList{"k=f16,v=f16"});
    const QStringList some = names(
        policyPresets({QStringLiteral("f16"), QStringLiteral("q8_0"), QStringLiteral("q4_0")}));
    QCOMPARE(some, (QStringList{"k=f16,v=f16", "k=q8_0,v=q8_0"}));
    // Every preset once its schemes exist, from the largest to the smallest;
    // auto (at its 5.5 and 4.5 bits) once all its candidates exist.
    const QStringList noAuto = names(policyPresets(
        {QStringLiteral("f16"), QStringLiteral("q8_0"), QStringLiteral("q8_0r"),
         QStringLiteral("turbo6b"), QStringLiteral("turbo5b"), QStringLiteral("turbo4b")}));
    QCOMPARE(noAuto,
             (QStringList{"k=f16,v=f16", "k=q8_0r,v=q8_0r", "k=q8_0,v=q8_0", "k=q8_0r,v=turbo6b",
                          "k=turbo6b,v=turbo6b", "k=turbo5b,v=turbo5b", "k=turbo4b,v=turbo4b"}));
    const QList<PolicyPreset> withBlocks =
        policyPresets({QStringLiteral("f16"), QStringLiteral("q8_0"), QStringLiteral("q8_0r"),
                       QStringLiteral("turbo6b"), QStringLiteral("turbo5b"),
                       QStringLiteral("turbo4b"), QStringLiteral("turbo3b")});
    QCOMPARE(names(withBlocks),
             (QStringList{"k=f16,v=f16", "k=q8_0r,v=q8_0r", "k=q8_0,v=q8_0", "k=q8_0r,v=turbo6b",
                          "k=turbo6b,v=turbo6b", "auto", "k=turbo5b,v=turbo5b", "auto:4.5",
                          "k=turbo4b,v=turbo4b", "k=turbo3b,v=turbo3b"}));
    // Each name leads with its bits per value, which fall from preset to preset, and no
    // two presets share a name.
    QStringList seen;
    double previous = 1e9;
    for (const PolicyPreset& p : withBlocks) {
      const double bits = QLocale().toDouble(p.name.section(QLatin1Char(' '), 0, 0));
      QVERIFY2(bits > 0 && bits <= previous, qPrintable(p.name));
      previous = bits;
      QVERIFY2(!seen.contains(p.name), qPrintable(p.name));
      seen << p.name;
    }
    QCOMPARE(withBlocks.first().name, QStringLiteral("16.0 bits · f16, uncompressed"));
    // 8-bit K and V: q8_0 stores 34 bytes per 32 values.
    QVERIFY(seen.contains(QStringLiteral("8.5 bits · 8-bit K and V")));
    QVERIFY(seen.contains(QStringLiteral("5.5 bits · Auto, chosen per layer")));
    QVERIFY(seen.contains(QStringLiteral("4.5 bits · Auto, chosen per layer")));
  }

  void schemePanelShowsWhatAutoChose() {
    SchemePanel panel;
    panel.setAvailableSchemes({QStringLiteral("f16"), QStringLiteral("q8_0"),
                               QStringLiteral("q8_0r"), QStringLiteral("turbo6b"),
                               QStringLiteral("turbo5b"), QStringLiteral("turbo4b"),
                               QStringLiteral("turbo3b")});
    panel.setLayerCount(2);
    panel.setPolicy(QStringLiteral("auto"));
    panel.setEditable(true);
    auto* preset = panel.findChild<QComboBox*>(QStringLiteral("policyPreset"));
    auto* keys = panel.findChild<QComboBox*>(QStringLiteral("keySchemePicker"));
    auto* apply = panel.findChild<QPushButton*>(QStringLiteral("applyPolicyButton"));
    auto* status = panel.findChild<QLabel*>(QStringLiteral("autoStatus"));
    auto* table = panel.findChild<QTableWidget*>(QStringLiteral("schemeTable"));
    QCOMPARE(preset->currentData().toString(), QStringLiteral("auto"));
    QVERIFY(!keys->isEnabled());  // auto picks every layer's codecs
    QVERIFY(!apply->isEnabled());
    QCOMPARE(panel.chosenPolicy(), QStringLiteral("auto"));

    KvReport report = twoLayerReport();
    report.kv.autoStatus = "auto:5.5 chose 6.50 bits per value on average";
    report.kv.layers[1].keyScheme = "q8_0";
    report.kv.layers[1].keyPromotion = "K score error at turbo4b is 3.1x the median";
    const QString promotion = QString::fromStdString(report.kv.layers[1].keyPromotion);
    panel.showReport(report);
    auto* why = panel.findChild<QLabel*>(QStringLiteral("autoPromotions"));
    QVERIFY(!status->isHidden());
    QCOMPARE(status->text(), QString::fromStdString(report.kv.autoStatus));
    QVERIFY(!why->isHidden());
    QCOMPARE(why->text(), QStringLiteral("▲ layer 1 K → q8_0: ") + promotion);
    QCOMPARE(table->item(1, 1)->text(), QStringLiteral("q8_0 ▲"));
    QVERIFY(table->item(1, 1)->toolTip().contains(promotion));
    QCOMPARE(table->item(0, 1)->text(), QStringLiteral("q4_0"));
    // The disabled pickers show what most layers got (V: q8_0 in both layers).
    auto* values = panel.findChild<QComboBox*>(QStringLiteral("valueSchemePicker"));
    QCOMPARE(values->currentText(), QStringLiteral("q8_0"));
    QCOMPARE(panel.chosenPolicy(), QStringLiteral("auto"));  // still auto

    // Picking a codec by hand leaves auto; the Auto preset returns to it.
    keys->setCurrentText(QStringLiteral("q8_0"));
    QVERIFY(panel.chosenPolicy().startsWith(QStringLiteral("k=q8_0")));
    QVERIFY(apply->isEnabled());
    const int autoIndex = preset->findData(QStringLiteral("auto"));
    preset->setCurrentIndex(autoIndex);
    emit preset->activated(autoIndex);
    QCOMPARE(panel.chosenPolicy(), QStringLiteral("auto"));
    QVERIFY(!apply->isEnabled());  // the active policy again

    // Auto at another budget is its own preset, kept whole both ways.
    const int smallIndex = preset->findData(QStringLiteral("auto:4.5"));
    QVERIFY(smallIndex > 0);
    preset->setCurrentIndex(smallIndex);
    emit preset->activated(smallIndex);
    QCOMPARE(panel.chosenPolicy(), QStringLiteral("auto:4.5"));
    QCOMPARE(preset->currentData().toString(), QStringLiteral("auto:4.5"));
    QVERIFY(apply->isEnabled());
    QVERIFY(!keys->isEnabled());
    panel.setPolicy(QStringLiteral("auto:4.5"));
    QCOMPARE(preset->currentData().toString(), QStringLiteral("auto:4.5"));
    QVERIFY(!apply->isEnabled());
    preset->setCurrentIndex(autoIndex);
    emit preset->activated(autoIndex);
    QCOMPARE(panel.chosenPolicy(), QStringLiteral("auto"));
    QVERIFY(apply->isEnabled());  // back to 5.5 bits is a change

    // Another policy hides what auto did.
    panel.setPolicy(QStringLiteral("k=q8_0,v=q8_0"));
    report.kv.autoStatus.clear();
    report.kv.layers[1].keyPromotion.clear();
    panel.showReport(report);
    QVERIFY(status->isHidden());
    QVERIFY(why->isHidden());
    QVERIFY(keys->isEnabled());
  }

  void schemePanelPresetsBoundaryAndProgress() {
    SchemePanel panel;
    panel.setAvailableSchemes({QStringLiteral("f16"), QStringLiteral("q8_0r"),
                               QStringLiteral("turbo6b"), QStringLiteral("turbo3b")});
    panel.setLayerCount(32);
    panel.setPolicy(QStringLiteral("k=q8_0r,v=turbo6b,boundary=2"));
    panel.setEditable(true);
    auto* preset = panel.findChild<QComboBox*>(QStringLiteral("policyPreset"));
    auto* keys = panel.findChild<QComboBox*>(QStringLiteral("keySchemePicker"));
    auto* boundary = panel.findChild<QSpinBox*>(QStringLiteral("boundaryLayers"));
    auto* apply = panel.findChild<QPushButton*>(QStringLiteral("applyPolicyButton"));
    QCOMPARE(boundary->maximum(), 16);
    QCOMPARE(boundary->value(), 2);
    QCOMPARE(preset->currentData().toString(), QStringLiteral("k=q8_0r,v=turbo6b"));
    QVERIFY(!apply->isEnabled());  // the active policy, boundary included

    // A preset sets K and V and keeps the boundary.
    const int smallest = preset->findData(QStringLiteral("k=turbo3b,v=turbo3b"));
    QVERIFY(smallest > 0);
    preset->setCurrentIndex(smallest);
    emit preset->activated(smallest);
    QCOMPARE(keys->currentText(), QStringLiteral("turbo3b"));
    QCOMPARE(panel.chosenPolicy(), QStringLiteral("k=turbo3b,v=turbo3b,boundary=2"));
    boundary->setValue(0);
    QCOMPARE(panel.chosenPolicy(), QStringLiteral("k=turbo3b,v=turbo3b"));
    // A hand-picked pair no preset has reads as Custom.
    keys->setCurrentText(QStringLiteral("f16"));
    QCOMPARE(preset->currentIndex(), 0);
    QSignalSpy requested(&panel, &SchemePanel::policyRequested);
    QTest::mouseClick(apply, Qt::LeftButton);
    QCOMPARE(requested.at(0).at(0).toString(), QStringLiteral("k=f16,v=turbo3b"));

    auto* progress = panel.findChild<QProgressBar*>(QStringLiteral("reencodeProgress"));
    QVERIFY(progress->isHidden());
    panel.showProgress(30, 120);
    QVERIFY(!progress->isHidden());
    QCOMPARE(progress->value(), 30);
    QCOMPARE(progress->maximum(), 120);
    panel.hideProgress();
    QVERIFY(progress->isHidden());
  }

  void layerChartShowsTheMeasuredError() {
    KvLayerChart chart;
    std::vector<kvscope::runtime::KvLayerSnapshot> layers = twoLayerReport().kv.layers;
    chart.setLayers(layers);
    QVERIFY(chart.layerErrorText(0).isEmpty());  // not measured
    layers[0].keyError = 0.0003;
    layers[0].valueError = 0.061;
    layers[1].keyError = 0.012;
    chart.setLayers(layers);
    const QLocale locale;
    QCOMPARE(chart.layerErrorText(0),
             QStringLiteral("%1% / %2%")
                 .arg(locale.toString(0.03, 'f', 2), locale.toString(6.1, 'f', 1)));
    QCOMPARE(chart.layerErrorText(1), QStringLiteral("%1% / –").arg(locale.toString(1.2, 'f', 1)));
    QVERIFY(chart.layerToolTip(0).contains(QStringLiteral("reconstruction error")));
  }

  // 2 layers of 4 experts, 2 per token, 10 tokens; an expert is 100 bytes. The last
  // token used experts 0 and 2 in both layers.
  void expertPanelSummaryHoverAndTab() {
    ExpertReport report;
    report.turnId = 1;
    kvscope::backend::ExpertUsage& u = report.usage;
    u.nExpert = 4;
    u.nUsed = 2;
    u.rows = 10;
    u.counts = {{5, 5, 6, 4}, {10, 0, 10, 0}};
    u.lastStep = {{0, 2}, {2, 0}};
    u.expertBytes = 800;
    u.lastStepBytes = 400;
    ExpertPanel panel;
    QVERIFY(!panel.hasContent());
    panel.showReport(report);
    QVERIFY(panel.hasContent());
    const QString summary = panel.findChild<QLabel*>(QStringLiteral("expertSummary"))->text();
    QVERIFY2(summary.contains(QStringLiteral("2 of 4 experts per token, over 10 cached tokens")),
             qPrintable(summary));
    QVERIFY2(summary.contains(QStringLiteral("<b>%1</b> of expert weights (50% of %2)")
                                  .arg(formatBytes(400), formatBytes(800))),
             qPrintable(summary));
    ExpertHeatmap* map = panel.heatmap();
    QCOMPARE(map->cellText(0, 2),
             QStringLiteral("Layer 0 · expert 2: 6 of 10 tokens (60%) · used by the last token"));
    QCOMPARE(map->cellText(1, 1), QStringLiteral("Layer 1 · expert 1: 0 of 10 tokens (%1%)")
                                      .arg(QLocale().toString(0.0, 'f', 1)));
    QVERIFY(map->cellText(2, 0).isEmpty());
    map->resize(330, 200);  // plot: x 30..326, y 2..184
    QCOMPARE(map->cellAt(QPoint(31, 3)), std::make_pair(0, 0));
    QCOMPARE(map->cellAt(QPoint(325, 183)), std::make_pair(1, 3));
    QCOMPARE(map->cellAt(QPoint(5, 50)), std::make_pair(-1, -1));

    // The dock shows the tab, and the throughput tile, only for a model with experts.
    InspectorDock dock;
    ModelInfo dense;
    dense.kvLayers = 2;
    dock.setModel(dense, {}, 0);
    QVERIFY(!dock.expertTabVisible());
    auto* tile = dock.throughputPanel()->findChild<StatTile*>(QStringLiteral("expertBytes"));
    QVERIFY(tile->isHidden());
    ModelInfo moe = dense;
    moe.nExpert = 4;
    dock.setModel(moe, {}, 0);
    QVERIFY(dock.expertTabVisible());
    QVERIFY(!tile->isHidden());
    dock.showExperts(report);
    dock.flush();
    QVERIFY(dock.expertPanel()->hasContent());
    QCOMPARE(tile->value(), formatBytes(400));
    dock.clearModel();
    QVERIFY(!dock.expertTabVisible());
    QVERIFY(!dock.expertPanel()->hasContent());
  }

  void dockCoalescesBursts() {
    InspectorDock dock;
    KvReport report = twoLayerReport();
    for (quint32 rows = 1; rows <= 50; ++rows) {
      report.kv.rows = rows;
      dock.showKv(report);
    }
    QVERIFY(!dock.kvMemoryPanel()->hasContent());  // nothing painted per report
    dock.showStep(step(1, 10, 100, 50));
    dock.showStep(step(1, 20, 300, 60));
    dock.flush();
    QCOMPARE(dock.kvMemoryPanel()->summary().rows, quint32{50});  // the latest one
    QCOMPARE(dock.throughputPanel()->decodePointCount(), 2);      // every step is a point
    report.kv.rows = 51;
    dock.showKv(report);
    QTRY_COMPARE(dock.kvMemoryPanel()->summary().rows, quint32{51});  // the timer applies it
  }
};

QTEST_MAIN(InspectorPanelsTest)
#include "inspector_panels_test.moc"
