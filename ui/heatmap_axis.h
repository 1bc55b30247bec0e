#pragma once
// The layer axis of the inspector's layers x columns heatmaps (indexer
// positions, experts): a layer number every few rows, as many as fit.

class QPainter;
class QRect;

namespace kvscope::ui {

// Draws the labels in the `labelWidth` pixels left of `plot`, with the
// painter's current pen and font.
void drawLayerLabels(QPainter& p, const QRect& plot, int layers, int labelWidth);

}  // namespace kvscope::ui
