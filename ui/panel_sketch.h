#pragma once
// PanelSketch: a faint drawing of what an inspector panel will show once data arrives
// (per-layer bars, a codec grid, selected rows, a throughput line). It makes an empty
// panel explain itself at a glance. Pure painting from the palette and theme colours.

#include <QWidget>

namespace kvscope::ui {

class PanelSketch : public QWidget {
  Q_OBJECT

 public:
  enum class Kind { kLayerBars, kSchemeGrid, kSelectedRows, kThroughputLine };

  explicit PanelSketch(Kind kind, QWidget* parent = nullptr);

  QSize sizeHint() const override { return {176, 104}; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  Kind m_kind;
};

}  // namespace kvscope::ui
