#include "ui/kv_memory_panel.h"

#include <algorithm>

#include <QGridLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QLocale>
#include <QPainter>
#include <QScrollArea>
#include <QToolTip>
#include <QVBoxLayout>

#include "ui/stat_tile.h"
#include "ui/theme.h"

namespace kvscope::ui {
namespace {

constexpr int kLabelWidth = 34;
constexpr int kBytesWidth = 68;
constexpr int kErrorWidth = 88;  // "0.03% / 12.4%"
constexpr int kStreamGap = 2;
constexpr int kRowGap = 7;

// Shades of one stream's colour: codes full strength, scales paler, other bytes faint, the
// precision tail's f16 rows darker; the indexer's sidecar (K only) in the accent colour, as in
// the Indexer panel.
QColor blend(const QColor& color, const QColor& over, double amount) {
  return QColor::fromRgbF(float(color.redF() * amount + over.redF() * (1 - amount)),
                          float(color.greenF() * amount + over.greenF() * (1 - amount)),
                          float(color.blueF() * amount + over.blueF() * (1 - amount)));
}

struct PartColors {
  QColor codes, scales, other, sidecar, tail;
};

PartColors partColors(const QColor& stream) {
  const QColor surface = themeColors().surface;
  return {stream, blend(stream, surface, 0.5), blend(stream, surface, 0.22),
          blend(themeColors().accent, surface, 0.6), blend(stream, themeColors().text, 0.55)};
}

// A measured error as a percentage: two decimals below 1%, one above; "–" unmeasured.
QString percent(double error) {
  if (error < 0) return QStringLiteral("–");
  return QLocale().toString(error * 100, 'f', error < 0.01 ? 2 : 1) + QLatin1Char('%');
}

bool anyError(const std::vector<runtime::KvLayerSnapshot>& layers) {
  for (const runtime::KvLayerSnapshot& l : layers)
    if (l.keyError >= 0 || l.valueError >= 0) return true;
  return false;
}

quint64 streamScale(const std::vector<runtime::KvLayerSnapshot>& layers) {
  quint64 scale = 1;
  for (const runtime::KvLayerSnapshot& layer : layers) {
    scale = qMax(scale, layer.f16Bytes / 2);
    scale = qMax(scale, layer.key.used());
    scale = qMax(scale, layer.value.used());
  }
  return scale;
}

QString bits(double value) {
  return QLocale().toString(value, 'f', value < 10 ? 2 : 1);
}

QString streamRows(const QString& name, const std::string& scheme, double bitsPerValue,
                   const kv::KvBytes& bytes, quint64 f16, double error) {
  QString rows = QStringLiteral("<tr><td><b>%1</b></td><td><b>%2</b> · %3 bits/value</td></tr>")
                     .arg(name, QString::fromStdString(scheme).toHtmlEscaped(), bits(bitsPerValue));
  rows += QStringLiteral("<tr><td></td><td>codes %1 · scales %2 · other %3</td></tr>")
              .arg(formatBytes(bytes.codes), formatBytes(bytes.scales), formatBytes(bytes.padding));
  if (bytes.sidecar > 0) {
    rows += QStringLiteral("<tr><td></td><td>indexer sidecar %1</td></tr>")
                .arg(formatBytes(bytes.sidecar));
  }
  if (bytes.tail > 0) {
    rows += QStringLiteral("<tr><td></td><td>precision tail %1 (the last rows at f16)</td></tr>")
                .arg(formatBytes(bytes.tail));
  }
  const double ratio = bytes.used() > 0 ? double(f16) / bytes.used() : 1.0;
  rows += QStringLiteral("<tr><td></td><td>%1 stored · f16 %2 · %3×</td></tr>")
              .arg(formatBytes(bytes.used()), formatBytes(f16), QLocale().toString(ratio, 'f', 2));
  if (error >= 0) {
    rows += QStringLiteral("<tr><td></td><td>reconstruction error %1%</td></tr>")
                .arg(QLocale().toString(error * 100, 'f', 2));
  }
  return rows;
}

// The colour key above the chart: K and V, their three parts, and the f16 outline.
class KvLegend : public QWidget {
 public:
  explicit KvLegend(QWidget* parent = nullptr) : QWidget(parent) {
    setFixedHeight(fontMetrics().height() * 2 + 10);
  }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    p.setFont(scaledFont(0.85));
    const ThemeColors& c = themeColors();
    const int line = fontMetrics().height() + 4;
    int y = 2;
    for (const auto& [name, color] :
         {std::pair{QObject::tr("K"), c.keys}, std::pair{QObject::tr("V"), c.values}}) {
      const PartColors parts = partColors(color);
      int x = 0;
      p.setPen(c.text);
      p.drawText(QRect(x, y, 16, line), Qt::AlignVCenter, name);
      x += 18;
      for (const auto& [label, swatch] : {std::pair{QObject::tr("codes"), parts.codes},
                                          std::pair{QObject::tr("scales"), parts.scales},
                                          std::pair{QObject::tr("other"), parts.other}}) {
        p.fillRect(QRect(x, y + line / 2 - 5, 10, 10), swatch);
        x += 14;
        p.setPen(c.muted);
        const int width = p.fontMetrics().horizontalAdvance(label);
        p.drawText(QRect(x, y, width, line), Qt::AlignVCenter, label);
        x += width + 12;
      }
      if (name == QObject::tr("K")) {
        p.fillRect(QRect(x, y + line / 2 - 5, 10, 10), parts.sidecar);
        x += 14;
        p.setPen(c.muted);
        const QString sidecar = QObject::tr("indexer");
        p.drawText(QRect(x, y, p.fontMetrics().horizontalAdvance(sidecar), line), Qt::AlignVCenter,
                   sidecar);
        x += p.fontMetrics().horizontalAdvance(sidecar) + 12;
        p.setPen(QPen(c.text, 1));
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRectF(x + 0.5, y + line / 2 - 4.5, 18, 9));
        p.setPen(c.muted);
        p.drawText(QRect(x + 24, y, 120, line), Qt::AlignVCenter, QObject::tr("f16 size"));
      } else {
        p.fillRect(QRect(x, y + line / 2 - 5, 10, 10), parts.tail);
        x += 14;
        p.setPen(c.muted);
        p.drawText(QRect(x, y, 120, line), Qt::AlignVCenter, QObject::tr("f16 tail"));
      }
      y += line;
    }
  }
};

}  // namespace

