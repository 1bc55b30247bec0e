#include "ui/indexer_history.h"

#include <algorithm>

namespace kvscope::ui {
namespace {

// Calls f(begin, end, weight) for the rows each KV head of `layer` attended.
template <typename F>
void forEachRange(const backend::IndexerLayerStep& layer, quint32 rows, F&& f) {
  const float weight = layer.heads.empty() ? 0.0f : 1.0f / float(layer.heads.size());
  for (const std::vector<kv::RowRun>& head : layer.heads) {
    if (head.empty()) {
      f(0u, rows, weight);
      continue;
    }
    for (const kv::RowRun& r : head) f(r.begin, std::min(r.end, rows), weight);
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
  const backend::IndexerStep& step = report.indexer.step;
  if (step.layers.empty() || step.rows == 0) return;
  if (step.rows < m_rows || step.layers.size() != size_t(m_layers)) restart();

  m_layers = static_cast<int>(step.layers.size());
  m_rows = step.rows;
  m_sum.resize(size_t(m_layers));
  for (std::vector<float>& row : m_sum) row.resize(m_rows, 0.0f);  // new rows start at 0
  m_last.assign(size_t(m_layers) * m_rows, 0.0f);
  double read = 0.0, streams = 0.0;
  for (int l = 0; l < m_layers; ++l) {
    forEachRange(step.layers[size_t(l)], m_rows, [&](quint32 begin, quint32 end, float w) {
      float* row = &m_last[size_t(l) * m_rows];
      for (quint32 p = begin; p < end; ++p) row[p] += w;
      read += end - begin;
    });
    streams += double(step.layers[size_t(l)].heads.size());
  }
  m_rowsRead = streams > 0 ? read / (streams * m_rows) : 0.0;

  accumulate(step, 1.0f);
  m_window.push_back(report.indexer);
  if (static_cast<int>(m_window.size()) > kSteps) {
    accumulate(m_window.front().step, -1.0f);
    m_window.pop_front();
  }
  if (const double mass = lastMass(); mass >= 0.0) {
    m_mass.push_back(mass);
    if (static_cast<int>(m_mass.size()) > kMassPoints) m_mass.pop_front();
  }
}

double IndexerHistory::lastMass() const {
  if (m_window.empty()) return -1.0;
  runtime::IndexerTally tally;
  tally.add(m_window.back().step);
  return tally.capturedMass();
}

void IndexerHistory::accumulate(const backend::IndexerStep& step, float sign) {
  for (int l = 0; l < m_layers; ++l) {
    float* row = m_sum[size_t(l)].data();
    forEachRange(step.layers[size_t(l)], step.rows, [&](quint32 begin, quint32 end, float w) {
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
