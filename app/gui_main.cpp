// kvscope: the desktop app's entry point. Wiring only: theme, engine thread, main window,
// and the scripted screenshot mode used by tools/screenshot.sh (--screenshot, --demo-*).
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QIcon>

#include "model/default_model.h"
#include "ui/chat_controller.h"
#include "ui/engine_thread.h"
#include "ui/main_window.h"
#include "ui/model_settings.h"
#include "ui/resources.h"
#include "ui/screenshot_script.h"
#include "ui/theme.h"

namespace {

QCommandLineOption option(const char* name, const char* help, const char* value = nullptr) {
  return value ? QCommandLineOption(QString::fromLatin1(name), QString::fromLatin1(help),
                                    QString::fromLatin1(value))
               : QCommandLineOption(QString::fromLatin1(name), QString::fromLatin1(help));
}

// With no model named on the command line: the model used last, if it is still
// there, else the demo model kvscope ships, so a first start is ready to chat.
// Empty (the window's empty state) when neither exists.
QString startupModel() {
  const QStringList recent = kvscope::ui::ModelSettings().recentModels();
  if (!recent.isEmpty() && QFileInfo::exists(recent.first())) return recent.first();
  auto demo = kvscope::model::findDefaultModel();
  return demo.ok() ? QString::fromStdString(demo->string()) : QString();
}

}  // namespace

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
  parser.addPositionalArgument(QStringLiteral("model"),
                               QStringLiteral("A model to load at start (.gguf file or folder)."),
                               QStringLiteral("[model]"));
  const QCommandLineOption screenshot =
      option("screenshot",
             "Save a PNG of the main window and exit: once the device probe finishes, or with "
             "--demo-model, while the last --demo-chat reply streams.",
             "path");
  const QCommandLineOption demoModel =
      option("demo-model", "Screenshot mode: the model to load (.gguf or folder).", "path");
  const QCommandLineOption demoChat =
      option("demo-chat", "Screenshot mode: a prompt to send; repeat for more turns.", "text");
  const QCommandLineOption demoSystem =
      option("demo-system", "Screenshot mode: the conversation's system prompt.", "text");
  const QCommandLineOption demoBackend =
      option("demo-backend", "Screenshot mode: vulkan (default) or cpu.", "kind");
  const QCommandLineOption demoPolicy =
      option("demo-kv-policy", "Screenshot mode: KV policy, e.g. k=q8_0,v=q4_0.", "policy");
  const QCommandLineOption demoContext =
      option("demo-context", "Screenshot mode: context length in tokens.", "tokens");
  const QCommandLineOption demoTokens = option(
      "demo-tokens", "Screenshot mode: reply tokens to wait for before capturing (24).", "n");
  const QCommandLineOption demoMaxTokens =
      option("demo-max-tokens", "Screenshot mode: longest reply in tokens.", "n");
  const QCommandLineOption demoTab = option(
      "demo-tab",
      "Screenshot mode: inspector tab (0 KV memory, 1 Scheme, 2 Indexer, 3 Throughput).", "n");
  const QCommandLineOption demoDiagnostic =
      option("demo-indexer-diagnostic",
             "Screenshot mode: measure the attention mass the indexer captures.");
  const QCommandLineOption demoCompare = option(
      "demo-compare",
      "Screenshot mode: after the last reply, compare schemes on the conversation and capture "
      "that window.");
  const QCommandLineOption demoServe = option(
      "demo-serve",
      "Screenshot mode: after the last reply, serve on this port and capture once a client's two "
      "requests were answered.",
      "port");
  const QCommandLineOption demoOverflow = option(
      "demo-context-overflow",
      "Screenshot mode: when the conversation outgrows the context: truncate-middle, rolling, or "
      "stop (then capture the error and the actions it offers).",
      "policy");
  const QCommandLineOption demoReopen = option(
      "demo-reopen",
      "Screenshot mode: after the last reply, start a new chat, reopen the conversation and "
      "capture once its saved KV cache was restored.");
  for (const QCommandLineOption& o :
       {screenshot, demoModel, demoChat, demoSystem, demoBackend, demoPolicy, demoContext,
        demoTokens, demoMaxTokens, demoTab, demoDiagnostic, demoCompare, demoServe, demoOverflow,
        demoReopen})
    parser.addOption(o);
  parser.process(app);

  kvscope::ui::applyTheme(app);
  kvscope::ui::EngineThread engine;
  kvscope::ui::MainWindow window(engine.worker());
  const QStringList args = parser.positionalArguments();
  const QString model = !args.isEmpty()            ? QFileInfo(args.first()).absoluteFilePath()
                        : parser.isSet(screenshot) ? QString()
                                                   : startupModel();
  if (!model.isEmpty()) window.controller()->loadModel(model);

  if (parser.isSet(screenshot)) {
    kvscope::ui::ScreenshotPlan plan;
    plan.output = parser.value(screenshot);
    plan.modelPath = parser.value(demoModel);
    plan.prompts = parser.values(demoChat);
    plan.systemPrompt = parser.value(demoSystem);
    if (parser.isSet(demoBackend)) plan.backend.kind = parser.value(demoBackend);
    // Without --demo-kv-policy, the app's default policy (auto).
    if (parser.isSet(demoPolicy)) plan.backend.kvPolicy = parser.value(demoPolicy);
    plan.backend.contextLimit = parser.value(demoContext).toUInt();
    if (parser.isSet(demoTokens)) plan.minTokens = parser.value(demoTokens).toInt();
    plan.maxTokens = parser.value(demoMaxTokens).toInt();
    plan.inspectorTab = parser.value(demoTab).toInt();
    plan.indexerDiagnostic = parser.isSet(demoDiagnostic);
    plan.compare = parser.isSet(demoCompare);
    plan.servePort = static_cast<quint16>(parser.value(demoServe).toUInt());
    if (parser.isSet(demoOverflow)) {
      auto overflow =
          kvscope::runtime::parseContextOverflow(parser.value(demoOverflow).toStdString());
      if (!overflow.ok()) {
        qCritical("--demo-context-overflow: %s", overflow.error().message.c_str());
        return 2;
      }
      plan.contextOverflow = *overflow;
    }
    plan.reopen = parser.isSet(demoReopen);
    if (!plan.modelPath.isEmpty() && plan.prompts.isEmpty()) {
      qCritical("--demo-model needs at least one --demo-chat prompt");
      return 2;
    }
    new kvscope::ui::ScreenshotScript(window, plan);  // owned by the window
  }

  window.show();
  return QApplication::exec();
}
