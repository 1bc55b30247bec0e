#pragma once
// InspectorPanel: the common frame of the inspector's panels. Until its first data
// arrives a panel shows an EmptyState with a sketch of what it will display; each
// concrete panel (kv_memory_panel.h, scheme_panel.h, ...) adds its views and the slots
// that take snapshots from EngineWorker, and switches to them with showContent() once
// there is something to show.

#include <QWidget>

#include "ui/panel_sketch.h"

class QVBoxLayout;

namespace kvscope::ui {

class EmptyState;

class InspectorPanel : public QWidget {
  Q_OBJECT

 public:
  bool hasContent() const;

 protected:
  InspectorPanel(const QString& objectName, PanelSketch::Kind sketch, const QString& title,
                 const QString& body, QWidget* parent);

  // Adds the panel's view, shown instead of the empty state by showContent(true).
  void setContent(QWidget* content);
  void showContent(bool show);

  QVBoxLayout* m_layout;
  EmptyState* m_emptyState;
  QWidget* m_content = nullptr;
};

}  // namespace kvscope::ui
