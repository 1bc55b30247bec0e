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

bool InspectorPanel::hasContent() const {
  return m_content && !m_content->isHidden();
}

void InspectorPanel::setContent(QWidget* content) {
  m_content = content;
  m_layout->addWidget(content);
  content->hide();
}

void InspectorPanel::showContent(bool show) {
  if (!m_content) return;
  m_content->setVisible(show);
  m_emptyState->setVisible(!show);
}

}  // namespace kvscope::ui
