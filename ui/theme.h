#pragma once
// The app's look: the Fusion style with a light or dark palette chosen to match the
// system's (KVSCOPE_THEME=light|dark overrides), one accent colour, and a style sheet for what a
// palette cannot describe (primary buttons, the composer frame, message bubbles, flat inspector
// tabs). Widgets opt in through a "role" property or an object name instead of hard-coding colours,
// and custom-painted widgets take their colours from themeColors(), so a theme change stays in this
// file. Call applyTheme() once, before the first window is created.

#include <QColor>
#include <QFont>
#include <QIcon>

class QApplication;

namespace kvscope::ui {

struct ThemeColors {
  QColor text;
  QColor accent;
  QColor accentSoft;  // tinted surfaces: the user's bubbles, selected rows
  QColor muted;       // secondary text: hints, captions, inactive tabs
  QColor border;      // hairlines between regions
  QColor surface;     // cards and the conversation background
  QColor sunken;      // code blocks, gauge tracks, empty bar space
  QColor sketch;      // faint strokes of empty-state illustrations
  QColor ok;
  QColor warning;
  QColor error;
  QColor errorSoft;  // the error banner's background
  QColor keys;       // everything about the K cache
  QColor values;     // everything about the V cache
  QColor prefill;    // prefill series in the throughput chart
  QColor decode;     // decode series
};

void applyTheme(QApplication& app);

// The colours of the applied theme; light until applyTheme() says otherwise.
const ThemeColors& themeColors();

// A monochrome icon from resources/icons/<name>.svg drawn in `color` (the palette's text
// colour when invalid), with a faded variant for disabled buttons and `selected` (white
// when invalid) for selected items of views that highlight in the accent colour.
QIcon themeIcon(const QString& name, const QColor& color = QColor(),
                const QColor& selected = QColor());

// The application font scaled by `factor`, optionally bold; for headings and captions.
QFont scaledFont(double factor, bool bold = false);

// Formats a byte count with three significant digits: "812 B", "14.2 KiB", "3.41 GiB".
QString formatBytes(quint64 bytes);

}  // namespace kvscope::ui
