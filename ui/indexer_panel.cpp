#include "ui/indexer_panel.h"

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QPainter>
#include <QPainterPath>
#include <QVBoxLayout>

#include "ui/indexer_heatmap.h"
#include "ui/theme.h"

namespace kvscope::ui {

// The captured mass of recent steps, 0..100%, newest on the right.
class MassSparkline : public QWidget {
 public:
  explicit MassSparkline(const IndexerHistory& history) : m_history(history) {
    setObjectName(QStringLiteral("capturedMassSparkline"));
    setFixedHeight(44);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const ThemeColors& c = themeColors();
    const QRectF r = QRectF(rect()).adjusted(1, 2, -1, -2);
    p.fillRect(r, c.sunken);
    const auto& mass = m_history.mass();
    if (mass.empty()) {
      p.setPen(c.muted);
      p.setFont(scaledFont(0.8));
      p.drawText(r, Qt::AlignCenter,
                 tr("Turn on “Measure captured mass” to follow it step by step"));
      return;
    }
    // At least 20 slots, so the first few points already draw a line.
    const double n = static_cast<double>(std::max<size_t>(20, mass.size()) - 1);
    QPainterPath path;
    for (size_t i = 0; i < mass.size(); ++i) {
      const double x = r.right() - (mass.size() - 1 - i) * r.width() / n;
      const double y = r.bottom() - std::clamp(mass[i], 0.0, 1.0) * r.height();
      if (i == 0) {
        path.moveTo(x, y);
      } else {
        path.lineTo(x, y);
      }
    }
    p.setPen(QPen(c.accent, 1.5));
    p.drawPath(path);
    // The newest point as a dot, so a line of one or two points still reads.
    p.setBrush(c.accent);
    p.drawEllipse(path.currentPosition(), 2.5, 2.5);
  }

 private:
  const IndexerHistory& m_history;
};

IndexerPanel::IndexerPanel(QWidget* parent)
    : InspectorPanel(QStringLiteral("indexerPanel"), PanelSketch::Kind::kSelectedRows,
                     tr("Sparse attention is off"),
                     tr("With sparse attention, a small indexer scores every cached row and each "
                        "layer attends only to the rows it picks, so long contexts cost less per "
                        "token. Turn it on in the Scheme tab; this panel then shows the "
                        "positions picked at every step and how much of the attention they "
                        "capture."),
                     parent),
      m_summary(new QLabel),
      m_mode(new QComboBox),
      m_diagnostic(new QCheckBox(tr("Measure captured mass"))),
      m_heatmap(new IndexerHeatmap(m_history)),
      m_mass(new MassSparkline(m_history)),
      m_massValue(new QLabel) {
  auto* content = new QWidget;
  auto* heading = new QLabel(tr("ROWS ATTENDED"));
  heading->setProperty("role", "section");
  m_summary->setObjectName(QStringLiteral("indexerSummary"));
  m_summary->setWordWrap(true);
  m_mode->setObjectName(QStringLiteral("indexerMode"));
  m_mode->addItem(tr("Last step"));
  m_mode->addItem(tr("Frequency, last %1 steps").arg(IndexerHistory::kSteps));
  m_diagnostic->setObjectName(QStringLiteral("indexerDiagnostic"));
  m_diagnostic->setToolTip(
      tr("Also computes full attention at every step to report the share of its weight the "
         "picked rows carry. Slower: use it to judge a setting, not while working."));
  auto* controls = new QHBoxLayout;
  controls->addWidget(m_mode);
  controls->addStretch(1);
  controls->addWidget(m_diagnostic);
  auto* massHeading = new QLabel(tr("CAPTURED ATTENTION MASS"));
  massHeading->setProperty("role", "section");
  m_massValue->setObjectName(QStringLiteral("capturedMass"));
  auto* massRow = new QHBoxLayout;
  massRow->addWidget(massHeading);
  massRow->addStretch(1);
  massRow->addWidget(m_massValue);

  auto* column = new QVBoxLayout(content);
  column->setContentsMargins(12, 12, 12, 8);
  column->setSpacing(8);
  column->addWidget(heading);
  column->addWidget(m_summary);
  column->addLayout(controls);
  column->addWidget(m_heatmap, 1);
  column->addLayout(massRow);
  column->addWidget(m_mass);
  setContent(content);

  connect(m_mode, &QComboBox::currentIndexChanged, this, [this](int index) {
    m_heatmap->setMode(index == 0 ? IndexerHeatmap::Mode::kLastStep
                                  : IndexerHeatmap::Mode::kFrequency);
  });
  connect(m_diagnostic, &QCheckBox::toggled, this, &IndexerPanel::diagnosticRequested);
}

void IndexerPanel::showReport(const IndexerReport& report) {
  m_history.add(report);
  if (m_history.empty()) return;
  updateSummary();
  m_heatmap->update();
  m_mass->update();
  showContent(true);
}

void IndexerPanel::updateSummary() {
  const runtime::IndexerSnapshot& r = m_history.last();
  const QLocale locale;
  // The first layers attend every row (IndexerOptions::denseLayers, which may
  // name more layers than the model has).
  const auto layers = static_cast<uint32_t>(r.step.layers.size());
  // While indexer_dense_heads=auto measures, every layer does.
  const uint32_t dense =
      r.options.autoDenseHeads ? layers : std::min(r.options.denseLayers, layers);
  const QString whole = dense == 0        ? QString()
                        : dense == layers ? tr("; every layer reads every row")
                        : dense == 1      ? tr("; layer 0 reads every row")
                                          : tr("; layers 0–%1 read every row").arg(dense - 1);
  // Single KV heads kept dense (IndexerOptions::denseHeads), as LAYER.HEAD.
  QString heads;
  if (!r.options.denseHeads.empty() && dense < layers) {
    const QString named = QString::fromStdString(r.options.denseHeadsText())
                              .replace(QLatin1Char('+'), QStringLiteral(", "));
    heads = r.options.denseHeads.size() == 1 ? tr("; KV head %1 reads every row").arg(named)
                                             : tr("; KV heads %1 read every row").arg(named);
  }
  QString summary =
      tr("top %1 rows by score, the first %2 and the last %3%4 · "
         "%5% of %6 cached rows read in the last step")
          .arg(locale.toString(r.options.topK), locale.toString(r.options.sinks),
               locale.toString(r.options.window), whole + heads,
               locale.toString(100.0 * m_history.rowsRead(), 'f', 1), locale.toString(r.step.rows));
  // indexer_dense_heads=auto: measuring, or what it measured.
  if (!r.denseHeadsNote.empty())
    summary += QLatin1Char('\n') + QString::fromStdString(r.denseHeadsNote);
  m_summary->setText(summary);
  const double mass = m_history.lastMass();
  m_massValue->setText(mass >= 0.0 ? locale.toString(100.0 * mass, 'f', 1) + QLatin1Char('%')
                                   : QStringLiteral("–"));
}

void IndexerPanel::setIndexerEnabled(bool enabled) {
  if (enabled) return;
  m_history.restart();  // the token texts stay: the engine sends only new ones
  showContent(false);
}

void IndexerPanel::clear() {
  m_history.clear();
  showContent(false);
}

}  // namespace kvscope::ui
