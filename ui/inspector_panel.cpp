#include "ui/inspector_panel.h"

#include <QVBoxLayout>

#include "ui/empty_state.h"

namespace kvscope::ui {

InspectorPanel::InspectorPanel(const QString& objectName, PanelSketch::Kind sketch,
                               const QString& title, const QString& body, QWidget* parent)
    : QWidget(parent),
      m_layout(new QVBoxLayout(this)),
      m_emptyState(new EmptyState(new PanelSketch(sketch), title, body, this)) {
  setObjectName(objectName);
  m_layout->setContentsMargins(0, 0, 0, 0);
  m_layout->addWidget(m_emptyState);
}

}  // namespace kvscope::ui
