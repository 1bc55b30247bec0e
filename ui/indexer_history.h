#pragma once
// IndexerHistory: what the Indexer panel draws, kept from the engine's IndexerReports:
// per layer and cached position, the share of KV heads that attended it in the last
// step, and that share averaged over the last kSteps reports (selection frequency);
// the text of every cached token (for the hover); the captured attention mass of recent
// steps (for the sparkline). Reports keep only their selected runs, so the frequency
// window costs the runs it holds, not layers x positions x steps.

#include <deque>
#include <vector>

#include <QString>
#include <QStringList>

#include "ui/engine_types.h"

namespace kvscope::ui {

class IndexerHistory {
 public:
  static constexpr int kSteps = 32;      // reports in the frequency window
  static constexpr int kMassPoints = 120;  // sparkline points

  // A report with fewer rows or another layer count than the last starts over (a new
  // conversation, an edit, another model); its token texts are kept in every case.
  void add(const IndexerReport& report);
  void clear();
  // Forgets the steps but keeps the token texts (the indexer was turned off).
  void restart();

  bool empty() const { return m_rows == 0; }
  quint32 rows() const { return m_rows; }
  int layers() const { return m_layers; }
  int steps() const { return static_cast<int>(m_window.size()); }
  const runtime::IndexerSnapshot& last() const { return m_window.back(); }
  // The mean captured mass of the last step's measured layers; negative when no
  // layer was measured.
  double lastMass() const;

  // In [0, 1]: the share of the layer's KV heads that attended `position` last step ...
  float lastStep(int layer, quint32 position) const;
  // ... and that share averaged over the steps in the window (0 before it existed).
  float frequency(int layer, quint32 position) const;
  // The share of cached rows the last step attended, over every layer and KV head.
  double rowsRead() const { return m_rowsRead; }

  // The token at `position` as text ("" when unknown).
  QString tokenText(quint32 position) const;
  // Mean captured mass of the recent steps that measured it, oldest first.
  const std::deque<double>& mass() const { return m_mass; }

 private:
  // Adds `sign` / heads over every attended position of `step` to m_sum.
  void accumulate(const backend::IndexerStep& step, float sign);

  quint32 m_rows = 0;
  int m_layers = 0;
  std::deque<runtime::IndexerSnapshot> m_window;  // the last kSteps reports' steps
  std::vector<float> m_last;               // [layer * rows + position]
  std::vector<std::vector<float>> m_sum;  // [layer][position], grown as rows are added
  double m_rowsRead = 0.0;
  QStringList m_texts;  // [position]
  std::deque<double> m_mass;
};

}  // namespace kvscope::ui
