#pragma once
// IndexerPanel is the inspector's view of sparse attention, live while a reply streams:
// which cached rows the indexer picked per layer (a heatmap of layers x positions, the
// last step or the selection frequency over recent steps), a summary of the settings and
// the share of rows read, and a sparkline of the attention mass the selection captured
// (measured when "Measure captured mass" turns on the engine's diagnostic mode). It shows
// its empty state until the first IndexerReport and again when the indexer turns off.

#include "ui/engine_types.h"
#include "ui/indexer_history.h"
#include "ui/inspector_panel.h"

class QCheckBox;
class QComboBox;
class QLabel;

namespace kvscope::ui {

class IndexerHeatmap;
class MassSparkline;

class IndexerPanel : public InspectorPanel {
  Q_OBJECT

 public:
  explicit IndexerPanel(QWidget* parent = nullptr);

  void showReport(const kvscope::ui::IndexerReport& report);
  // The indexer was turned on or off (the active policy changed); off clears the panel.
  void setIndexerEnabled(bool enabled);
  void clear();

  const IndexerHistory& history() const { return m_history; }
  IndexerHeatmap* heatmap() const { return m_heatmap; }

 signals:
  void diagnosticRequested(bool on);

 private:
  void updateSummary();

  IndexerHistory m_history;
  QLabel* m_summary;
  QComboBox* m_mode;
  QCheckBox* m_diagnostic;
  IndexerHeatmap* m_heatmap;
  MassSparkline* m_mass;
  QLabel* m_massValue;
};

}  // namespace kvscope::ui
