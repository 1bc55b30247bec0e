#include "ui/indexer_heatmap.h"

#include <QLocale>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include "ui/heatmap_axis.h"
#include "ui/theme.h"

namespace kvscope::ui {
namespace {

constexpr int kAxisWidth = 28;    // layer labels on the left
constexpr int kLegendHeight = 22;  // swatches above the plot
constexpr int kFooterHeight = 16;  // position labels below

// Where positions [first, last] of a layer stand: in one of the first layers,
// which attend every row (IndexerOptions::denseLayers), with a sink or a row
// of the recent window (both always attended), else among the rows picked by
// score.
enum class Zone { kDense, kSink, kWindow, kPicked };

// Whether every KV head of `layer` attends every row: a dense layer
// (IndexerOptions::denseLayers) or one whose heads are all dense heads.
bool denseLayer(const runtime::IndexerSnapshot& r, int layer) {
  const auto l = static_cast<uint32_t>(layer);
  if (!r.options.selects(l)) return true;
  if (l >= r.step.layers.size()) return false;
  const auto heads = static_cast<uint32_t>(r.step.layers[l].heads.size());
  for (uint32_t h = 0; h < heads; ++h)
    if (r.options.selectsHead(l, h)) return false;
  return heads > 0;
}

Zone zoneOf(const runtime::IndexerSnapshot& r, int layer, quint32 first, quint32 last) {
  if (denseLayer(r, layer)) return Zone::kDense;
  if (first < r.options.sinks) return Zone::kSink;
  if (quint64(last) + r.options.window >= r.step.rows) return Zone::kWindow;
  return Zone::kPicked;
}

QColor zoneColor(Zone zone) {
  const ThemeColors& c = themeColors();
  switch (zone) {
    case Zone::kDense:
      return c.muted;
    case Zone::kSink:
      return c.warning;
    case Zone::kWindow:
      return c.ok;
    case Zone::kPicked:
      break;
  }
  return c.accent;
}

QString quoted(QString text) {
  text.replace(QLatin1Char('\n'), QStringLiteral("⏎"));
  return QStringLiteral("“%1”").arg(text.toHtmlEscaped());
}

}  // namespace

IndexerHeatmap::IndexerHeatmap(const IndexerHistory& history, QWidget* parent)
    : QWidget(parent), m_history(history) {
  setObjectName(QStringLiteral("indexerHeatmap"));
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void IndexerHeatmap::setMode(Mode mode) {
  m_mode = mode;
  update();
}

QRect IndexerHeatmap::plotRect() const {
  return rect().adjusted(kAxisWidth, kLegendHeight, -4, -kFooterHeight);
}

std::pair<quint32, quint32> IndexerHeatmap::positionsAt(int x) const {
  const QRect plot = plotRect();
  const quint32 rows = m_history.rows();
  if (rows == 0 || x < plot.left() || x > plot.right()) return {1, 0};
  const quint32 columns = std::min<quint32>(rows, static_cast<quint32>(plot.width()));
  const auto column = static_cast<quint32>(
      std::min<qint64>(columns - 1, qint64(x - plot.left()) * columns / plot.width()));
  const auto first = static_cast<quint32>(quint64(column) * rows / columns);
  const auto last = static_cast<quint32>(quint64(column + 1) * rows / columns) - 1;
  return {first, last};
}

int IndexerHeatmap::layerAt(int y) const {
  const QRect plot = plotRect();
  if (m_history.layers() == 0 || y < plot.top() || y > plot.bottom()) return -1;
  return std::min(m_history.layers() - 1,
                  (y - plot.top()) * m_history.layers() / std::max(1, plot.height()));
}

float IndexerHeatmap::value(int layer, quint32 first, quint32 last) const {
  float sum = 0.0f;
  for (quint32 p = first; p <= last; ++p)
    sum += m_mode == Mode::kLastStep ? m_history.lastStep(layer, p) : m_history.frequency(layer, p);
  return sum / float(last - first + 1);
}

void IndexerHeatmap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const ThemeColors& c = themeColors();
  p.setFont(scaledFont(0.8));
  // Legend: what the four colours mean.
  int x = kAxisWidth;
  for (const auto& [zone, label] :
       {std::pair{Zone::kSink, tr("sinks")}, std::pair{Zone::kPicked, tr("picked by score")},
        std::pair{Zone::kWindow, tr("recent window")},
        std::pair{Zone::kDense, tr("dense layer")}}) {
    p.fillRect(QRect(x, 5, 10, 10), zoneColor(zone));
    p.setPen(c.muted);
    p.drawText(QPoint(x + 14, 14), label);
    x += 24 + p.fontMetrics().horizontalAdvance(label);
  }
  const QRect plot = plotRect();
  p.fillRect(plot, c.sunken);
  if (m_history.empty()) return;
  const runtime::IndexerSnapshot& report = m_history.last();
  const quint32 rows = m_history.rows();
  const int layers = m_history.layers();
  const quint32 columns = std::min<quint32>(rows, static_cast<quint32>(plot.width()));
  for (int l = 0; l < layers; ++l) {
    const int top = plot.top() + l * plot.height() / layers;
    const int bottom = plot.top() + (l + 1) * plot.height() / layers;
    const int gap = plot.height() / layers > 6 ? 1 : 0;
    for (quint32 col = 0; col < columns; ++col) {
      const int left = plot.left() + static_cast<int>(qint64(col) * plot.width() / columns);
      const int right = plot.left() + static_cast<int>(qint64(col + 1) * plot.width() / columns);
      const auto first = static_cast<quint32>(quint64(col) * rows / columns);
      const auto last = static_cast<quint32>(quint64(col + 1) * rows / columns) - 1;
      const float v = value(l, first, last);
      if (v <= 0.0f) continue;
      QColor color = zoneColor(zoneOf(report, l, first, last));
      color.setAlphaF(std::clamp(0.3f + 0.7f * v, 0.0f, 1.0f));
      p.fillRect(QRect(QPoint(left, top), QPoint(std::max(left, right - 1), bottom - 1 - gap)),
                 color);
    }
  }
  // Axes: a layer label every few rows, the first and last position below.
  p.setPen(c.muted);
  drawLayerLabels(p, plot, layers, kAxisWidth);
  const QRect footer(plot.left(), plot.bottom() + 2, plot.width(), kFooterHeight - 2);
  p.drawText(footer, Qt::AlignLeft | Qt::AlignVCenter, QStringLiteral("0"));
  p.drawText(footer, Qt::AlignRight | Qt::AlignVCenter, QLocale().toString(rows - 1));
  p.drawText(footer, Qt::AlignHCenter | Qt::AlignVCenter,
             columns < rows ? tr("position (%1 per column)").arg(QLocale().toString(double(rows) / columns, 'f', 1))
                            : tr("position"));
}

QString IndexerHeatmap::describe(const QPoint& point) const {
  const int layer = layerAt(point.y());
  const auto [first, last] = positionsAt(point.x());
  if (layer < 0 || first > last) return {};
  const QLocale locale;
  QString where = first == last ? tr("Position %1").arg(locale.toString(first))
                                : tr("Positions %1–%2").arg(locale.toString(first), locale.toString(last));
  QString text = tr("<b>Layer %1 · %2</b>").arg(layer).arg(where);
  if (first == last) {
    text += QStringLiteral("<br>") + quoted(m_history.tokenText(first));
  } else if (last - first < 12) {
    QString tokens;
    for (quint32 p = first; p <= last; ++p) tokens += m_history.tokenText(p);
    text += QStringLiteral("<br>") + quoted(tokens);
  }
  float now = 0.0f, often = 0.0f;
  for (quint32 p = first; p <= last; ++p) {
    now += m_history.lastStep(layer, p);
    often += m_history.frequency(layer, p);
  }
  const float n = float(last - first + 1);
  switch (zoneOf(m_history.last(), layer, first, last)) {
    case Zone::kDense:
      text += QStringLiteral("<br>");
      if (m_history.last().options.selects(static_cast<uint32_t>(layer))) {
        text +=
            tr("Every KV head of this layer is kept dense (indexer_dense_heads): it attends "
               "every row.");
      } else if (m_history.last().options.autoDenseHeads) {
        text +=
            tr("indexer_dense_heads=auto has not measured yet: every layer attends every "
               "row until then.");
      } else {
        text += tr("A dense layer (indexer_dense=%1): it attends every row.")
                    .arg(m_history.last().options.denseLayers);
      }
      break;
    case Zone::kSink:
      text += QStringLiteral("<br>") + tr("An attention sink: always attended.");
      break;
    case Zone::kWindow:
      text += QStringLiteral("<br>") + tr("In the recent window: always attended.");
      break;
    case Zone::kPicked:
      break;
  }
  text += QStringLiteral("<br>") + tr("Attended by %1% of the KV heads in the last step; "
                                      "%2% over the last %3 steps.")
                                       .arg(locale.toString(100.0 * now / n, 'f', 0),
                                            locale.toString(100.0 * often / n, 'f', 0))
                                       .arg(m_history.steps());
  return text;
}

void IndexerHeatmap::mouseMoveEvent(QMouseEvent* event) {
  const QString text = describe(event->position().toPoint());
  if (text.isEmpty()) {
    QToolTip::hideText();
  } else {
    QToolTip::showText(event->globalPosition().toPoint(), text, this);
  }
}

}  // namespace kvscope::ui
