#include "ui/context_gauge.h"

#include <QPainter>

#include "ui/theme.h"

namespace kvscope::ui {
namespace {

constexpr int kRing = 14;
constexpr int kGap = 6;

}  // namespace

QString shortCount(quint32 count) {
  if (count < 1000) return QString::number(count);
  const double thousands = count / 1000.0;
  return thousands < 10 ? QStringLiteral("%1k").arg(thousands, 0, 'f', 1)
                        : QStringLiteral("%1k").arg(qRound(thousands));
}

ContextGauge::ContextGauge(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("contextGauge"));
  setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Fixed);
  setUsage(0, 0);
}

void ContextGauge::setUsage(quint32 used, quint32 limit) {
  m_used = used;
  m_limit = limit;
  QString tip = limit > 0 ? tr("Context: %1 of %2 tokens used (%3%)")
                                .arg(used)
                                .arg(limit)
                                .arg(qRound(100.0 * used / limit))
                          : tr("Context usage appears once a model is loaded");
  if (m_leftOut > 0) {
    tip += tr("\nThe conversation outgrew the context: the model no longer sees %1 (greyed)")
               .arg(messageCount(m_leftOut));
  }
  setToolTip(tip);
  updateGeometry();
  update();
}

void ContextGauge::setLeftOut(int messages) {
  m_leftOut = messages;
  setUsage(m_used, m_limit);
}

QString messageCount(int n) {
  return n == 1 ? ContextGauge::tr("1 earlier message")
                : ContextGauge::tr("%1 earlier messages").arg(n);
}

QString ContextGauge::text() const {
  if (m_limit == 0) return {};
  const QString usage = tr("%1 / %2").arg(shortCount(m_used), shortCount(m_limit));
  return m_leftOut > 0 ? tr("%1 · %2 left out").arg(usage).arg(m_leftOut) : usage;
}

QSize ContextGauge::sizeHint() const {
  const int textWidth = fontMetrics().horizontalAdvance(text());
  return {kRing + kGap + textWidth + 2, qMax(kRing, fontMetrics().height()) + 2};
}

void ContextGauge::paintEvent(QPaintEvent*) {
  if (m_limit == 0) return;
  const ThemeColors& c = themeColors();
  const double fraction = qMin(1.0, double(m_used) / m_limit);
  const QColor fill = fraction > 0.9 ? c.error : fraction > 0.75 ? c.warning : c.accent;

  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QRectF ring(1.5, (height() - kRing) / 2.0 + 0.5, kRing - 1, kRing - 1);
  p.setPen(QPen(c.sunken.darker(108), 2.5));
  p.drawEllipse(ring);
  p.setPen(QPen(fill, 2.5, Qt::SolidLine, Qt::FlatCap));
  // Angles in 1/16 degree, counter-clockwise from 3 o'clock: start at 12, run clockwise.
  p.drawArc(ring, 90 * 16, -qRound(fraction * 360 * 16));

  p.setPen(c.muted);
  p.drawText(QRect(kRing + kGap, 0, width() - kRing - kGap, height()),
             Qt::AlignVCenter | Qt::AlignLeft, text());
}

}  // namespace kvscope::ui
