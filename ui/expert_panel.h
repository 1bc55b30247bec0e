#pragma once
// ExpertPanel: the inspector's view of a mixture-of-experts model, from the
// engine's ExpertReports (backend::ExpertUsage):
//   - a summary: experts per token, the expert weights the last token read
//     (bytes, and their share of all expert weights), the rows counted;
//   - a heatmap with one row per layer and one column per expert: how often
//     the router picked each expert over the cached rows (each layer scaled to
//     its most used expert), the last token's experts outlined.
// The dock shows the tab only for a model with experts.

#include "ui/engine_types.h"
#include "ui/inspector_panel.h"

class QLabel;

namespace kvscope::ui {

class ExpertHeatmap : public QWidget {
  Q_OBJECT

 public:
  explicit ExpertHeatmap(QWidget* parent = nullptr);

  void setUsage(const backend::ExpertUsage& usage);
  // The cell under a point in widget coordinates: {layer, expert}, or {-1, -1}.
  std::pair<int, int> cellAt(QPoint point) const;
  // What hovering a cell shows ("" outside the grid).
  QString cellText(int layer, int expert) const;

  QSize sizeHint() const override { return {320, 240}; }

 protected:
  bool event(QEvent* event) override;
  void paintEvent(QPaintEvent* event) override;

 private:
  QRect plotRect() const;
  bool usedLast(int layer, int expert) const;

  backend::ExpertUsage m_usage;
};

class ExpertPanel : public InspectorPanel {
  Q_OBJECT

 public:
  explicit ExpertPanel(QWidget* parent = nullptr);

  void showReport(const kvscope::ui::ExpertReport& report);
  void clear();
  ExpertHeatmap* heatmap() const { return m_heatmap; }

 private:
  QLabel* m_summary;
  ExpertHeatmap* m_heatmap;
};

}  // namespace kvscope::ui
