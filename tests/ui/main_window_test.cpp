// MainWindow: its layout is complete without a model, the empty state tells how to get
// one, Send stays disabled until a model is loaded, the status bar reports the engine
// worker's device probe whatever its outcome, and a real chat turn on stories260K
// reaches the chat view and the inspector through the controller; Serve on Localhost
// shows the server in the status bar.
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QtTest>

#include <QTemporaryDir>

#include "fake_devices.h"
#include "ui/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/composer.h"
#include "ui/device_indicator.h"
#include "ui/engine_thread.h"
#include "ui/inspector_dock.h"
#include "ui/kv_memory_panel.h"
#include "ui/local_server.h"
#include "ui/main_window.h"
#include "ui/message_widget.h"
#include "ui/stat_tile.h"
#include "ui/throughput_panel.h"
#include "ui_fixtures.h"

using namespace kvscope;
using kvscope::ui::EngineThread;
using kvscope::ui::MainWindow;

class MainWindowTest : public QObject {
  Q_OBJECT

  QTemporaryDir m_home;

 private slots:
  void initTestCase() {
    // The choice rule would honour a device index from the developer's shell.
    qunsetenv("KVSCOPE_DEVICE");
    // Conversations and settings go to a throwaway folder, not the developer's.
    QVERIFY(m_home.isValid());
    qputenv("XDG_DATA_HOME", m_home.filePath(QStringLiteral("data")).toUtf8());
    qputenv("XDG_CONFIG_HOME", m_home.filePath(QStringLiteral("config")).toUtf8());
  }

  void emptyStateExplainsHowToGetAModel() {
    EngineThread engine(ui::test::fakeDevices);
    MainWindow window(engine.worker());
    window.show();
    auto* empty = window.findChild<QWidget*>(QStringLiteral("chatEmptyState"));
    QVERIFY(empty && empty->isVisible());
    QVERIFY(window.findChild<QPushButton*>(QStringLiteral("openModelFileButton"))->isVisible());
    QVERIFY(window.findChild<QLabel*>(QStringLiteral("downloadHint"))->isVisible());
    QCOMPARE(window.findChild<QLabel*>(QStringLiteral("modelStatus"))->text(),
             QStringLiteral("No model loaded"));
  }

  // The whole path on the CPU backend: load, send, stream, finish; the reply, its stats
  // and the inspector's KV numbers all arrive.
  void chatTurnReachesViewAndInspector() {
    KVS_REQUIRE_UI_FIXTURE(ui::test::storiesModel());
    EngineThread engine(ui::test::fakeDevices);
    MainWindow window(engine.worker());
    ui::ChatController* controller = window.controller();
    ui::SamplingSettings greedy;
    greedy.temperature = 0;
    greedy.maxTokens = 12;
    QSignalSpy loaded(controller, &ui::ChatController::modelLoaded);
    ui::BackendSettings cpu;
    cpu.kind = QStringLiteral("cpu");
    cpu.kvPolicy.clear();  // f16, so the expected ratio and bits are exact
    controller->loadModelWith(ui::test::storiesModel(), cpu);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
    controller->setSampling(greedy);
    auto* send = window.findChild<QPushButton*>(QStringLiteral("sendButton"));
    auto* input = window.findChild<QWidget*>(QStringLiteral("composerInput"));
    QTest::keyClicks(input, QStringLiteral("Once upon a time"));
    QVERIFY(send->isEnabled());

    QSignalSpy finished(controller, &ui::ChatController::replyFinished);
    QTest::mouseClick(send, Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);

    ui::ChatView* chat = window.chatView();
    QCOMPARE(chat->messageCount(), 2);
    QCOMPARE(chat->message(0)->text(), QStringLiteral("Once upon a time"));
    const QString reply = controller->conversation().messages.at(1).text;
    QVERIFY(!reply.isEmpty());
    QCOMPARE(chat->message(1)->text(), reply);
    QCOMPARE(chat->message(1)->findChild<QLabel*>(QStringLiteral("replyStats"))->text(),
             ui::replyStatsText(controller->conversation().messages.at(1).stats));

    QTRY_VERIFY(window.inspector()->kvMemoryPanel()->hasContent());
    const ui::KvSummary& kv = window.inspector()->kvMemoryPanel()->summary();
    QCOMPARE(kv.rows, controller->cachedTokens());
    QCOMPARE(kv.ratio, 1.0);  // f16 cache: the f16 size itself
    QCOMPARE(kv.bitsPerValue, 16.0);
    QVERIFY(window.inspector()->throughputPanel()->decodePointCount() > 0);
  }