QString tokenCount(quint64 tokens) {
  const QLocale locale;
  if (tokens < 10000) return locale.toString(tokens);
  if (tokens < 1000000) return QStringLiteral("%1k").arg(locale.toString(tokens / 1000.0, 'f', 0));
  return QStringLiteral("%1M").arg(locale.toString(tokens / 1e6, 'f', 1));
}

KvSummary summarizeKv(const KvReport& report, quint64 deviceBytes, quint64 weightBytes,
                      quint64 trainedContext) {
  KvSummary s;
  s.rows = report.kv.rows;
  quint64 growing = 0, growingF16 = 0, ringF16 = 0;  // by layers that grow with the context or not
  for (const runtime::KvLayerSnapshot& layer : report.kv.layers) {
    s.keyBytes += layer.key.used();
    s.valueBytes += layer.value.used();
    s.f16Bytes += layer.f16Bytes;
    if (layer.ring) {
      s.ringBytes += layer.key.total() + layer.value.total();
      ringF16 += layer.f16Bytes;
    } else {
      growing += layer.key.used() + layer.value.used();
      growingF16 += layer.f16Bytes;
    }
  }
  s.bytes = s.keyBytes + s.valueBytes;
  if (s.bytes == 0) return s;
  s.ratio = double(s.f16Bytes) / double(s.bytes);
  // f16 stores each value in 16 bits, so the f16 size counts the values.
  const double values = s.f16Bytes / 2.0;
  s.bitsPerValue = s.bytes * 8.0 / values;
  s.keyBitsPerValue = s.keyBytes * 8.0 / (values / 2);
  s.valueBitsPerValue = s.valueBytes * 8.0 / (values / 2);
  if (s.rows == 0) return s;
  s.bytesPerToken = growing / s.rows;
  if (deviceBytes > weightBytes + s.ringBytes && s.bytesPerToken > 0) {
    s.maxContext = (deviceBytes - weightBytes - s.ringBytes) / s.bytesPerToken;
    if (deviceBytes > weightBytes + ringF16)
      s.maxContextF16 =
          (deviceBytes - weightBytes - ringF16) / qMax<quint64>(1, growingF16 / s.rows);
  }
  s.trainedContextBinds =
      trainedContext > 0 && (s.maxContext == 0 || trainedContext <= s.maxContext);
  s.usableContext = s.trainedContextBinds ? trainedContext : s.maxContext;
  if (deviceBytes > 0 && deviceBytes <= weightBytes) s.usableContext = 0;  // nothing fits
  return s;
}

KvLayerChart::KvLayerChart(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("kvLayerChart"));
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  setMouseTracking(true);
}

