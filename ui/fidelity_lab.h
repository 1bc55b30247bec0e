#pragma once
// FidelityLab: the "Compare schemes on this conversation" window. The user ticks KV
// policies and runs them over the open conversation's tokens (SchemeComparison, on a
// thread of its own: the chat stays usable, Cancel stops it); the result is a Pareto
// chart of bits per value against KLD to the f16 cache (log scale), one point per policy,
// the current policy's point ringed, the non-dominated points joined, and a table with
// top-1 agreement beside it. Clicking a point, or a row's Apply, asks for that policy:
// applyRequested(), which the window hands to the engine to re-encode the cache as the
// Scheme panel's Apply does.

#include <QDialog>
#include <QList>
#include <QStringList>

#include "ui/scheme_comparison.h"

class QChart;
class QChartView;
class QLabel;
class QListWidget;
class QLogValueAxis;
class QProgressBar;
class QPushButton;
class QTableWidget;
class QValueAxis;

namespace kvscope::ui {

struct PolicyPreset;

// Indexes of the points no other point beats on both bits and KLD (fewer or equal bits
// and lower KLD, or fewer bits and equal KLD), in ascending bits.
QList<int> paretoFront(const QList<ComparisonPoint>& points);

class FidelityLab : public QDialog {
  Q_OBJECT

 public:
  explicit FidelityLab(QWidget* parent = nullptr);

  // The policies offered (names and texts), `checked` ticked to start with.
  void setPolicies(const QList<PolicyPreset>& presets, const QStringList& checked);
  // The policy the cache holds now (its point is ringed).
  void setCurrentPolicy(const QString& policy);
  // The conversation to compare on; enables Run. With `runNow`, runs at once.
  void setConversation(const QString& modelPath, const QList<qint32>& tokens, bool runNow = false);
  void setUnavailable(const QString& message);
  void run();

  const QList<ComparisonPoint>& points() const { return m_points; }
  QChart* chart() const { return m_chart; }

 signals:
  void applyRequested(const QString& policy);
  void comparisonFinished();

 private:
  void showPoints();

  SchemeComparison m_comparison;
  QString m_modelPath;
  QList<qint32> m_tokens;
  QString m_current;
  QStringList m_names;  // display names by policy text (parallel to m_texts)
  QStringList m_texts;
  QList<ComparisonPoint> m_points;

  QLabel* m_summary;
  QListWidget* m_policies;
  QPushButton* m_run;
  QPushButton* m_cancel;
  QProgressBar* m_progress;
  QChart* m_chart;
  QChartView* m_chartView;
  QValueAxis* m_axisBits;
  QLogValueAxis* m_axisKld;
  QTableWidget* m_table;
};

}  // namespace kvscope::ui
