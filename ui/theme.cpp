#include "ui/theme.h"

#include <QApplication>
#include <QFont>
#include <QHash>
#include <QLocale>
#include <QPainter>
#include <QPalette>
#include <QStyleFactory>
#include <QSvgRenderer>

#include "ui/resources.h"

namespace kvscope::ui {
namespace {

struct Scheme {
  QColor window, base, alternateBase, button, disabledText;
  ThemeColors colors;
};

Scheme lightScheme() {
  Scheme s{QColor("#f3f4f7"), QColor("#ffffff"), QColor("#f7f8fa"),
           QColor("#fbfbfc"), QColor("#a3a9b5"), {}};
  ThemeColors& c = s.colors;
  c.text = QColor("#1c2230");
  c.accent = QColor("#3a6ee0");
  c.accentSoft = QColor("#e8effd");
  c.muted = QColor("#687183");
  c.border = QColor("#dde0e6");
  c.surface = QColor("#ffffff");
  c.sunken = QColor("#f1f3f6");
  c.sketch = QColor("#c9ced8");
  c.ok = QColor("#2f9e6a");
  c.warning = QColor("#c7811a");
  c.error = QColor("#d14343");
  c.errorSoft = QColor("#fdecec");
  c.keys = QColor("#3a6ee0");
  c.values = QColor("#d9822b");
  c.prefill = QColor("#8b5cf6");
  c.decode = QColor("#2f9e6a");
  return s;
}

Scheme darkScheme() {
  Scheme s{QColor("#1d2027"), QColor("#16181d"), QColor("#1b1e24"),
           QColor("#2a2e37"), QColor("#6b7280"), {}};
  ThemeColors& c = s.colors;
  c.text = QColor("#e4e7ec");
  c.accent = QColor("#6f9cff");
  c.accentSoft = QColor("#243452");
  c.muted = QColor("#9aa3b2");
  c.border = QColor("#2e323b");
  c.surface = QColor("#16181d");
  c.sunken = QColor("#22262e");
  c.sketch = QColor("#3b414d");
  c.ok = QColor("#4cc38a");
  c.warning = QColor("#e0a040");
  c.error = QColor("#f07070");
  c.errorSoft = QColor("#3a2224");
  c.keys = QColor("#6f9cff");
  c.values = QColor("#f0a050");
  c.prefill = QColor("#a78bfa");
  c.decode = QColor("#4cc38a");
  return s;
}

ThemeColors g_colors = lightScheme().colors;

QPalette paletteFor(const Scheme& s) {
  const ThemeColors& c = s.colors;
  QPalette p(s.button, s.window);  // derives light/mid/dark/shadow consistently
  p.setColor(QPalette::Window, s.window);
  p.setColor(QPalette::WindowText, c.text);
  p.setColor(QPalette::Base, s.base);
  p.setColor(QPalette::AlternateBase, s.alternateBase);
  p.setColor(QPalette::Text, c.text);
  p.setColor(QPalette::Button, s.button);
  p.setColor(QPalette::ButtonText, c.text);
  p.setColor(QPalette::ToolTipBase, s.base);
  p.setColor(QPalette::ToolTipText, c.text);
  p.setColor(QPalette::PlaceholderText, c.muted);
  p.setColor(QPalette::Highlight, c.accent);
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Link, c.accent);
  for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
    p.setColor(QPalette::Disabled, role, s.disabledText);
  return p;
}

// Placeholders: @accent@ and friends, so the sheet reads as CSS rather than %1..%20.
QString styleSheetFor(const Scheme& s) {
  const ThemeColors& c = s.colors;
  QColor accentDisabled = c.accent;
  accentDisabled.setAlphaF(0.35);
  QString sheet = QStringLiteral(R"(
QPushButton[role="primary"] {
  background: @accent@; color: white; border: none; border-radius: 6px;
  padding: 6px 18px; font-weight: 600; min-height: 20px;
}
QPushButton[role="primary"]:hover { background: @accentHover@; }
QPushButton[role="primary"]:pressed { background: @accentPressed@; }
QPushButton[role="primary"]:disabled { background: @accentDisabled@; color: rgba(255, 255, 255, 200); }
QPushButton[role="secondary"] {
  background: @base@; color: @text@; border: 1px solid @border@; border-radius: 6px;
  padding: 6px 14px; min-height: 20px;
}
QPushButton[role="secondary"]:hover { border-color: @accent@; }
QPushButton[role="secondary"]:disabled { color: @disabled@; }
QToolButton[role="action"] {
  background: transparent; border: none; border-radius: 5px; padding: 3px; color: @muted@;
}
QToolButton[role="action"]:hover { background: @sunken@; color: @text@; }
QLabel[role="title"] { font-size: 15pt; font-weight: 600; }
QLabel[role="muted"] { color: @muted@; }
QLabel[role="caption"] { color: @muted@; font-size: 8.5pt; }
QLabel[role="section"] { color: @muted@; font-weight: 600; font-size: 8.5pt; }
QLabel[role="statValue"] { font-size: 13pt; font-weight: 600; }
QFrame[role="card"] { background: @base@; border: 1px solid @border@; border-radius: 8px; }
#chatColumn, #transcript, #transcriptContent { background: @base@; }
#userBubble { background: @accentSoft@; border-radius: 14px; }
#errorBanner { background: @errorSoft@; border: 1px solid @error@; border-radius: 8px; }
#errorBanner QLabel { color: @text@; }
#replyError { color: @error@; }
#messageEditor { background: @base@; border: 1px solid @accent@; border-radius: 10px; padding: 4px; }
#sidebar { background: @window@; border-right: 1px solid @border@; }
#conversationListView { background: transparent; border: none; outline: none; }
#conversationListView::item { padding: 7px 8px; border-radius: 6px; color: @text@; }
#conversationListView::item:hover { background: @sunken@; }
#conversationListView::item:selected { background: @accentSoft@; color: @text@; }
#composerFrame { background: @base@; border: 1px solid @border@; border-radius: 12px; }
#composerFrame[focused="true"] { border-color: @accent@; }
#composerInput { background: transparent; border: none; }
QProgressBar { background: @sunken@; border: none; border-radius: 3px; max-height: 6px; }
QProgressBar::chunk { background: @accent@; border-radius: 3px; }
QTabWidget::pane { border: none; border-top: 1px solid @border@; }
QTabBar::tab {
  background: transparent; border: none; border-bottom: 2px solid transparent;
  padding: 8px 10px; color: @muted@;
}
QTabBar::tab:selected { color: @text@; border-bottom-color: @accent@; }
QTabBar::tab:hover { color: @text@; }
QDockWidget::title { background: @window@; padding: 8px 12px; text-align: left; }
QMainWindow::separator { background: @border@; width: 1px; height: 1px; }
QStatusBar { border-top: 1px solid @border@; }
QStatusBar::item { border: none; }
QScrollBar:vertical { background: transparent; width: 10px; margin: 0; }
QScrollBar::handle:vertical { background: @sketch@; border-radius: 4px; min-height: 28px; margin: 2px; }
QScrollBar::add-line:vertical, QScrollBar::sub-line:vertical { height: 0; }
QScrollBar::add-page:vertical, QScrollBar::sub-page:vertical { background: none; }
QHeaderView::section {
  background: @window@; color: @muted@; border: none; border-bottom: 1px solid @border@;
  padding: 4px 6px; font-weight: 600;
}
QTableView { border: none; gridline-color: @border@; }
)");
  const QHash<QString, QString> values{
      {QStringLiteral("accent"), c.accent.name()},
      {QStringLiteral("accentHover"), c.accent.lighter(112).name()},
      {QStringLiteral("accentPressed"), c.accent.darker(112).name()},
      {QStringLiteral("accentDisabled"), accentDisabled.name(QColor::HexArgb)},
      {QStringLiteral("accentSoft"), c.accentSoft.name()},
      {QStringLiteral("base"), s.base.name()},
      {QStringLiteral("window"), s.window.name()},
      {QStringLiteral("text"), c.text.name()},
      {QStringLiteral("border"), c.border.name()},
      {QStringLiteral("disabled"), s.disabledText.name()},
      {QStringLiteral("muted"), c.muted.name()},
      {QStringLiteral("sunken"), c.sunken.name()},
      {QStringLiteral("sketch"), c.sketch.name()},
      {QStringLiteral("error"), c.error.name()},
      {QStringLiteral("errorSoft"), c.errorSoft.name()},
  };
  for (auto it = values.begin(); it != values.end(); ++it)
    sheet.replace(QLatin1Char('@') + it.key() + QLatin1Char('@'), it.value());
  return sheet;
}

QPixmap tintedSvg(QSvgRenderer& svg, int size, const QColor& color) {
  QPixmap pixmap(size, size);
  pixmap.fill(Qt::transparent);
  QPainter p(&pixmap);
  p.setRenderHint(QPainter::Antialiasing);
  svg.render(&p, QRectF(0, 0, size, size));
  // Keep the drawing's coverage, replace its colour.
  p.setCompositionMode(QPainter::CompositionMode_SourceIn);
  p.fillRect(pixmap.rect(), color);
  return pixmap;
}

}  // namespace

