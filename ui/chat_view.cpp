#include "ui/chat_view.h"

#include <QIcon>
#include <QKeySequence>
#include <QLabel>
#include <QPushButton>
#include <QStackedLayout>

#include "ui/empty_state.h"
#include "ui/resources.h"

namespace kvscope::ui {
namespace {

QWidget* appMark() {
  registerResources();
  auto* mark = new QLabel;
  mark->setPixmap(QIcon(QStringLiteral(":/icons/kvscope-256.png")).pixmap(88, 88));
  return mark;
}

}  // namespace

ChatView::ChatView(QWidget* parent) : QWidget(parent), m_pages(new QStackedLayout(this)) {
  setObjectName(QStringLiteral("chatView"));

  auto* empty = new EmptyState(
      appMark(), tr("No model loaded"),
      tr("Open a GGUF file or a Hugging Face model folder to start chatting. The model runs "
         "locally on your GPU through Vulkan, and the inspector on the right shows its KV "
         "cache as it fills."));
  empty->setObjectName(QStringLiteral("chatEmptyState"));
  empty->setMaximumTextWidth(460);

  auto* openFile = new QPushButton(tr("Open GGUF File…"));
  openFile->setObjectName(QStringLiteral("openModelFileButton"));
  openFile->setProperty("role", "primary");
  auto* openFolder = new QPushButton(tr("Open Model Folder…"));
  openFolder->setObjectName(QStringLiteral("openModelFolderButton"));
  openFolder->setProperty("role", "secondary");
  empty->addButton(openFile);
  empty->addButton(openFolder);
  empty->setFootnote(tr("or press %1 at any time")
                         .arg(QKeySequence(QKeySequence::Open).toString(QKeySequence::NativeText)));

  connect(openFile, &QPushButton::clicked, this, &ChatView::openModelFileRequested);
  connect(openFolder, &QPushButton::clicked, this, &ChatView::openModelFolderRequested);
  m_pages->addWidget(empty);
}

}  // namespace kvscope::ui
