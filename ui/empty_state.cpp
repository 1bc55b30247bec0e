#include "ui/empty_state.h"

#include <QAbstractButton>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

namespace kvscope::ui {
namespace {

// Centers a width-limited widget: it grows up to its maximum width, the stretches take
// the rest. (Layout alignment would shrink word-wrapped labels to their narrow size hint.)
QHBoxLayout* centered(QWidget* widget) {
  auto* row = new QHBoxLayout;
  row->addStretch(1);
  row->addWidget(widget, 100);
  row->addStretch(1);
  return row;
}

}  // namespace

EmptyState::EmptyState(QWidget* art, const QString& title, const QString& body, QWidget* parent)
    : QWidget(parent),
      m_textColumn(new QWidget(this)),
      m_title(new QLabel(title, m_textColumn)),
      m_body(new QLabel(body, m_textColumn)),
      m_buttons(new QHBoxLayout),
      m_extras(new QVBoxLayout),
      m_footnote(new QLabel(this)) {
  m_title->setObjectName(QStringLiteral("emptyStateTitle"));
  m_title->setProperty("role", "title");
  m_title->setAlignment(Qt::AlignHCenter);
  m_title->setWordWrap(true);

  m_body->setObjectName(QStringLiteral("emptyStateBody"));
  m_body->setProperty("role", "muted");
  m_body->setAlignment(Qt::AlignHCenter);
  m_body->setWordWrap(true);

  auto* text = new QVBoxLayout(m_textColumn);
  text->setContentsMargins(0, 0, 0, 0);
  text->setSpacing(8);
  text->addWidget(m_title);
  text->addWidget(m_body);
  m_textColumn->setMaximumWidth(340);

  m_buttons->setSpacing(10);
  m_buttons->addStretch();
  m_buttons->addStretch();

  m_footnote->setProperty("role", "muted");
  m_footnote->setAlignment(Qt::AlignHCenter);
  m_footnote->hide();

  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(24, 24, 24, 24);
  column->setSpacing(0);
  column->addStretch(3);
  column->addWidget(art, 0, Qt::AlignHCenter);
  column->addSpacing(20);
  column->addLayout(centered(m_textColumn));
  column->addSpacing(20);
  column->addLayout(m_buttons);
  column->addLayout(m_extras);
  column->addSpacing(12);
  column->addWidget(m_footnote, 0, Qt::AlignHCenter);
  column->addStretch(4);  // a little above center reads as centered
}

void EmptyState::addButton(QAbstractButton* button) {
  m_buttons->insertWidget(m_buttons->count() - 1, button);
}

void EmptyState::setFootnote(const QString& text) {
  m_footnote->setText(text);
  m_footnote->setVisible(!text.isEmpty());
}

void EmptyState::setTitle(const QString& title) {
  m_title->setText(title);
}

void EmptyState::setBody(const QString& body) {
  m_body->setText(body);
}

void EmptyState::addWidget(QWidget* widget) {
  m_extras->addSpacing(20);
  m_extras->addLayout(centered(widget));
}

void EmptyState::setMaximumTextWidth(int pixels) {
  m_textColumn->setMaximumWidth(pixels);
}

}  // namespace kvscope::ui
