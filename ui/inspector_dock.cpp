#include "ui/inspector_dock.h"

#include <QTabWidget>

#include "ui/expert_panel.h"
#include "ui/indexer_panel.h"
#include "ui/kv_memory_panel.h"
#include "ui/scheme_panel.h"
#include "ui/throughput_panel.h"

namespace kvscope::ui {

InspectorDock::InspectorDock(QWidget* parent)
    : QDockWidget(tr("Inspector"), parent),
      m_tabs(new QTabWidget(this)),
      m_kv(new KvMemoryPanel),
      m_scheme(new SchemePanel),
      m_indexer(new IndexerPanel),
      m_throughput(new ThroughputPanel),
      m_experts(new ExpertPanel) {
  setObjectName(QStringLiteral("inspectorDock"));
  setAllowedAreas(Qt::LeftDockWidgetArea | Qt::RightDockWidgetArea);
  setMinimumWidth(360);  // the tab titles and the stat tiles stay readable

  m_tabs->setObjectName(QStringLiteral("inspectorTabs"));
  m_tabs->setDocumentMode(true);
  m_tabs->setUsesScrollButtons(false);
  m_tabs->addTab(m_kv, tr("KV memory"));
  m_tabs->addTab(m_scheme, tr("Scheme"));
  m_tabs->addTab(m_indexer, tr("Indexer"));
  m_tabs->addTab(m_throughput, tr("Throughput"));
  m_tabs->addTab(m_experts, tr("Experts"));
  m_tabs->setTabVisible(m_tabs->indexOf(m_experts), false);
  setWidget(m_tabs);

  m_refresh.setSingleShot(true);
  m_refresh.setInterval(kRefreshInterval);
  connect(&m_refresh, &QTimer::timeout, this, &InspectorDock::flush);
  connect(m_scheme, &SchemePanel::policyRequested, this, &InspectorDock::policyRequested);
  connect(m_scheme, &SchemePanel::compareRequested, this, &InspectorDock::compareRequested);
  connect(m_indexer, &IndexerPanel::diagnosticRequested, this,
          &InspectorDock::indexerDiagnosticRequested);
}

void InspectorDock::showTab(int index) {
  m_tabs->setCurrentIndex(index);
}

void InspectorDock::setModel(const ModelInfo& model, const QString& policy, quint64 deviceBytes) {
  m_kv->setModelLimits(deviceBytes, model.weightBytes, model.trainedContext);
  m_scheme->setLayerCount(model.kvLayers);
  m_scheme->setPolicy(policy);
  m_scheme->setEditable(true);
  m_indexer->setIndexerEnabled(policy.contains(QLatin1String("indexer=")));
  m_tabs->setTabVisible(m_tabs->indexOf(m_experts), model.nExpert > 0);
  m_throughput->setExpertsShown(model.nExpert > 0);
}

void InspectorDock::clearModel() {
  m_refresh.stop();
  m_pendingSteps.clear();
  m_pendingIndexer.clear();
  m_kvPending = false;
  m_expertsPending = false;
  m_experts->clear();
  m_tabs->setTabVisible(m_tabs->indexOf(m_experts), false);
  m_throughput->setExpertsShown(false);
  m_kv->clear();
  m_indexer->clear();
  m_scheme->clear();
  m_throughput->clear();
}

void InspectorDock::setGenerating(bool generating) {
  m_scheme->setEditable(!generating);
  if (!generating) flush();
}

void InspectorDock::showKv(const KvReport& report) {
  m_pendingKv = report;
  m_kvPending = true;
  if (!m_refresh.isActive()) m_refresh.start();
}

void InspectorDock::showStep(const StepReport& report) {
  m_pendingSteps.append(report);
  if (!m_refresh.isActive()) m_refresh.start();
}

void InspectorDock::showIndexer(const IndexerReport& report) {
  m_pendingIndexer.append(report);
  if (!m_refresh.isActive()) m_refresh.start();
}

void InspectorDock::showExperts(const ExpertReport& report) {
  m_pendingExperts = report;
  m_expertsPending = true;
  if (!m_refresh.isActive()) m_refresh.start();
}

bool InspectorDock::expertTabVisible() const {
  return m_tabs->isTabVisible(m_tabs->indexOf(m_experts));
}

void InspectorDock::flush() {
  m_refresh.stop();
  if (m_expertsPending) {
    m_expertsPending = false;
    m_experts->showReport(m_pendingExperts);
    m_throughput->showExperts(m_pendingExperts.usage);
  }
  if (m_kvPending) {
    m_kvPending = false;
    m_kv->showReport(m_pendingKv);
    m_scheme->showReport(m_pendingKv);
  }
  for (const StepReport& report : m_pendingSteps) m_throughput->showStep(report);
  m_pendingSteps.clear();
  for (const IndexerReport& report : m_pendingIndexer) m_indexer->showReport(report);
  m_pendingIndexer.clear();
}

}  // namespace kvscope::ui
