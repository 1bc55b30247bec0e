#pragma once
// KvMemoryPanel is the inspector's KV memory view, from the engine's periodic KvReport:
//   - headline numbers: bytes in use, compression against f16, bits per value (K and V),
//     and the longest context that fits the device's memory at this scheme;
//   - one row per layer with a K bar and a V bar, each split into codes, scales and
//     other bytes (row padding), inside an outline of what the same rows take at f16,
//     and the codec error the engine measured on the layer's K and V rows; a
//     sliding-window layer is marked as the ring it is (rows kept / window).
// summarizeKv() does the arithmetic, so it is testable without painting.

class QLabel;

#include <vector>

#include "ui/engine_types.h"
#include "ui/inspector_panel.h"

namespace kvscope::ui {

class StatTile;

struct KvSummary {
  quint32 rows = 0;
  quint64 bytes = 0;     // codes + scales + other, every layer, K and V
  quint64 f16Bytes = 0;  // the same rows at f16
  quint64 keyBytes = 0;
  quint64 valueBytes = 0;
  double ratio = 1.0;         // f16Bytes / bytes
  double bitsPerValue = 0.0;  // all stored bytes over all cached values
  double keyBitsPerValue = 0.0;
  double valueBitsPerValue = 0.0;
  // Bytes each further token adds: the layers that keep every row (a
  // sliding-window layer's ring does not grow); 0 when there are no rows yet.
  quint64 bytesPerToken = 0;
  quint64 ringBytes = 0;  // the sliding-window layers' rings, allocated whatever the context
  // Longest context whose weights and KV fit `deviceBytes` at these bytes per token, and
  // the same at f16; 0 when unknown (no device size, no rows) or the weights do not fit.
  quint64 maxContext = 0;
  quint64 maxContextF16 = 0;
  // The longest context that is both usable by the model (its trained context) and fits
  // the device, and whether the trained context is the limit that binds; 0 when unknown.
  quint64 usableContext = 0;
  bool trainedContextBinds = false;
};

// trainedContext 0: unknown (the memory bound alone then sets usableContext).
KvSummary summarizeKv(const KvReport& report, quint64 deviceBytes, quint64 weightBytes,
                      quint64 trainedContext);

// The per-layer bar chart, exposed for tests and tooltips.
class KvLayerChart : public QWidget {
  Q_OBJECT

 public:
  explicit KvLayerChart(QWidget* parent = nullptr);

  void setLayers(const std::vector<runtime::KvLayerSnapshot>& layers);
  // Layer `layer`'s measured codec error as its row shows it ("0.03% / 6.1%", K / V);
  // empty when the engine did not measure it.
  QString layerErrorText(int layer) const;
  // The tooltip text for layer `layer` (what hovering its row shows).
  QString layerToolTip(int layer) const;
  // The row under a point in widget coordinates, -1 if none.
  int layerAt(QPoint point) const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override { return {200, sizeHint().height()}; }

 protected:
  bool event(QEvent* event) override;
  void paintEvent(QPaintEvent* event) override;

 private:
  int barHeight() const;
  int rowHeight() const;
  int layerCount() const { return static_cast<int>(m_layers.size()); }

  std::vector<runtime::KvLayerSnapshot> m_layers;  // [cache layers]
};

class KvMemoryPanel : public InspectorPanel {
  Q_OBJECT

 public:
  explicit KvMemoryPanel(QWidget* parent = nullptr);

  // Memory of the device the model runs on, the weights' share of it and the model's
  // trained context; together they bound the longest context. 0: unknown.
  void setModelLimits(quint64 deviceBytes, quint64 weightBytes, quint64 trainedContext);
  void showReport(const kvscope::ui::KvReport& report);
  void clear();

  const KvSummary& summary() const { return m_summary; }

 private:
  void refresh();

  KvReport m_report;
  KvSummary m_summary;
  quint64 m_deviceBytes = 0;
  quint64 m_weightBytes = 0;
  quint64 m_trainedContext = 0;
  StatTile* m_total;
  StatTile* m_ratio;
  StatTile* m_bits;
  StatTile* m_fits;
  QLabel* m_allocation;
  QLabel* m_scale;
  KvLayerChart* m_chart;
};

// "950", "12.5k", "1.9M": large token counts for headline numbers.
QString tokenCount(quint64 tokens);

}  // namespace kvscope::ui
