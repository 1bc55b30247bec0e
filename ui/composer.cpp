#include "ui/composer.h"

#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QStyle>
#include <QVBoxLayout>

#include "ui/context_gauge.h"
#include "ui/theme.h"

namespace kvscope::ui {

Composer::Composer(QWidget* parent)
    : QFrame(parent),
      m_input(new QPlainTextEdit(this)),
      m_hint(new QLabel(this)),
      m_gauge(new ContextGauge(this)),
      m_send(new QPushButton(tr("Send"), this)),
      m_stop(new QPushButton(tr("Stop"), this)) {
  setObjectName(QStringLiteral("composerFrame"));

  m_input->setObjectName(QStringLiteral("composerInput"));
  m_input->setTabChangesFocus(true);
  m_input->setFrameShape(QFrame::NoFrame);
  m_input->setFixedHeight(m_input->fontMetrics().lineSpacing() * 3 + 12);
  m_input->installEventFilter(this);

  m_hint->setProperty("role", "caption");
  m_send->setObjectName(QStringLiteral("sendButton"));
  m_send->setProperty("role", "primary");
  m_send->setDefault(true);
  m_send->setIcon(themeIcon(QStringLiteral("send"), Qt::white));
  m_stop->setObjectName(QStringLiteral("stopButton"));
  m_stop->setProperty("role", "secondary");
  m_stop->setIcon(themeIcon(QStringLiteral("stop")));

  auto* actions = new QHBoxLayout;
  actions->setSpacing(8);
  actions->addWidget(m_gauge);
  actions->addSpacing(6);
  actions->addWidget(m_hint, 1);
  actions->addWidget(m_stop);
  actions->addWidget(m_send);

  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(14, 10, 10, 10);
  column->setSpacing(6);
  column->addWidget(m_input);
  column->addLayout(actions);

  connect(m_input, &QPlainTextEdit::textChanged, this, &Composer::updateState);
  connect(m_send, &QPushButton::clicked, this, &Composer::send);
  connect(m_stop, &QPushButton::clicked, this, &Composer::stopRequested);
  updateState();
}

void Composer::setModelLoaded(bool loaded) {
  m_modelLoaded = loaded;
  updateState();
}

void Composer::setGenerating(bool generating) {
  m_generating = generating;
  updateState();
}

void Composer::setContextUsage(quint32 used, quint32 limit) {
  m_gauge->setUsage(used, limit);
}

void Composer::setLeftOut(int messages) {
  m_gauge->setLeftOut(messages);
}

QString Composer::text() const {
  return m_input->toPlainText();
}

void Composer::setText(const QString& text) {
  m_input->setPlainText(text);
}

bool Composer::eventFilter(QObject* watched, QEvent* event) {
  if (watched == m_input) {
    if (event->type() == QEvent::KeyPress) {
      auto* key = static_cast<QKeyEvent*>(event);
      const bool enter = key->key() == Qt::Key_Return || key->key() == Qt::Key_Enter;
      if (enter && !(key->modifiers() & Qt::ShiftModifier)) {
        send();
        return true;
      }
    } else if (event->type() == QEvent::FocusIn || event->type() == QEvent::FocusOut) {
      // The frame, not the borderless editor, shows focus; a property change needs a
      // re-polish for the style sheet to notice it.
      setProperty("focused", event->type() == QEvent::FocusIn);
      style()->unpolish(this);
      style()->polish(this);
    }
  }
  return QFrame::eventFilter(watched, event);
}

void Composer::send() {
  if (!m_send->isEnabled()) return;
  const QString text = m_input->toPlainText().trimmed();
  m_input->clear();
  emit sendRequested(text);
}

void Composer::updateState() {
  const bool hasText = !m_input->toPlainText().trimmed().isEmpty();
  m_send->setEnabled(m_modelLoaded && !m_generating && hasText);
  m_stop->setEnabled(m_generating);
  m_stop->setVisible(m_generating);
  m_input->setPlaceholderText(m_modelLoaded ? tr("Message the model…")
                                            : tr("Open a model to start chatting"));
  m_hint->setText(m_modelLoaded ? tr("Enter to send · Shift+Enter for a new line") : QString());
}

}  // namespace kvscope::ui