void KvLayerChart::setLayers(const std::vector<runtime::KvLayerSnapshot>& layers) {
  const bool resized = layers.size() != m_layers.size();
  m_layers = layers;
  if (resized) {
    setFixedHeight(sizeHint().height());
    updateGeometry();
  }
  update();
}

int KvLayerChart::barHeight() const {
  const size_t n = m_layers.size();
  return n > 40 ? 5 : n > 20 ? 6 : n > 8 ? 8 : 11;
}

int KvLayerChart::rowHeight() const {
  return 2 * barHeight() + kStreamGap + kRowGap;
}

QSize KvLayerChart::sizeHint() const {
  return {320, static_cast<int>(m_layers.size()) * rowHeight() + 4};
}

int KvLayerChart::layerAt(QPoint point) const {
  const int row = (point.y() - 2) / rowHeight();
  return point.y() >= 2 && row < layerCount() ? row : -1;
}

QString KvLayerChart::layerErrorText(int layer) const {
  if (layer < 0 || layer >= layerCount()) return {};
  const runtime::KvLayerSnapshot& l = m_layers.at(layer);
  if (l.keyError < 0 && l.valueError < 0) return {};
  return QStringLiteral("%1 / %2").arg(percent(l.keyError), percent(l.valueError));
}

QString KvLayerChart::layerToolTip(int layer) const {
  if (layer < 0 || layer >= layerCount()) return {};
  const runtime::KvLayerSnapshot& l = m_layers.at(layer);
  const quint64 f16 = l.f16Bytes / 2;
  const QLocale locale;
  QString kind;
  if (l.window > 0 && l.ring) {
    kind = tr("sliding window of %1 tokens: keeps its last %2 rows in a ring")
               .arg(locale.toString(l.window), locale.toString(l.rows));
  } else if (l.window > 0) {
    kind = tr("sliding window of %1 tokens: %2 rows kept")
               .arg(locale.toString(l.window), locale.toString(l.rows));
  } else {
    kind = tr("global: attends every cached row (%1)").arg(locale.toString(l.rows));
  }
  return QStringLiteral(
             "<table cellspacing=2><tr><td colspan=2><b>%1</b> · %2</td></tr>%3%4</table>")
      .arg(tr("Layer %1").arg(layer), kind.toHtmlEscaped(),
           streamRows(tr("K"), l.keyScheme, l.keyBitsPerValue, l.key, f16, l.keyError),
           streamRows(tr("V"), l.valueScheme, l.valueBitsPerValue, l.value, f16, l.valueError));
}

bool KvLayerChart::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const QString text = layerToolTip(layerAt(help->pos()));
    if (text.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(help->globalPos(), text, this);
    return true;
  }
  return QWidget::event(event);
}

void KvLayerChart::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const ThemeColors& c = themeColors();
  const QFont small = scaledFont(0.85);
  p.setFont(small);
  const int errorWidth = anyError(m_layers) ? kErrorWidth : 0;
  const int barArea = qMax(40, width() - kLabelWidth - kBytesWidth - errorWidth - 8);
  const double scale = double(barArea) / double(streamScale(m_layers));
  const int barH = barHeight();
  const bool labelEvery = m_layers.size() <= 40;

  for (int i = 0; i < layerCount(); ++i) {
    const runtime::KvLayerSnapshot& layer = m_layers.at(i);
    const int top = 2 + i * rowHeight();
    const QRect labelRect(0, top, kLabelWidth - 6, 2 * barH + kStreamGap);
    if (labelEvery || i % 4 == 0) {
      // A ring is marked: its bar stops growing at window + a step's rows.
      p.setPen(layer.window > 0 ? c.accent : c.muted);
      p.drawText(labelRect, Qt::AlignRight | Qt::AlignVCenter,
                 layer.window > 0 ? QStringLiteral("↻L%1").arg(i) : QStringLiteral("L%1").arg(i));
    }
    const int f16Width = qRound(layer.f16Bytes / 2 * scale);
    for (int stream = 0; stream < 2; ++stream) {
      const kv::KvBytes& bytes = stream == 0 ? layer.key : layer.value;
      const PartColors colors = partColors(stream == 0 ? c.keys : c.values);
      const int y = top + stream * (barH + kStreamGap);
      int x = kLabelWidth;
      p.fillRect(QRect(x, y, f16Width, barH), c.sunken);
      for (const auto& [partBytes, color] :
           {std::pair{bytes.codes, colors.codes}, std::pair{bytes.scales, colors.scales},
            std::pair{bytes.padding, colors.other}, std::pair{bytes.sidecar, colors.sidecar},
            std::pair{bytes.tail, colors.tail}}) {
        const int w = qRound(partBytes * scale);
        p.fillRect(QRect(x, y, w, barH), color);
        x += w;
      }
      // The f16 size as an outline: how much this codec saves is the empty space inside.
      p.setPen(QPen(blend(c.text, c.surface, 0.55), 1));
      p.setBrush(Qt::NoBrush);
      p.drawRect(QRectF(kLabelWidth + 0.5, y + 0.5, qMax(1, f16Width - 1), barH - 1));
    }
    p.setPen(c.muted);
    if (errorWidth > 0) {
      p.drawText(QRect(width() - kBytesWidth - errorWidth, top, errorWidth, 2 * barH + kStreamGap),
                 Qt::AlignRight | Qt::AlignVCenter, layerErrorText(i));
    }
    p.drawText(QRect(width() - kBytesWidth, top, kBytesWidth, 2 * barH + kStreamGap),
               Qt::AlignRight | Qt::AlignVCenter,
               formatBytes(layer.key.used() + layer.value.used()));
  }
}

