#pragma once
// EmptyState: what a region shows before it has data — a picture, a title, a sentence on
// what will appear and how to get there, and optionally a row of buttons. Centered,
// width-limited so the text stays readable in wide and narrow regions alike.

#include <QWidget>

class QAbstractButton;
class QHBoxLayout;
class QLabel;
class QVBoxLayout;

namespace kvscope::ui {

class EmptyState : public QWidget {
  Q_OBJECT

 public:
  // Takes ownership of `art`.
  EmptyState(QWidget* art, const QString& title, const QString& body, QWidget* parent = nullptr);

  // Appends a button to the centered action row under the text; takes ownership.
  void addButton(QAbstractButton* button);
  // A small muted line under the buttons, e.g. a keyboard shortcut.
  void setFootnote(const QString& text);
  void setMaximumTextWidth(int pixels);
  void setTitle(const QString& title);
  void setBody(const QString& body);
  // Appends a widget under the buttons and above the footnote; takes ownership.
  void addWidget(QWidget* widget);

 private:
  QWidget* m_textColumn;
  QLabel* m_title;
  QLabel* m_body;
  QHBoxLayout* m_buttons;
  QVBoxLayout* m_extras;
  QLabel* m_footnote;
};

}  // namespace kvscope::ui
