#include "ui/theme.h"

#include <QApplication>
#include <QFont>
#include <QPalette>
#include <QStyleFactory>

namespace kvscope::ui {
namespace {

struct Scheme {
  QColor window, base, alternateBase, text, button, disabledText;
  ThemeColors colors;
};

Scheme lightScheme() {
  return {QColor("#f3f4f7"),
          QColor("#ffffff"),
          QColor("#f7f8fa"),
          QColor("#1c2230"),
          QColor("#fbfbfc"),
          QColor("#a3a9b5"),
          ThemeColors{QColor("#3a6ee0"), QColor("#687183"), QColor("#dde0e6"), QColor("#c9ced8"),
                      QColor("#2f9e6a"), QColor("#d14343")}};
}

Scheme darkScheme() {
  return {QColor("#1d2027"),
          QColor("#16181d"),
          QColor("#1b1e24"),
          QColor("#e4e7ec"),
          QColor("#2a2e37"),
          QColor("#6b7280"),
          ThemeColors{QColor("#6f9cff"), QColor("#9aa3b2"), QColor("#2e323b"), QColor("#3b414d"),
                      QColor("#4cc38a"), QColor("#f07070")}};
}

// Light until applyTheme() says otherwise, so widgets built without it (tests) still paint.
ThemeColors g_colors = lightScheme().colors;

QPalette paletteFor(const Scheme& s) {
  QPalette p(s.button, s.window);  // derives light/mid/dark/shadow consistently
  p.setColor(QPalette::Window, s.window);
  p.setColor(QPalette::WindowText, s.text);
  p.setColor(QPalette::Base, s.base);
  p.setColor(QPalette::AlternateBase, s.alternateBase);
  p.setColor(QPalette::Text, s.text);
  p.setColor(QPalette::Button, s.button);
  p.setColor(QPalette::ButtonText, s.text);
  p.setColor(QPalette::ToolTipBase, s.base);
  p.setColor(QPalette::ToolTipText, s.text);
  p.setColor(QPalette::PlaceholderText, s.colors.muted);
  p.setColor(QPalette::Highlight, s.colors.accent);
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Link, s.colors.accent);
  for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
    p.setColor(QPalette::Disabled, role, s.disabledText);
  return p;
}

QString styleSheetFor(const Scheme& s) {
  const ThemeColors& c = s.colors;
  QColor accentDisabled = c.accent;
  accentDisabled.setAlphaF(0.35);
  return QStringLiteral(R"(
QPushButton[role="primary"] {
  background: %1; color: white; border: none; border-radius: 6px;
  padding: 6px 18px; font-weight: 600; min-height: 20px;
}
QPushButton[role="primary"]:hover { background: %2; }
QPushButton[role="primary"]:pressed { background: %3; }
QPushButton[role="primary"]:disabled { background: %4; color: rgba(255, 255, 255, 200); }
QPushButton[role="secondary"] {
  background: %5; color: %6; border: 1px solid %7; border-radius: 6px;
  padding: 6px 16px; min-height: 20px;
}
QPushButton[role="secondary"]:hover { border-color: %1; }
QPushButton[role="secondary"]:disabled { color: %8; }
QLabel[role="title"] { font-size: 15pt; font-weight: 600; }
QLabel[role="muted"] { color: %9; }
QLabel[role="section"] { color: %9; font-weight: 600; }
#chatColumn { background: %5; }
#sidebar { background: %10; border-right: 1px solid %7; }
#composerFrame { background: %5; border: 1px solid %7; border-radius: 12px; }
#composerFrame[focused="true"] { border-color: %1; }
#composerInput { background: transparent; border: none; }
QTabWidget::pane { border: none; border-top: 1px solid %7; }
QTabBar::tab {
  background: transparent; border: none; border-bottom: 2px solid transparent;
  padding: 8px 10px; color: %9;
}
QTabBar::tab:selected { color: %6; border-bottom-color: %1; }
QTabBar::tab:hover { color: %6; }
QDockWidget::title { background: %10; padding: 8px 12px; text-align: left; }
QMainWindow::separator { background: %10; width: 5px; height: 5px; }
QStatusBar { border-top: 1px solid %7; }
QStatusBar::item { border: none; }
)")
      .arg(c.accent.name(), c.accent.lighter(112).name(), c.accent.darker(112).name(),
           accentDisabled.name(QColor::HexArgb), s.base.name(), s.text.name(), c.border.name(),
           s.disabledText.name(), c.muted.name(), s.window.name());
}

}  // namespace

void applyTheme(QApplication& app) {
  // The platform theme's palette is the only portable hint of a dark desktop in Qt 6.4.
  const bool dark = app.palette().color(QPalette::Window).lightness() < 128;
  const Scheme scheme = dark ? darkScheme() : lightScheme();
  g_colors = scheme.colors;

  app.setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
  app.setPalette(paletteFor(scheme));
  QFont font = app.font();
  if (font.pointSizeF() < 10) font.setPointSizeF(10);
  app.setFont(font);
  app.setStyleSheet(styleSheetFor(scheme));
}

const ThemeColors& themeColors() {
  return g_colors;
}

}  // namespace kvscope::ui