  void buildsWithTheInspectorPanels() {
    EngineThread engine(ui::test::fakeDevices);
    MainWindow window(engine.worker());
    auto* dock = window.findChild<ui::InspectorDock*>(QStringLiteral("inspectorDock"));
    QVERIFY(dock);
    QCOMPARE(window.dockWidgetArea(dock), Qt::RightDockWidgetArea);
    for (const char* name : {"kvMemoryPanel", "schemePanel", "indexerPanel", "throughputPanel"}) {
      QWidget* panel = dock->findChild<QWidget*>(QString::fromLatin1(name));
      QVERIFY2(panel, name);
    }
    auto* tabs = dock->findChild<QTabWidget*>(QStringLiteral("inspectorTabs"));
    QVERIFY(tabs);
    // The fifth, Experts, shows only for a model with experts.
    QCOMPARE(tabs->count(), 5);
    int visible = 0;
    for (int i = 0; i < tabs->count(); ++i) visible += tabs->isTabVisible(i) ? 1 : 0;
    QCOMPARE(visible, 4);
    QVERIFY(!dock->expertTabVisible());
  }

  void sendDisabledWithoutModel() {
    EngineThread engine(ui::test::fakeDevices);
    MainWindow window(engine.worker());
    auto* send = window.findChild<QPushButton*>(QStringLiteral("sendButton"));
    auto* stop = window.findChild<QPushButton*>(QStringLiteral("stopButton"));
    QVERIFY(send);
    QVERIFY(stop);
    QVERIFY(!send->isEnabled());
    QVERIFY(!stop->isEnabled());

    // Text alone does not enable it: there is no model to send it to.
    auto* input = window.findChild<QWidget*>(QStringLiteral("composerInput"));
    QVERIFY(input);
    QTest::keyClicks(input, QStringLiteral("hello"));
    QVERIFY(!send->isEnabled());
  }

  // Server › Serve on Localhost: the status bar shows the URL and counts; off hides it.
  void serveActionShowsTheServerInTheStatusBar() {
    KVS_REQUIRE_UI_FIXTURE(ui::test::storiesModel());
    EngineThread engine(ui::test::fakeDevices);
    MainWindow window(engine.worker());
    window.show();
    auto* action = window.findChild<QAction*>(QStringLiteral("serveAction"));
    auto* status = window.findChild<QLabel*>(QStringLiteral("serverStatus"));
    QVERIFY(action && status);
    QVERIFY(!status->isVisible());
    window.localServer()->setPort(0);  // any free port: 8080 may be taken here
    action->trigger();                 // before a model: it waits for one
    QVERIFY(status->isVisible());
    QVERIFY(status->text().contains(QStringLiteral("waits for a model")));

    QSignalSpy loaded(window.controller(), &ui::ChatController::modelLoaded);
    window.controller()->loadModelWith(ui::test::storiesModel(),
                                       {QStringLiteral("cpu"), -1, 0, {}});
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
    QTRY_VERIFY_WITH_TIMEOUT(status->text().contains(QStringLiteral("Serving http://127.0.0.1:")),
                             60000);
    QVERIFY(status->text().contains(QStringLiteral("0 active · 0 served")));
    QVERIFY(action->isChecked());
    QVERIFY(status->toolTip().contains(QStringLiteral("stories260K.gguf")));
    action->trigger();
    QVERIFY(!action->isChecked());
    QVERIFY(!status->isVisible());
  }

