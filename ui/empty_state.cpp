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
      m_buttons(new QHBoxLayout),
      m_footnote(new QLabel(this)) {
  auto* titleLabel = new QLabel(title, m_textColumn);
  titleLabel->setObjectName(QStringLiteral("emptyStateTitle"));
  titleLabel->setProperty("role", "title");
  titleLabel->setAlignment(Qt::AlignHCenter);
  titleLabel->setWordWrap(true);

  auto* bodyLabel = new QLabel(body, m_textColumn);
  bodyLabel->setObjectName(QStringLiteral("emptyStateBody"));
  bodyLabel->setProperty("role", "muted");
  bodyLabel->setAlignment(Qt::AlignHCenter);
  bodyLabel->setWordWrap(true);

  auto* text = new QVBoxLayout(m_textColumn);
  text->setContentsMargins(0, 0, 0, 0);
  text->setSpacing(8);
  text->addWidget(titleLabel);
  text->addWidget(bodyLabel);
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

void EmptyState::setMaximumTextWidth(int pixels) {
  m_textColumn->setMaximumWidth(pixels);
}

}  // namespace kvscope::ui
