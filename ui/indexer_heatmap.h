#pragma once
// IndexerHeatmap: layers (rows) x cached positions (columns) of the sparse-attention
// indexer, from an IndexerHistory: each cell is shaded by the share of KV heads that
// attended the position in the last step, or by how often it was attended over the last
// steps (Mode). The first `sinks` and last `window` positions, always attended, are drawn
// in their own colours; positions the indexer picked by score in the accent. When there
// are more positions than pixels, a column covers a bin of positions and shows their
// mean (any picked position in a bin stays visible). Hovering names the position(s), the
// token text and how often they were picked.

#include <QWidget>

#include "ui/indexer_history.h"

namespace kvscope::ui {

class IndexerHeatmap : public QWidget {
  Q_OBJECT

 public:
  enum class Mode { kLastStep, kFrequency };

  explicit IndexerHeatmap(const IndexerHistory& history, QWidget* parent = nullptr);

  void setMode(Mode mode);
  Mode mode() const { return m_mode; }
  // Positions [first, last] under column `x` of the plot (first > last: none).
  std::pair<quint32, quint32> positionsAt(int x) const;
  // The tooltip text for a point in widget coordinates ("" outside the plot).
  QString describe(const QPoint& point) const;

  QSize sizeHint() const override { return {360, 220}; }
  QSize minimumSizeHint() const override { return {200, 120}; }

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;

 private:
  QRect plotRect() const;
  int layerAt(int y) const;
  // The shade of (layer, positions [first, last]) in the current mode, in [0, 1].
  float value(int layer, quint32 first, quint32 last) const;

  const IndexerHistory& m_history;
  Mode m_mode = Mode::kLastStep;
};

}  // namespace kvscope::ui
