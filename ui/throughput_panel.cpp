#include "ui/throughput_panel.h"

#include <QChart>
#include <QChartView>
#include <QGraphicsLayout>
#include <QGridLayout>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLocale>
#include <QPainter>
#include <QScatterSeries>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "ui/stat_tile.h"
#include "ui/theme.h"

namespace kvscope::ui {
namespace {

constexpr int kMaxReplies = 32;  // older replies' lines are dropped from the chart
constexpr int kKernelRow = 20;

QString rate(double tokensPerSecond) {
  return tokensPerSecond > 0
             ? QLocale().toString(tokensPerSecond, 'f', tokensPerSecond < 100 ? 1 : 0)
             : QStringLiteral("–");
}

QString millis(double ms) {
  return QLocale().toString(ms, 'f', ms < 10 ? 2 : ms < 100 ? 1 : 0) + QStringLiteral(" ms");
}

// Rounds an axis maximum up to 1, 2 or 5 times a power of ten, for tidy tick labels.
double niceCeiling(double value) {
  if (value <= 0) return 1;
  const double magnitude = std::pow(10.0, std::floor(std::log10(value)));
  for (double step : {1.0, 2.0, 5.0, 10.0})
    if (value <= step * magnitude) return step * magnitude;
  return 10 * magnitude;
}

void styleAxis(QValueAxis* axis, const QColor& labels) {
  const ThemeColors& c = themeColors();
  axis->setLabelsFont(scaledFont(0.8));
  axis->setTitleFont(scaledFont(0.8));
  axis->setLabelsColor(labels);
  axis->setTitleBrush(labels);
  axis->setGridLineColor(c.border);
  axis->setLinePenColor(c.border);
  axis->setTickCount(5);
  axis->setMinorTickCount(0);
}

}  // namespace

KernelBars::KernelBars(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("kernelBars"));
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

void KernelBars::setKernels(const std::vector<backend::KernelTiming>& kernels) {
  m_kernels = kernels;
  std::sort(
      m_kernels.begin(), m_kernels.end(),
      [](const backend::KernelTiming& a, const backend::KernelTiming& b) { return a.ms > b.ms; });
  setFixedHeight(sizeHint().height());
  update();
}

QSize KernelBars::sizeHint() const {
  return {300, qMax(1, static_cast<int>(m_kernels.size())) * kKernelRow};
}

void KernelBars::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const ThemeColors& c = themeColors();
  p.setFont(scaledFont(0.85));
  if (m_kernels.empty()) {
    p.setPen(c.muted);
    p.drawText(rect(), Qt::AlignLeft | Qt::AlignVCenter,
               tr("No device timings: the CPU backend does not report them."));
    return;
  }
  double total = 0;
  for (const backend::KernelTiming& k : m_kernels) total += k.ms;
  const double longest = qMax(1e-9, m_kernels.front().ms);
  const int labelWidth = 86;
  const int valueWidth = 96;
  const int barArea = qMax(30, width() - labelWidth - valueWidth - 8);
  int y = 0;
  for (const backend::KernelTiming& k : m_kernels) {
    p.setPen(c.text);
    p.drawText(QRect(0, y, labelWidth - 6, kKernelRow), Qt::AlignLeft | Qt::AlignVCenter,
               p.fontMetrics().elidedText(QString::fromStdString(k.kernelClass), Qt::ElideRight,
                                          labelWidth - 6));
    const int w = qMax(1, qRound(k.ms / longest * barArea));
    p.fillRect(QRect(labelWidth, y + 5, barArea, kKernelRow - 10), c.sunken);
    p.fillRect(QRect(labelWidth, y + 5, w, kKernelRow - 10), c.accent);
    p.setPen(c.muted);
    const QString value = QStringLiteral("%1 · %2%")
                              .arg(millis(k.ms))
                              .arg(qRound(total > 0 ? 100 * k.ms / total : 0));
    p.drawText(QRect(width() - valueWidth, y, valueWidth, kKernelRow),
               Qt::AlignRight | Qt::AlignVCenter, value);
    y += kKernelRow;
  }
}

