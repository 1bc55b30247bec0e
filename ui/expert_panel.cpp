#include "ui/expert_panel.h"

#include <QHelpEvent>
#include <QLabel>
#include <QLocale>
#include <QPainter>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>

#include "ui/heatmap_axis.h"
#include "ui/theme.h"

namespace kvscope::ui {
namespace {

constexpr int kAxisWidth = 30;     // layer labels
constexpr int kFooterHeight = 16;  // expert labels

int layerCount(const backend::ExpertUsage& u) {
  return static_cast<int>(u.counts.size());
}

QString percent(double share) {
  return QLocale().toString(100.0 * share, 'f', share < 0.1 ? 1 : 0) + QLatin1Char('%');
}

}  // namespace

ExpertHeatmap::ExpertHeatmap(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("expertHeatmap"));
  setMouseTracking(true);
  setMinimumHeight(120);
}

void ExpertHeatmap::setUsage(const backend::ExpertUsage& usage) {
  m_usage = usage;
  update();
}

QRect ExpertHeatmap::plotRect() const {
  return rect().adjusted(kAxisWidth, 2, -4, -kFooterHeight);
}

std::pair<int, int> ExpertHeatmap::cellAt(QPoint point) const {
  const QRect plot = plotRect();
  const int layers = layerCount(m_usage);
  const int experts = static_cast<int>(m_usage.nExpert);
  if (layers == 0 || experts == 0 || !plot.contains(point)) return {-1, -1};
  const int layer = std::min(layers - 1, (point.y() - plot.top()) * layers / plot.height());
  const int expert = std::min(experts - 1, (point.x() - plot.left()) * experts / plot.width());
  return {layer, expert};
}

bool ExpertHeatmap::usedLast(int layer, int expert) const {
  if (layer < 0 || layer >= static_cast<int>(m_usage.lastStep.size())) return false;
  const auto& last = m_usage.lastStep[static_cast<size_t>(layer)];
  return std::find(last.begin(), last.end(), static_cast<uint32_t>(expert)) != last.end();
}

QString ExpertHeatmap::cellText(int layer, int expert) const {
  if (layer < 0 || layer >= layerCount(m_usage) || expert < 0 ||
      expert >= static_cast<int>(m_usage.nExpert))
    return {};
  const uint32_t count = m_usage.counts[size_t(layer)][size_t(expert)];
  QString text = tr("Layer %1 · expert %2: %3 of %4 tokens (%5)")
                     .arg(layer)
                     .arg(expert)
                     .arg(QLocale().toString(count), QLocale().toString(m_usage.rows),
                          percent(m_usage.rows ? double(count) / m_usage.rows : 0.0));
  if (usedLast(layer, expert)) text += tr(" · used by the last token");
  return text;
}

bool ExpertHeatmap::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const auto [layer, expert] = cellAt(help->pos());
    const QString text = cellText(layer, expert);
    if (text.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(help->globalPos(), text, this);
    return true;
  }
  return QWidget::event(event);
}

void ExpertHeatmap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const ThemeColors& c = themeColors();
  p.setFont(scaledFont(0.8));
  const QRect plot = plotRect();
  p.fillRect(plot, c.sunken);
  const int layers = layerCount(m_usage);
  const int experts = static_cast<int>(m_usage.nExpert);
  if (layers == 0 || experts == 0) return;
  for (int l = 0; l < layers; ++l) {
    const auto& counts = m_usage.counts[size_t(l)];
    const uint32_t most = std::max(1u, *std::max_element(counts.begin(), counts.end()));
    const int top = plot.top() + l * plot.height() / layers;
    const int bottom = plot.top() + (l + 1) * plot.height() / layers;
    const int gap = plot.height() / layers > 6 ? 1 : 0;
    for (int e = 0; e < experts; ++e) {
      const int left = plot.left() + e * plot.width() / experts;
      const int right = plot.left() + (e + 1) * plot.width() / experts;
      const QRect cell(QPoint(left, top),
                       QPoint(std::max(left, right - 1 - (right - left > 4)), bottom - 1 - gap));
      if (counts[size_t(e)] > 0) {
        QColor heat = c.keys;
        heat.setAlphaF(0.15f + 0.85f * float(counts[size_t(e)]) / float(most));
        p.fillRect(cell, heat);
      }
      if (usedLast(l, e)) {
        p.setPen(QPen(c.values, 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(cell.adjusted(1, 1, -1, -1));
      }
    }
  }
  // Axes: a layer label every few rows, the first and last expert below.
  p.setPen(c.muted);
  drawLayerLabels(p, plot, layers, kAxisWidth);
  const QRect footer(plot.left(), plot.bottom() + 2, plot.width(), kFooterHeight - 2);
  p.drawText(footer, Qt::AlignLeft | Qt::AlignVCenter, tr("expert 0"));
  p.drawText(footer, Qt::AlignCenter, tr("each layer scaled to its most used expert"));
  p.drawText(footer, Qt::AlignRight | Qt::AlignVCenter, QString::number(experts - 1));
}

ExpertPanel::ExpertPanel(QWidget* parent)
    : InspectorPanel(QStringLiteral("expertPanel"), PanelSketch::Kind::kSelectedRows,
                     tr("No experts picked yet"),
                     tr("In a mixture-of-experts model a router picks a few experts per token "
                        "in every layer. Once the model has run, this panel shows which experts "
                        "the last token used and how often each was picked over the "
                        "conversation."),
                     parent),
      m_summary(new QLabel),
      m_heatmap(new ExpertHeatmap) {
  auto* content = new QWidget;
  auto* heading = new QLabel(tr("EXPERTS PICKED"));
  heading->setProperty("role", "section");
  m_summary->setObjectName(QStringLiteral("expertSummary"));
  m_summary->setWordWrap(true);
  auto* legend =
      new QLabel(tr("Shade: how often the router picked the expert over the cached "
                    "tokens. Outlined: the last token's experts. Hover a cell for "
                    "its count."));
  legend->setProperty("role", "caption");
  legend->setWordWrap(true);
  auto* column = new QVBoxLayout(content);
  column->setContentsMargins(12, 12, 12, 8);
  column->setSpacing(8);
  column->addWidget(heading);
  column->addWidget(m_summary);
  column->addWidget(m_heatmap, 1);
  column->addWidget(legend);
  setContent(content);
}

void ExpertPanel::showReport(const ExpertReport& report) {
  const backend::ExpertUsage& u = report.usage;
  if (u.nExpert == 0) return;
  m_heatmap->setUsage(u);
  const QLocale locale;
  QString text =
      tr("%1 of %2 experts per token, over %3 cached tokens")
          .arg(locale.toString(u.nUsed), locale.toString(u.nExpert), locale.toString(u.rows));
  if (u.cachedRows > u.rows) {
    text += tr(" (%1 more restored from a saved cache, their experts unknown)")
                .arg(locale.toString(u.cachedRows - u.rows));
  }
  if (u.lastStepBytes > 0 && u.expertBytes > 0) {
    text +=
        QStringLiteral("<br>") + tr("The last token read <b>%1</b> of expert weights (%2 of %3)")
                                     .arg(formatBytes(u.lastStepBytes),
                                          percent(double(u.lastStepBytes) / double(u.expertBytes)),
                                          formatBytes(u.expertBytes));
  }
  m_summary->setText(text);
  showContent(true);
}

void ExpertPanel::clear() {
  m_heatmap->setUsage({});
  showContent(false);
}

}  // namespace kvscope::ui
