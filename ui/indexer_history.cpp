#include "ui/indexer_history.h"

#include <algorithm>

namespace kvscope::ui {
namespace {

// Calls f(begin, end, weight) for the rows each KV head of `layer` attended.
template <typename F>
void forEachRange(const IndexerLayerReport& layer, quint32 rows, F&& f) {
  const float weight = layer.heads.isEmpty() ? 0.0f : 1.0f / float(layer.heads.size());
  for (const QList<RowRange>& head : layer.heads) {
    if (head.isEmpty()) {
      f(0u, rows, weight);
      continue;
    }
    for (const RowRange& r : head) f(r.begin, std::min(r.end, rows), weight);
  }
}

}  // namespace

void IndexerHistory::clear() {
  *this = IndexerHistory();
}

void IndexerHistory::restart() {
  const QStringList texts = m_texts;  // the texts follow tokensFrom, not the window
  clear();
  m_texts = texts;
}

void IndexerHistory::add(const IndexerReport& report) {
  // Token texts first, from every report: each carries only what changed.
  while (m_texts.size() > static_cast<qsizetype>(report.tokensFrom)) m_texts.removeLast();
  while (m_texts.size() < static_cast<qsizetype>(report.tokensFrom)) m_texts.append(QString());
  m_texts.append(report.tokenTexts);
  if (report.layers.isEmpty() || report.rows == 0) return;
  if (report.rows < m_rows || report.layers.size() != m_layers) restart();

  m_layers = static_cast<int>(report.layers.size());
  m_rows = report.rows;
  m_sum.resize(size_t(m_layers));
  for (std::vector<float>& row : m_sum) row.resize(m_rows, 0.0f);  // new rows start at 0
  m_last.assign(size_t(m_layers) * m_rows, 0.0f);
  double read = 0.0, streams = 0.0;
  for (int l = 0; l < m_layers; ++l) {
    forEachRange(report.layers[l], m_rows, [&](quint32 begin, quint32 end, float w) {
      float* row = &m_last[size_t(l) * m_rows];
      for (quint32 p = begin; p < end; ++p) row[p] += w;
      read += end - begin;
    });
    streams += report.layers[l].heads.size();
  }
  m_rowsRead = streams > 0 ? read / (streams * m_rows) : 0.0;

  IndexerReport kept = report;
  kept.tokenTexts.clear();
  accumulate(kept, 1.0f);
  m_window.push_back(std::move(kept));
  if (static_cast<int>(m_window.size()) > kSteps) {
    accumulate(m_window.front(), -1.0f);
    m_window.pop_front();
  }
  if (const double mass = report.capturedMass(); mass >= 0.0) {
    m_mass.push_back(mass);
    if (static_cast<int>(m_mass.size()) > kMassPoints) m_mass.pop_front();
  }
}

void IndexerHistory::accumulate(const IndexerReport& report, float sign) {
  for (int l = 0; l < m_layers; ++l) {
    float* row = m_sum[size_t(l)].data();
    forEachRange(report.layers[l], report.rows, [&](quint32 begin, quint32 end, float w) {
      for (quint32 p = begin; p < end; ++p) row[p] += sign * w;
    });
  }
}

float IndexerHistory::lastStep(int layer, quint32 position) const {
  if (layer < 0 || layer >= m_layers || position >= m_rows) return 0.0f;
  return m_last[size_t(layer) * m_rows + position];
}

float IndexerHistory::frequency(int layer, quint32 position) const {
  if (layer < 0 || layer >= m_layers || position >= m_rows || m_window.empty()) return 0.0f;
  return std::clamp(m_sum[size_t(layer)][position] / float(m_window.size()), 0.0f, 1.0f);
}

QString IndexerHistory::tokenText(quint32 position) const {
  return position < static_cast<quint32>(m_texts.size()) ? m_texts[position] : QString();
}

}  // namespace kvscope::ui