ThroughputPanel::ThroughputPanel(QWidget* parent)
    : InspectorPanel(
          QStringLiteral("throughputPanel"), PanelSketch::Kind::kThroughputLine,
          tr("No measurements yet"),
          tr("Prefill and decode speed in tokens per second, time to first token, and how each "
             "step's GPU time splits across kernels, as soon as the model starts working."),
          parent),
      m_chart(new QChart),
      m_chartView(new QChartView(m_chart)),
      m_axisX(new QValueAxis),
      m_axisDecode(new QValueAxis),
      m_axisPrefill(new QValueAxis),
      m_prefillSeries(new QScatterSeries),
      m_decode(new StatTile(QStringLiteral("decodeRate"), tr("Decode"))),
      m_prefill(new StatTile(QStringLiteral("prefillRate"), tr("Prefill"))),
      m_perToken(new StatTile(QStringLiteral("msPerToken"), tr("Per token"))),
      m_firstToken(new StatTile(QStringLiteral("firstToken"), tr("First token"))),
      m_expertBytes(new StatTile(QStringLiteral("expertBytes"), tr("Experts read"))),
      m_kernels(new KernelBars),
      m_kernelCaption(new QLabel) {
  const ThemeColors& c = themeColors();
  m_chart->setBackgroundVisible(false);
  m_chart->setMargins(QMargins(0, 4, 0, 0));
  m_chart->layout()->setContentsMargins(0, 0, 0, 0);
  m_chart->legend()->setFont(scaledFont(0.85));
  m_chart->legend()->setLabelColor(c.text);
  m_chart->legend()->setAlignment(Qt::AlignTop);
  m_chart->setAnimationOptions(QChart::NoAnimation);
  m_axisX->setTitleText(tr("tokens in context"));
  m_axisX->setLabelFormat(QStringLiteral("%d"));
  m_axisDecode->setTitleText(tr("decode tok/s"));
  m_axisDecode->setLabelFormat(QStringLiteral("%.0f"));
  m_axisPrefill->setTitleText(tr("prefill tok/s"));
  m_axisPrefill->setLabelFormat(QStringLiteral("%.0f"));
  styleAxis(m_axisX, c.muted);
  styleAxis(m_axisDecode, c.decode);
  styleAxis(m_axisPrefill, c.prefill);
  m_axisPrefill->setGridLineVisible(false);
  m_chart->addAxis(m_axisX, Qt::AlignBottom);
  m_chart->addAxis(m_axisDecode, Qt::AlignLeft);
  m_chart->addAxis(m_axisPrefill, Qt::AlignRight);
  m_prefillSeries->setName(tr("prefill"));
  m_prefillSeries->setColor(c.prefill);
  m_prefillSeries->setBorderColor(c.prefill);
  m_prefillSeries->setMarkerSize(9);
  m_chart->addSeries(m_prefillSeries);
  m_prefillSeries->attachAxis(m_axisX);
  m_prefillSeries->attachAxis(m_axisPrefill);
  m_chartView->setObjectName(QStringLiteral("throughputChart"));
  m_chartView->setRenderHint(QPainter::Antialiasing);
  m_chartView->setMinimumHeight(190);
  m_chartView->setStyleSheet(QStringLiteral("background: transparent;"));
  fitAxes();

  auto* content = new QWidget;
  auto* tiles = new QGridLayout;
  tiles->setSpacing(8);
  tiles->addWidget(m_decode, 0, 0);
  tiles->addWidget(m_prefill, 0, 1);
  tiles->addWidget(m_perToken, 1, 0);
  tiles->addWidget(m_firstToken, 1, 1);
  tiles->addWidget(m_expertBytes, 2, 0, 1, 2);
  m_expertBytes->hide();
  auto* kernelHeading = new QLabel(tr("DEVICE TIME PER KERNEL CLASS · LAST STEP"));
  kernelHeading->setProperty("role", "section");
  m_kernelCaption->setProperty("role", "caption");
  m_kernelCaption->setWordWrap(true);

  auto* column = new QVBoxLayout(content);
  column->setContentsMargins(12, 12, 12, 8);
  column->setSpacing(8);
  column->addLayout(tiles);
  column->addWidget(m_chartView, 1);
  column->addWidget(kernelHeading);
  column->addWidget(m_kernels);
  column->addWidget(m_kernelCaption);
  setContent(content);
}

int ThroughputPanel::decodePointCount() const {
  int count = 0;
  for (const QLineSeries* series : m_decodeSeries) count += series->count();
  return count;
}

int ThroughputPanel::prefillPointCount() const {
  return m_prefillSeries->count();
}

void ThroughputPanel::setExpertsShown(bool shown) {
  if (shown == !m_expertBytes->isHidden()) return;  // a policy switch keeps the reading
  m_expertBytes->setVisible(shown);
  m_expertBytes->setValue(QStringLiteral("–"));
  m_expertBytes->setDetail(tr("expert weights the last token read"));
}

void ThroughputPanel::showExperts(const backend::ExpertUsage& usage) {
  if (usage.expertBytes == 0 || usage.lastStepBytes == 0) {  // the last row's picks unknown
    m_expertBytes->setValue(QStringLiteral("–"));
    return;
  }
  m_expertBytes->setValue(formatBytes(usage.lastStepBytes));
  m_expertBytes->setDetail(
      tr("per token: %1 of the %2 of expert weights, %3 of %4 experts per layer")
          .arg(QLocale().toString(100.0 * double(usage.lastStepBytes) / double(usage.expertBytes),
                                  'f', 1) +
                   QLatin1Char('%'),
               formatBytes(usage.expertBytes))
          .arg(usage.nUsed)
          .arg(usage.nExpert));
}

