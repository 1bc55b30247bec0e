#include "ui/panel_sketch.h"

#include <array>

#include <QPainter>
#include <QPainterPath>

#include "ui/theme.h"

namespace kvscope::ui {
namespace {

QColor withAlpha(QColor color, double alpha) {
  color.setAlphaF(alpha);
  return color;
}

// Eight layers; K and V bars of a compressed cache against the f16 size of each layer.
void paintLayerBars(QPainter& p, QRectF area, const ThemeColors& c) {
  constexpr std::array<double, 8> kFill = {0.95, 0.95, 0.42, 0.38, 0.40, 0.36, 0.44, 0.95};
  const double rowHeight = area.height() / kFill.size();
  for (size_t i = 0; i < kFill.size(); ++i) {
    QRectF full(area.left(), area.top() + i * rowHeight + 2, area.width(), rowHeight - 5);
    p.setBrush(withAlpha(c.sketch, 0.35));
    p.drawRoundedRect(full, 3, 3);
    QRectF used = full;
    used.setWidth(full.width() * kFill[i]);
    p.setBrush(withAlpha(c.accent, kFill[i] > 0.9 ? 0.30 : 0.55));
    p.drawRoundedRect(used, 3, 3);
  }
}

// Layers down, K and V across; each chip's shade stands for a codec.
void paintSchemeGrid(QPainter& p, QRectF area, const ThemeColors& c) {
  constexpr std::array<int, 12> kCodec = {0, 0, 1, 2, 1, 2, 1, 3, 1, 3, 0, 0};
  constexpr std::array<double, 4> kShade = {0.25, 0.65, 0.45, 0.85};
  const int rows = 6;
  const double gap = 6;
  const double chipW = (area.width() - gap) / 2;
  const double chipH = (area.height() - gap * (rows - 1)) / rows;
  for (int r = 0; r < rows; ++r) {
    for (int col = 0; col < 2; ++col) {
      QRectF chip(area.left() + col * (chipW + gap), area.top() + r * (chipH + gap), chipW, chipH);
      p.setBrush(withAlpha(c.accent, kShade[kCodec[r * 2 + col]]));
      p.drawRoundedRect(chip, 3, 3);
    }
  }
}

// Cached rows of a few layers; the highlighted cells are the ones the indexer picked.
void paintSelectedRows(QPainter& p, QRectF area, const ThemeColors& c) {
  constexpr int kRows = 5;
  constexpr int kCols = 16;
  constexpr std::array<uint16_t, kRows> kPicked = {0x8013, 0x8c01, 0x8061, 0xb001, 0x8305};
  const double cellW = area.width() / kCols;
  const double cellH = area.height() / kRows;
  for (int r = 0; r < kRows; ++r) {
    for (int col = 0; col < kCols; ++col) {
      const bool picked = (kPicked[r] >> col) & 1;
      QRectF cell(area.left() + col * cellW + 1.5, area.top() + r * cellH + 1.5, cellW - 3,
                  cellH - 3);
      p.setBrush(picked ? withAlpha(c.accent, 0.75) : withAlpha(c.sketch, 0.45));
      p.drawRoundedRect(cell, 2, 2);
    }
  }
}

// Tokens per second over time: a quick prefill burst, then steady decode.
void paintThroughputLine(QPainter& p, QRectF area, const ThemeColors& c) {
  constexpr std::array<double, 12> kY = {0.15, 0.85, 0.9,  0.55, 0.5,  0.52,
                                         0.48, 0.5,  0.53, 0.49, 0.51, 0.5};
  QPainterPath line;
  for (size_t i = 0; i < kY.size(); ++i) {
    QPointF point(area.left() + area.width() * i / (kY.size() - 1),
                  area.bottom() - area.height() * kY[i]);
    if (i == 0)
      line.moveTo(point);
    else
      line.lineTo(point);
  }
  QPainterPath fill = line;
  fill.lineTo(area.bottomRight());
  fill.lineTo(area.bottomLeft());
  fill.closeSubpath();

  p.setPen(QPen(withAlpha(c.sketch, 0.8), 1));
  for (int i = 0; i <= 3; ++i) {
    const double y = area.top() + area.height() * i / 3;
    p.drawLine(QPointF(area.left(), y), QPointF(area.right(), y));
  }
  p.setPen(Qt::NoPen);
  p.setBrush(withAlpha(c.accent, 0.12));
  p.drawPath(fill);
  p.setPen(QPen(withAlpha(c.accent, 0.8), 2.5, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin));
  p.setBrush(Qt::NoBrush);
  p.drawPath(line);
}

}  // namespace

PanelSketch::PanelSketch(Kind kind, QWidget* parent) : QWidget(parent), m_kind(kind) {
  setFixedSize(sizeHint());
}

void PanelSketch::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  p.setPen(Qt::NoPen);
  const QRectF area = QRectF(rect()).adjusted(4, 4, -4, -4);
  const ThemeColors& colors = themeColors();
  switch (m_kind) {
    case Kind::kLayerBars:
      paintLayerBars(p, area, colors);
      break;
    case Kind::kSchemeGrid:
      paintSchemeGrid(p, area, colors);
      break;
    case Kind::kSelectedRows:
      paintSelectedRows(p, area, colors);
      break;
    case Kind::kThroughputLine:
      paintThroughputLine(p, area, colors);
      break;
  }
}

}  // namespace kvscope::ui
