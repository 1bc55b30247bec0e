#pragma once
// InspectorDock: the right-hand dock that shows the live state of the KV cache. It holds
// the inspector panels as tabs (KV memory, Scheme, Indexer, Throughput, and Experts for a
// model with experts). Reports
// arrive as fast as the engine sends them; the dock keeps only the latest of each kind
// and hands it to the panels at most every kRefreshInterval, so a burst of reports costs
// one repaint.

#include <QDockWidget>
#include <QTimer>

#include "ui/engine_types.h"

class QTabWidget;

namespace kvscope::ui {

class ExpertPanel;
class IndexerPanel;
class KvMemoryPanel;
class SchemePanel;
class ThroughputPanel;

class InspectorDock : public QDockWidget {
  Q_OBJECT

 public:
  static constexpr int kRefreshInterval = 100;  // ms: ~10 updates a second

  explicit InspectorDock(QWidget* parent = nullptr);

  KvMemoryPanel* kvMemoryPanel() const { return m_kv; }
  SchemePanel* schemePanel() const { return m_scheme; }
  IndexerPanel* indexerPanel() const { return m_indexer; }
  ThroughputPanel* throughputPanel() const { return m_throughput; }
  ExpertPanel* expertPanel() const { return m_experts; }
  bool expertTabVisible() const;
  void showTab(int index);

  // `policy`: the KV policy string the model was loaded with (empty: f16).
  void setModel(const ModelInfo& model, const QString& policy, quint64 deviceBytes);
  void clearModel();
  void setGenerating(bool generating);

 public slots:
  void showKv(const kvscope::ui::KvReport& report);
  void showStep(const kvscope::ui::StepReport& report);
  void showIndexer(const kvscope::ui::IndexerReport& report);
  void showExperts(const kvscope::ui::ExpertReport& report);
  // Applies pending reports now (end of a reply; tests).
  void flush();

 signals:
  void policyRequested(const QString& policy);
  void compareRequested();
  void indexerDiagnosticRequested(bool on);

 private:
  QTabWidget* m_tabs;
  KvMemoryPanel* m_kv;
  SchemePanel* m_scheme;
  IndexerPanel* m_indexer;
  ThroughputPanel* m_throughput;
  ExpertPanel* m_experts;
  QTimer m_refresh;
  KvReport m_pendingKv;
  QList<StepReport> m_pendingSteps;       // every step is a chart point; only the latest repaints
  QList<IndexerReport> m_pendingIndexer;  // every step counts in the selection frequency
  bool m_kvPending = false;
  ExpertReport m_pendingExperts;  // the latest only: it carries the counts so far
  bool m_expertsPending = false;
};

}  // namespace kvscope::ui