void ThroughputPanel::clear() {
  for (QLineSeries* series : m_decodeSeries) {
    m_chart->removeSeries(series);
    delete series;
  }
  m_decodeSeries.clear();
  m_prefillSeries->clear();
  m_haveTurn = false;
  m_maxDecode = m_maxPrefill = m_maxX = 0;
  fitAxes();
  showContent(false);
}

void ThroughputPanel::showStep(const StepReport& report) {
  if (!m_haveTurn || report.turnId != m_turnId) startTurn(report.turnId);
  updatePrefillPoint(report.stats);
  addDecodeSample(report.stats);
  updateTiles(report.stats);
  m_kernels->setKernels(report.stats.kernels);
  m_last = report.stats;
  fitAxes();
  showContent(true);
}

void ThroughputPanel::startTurn(quint64 turnId) {
  m_turnId = turnId;
  m_haveTurn = true;
  m_last = {};
  auto* series = new QLineSeries;
  series->setColor(themeColors().decode);
  QPen pen = series->pen();
  pen.setWidthF(2);
  series->setPen(pen);
  series->setName(tr("decode"));
  m_chart->addSeries(series);
  series->attachAxis(m_axisX);
  series->attachAxis(m_axisDecode);
  m_decodeSeries.append(series);
  if (m_decodeSeries.size() > kMaxReplies) {
    QLineSeries* oldest = m_decodeSeries.takeFirst();
    m_chart->removeSeries(oldest);
    delete oldest;
  }
  // One legend entry for all the replies' lines.
  for (int i = 0; i < m_decodeSeries.size() - 1; ++i) {
    for (QLegendMarker* marker : m_chart->legend()->markers(m_decodeSeries.at(i)))
      marker->setVisible(false);
  }
}

void ThroughputPanel::updatePrefillPoint(const runtime::StepStats& report) {
  if (report.prefillTokensPerSecond() <= 0 || m_last.prefillTokensPerSecond() > 0) return;
  const double x = report.promptTokens;
  m_prefillSeries->append(x, report.prefillTokensPerSecond());
  m_maxPrefill = qMax(m_maxPrefill, report.prefillTokensPerSecond());
  m_maxX = qMax(m_maxX, x);
}

void ThroughputPanel::addDecodeSample(const runtime::StepStats& report) {
  if (report.generatedTokens <= m_last.generatedTokens || report.decodeMs <= m_last.decodeMs)
    return;
  // The rate since the previous report: the chart shows speed at this context length,
  // not the reply's running average.
  const double tokens = report.generatedTokens - m_last.generatedTokens;
  const double rate = m_last.decodeMs > 0 ? tokens * 1000.0 / (report.decodeMs - m_last.decodeMs)
                                          : report.decodeTokensPerSecond();
  if (rate <= 0) return;
  m_decodeSeries.last()->append(report.cachedTokens, rate);
  m_maxDecode = qMax(m_maxDecode, rate);
  m_maxX = qMax(m_maxX, double(report.cachedTokens));
}

void ThroughputPanel::updateTiles(const runtime::StepStats& report) {
  const ThemeColors& c = themeColors();
  m_decode->setValue(rate(report.decodeTokensPerSecond()), c.decode);
  QString decodeDetail = tr("tok/s · %1 generated").arg(report.generatedTokens);
  if (report.contextShifts > 0) {
    decodeDetail += tr(" · context shifted %1× (%2 tokens dropped)")
                        .arg(report.contextShifts)
                        .arg(report.shiftedTokens);
  }
  m_decode->setDetail(decodeDetail);
  m_prefill->setValue(rate(report.prefillTokensPerSecond()), c.prefill);
  const quint32 fresh = report.promptTokens - qMin(report.promptTokens, report.reusedTokens);
  m_prefill->setDetail(tr("tok/s · %1 new, %2 reused").arg(fresh).arg(report.reusedTokens));
  const double average =
      report.generatedTokens > 0 ? report.decodeMs / report.generatedTokens : 0.0;
  m_perToken->setValue(report.lastStepMs > 0 ? millis(report.lastStepMs) : QStringLiteral("–"));
  m_perToken->setDetail(average > 0 ? tr("last step · average %1").arg(millis(average))
                                    : tr("last step"));
  m_firstToken->setValue(report.prefillMs > 0 ? millis(report.prefillMs) : QStringLiteral("–"));
  m_firstToken->setDetail(tr("prompt processing of this reply"));
  double total = 0;
  for (const backend::KernelTiming& k : report.kernels) total += k.ms;
  m_kernelCaption->setText(
      report.kernels.empty()
          ? QString()
          : tr("%1 of device time in the last step, from Vulkan timestamps.").arg(millis(total)));
}

void ThroughputPanel::fitAxes() {
  m_axisX->setRange(0, niceCeiling(qMax(16.0, m_maxX * 1.05)));
  m_axisDecode->setRange(0, niceCeiling(qMax(1.0, m_maxDecode * 1.1)));
  m_axisPrefill->setRange(0, niceCeiling(qMax(1.0, m_maxPrefill * 1.1)));
}

}  // namespace kvscope::ui
