#pragma once
// ThroughputPanel is the inspector's speed view, from the engine's StepReports:
//   - headline numbers: decode and prefill tokens per second, milliseconds per token and
//     time to first token of the current reply;
//   - a chart over the conversation: decode speed against the tokens in context (one line
//     per reply, so the cost of a growing cache shows as a slope) and each reply's prefill
//     speed as a point, on its own axis;
//   - device time of the last step per kernel class, as horizontal bars.

#include <QList>

#include "ui/engine_types.h"
#include "ui/inspector_panel.h"

class QChart;
class QLabel;
class QChartView;
class QLineSeries;
class QScatterSeries;
class QValueAxis;

namespace kvscope::ui {

class StatTile;

// Device time per kernel class, longest first, with each class's share of the step.
class KernelBars : public QWidget {
  Q_OBJECT

 public:
  explicit KernelBars(QWidget* parent = nullptr);

  void setKernels(const std::vector<backend::KernelTiming>& kernels);
  const std::vector<backend::KernelTiming>& kernels() const { return m_kernels; }

  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  std::vector<backend::KernelTiming> m_kernels;  // sorted, longest first
};

class ThroughputPanel : public InspectorPanel {
  Q_OBJECT

 public:
  explicit ThroughputPanel(QWidget* parent = nullptr);

  void showStep(const kvscope::ui::StepReport& report);
  // A model with experts: the expert weights its last token read, as a tile.
  void setExpertsShown(bool shown);
  void showExperts(const backend::ExpertUsage& usage);
  void clear();

  // Points plotted so far (tests): decode samples over every reply, prefill points.
  int decodePointCount() const;
  int prefillPointCount() const;

 private:
  void startTurn(quint64 turnId);
  void addDecodeSample(const runtime::StepStats& report);
  void updatePrefillPoint(const runtime::StepStats& report);
  void updateTiles(const runtime::StepStats& report);
  void fitAxes();

  QChart* m_chart;
  QChartView* m_chartView;
  QValueAxis* m_axisX;
  QValueAxis* m_axisDecode;
  QValueAxis* m_axisPrefill;
  QList<QLineSeries*> m_decodeSeries;  // one per reply
  QScatterSeries* m_prefillSeries;
  StatTile* m_decode;
  StatTile* m_prefill;
  StatTile* m_perToken;
  StatTile* m_firstToken;
  StatTile* m_expertBytes;
  KernelBars* m_kernels;
  QLabel* m_kernelCaption;

  quint64 m_turnId = 0;
  bool m_haveTurn = false;
  runtime::StepStats m_last;  // the previous report of the current turn
  double m_maxDecode = 0;
  double m_maxPrefill = 0;
  double m_maxX = 0;
};

}  // namespace kvscope::ui
