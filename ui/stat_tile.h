#pragma once
// StatTile: one headline number of an inspector panel — a small caption, the value in a
// large weight, and a muted detail line under it ("KV cache / 1.2 MiB / 312 tokens").
// The value label is named `<objectName>Value` so tests and tools can read it.

#include <QFrame>

class QLabel;

namespace kvscope::ui {

class StatTile : public QFrame {
  Q_OBJECT

 public:
  StatTile(const QString& objectName, const QString& caption, QWidget* parent = nullptr);

  void setValue(const QString& value, const QColor& color = QColor());
  void setDetail(const QString& detail);
  QString value() const;
  QString detail() const;

 private:
  QLabel* m_value;
  QLabel* m_detail;
};

}  // namespace kvscope::ui
