#include "ui/markdown_view.h"

#include <QAbstractTextDocumentLayout>
#include <QFontDatabase>
#include <QScrollBar>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>
#include <QtMath>

#include "ui/theme.h"

namespace kvscope::ui {
namespace {

bool isCodeBlock(const QTextBlock& block) {
  const QTextBlockFormat format = block.blockFormat();
  return format.hasProperty(QTextFormat::BlockCodeFence) ||
         format.hasProperty(QTextFormat::BlockCodeLanguage) || block.charFormat().fontFixedPitch();
}

}  // namespace

MarkdownView::MarkdownView(QWidget* parent) : QTextBrowser(parent) {
  setObjectName(QStringLiteral("markdownView"));
  setOpenExternalLinks(true);
  setFrameShape(QFrame::NoFrame);
  setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  setTextInteractionFlags(Qt::TextBrowserInteraction | Qt::TextSelectableByKeyboard);
  viewport()->setAutoFillBackground(false);
  setStyleSheet(QStringLiteral("background: transparent;"));
  document()->setDocumentMargin(0);
  connect(document()->documentLayout(), &QAbstractTextDocumentLayout::documentSizeChanged, this,
          &MarkdownView::fitHeight);
}

void MarkdownView::setMarkdownText(const QString& markdown) {
  document()->setMarkdown(markdown, QTextDocument::MarkdownDialectGitHub);
  shadeCode();
  fitHeight();
}

QSize MarkdownView::sizeHint() const {
  return {QTextBrowser::sizeHint().width(), height()};
}

QSize MarkdownView::minimumSizeHint() const {
  return {80, height()};
}

// The importer marks code with a fixed-pitch font only; a tinted background is what makes
// a code block or an identifier stand out in a reply.
void MarkdownView::shadeCode() {
  const ThemeColors& colors = themeColors();
  const QFont fixed = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  QTextCursor cursor(document());
  cursor.beginEditBlock();
  for (QTextBlock block = document()->begin(); block.isValid(); block = block.next()) {
    if (isCodeBlock(block)) {
      QTextBlockFormat format = block.blockFormat();
      format.setBackground(colors.sunken);
      format.setLeftMargin(10);
      format.setRightMargin(4);
      cursor.setPosition(block.position());
      cursor.setBlockFormat(format);
      continue;
    }
    for (auto it = block.begin(); !it.atEnd(); ++it) {
      const QTextFragment fragment = it.fragment();
      QTextCharFormat format = fragment.charFormat();
      if (!format.fontFixedPitch()) continue;
      format.setBackground(colors.sunken);
      format.setFontFamilies({fixed.family()});
      cursor.setPosition(fragment.position());
      cursor.setPosition(fragment.position() + fragment.length(), QTextCursor::KeepAnchor);
      cursor.setCharFormat(format);
    }
  }
  cursor.endEditBlock();
}

void MarkdownView::fitHeight() {
  const int textHeight = qCeil(document()->size().height());
  const int height =
      textHeight + 2 * frameWidth() + contentsMargins().top() + contentsMargins().bottom();
  if (height != this->height()) {
    setFixedHeight(qMax(height, fontMetrics().height()));
    updateGeometry();
  }
}

}  // namespace kvscope::ui
