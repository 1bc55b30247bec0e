#include "ui/stat_tile.h"

#include <QLabel>
#include <QVBoxLayout>

namespace kvscope::ui {

StatTile::StatTile(const QString& objectName, const QString& caption, QWidget* parent)
    : QFrame(parent), m_value(new QLabel(this)), m_detail(new QLabel(this)) {
  setObjectName(objectName);
  setProperty("role", "card");
  auto* title = new QLabel(caption.toUpper(), this);
  title->setProperty("role", "section");
  m_value->setObjectName(objectName + QStringLiteral("Value"));
  m_value->setProperty("role", "statValue");
  m_detail->setObjectName(objectName + QStringLiteral("Detail"));
  m_detail->setProperty("role", "caption");
  m_detail->setWordWrap(true);
  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(10, 8, 10, 8);
  column->setSpacing(2);
  column->addWidget(title);
  column->addWidget(m_value);
  column->addWidget(m_detail);
  column->addStretch(1);
}

void StatTile::setValue(const QString& value, const QColor& color) {
  m_value->setText(value);
  m_value->setStyleSheet(color.isValid() ? QStringLiteral("color: %1;").arg(color.name())
                                         : QString());
}

void StatTile::setDetail(const QString& detail) {
  m_detail->setText(detail);
}

QString StatTile::value() const {
  return m_value->text();
}

QString StatTile::detail() const {
  return m_detail->text();
}

}  // namespace kvscope::ui
