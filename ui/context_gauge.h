#pragma once
// ContextGauge: how full the model's context is — a small ring and "1.2k / 4k" — so the
// user sees a long conversation approaching the limit before the model has to stop. The
// ring turns amber past 75% and red past 90%; the tooltip has the exact numbers.

#include <QWidget>

namespace kvscope::ui {

class ContextGauge : public QWidget {
  Q_OBJECT

 public:
  explicit ContextGauge(QWidget* parent = nullptr);

  void setUsage(quint32 used, quint32 limit);
  quint32 used() const { return m_used; }
  quint32 limit() const { return m_limit; }
  QString text() const;

  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  quint32 m_used = 0;
  quint32 m_limit = 0;
};

// "950", "1.2k", "32k": token counts for tight labels.
QString shortCount(quint32 count);

}  // namespace kvscope::ui