void applyTheme(QApplication& app) {
  // The platform theme's palette is the only portable hint of a dark desktop in Qt 6.4;
  // KVSCOPE_THEME=light|dark overrides it.
  const QString forced = qEnvironmentVariable("KVSCOPE_THEME");
  const bool dark = forced.isEmpty() ? app.palette().color(QPalette::Window).lightness() < 128
                                     : forced == QStringLiteral("dark");
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

QIcon themeIcon(const QString& name, const QColor& color, const QColor& selected) {
  registerResources();
  QSvgRenderer svg(QStringLiteral(":/icons/%1.svg").arg(name));
  QIcon icon;
  if (!svg.isValid()) return icon;
  const QColor normal = color.isValid() ? color : g_colors.text;
  QColor disabled = normal;
  disabled.setAlphaF(0.35);
  for (int size : {16, 20, 24, 32, 48}) {
    icon.addPixmap(tintedSvg(svg, size, normal), QIcon::Normal);
    icon.addPixmap(tintedSvg(svg, size, disabled), QIcon::Disabled);
    icon.addPixmap(tintedSvg(svg, size, selected.isValid() ? selected : QColor(Qt::white)),
                   QIcon::Selected);
  }
  return icon;
}

QFont scaledFont(double factor, bool bold) {
  QFont font = QApplication::font();
  font.setPointSizeF(font.pointSizeF() * factor);
  font.setBold(bold);
  return font;
}

QString formatBytes(quint64 bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  // Three significant digits: "812 B", "48.0 MiB", "3.41 GiB".
  const int decimals = unit == 0 || value >= 100 ? 0 : value >= 10 ? 1 : 2;
  return QStringLiteral("%1 %2").arg(QLocale().toString(value, 'f', decimals),
                                     QString::fromLatin1(kUnits[unit]));
}

}  // namespace kvscope::ui
