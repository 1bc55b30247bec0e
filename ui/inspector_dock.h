#pragma once
// InspectorDock: the right-hand dock that shows the live state of the KV cache. It holds
// the four inspector panels as tabs (KV memory, Scheme, Indexer, Throughput); each panel
// is found by its objectName and fed by its own slots.

#include <QDockWidget>

class QTabWidget;

namespace kvscope::ui {

class InspectorDock : public QDockWidget {
  Q_OBJECT

 public:
  explicit InspectorDock(QWidget* parent = nullptr);

 private:
  QTabWidget* m_tabs;
};

}  // namespace kvscope::ui