KvMemoryPanel::KvMemoryPanel(QWidget* parent)
    : InspectorPanel(QStringLiteral("kvMemoryPanel"), PanelSketch::Kind::kLayerBars,
                     tr("No KV cache yet"),
                     tr("Load a model and send a message to see how much device memory each "
                        "layer's keys and values take, next to what an uncompressed f16 cache "
                        "would need. It updates live while the model generates."),
                     parent),
      m_total(new StatTile(QStringLiteral("kvTotal"), tr("KV cache"))),
      m_ratio(new StatTile(QStringLiteral("kvRatio"), tr("Compression"))),
      m_bits(new StatTile(QStringLiteral("kvBits"), tr("Bits / value"))),
      m_fits(new StatTile(QStringLiteral("kvFits"), tr("Longest context"))),
      m_allocation(new QLabel),
      m_scale(new QLabel),
      m_chart(new KvLayerChart) {
  auto* content = new QWidget;
  content->setObjectName(QStringLiteral("kvMemoryContent"));
  auto* tiles = new QGridLayout;
  tiles->setSpacing(8);
  tiles->addWidget(m_total, 0, 0);
  tiles->addWidget(m_ratio, 0, 1);
  tiles->addWidget(m_bits, 1, 0);
  tiles->addWidget(m_fits, 1, 1);
  m_fits->setToolTip(
      tr("The longest context this model can use here: its trained context, or less "
         "when the KV cache at this scheme's bytes per token does not fit the device "
         "memory left after the weights. The detail line names the limit that binds."));

  m_allocation->setObjectName(QStringLiteral("kvAllocation"));
  m_allocation->setProperty("role", "caption");
  m_allocation->setWordWrap(true);
  auto* heading = new QLabel(tr("PER LAYER"));
  heading->setProperty("role", "section");
  m_scale->setProperty("role", "caption");
  m_scale->setWordWrap(true);

  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* chartHolder = new QWidget;
  auto* holderColumn = new QVBoxLayout(chartHolder);
  holderColumn->setContentsMargins(0, 0, 0, 0);
  holderColumn->addWidget(m_chart);
  holderColumn->addStretch(1);
  scroll->setWidget(chartHolder);

  auto* column = new QVBoxLayout(content);
  column->setContentsMargins(12, 12, 12, 8);
  column->setSpacing(8);
  column->addLayout(tiles);
  column->addWidget(m_allocation);
  column->addSpacing(4);
  column->addWidget(heading);
  column->addWidget(new KvLegend);
  column->addWidget(m_scale);
  column->addWidget(scroll, 1);
  setContent(content);
}

void KvMemoryPanel::setModelLimits(quint64 deviceBytes, quint64 weightBytes,
                                   quint64 trainedContext) {
  m_trainedContext = trainedContext;
  m_deviceBytes = deviceBytes;
  m_weightBytes = weightBytes;
  if (hasContent()) refresh();
}

void KvMemoryPanel::showReport(const KvReport& report) {
  m_report = report;
  refresh();
}

void KvMemoryPanel::clear() {
  m_report = {};
  m_summary = {};
  showContent(false);
}

