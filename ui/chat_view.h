#pragma once
// ChatView: the conversation area of the main window. Without a model it shows how to
// open one (a GGUF file or a Hugging Face folder); the transcript of streamed markdown
// replies is added here as a second page of m_pages once models load.

#include <QWidget>

class QStackedLayout;

namespace kvscope::ui {

class ChatView : public QWidget {
  Q_OBJECT

 public:
  explicit ChatView(QWidget* parent = nullptr);

 signals:
  void openModelFileRequested();
  void openModelFolderRequested();

 private:
  QStackedLayout* m_pages;
};

}  // namespace kvscope::ui