  // A conversation too long for the context under "stop": the error banner
  // offers Leave Out Oldest Turns (the setting changes and the reply comes)
  // and New Chat (an empty chat, the unanswered message in the composer).
  void aConversationTooLongOffersItsActionsAsButtons() {
    KVS_REQUIRE_UI_FIXTURE(ui::test::storiesModel());
    EngineThread engine(ui::test::fakeDevices);
    MainWindow window(engine.worker());
    window.show();
    ui::ChatController* controller = window.controller();
    QSignalSpy loaded(controller, &ui::ChatController::modelLoaded);
    controller->loadModelWith(ui::test::storiesModel(), {QStringLiteral("cpu"), -1, 64, {}});
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
    ui::SamplingSettings stop;
    stop.temperature = 0;
    stop.maxTokens = 8;
    stop.contextOverflow = kvscope::runtime::ContextOverflow::kStop;
    auto* banner = window.findChild<QWidget*>(QStringLiteral("errorBanner"));
    auto* leaveOut = window.findChild<QPushButton*>(QStringLiteral("overflowLeaveOutButton"));
    auto* newChat = window.findChild<QPushButton*>(QStringLiteral("overflowNewChatButton"));
    auto* input = window.findChild<QPlainTextEdit*>(QStringLiteral("composerInput"));
    QVERIFY(banner && leaveOut && newChat && input);
    const QString text = QStringLiteral("Once upon a time there was a little dog");
    // Sends until the conversation no longer fits; true when it did not.
    const auto fillTheContext = [&]() -> bool {
      controller->setSampling(stop);
      QSignalSpy tooLong(controller, &ui::ChatController::conversationTooLong);
      for (int i = 0; i < 8 && tooLong.isEmpty(); ++i) {
        controller->send(text);
        if (!QTest::qWaitFor([&] { return !controller->isGenerating(); }, 60000)) return false;
      }
      return !tooLong.isEmpty() && tooLong.first().at(0).toString() == text;
    };

    QVERIFY(fillTheContext());
    QVERIFY(banner->isVisible());
    QVERIFY(leaveOut->isVisible() && newChat->isVisible());
    QSignalSpy finished(controller, &ui::ChatController::replyFinished);
    leaveOut->click();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
    QCOMPARE(controller->sampling().contextOverflow,
             kvscope::runtime::ContextOverflow::kTruncateMiddle);
    const ui::ChatMessage& reply = controller->conversation().messages.last();
    QVERIFY(reply.error.isEmpty());
    QVERIFY(!reply.text.isEmpty());
    QVERIFY(!leaveOut->isVisible());

    QVERIFY(fillTheContext());
    QVERIFY(newChat->isVisible());
    newChat->click();
    QVERIFY(controller->conversation().messages.isEmpty());
    QCOMPARE(input->toPlainText(), text);
    QVERIFY(!banner->isVisible());

    // The actions belong to the conversation that failed: another chat takes them away.
    QVERIFY(fillTheContext());
    QVERIFY(leaveOut->isVisible());
    controller->newChat();
    QVERIFY(!banner->isVisible());
    QCOMPARE(input->toPlainText(), text);  // the draft stays

    // Another error does not carry the buttons.
    window.chatView()->showError(QStringLiteral("something else"));
    QVERIFY(banner->isVisible());
    QVERIFY(!leaveOut->isVisible());
  }

  void viewMenuTogglesInspector() {
    EngineThread engine(ui::test::fakeDevices);
    MainWindow window(engine.worker());
    window.show();
    auto* dock = window.findChild<ui::InspectorDock*>(QStringLiteral("inspectorDock"));
    QVERIFY(dock->isVisible());
    dock->toggleViewAction()->trigger();
    QVERIFY(!dock->isVisible());
    dock->toggleViewAction()->trigger();
    QVERIFY(dock->isVisible());
  }

  void statusBarShowsChosenDevice() {
    EngineThread engine(ui::test::fakeDevices);
    MainWindow window(engine.worker());
    auto* device = window.findChild<ui::DeviceIndicator*>();
    QVERIFY(device);
    QVERIFY(!device->text().isEmpty());  // "looking for a device" before the answer

    QSignalSpy finished(&window, &MainWindow::deviceProbeFinished);
    QTRY_COMPARE(finished.count(), 1);
    // The discrete GPU outranks the CPU device.
    QCOMPARE(device->text(), QStringLiteral("Test Discrete GPU · Discrete GPU · Vulkan 1.3.280"));
  }

  void statusBarShowsDeviceError() {
    const std::string message = "No Vulkan device: install mesa-vulkan-drivers";
    EngineThread engine([&]() -> Expected<std::vector<gpu::DeviceInfo>> {
      return Error{ErrorCode::kDevice, message};
    });
    MainWindow window(engine.worker());
    QSignalSpy finished(&window, &MainWindow::deviceProbeFinished);
    QTRY_COMPARE(finished.count(), 1);
    QCOMPARE(window.findChild<ui::DeviceIndicator*>()->text(), QString::fromStdString(message));
  }

  // With the real engine the outcome depends on the machine; either way the status bar
  // must show exactly what the worker reported.
  void statusBarShowsRealProbeOutcome() {
    EngineThread engine;
    QString expected;
    connect(engine.worker(), &ui::EngineWorker::devicesReady, this,
            [&](const QList<ui::DeviceSummary>& devices, int chosen) {
              expected = devices.at(chosen).name;
            });
    connect(engine.worker(), &ui::EngineWorker::deviceError, this,
            [&](const QString& message) { expected = message; });
    MainWindow window(engine.worker());
    QSignalSpy finished(&window, &MainWindow::deviceProbeFinished);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
    QVERIFY(!expected.isEmpty());
    QVERIFY2(window.findChild<ui::DeviceIndicator*>()->text().contains(expected),
             qPrintable(expected));
  }
};

QTEST_MAIN(MainWindowTest)
#include "main_window_test.moc"
