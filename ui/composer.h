#pragma once
// Composer: the message box under the conversation, with Send and Stop. Send is enabled
// only when a model is loaded, nothing is being generated and the text is not blank;
// Stop only while generating. Enter sends, Shift+Enter inserts a new line. The context
// gauge at the bottom left shows how much of the model's context the conversation uses.

#include <QFrame>

class QPlainTextEdit;
class QPushButton;
class QLabel;

namespace kvscope::ui {

class ContextGauge;

class Composer : public QFrame {
  Q_OBJECT

 public:
  explicit Composer(QWidget* parent = nullptr);

  void setModelLoaded(bool loaded);
  void setGenerating(bool generating);
  void setContextUsage(quint32 used, quint32 limit);
  // Messages the context overflow policy left out (the gauge shows the count).
  void setLeftOut(int messages);
  // Puts text into the box (scripted demos, a message to send again), as if typed.
  void setText(const QString& text);
  QString text() const;

 signals:
  void sendRequested(const QString& text);
  void stopRequested();

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void send();
  void updateState();

  QPlainTextEdit* m_input;
  QLabel* m_hint;
  ContextGauge* m_gauge;
  QPushButton* m_send;
  QPushButton* m_stop;
  bool m_modelLoaded = false;
  bool m_generating = false;
};

}  // namespace kvscope::ui
