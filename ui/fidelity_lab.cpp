#include "ui/fidelity_lab.h"

#include <algorithm>
#include <cmath>

#include <QChart>
#include <QChartView>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QListWidget>
#include <QLocale>
#include <QLogValueAxis>
#include <QProgressBar>
#include <QPushButton>
#include <QScatterSeries>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>

#include "runtime/eval.h"
#include "ui/scheme_panel.h"
#include "ui/theme.h"

namespace kvscope::ui {
namespace {

enum Column { kPolicy, kBits, kKld, kTop1, kApply, kColumns };

// The policy without the items that only say how attention reads the cache.
QString cacheItems(const QString& policy) {
  QStringList kept;
  for (const QString& item : policy.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    const QString name = item.section(QLatin1Char('='), 0, 0).trimmed();
    if (name != QLatin1String("indexer") && name != QLatin1String("indexer_scorer") &&
        name != QLatin1String("sparse_v"))
      kept << item.trimmed();
  }
  return kept.join(QLatin1Char(','));
}

QString kldText(double kld) {
  return kld == 0.0 ? QStringLiteral("0 (exact)") : QString::number(kld, 'e', 2);
}

// Point colours: distinct hues at the theme's saturation.
QColor pointColor(int i) {
  return QColor::fromHsv((i * 67 + 200) % 360, 150, 200);
}

}  // namespace

QList<int> paretoFront(const QList<ComparisonPoint>& points) {
  QList<int> front;
  for (int i = 0; i < points.size(); ++i) {
    const ComparisonPoint& p = points.at(i);
    const bool beaten = std::any_of(points.begin(), points.end(), [&](const ComparisonPoint& q) {
      return (q.bitsPerValue <= p.bitsPerValue && q.kld < p.kld) ||
             (q.bitsPerValue < p.bitsPerValue && q.kld <= p.kld);
    });
    if (!beaten) front.append(i);
  }
  std::sort(front.begin(), front.end(),
            [&](int a, int b) { return points.at(a).bitsPerValue < points.at(b).bitsPerValue; });
  return front;
}

FidelityLab::FidelityLab(QWidget* parent)
    : QDialog(parent),
      m_summary(new QLabel),
      m_policies(new QListWidget),
      m_run(new QPushButton(tr("Run comparison"))),
      m_cancel(new QPushButton(tr("Cancel"))),
      m_progress(new QProgressBar),
      m_chart(new QChart),
      m_chartView(new QChartView(m_chart)),
      m_axisBits(new QValueAxis),
      m_axisKld(new QLogValueAxis),
      m_table(new QTableWidget(0, kColumns)) {
  setObjectName(QStringLiteral("fidelityLab"));
  setWindowTitle(tr("Compare schemes on this conversation"));
  resize(1100, 780);
  const ThemeColors& c = themeColors();

  m_summary->setObjectName(QStringLiteral("labSummary"));
  m_summary->setWordWrap(true);
  m_policies->setObjectName(QStringLiteral("labPolicies"));
  m_run->setObjectName(QStringLiteral("labRun"));
  m_run->setProperty("role", "primary");
  m_run->setEnabled(false);
  m_cancel->setObjectName(QStringLiteral("labCancel"));
  m_cancel->setEnabled(false);
  m_progress->setObjectName(QStringLiteral("labProgress"));
  m_progress->setFormat(tr("%p% of the forced steps"));
  m_progress->hide();

  m_chart->setBackgroundVisible(false);
  m_chart->setAnimationOptions(QChart::NoAnimation);
  m_chart->legend()->setAlignment(Qt::AlignRight);
  m_chart->legend()->setLabelColor(c.text);
  m_chart->legend()->setFont(scaledFont(0.85));
  m_axisBits->setTitleText(tr("bits per value (K and V, averaged)"));
  m_axisBits->setLabelFormat(QStringLiteral("%.1f"));
  m_axisKld->setTitleText(tr("KLD to the f16 cache (nats, log)"));
  m_axisKld->setLabelFormat(QStringLiteral("%.0e"));
  m_axisKld->setMinorTickCount(-1);
  for (QAbstractAxis* axis :
       {static_cast<QAbstractAxis*>(m_axisBits), static_cast<QAbstractAxis*>(m_axisKld)}) {
    axis->setLabelsColor(c.muted);
    axis->setTitleBrush(c.muted);
    axis->setGridLineColor(c.border);
  }
  m_chart->addAxis(m_axisBits, Qt::AlignBottom);
  m_chart->addAxis(m_axisKld, Qt::AlignLeft);
  m_chartView->setObjectName(QStringLiteral("labChart"));
  m_chartView->setRenderHint(QPainter::Antialiasing);
  m_chartView->setMinimumSize(560, 360);

  m_table->setObjectName(QStringLiteral("labTable"));
  m_table->setHorizontalHeaderLabels(
      {tr("Policy"), tr("bits/value"), tr("KLD"), tr("top-1"), QString()});
  m_table->verticalHeader()->hide();
  m_table->setSelectionMode(QAbstractItemView::NoSelection);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setSectionResizeMode(kPolicy, QHeaderView::Stretch);
  m_table->setMinimumHeight(300);

  auto* side = new QVBoxLayout;
  auto* heading = new QLabel(tr("POLICIES"));
  heading->setProperty("role", "section");
  side->addWidget(m_summary);
  side->addWidget(heading);
  side->addWidget(m_policies, 1);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_run);
  buttons->addWidget(m_cancel);
  side->addLayout(buttons);
  side->addWidget(m_progress);
  auto* main = new QVBoxLayout;
  main->addWidget(m_chartView, 1);
  main->addWidget(m_table);
  auto* layout = new QHBoxLayout(this);
  layout->addLayout(side, 0);
  layout->addLayout(main, 1);
  m_policies->setMaximumWidth(300);

