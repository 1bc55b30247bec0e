#include "ui/inspector_dock.h"

#include <QTabWidget>

#include "ui/indexer_panel.h"
#include "ui/kv_memory_panel.h"
#include "ui/scheme_panel.h"
#include "ui/throughput_panel.h"

namespace kvscope::ui {

InspectorDock::InspectorDock(QWidget* parent)
    : QDockWidget(tr("Inspector"), parent), m_tabs(new QTabWidget(this)) {
  setObjectName(QStringLiteral("inspectorDock"));
  setAllowedAreas(Qt::LeftDockWidgetArea | Qt::RightDockWidgetArea);
  setMinimumWidth(340);  // all four tab titles stay readable

  m_tabs->setObjectName(QStringLiteral("inspectorTabs"));
  m_tabs->setDocumentMode(true);
  m_tabs->setUsesScrollButtons(false);
  m_tabs->addTab(new KvMemoryPanel, tr("KV memory"));
  m_tabs->addTab(new SchemePanel, tr("Scheme"));
  m_tabs->addTab(new IndexerPanel, tr("Indexer"));
  m_tabs->addTab(new ThroughputPanel, tr("Throughput"));
  setWidget(m_tabs);
}

}  // namespace kvscope::ui
