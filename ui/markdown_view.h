#pragma once
// MarkdownView: read-only rich text for an assistant reply. It renders GitHub-flavoured
// markdown (lists, tables, code blocks, links) with QTextDocument, shades code blocks and
// inline code, and is exactly as tall as its text at the current width, so a column of
// them scrolls as one page rather than each scrolling on its own. Links open in the
// browser; text is selectable.

#include <QTextBrowser>

namespace kvscope::ui {

class MarkdownView : public QTextBrowser {
  Q_OBJECT

 public:
  explicit MarkdownView(QWidget* parent = nullptr);

  // Replaces the content. Cost is linear in the text; callers streaming text coalesce.
  void setMarkdownText(const QString& markdown);

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 private:
  void shadeCode();
  void fitHeight();
};

}  // namespace kvscope::ui