  connect(m_run, &QPushButton::clicked, this, &FidelityLab::run);
  connect(m_cancel, &QPushButton::clicked, &m_comparison, &SchemeComparison::cancel);
  connect(&m_comparison, &SchemeComparison::progress, this, [this](quint64 done, quint64 total) {
    m_progress->setRange(0, 1000);
    m_progress->setValue(total ? static_cast<int>(1000 * done / total) : 0);
  });
  connect(&m_comparison, &SchemeComparison::finished, this,
          [this](const QList<ComparisonPoint>& points) {
            m_points = points;
            m_progress->hide();
            m_run->setEnabled(true);
            m_cancel->setEnabled(false);
            showPoints();
            emit comparisonFinished();
          });
  connect(&m_comparison, &SchemeComparison::failed, this, [this](const QString& message) {
    m_progress->hide();
    m_run->setEnabled(!m_tokens.isEmpty());
    m_cancel->setEnabled(false);
    m_summary->setText(message);
  });
}

void FidelityLab::setPolicies(const QList<PolicyPreset>& presets, const QStringList& checked) {
  m_policies->clear();
  m_names.clear();
  m_texts.clear();
  for (const PolicyPreset& preset : presets) {
    auto* item = new QListWidgetItem(preset.name, m_policies);
    item->setData(Qt::UserRole, preset.policy);
    item->setToolTip(preset.policy);
    item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsUserCheckable);
    item->setCheckState(checked.contains(preset.policy) ? Qt::Checked : Qt::Unchecked);
    m_names << preset.name;
    m_texts << preset.policy;
  }
}

void FidelityLab::setCurrentPolicy(const QString& policy) {
  m_current = cacheItems(policy);
  if (!m_points.isEmpty()) showPoints();
}

void FidelityLab::setConversation(const QString& modelPath, const QList<qint32>& tokens,
                                  bool runNow) {
  m_modelPath = modelPath;
  m_tokens = tokens;
  m_summary->setText(
      tr("%n tokens of this conversation: one run with an f16 cache, then one per policy, "
         "each token fed in turn and compared with f16 (CPU backend, half the cores; the "
         "chat stays usable).",
         nullptr, static_cast<int>(tokens.size())));
  // eval needs its prefill and two forced steps.
  const bool enough = tokens.size() >= qsizetype{runtime::EvalOptions{}.prefill} + 2;
  m_run->setEnabled(enough && !m_comparison.running());
  if (!enough) m_summary->setText(tr("The conversation is too short to compare on."));
  if (runNow && m_run->isEnabled()) run();
}

void FidelityLab::setUnavailable(const QString& message) {
  m_tokens.clear();
  m_run->setEnabled(false);
  m_summary->setText(message);
}

