// kvscope: the desktop app's entry point. Wiring only: theme, engine thread, main window,
// and the --screenshot option used by tools/screenshot.sh to capture the window once the
// device probe has answered.
#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QPixmap>
#include <QTimer>

#include "ui/engine_thread.h"
#include "ui/main_window.h"
#include "ui/resources.h"
#include "ui/theme.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("kvscope"));
  QApplication::setApplicationVersion(QStringLiteral("0.1.0"));
  QApplication::setOrganizationName(QStringLiteral("kvscope"));
  QApplication::setDesktopFileName(QStringLiteral("kvscope"));
  kvscope::ui::registerResources();
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/kvscope-256.png")));

  QCommandLineParser parser;
  parser.setApplicationDescription(
      QStringLiteral("Chat with local LLMs and inspect their compressed KV cache"));
  parser.addHelpOption();
  parser.addVersionOption();
  QCommandLineOption screenshot(
      QStringLiteral("screenshot"),
      QStringLiteral("Save a PNG of the main window once the device probe finishes, then exit."),
      QStringLiteral("path"));
  parser.addOption(screenshot);
  parser.process(app);

  kvscope::ui::applyTheme(app);
  kvscope::ui::EngineThread engine;
  kvscope::ui::MainWindow window(engine.worker());

  if (parser.isSet(screenshot)) {
    const QString path = parser.value(screenshot);
    QObject::connect(&window, &kvscope::ui::MainWindow::deviceProbeFinished, &window, [&] {
      // A new status text re-lays out the status bar over several event-loop passes;
      // give them time so the picture shows the settled window.
      QTimer::singleShot(300, &window, [&] {
        const bool saved = window.grab().save(path, "PNG");
        if (!saved) qCritical("could not write %s", qPrintable(path));
        QApplication::exit(saved ? 0 : 1);
      });
    });
  }

  window.show();
  return QApplication::exec();
}