void KvMemoryPanel::refresh() {
  m_summary = summarizeKv(m_report, m_deviceBytes, m_weightBytes, m_trainedContext);
  const KvSummary& s = m_summary;
  const QLocale locale;
  const ThemeColors& c = themeColors();
  showContent(!m_report.kv.layers.empty());

  m_total->setValue(formatBytes(s.bytes));
  m_total->setDetail(s.rows > 0 ? tr("%1 tokens · %2 per token")
                                      .arg(locale.toString(s.rows), formatBytes(s.bytesPerToken))
                                : tr("empty"));
  m_ratio->setValue(
      s.bytes > 0 ? tr("%1×").arg(locale.toString(s.ratio, 'f', 2)) : QStringLiteral("–"),
      s.ratio > 1.01 ? c.ok : QColor());
  m_ratio->setDetail(s.ratio > 1.01 ? tr("smaller than f16 (%1)").arg(formatBytes(s.f16Bytes))
                                    : tr("uncompressed: the f16 size"));
  m_bits->setValue(s.bytes > 0 ? locale.toString(s.bitsPerValue, 'f', 2) : QStringLiteral("–"));
  m_bits->setDetail(tr("K %1 · V %2").arg(bits(s.keyBitsPerValue), bits(s.valueBitsPerValue)));
  if (m_report.kv.autoMeasuring) {
    // Not a compression failure: auto caches f16 while it measures this conversation.
    m_ratio->setValue(tr("measuring"), c.accent);
    m_ratio->setDetail(tr("auto keeps f16 until %1 tokens, then compresses each layer")
                           .arg(locale.toString(m_report.kv.autoMeasureTokens)));
    m_bits->setDetail(tr("f16 on purpose while auto measures"));
  }
  if (s.usableContext > 0 && s.trainedContextBinds) {
    m_fits->setValue(tr("%1 tokens").arg(tokenCount(s.usableContext)));
    m_fits->setDetail(s.maxContext > 0
                          ? tr("the model's trained context · memory fits %1 (f16: %2)")
                                .arg(tokenCount(s.maxContext), tokenCount(s.maxContextF16))
                          : tr("the model's trained context"));
  } else if (s.usableContext > 0) {
    m_fits->setValue(tr("%1 tokens").arg(tokenCount(s.usableContext)));
    QString detail = tr("limited by %1 of device memory · f16: %2")
                         .arg(formatBytes(m_deviceBytes), tokenCount(s.maxContextF16));
    if (m_trainedContext > 0) detail += tr(" · trained: %1").arg(tokenCount(m_trainedContext));
    m_fits->setDetail(detail);
  } else {
    m_fits->setValue(QStringLiteral("–"));
    m_fits->setDetail(m_deviceBytes == 0 ? tr("device memory unknown")
                                         : tr("after the first tokens are cached"));
  }
  QString allocation =
      tr("%1 of %2 context rows filled · %3 reserved in pages")
          .arg(locale.toString(m_report.kv.rows), locale.toString(m_report.kv.contextLimit),
               formatBytes(m_report.kv.allocatedBytes()));
  const auto windowLayers = std::count_if(m_report.kv.layers.begin(), m_report.kv.layers.end(),
                                          [](const auto& l) { return l.window > 0; });
  if (windowLayers > 0) {
    const auto& first = *std::find_if(m_report.kv.layers.begin(), m_report.kv.layers.end(),
                                      [](const auto& l) { return l.window > 0; });
    allocation +=
        tr(" · ↻ %1 of %2 layers attend a sliding window of %3 tokens%4; the "
           "others are global")
            .arg(windowLayers)
            .arg(m_report.kv.layers.size())
            .arg(locale.toString(first.window))
            .arg(s.ringBytes > 0 ? tr(" and keep a ring (%1)").arg(formatBytes(s.ringBytes))
                                 : QString());
  }
  if (const auto& shared = m_report.kv.sharedLayers; !shared.empty()) {
    QStringList sources;  // the cache layers read, in first-read order
    for (const auto& [layer, from] : shared) {
      const QString name = QStringLiteral("L%1").arg(from);
      if (!sources.contains(name)) sources << name;
    }
    allocation += tr(" · layers %1–%2 store no rows: they attend the rows of %3 (KV-shared)")
                      .arg(shared.front().first)
                      .arg(shared.back().first)
                      .arg(sources.join(tr(" and ")));
  }
  m_allocation->setText(allocation);
  m_chart->setLayers(m_report.kv.layers);
  QString scale = tr("Each layer: K above V; full width is %1 per stream. Hover a layer for "
                     "its codecs and exact bytes.")
                      .arg(formatBytes(streamScale(m_report.kv.layers)));
  if (anyError(m_report.kv.layers)) {
    scale += QLatin1Char(' ') +
             tr("Right of the bars: the codec's measured error on this conversation, K / V "
                "(relative RMS).");
  }
  m_scale->setText(scale);
}

}  // namespace kvscope::ui