void FidelityLab::run() {
  QStringList policies;
  for (int i = 0; i < m_policies->count(); ++i) {
    const QListWidgetItem* item = m_policies->item(i);
    if (item->checkState() == Qt::Checked) policies << item->data(Qt::UserRole).toString();
  }
  if (policies.isEmpty()) {
    m_summary->setText(tr("Tick at least one policy to compare."));
    return;
  }
  if (!m_comparison.start(m_modelPath, m_tokens, policies)) return;
  m_run->setEnabled(false);
  m_cancel->setEnabled(true);
  m_progress->setValue(0);
  m_progress->show();
}

void FidelityLab::showPoints() {
  const ThemeColors& c = themeColors();
  m_chart->removeAllSeries();
  double minBits = INFINITY, maxBits = 0, minKld = INFINITY, maxKld = 0;
  for (const ComparisonPoint& p : m_points) {
    if (p.kld <= 0.0) continue;  // exact (f16): no place on a log scale; in the table
    minBits = std::min(minBits, p.bitsPerValue);
    maxBits = std::max(maxBits, p.bitsPerValue);
    minKld = std::min(minKld, p.kld);
    maxKld = std::max(maxKld, p.kld);
  }
  const QList<int> front = paretoFront(m_points);
  auto* frontLine = new QLineSeries;
  frontLine->setName(tr("Pareto front"));
  QPen dashed(c.muted, 1.5, Qt::DashLine);
  frontLine->setPen(dashed);
  for (int i : front)
    if (m_points.at(i).kld > 0.0)
      frontLine->append(m_points.at(i).bitsPerValue, m_points.at(i).kld);
  m_chart->addSeries(frontLine);
  frontLine->attachAxis(m_axisBits);
  frontLine->attachAxis(m_axisKld);

  m_table->setRowCount(static_cast<int>(m_points.size()));
  for (int i = 0; i < m_points.size(); ++i) {
    const ComparisonPoint& p = m_points.at(i);
    const int named = static_cast<int>(m_texts.indexOf(p.policy));
    const QString name = named >= 0 ? m_names.at(named) : p.policy;
    const bool current = p.policy == m_current || p.used == m_current;
    if (p.kld > 0.0) {
      auto* series = new QScatterSeries;
      series->setName(current ? tr("%1 (current)").arg(name) : name);
      series->setColor(pointColor(i));
      series->setMarkerSize(current ? 18 : 12);
      series->setBorderColor(current ? c.text : pointColor(i).darker(130));
      QPen border(current ? c.text : pointColor(i).darker(130), current ? 3 : 1);
      series->setPen(border);
      series->append(p.bitsPerValue, p.kld);
      m_chart->addSeries(series);
      series->attachAxis(m_axisBits);
      series->attachAxis(m_axisKld);
      connect(series, &QScatterSeries::clicked, this,
              [this, policy = p.policy] { emit applyRequested(policy); });
    }
    auto* policyItem = new QTableWidgetItem(current ? tr("%1 · current").arg(name) : name);
    policyItem->setToolTip(p.used);
    if (front.contains(i)) policyItem->setForeground(c.accent);
    m_table->setItem(i, kPolicy, policyItem);
    m_table->setItem(i, kBits, new QTableWidgetItem(QLocale().toString(p.bitsPerValue, 'f', 2)));
    m_table->setItem(i, kKld, new QTableWidgetItem(kldText(p.kld)));
    m_table->setItem(
        i, kTop1,
        new QTableWidgetItem(QLocale().toString(100.0 * p.top1, 'f', 1) + QLatin1Char('%')));
    auto* apply = new QPushButton(tr("Apply"));
    apply->setEnabled(!current);
    connect(apply, &QPushButton::clicked, this,
            [this, policy = p.policy] { emit applyRequested(policy); });
    m_table->setCellWidget(i, kApply, apply);
  }
  if (std::isfinite(minBits)) {
    const double lo = std::floor(minBits - 0.5), hi = std::ceil(maxBits + 0.5);
    m_axisBits->setRange(lo, hi);
    m_axisBits->setTickCount(static_cast<int>(hi - lo) + 1);  // a tick per whole bit
    m_axisBits->setLabelFormat(QStringLiteral("%.0f"));
    m_axisKld->setRange(std::pow(10.0, std::floor(std::log10(minKld))),
                        std::pow(10.0, std::ceil(std::log10(maxKld))));
  }
  m_summary->setText(
      tr("KLD to f16 over %n forced steps of this conversation; lower and to "
         "the left is better. Click a point, or Apply, to re-encode the cache "
         "with that policy.",
         nullptr, static_cast<int>(m_tokens.size() - runtime::EvalOptions{}.prefill)));
}

}  // namespace kvscope::ui
