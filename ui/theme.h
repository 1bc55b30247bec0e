#pragma once
// The app's look: the Fusion style with a light or dark palette chosen to match the
// system's, one accent colour, and a small style sheet for the few widgets a palette
// cannot describe (primary buttons, the composer frame, flat inspector tabs). Widgets opt
// in through a "role" property instead of hard-coding colours, so a theme change stays
// in this file. Call applyTheme() once, before the first window is created.

#include <QColor>

class QApplication;

namespace kvscope::ui {

struct ThemeColors {
  QColor accent;
  QColor muted;   // secondary text: hints, captions, inactive tabs
  QColor border;  // hairlines between regions
  QColor sketch;  // faint strokes of empty-state illustrations
  QColor ok;
  QColor error;
};

void applyTheme(QApplication& app);

// The colours of the applied theme; valid after applyTheme().
const ThemeColors& themeColors();

}  // namespace kvscope::ui
