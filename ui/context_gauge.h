#pragma once
// ContextGauge: how full the model's context is — a small ring and "1.2k / 4k" — so the
// user sees a long conversation approaching the limit before the model has to stop. The
// ring turns amber past 75% and red past 90%; the tooltip has the exact numbers. When the
// context overflow policy left messages out, the label says how many.

#include <QWidget>

namespace kvscope::ui {

class ContextGauge : public QWidget {
  Q_OBJECT

 public:
  explicit ContextGauge(QWidget* parent = nullptr);

  void setUsage(quint32 used, quint32 limit);
  // Messages the context overflow policy left out of the model's prompt (0: none).
  void setLeftOut(int messages);
  int leftOut() const { return m_leftOut; }
  quint32 used() const { return m_used; }
  quint32 limit() const { return m_limit; }
  QString text() const;

  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  quint32 m_used = 0;
  quint32 m_limit = 0;
  int m_leftOut = 0;
};

// "1 earlier message", "3 earlier messages".
QString messageCount(int n);

// "950", "1.2k", "32k": token counts for tight labels.
QString shortCount(quint32 count);

}  // namespace kvscope::ui
