// MainWindow: its layout is complete without a model, Send stays disabled until a model
// is loaded, and the status bar reports the engine worker's device probe, whatever its
// outcome.
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QtTest>

#include "fake_devices.h"
#include "ui/composer.h"
#include "ui/device_indicator.h"
#include "ui/engine_thread.h"
#include "ui/inspector_dock.h"
#include "ui/main_window.h"

using namespace kvscope;
using kvscope::ui::EngineThread;
using kvscope::ui::MainWindow;

class MainWindowTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    // The choice rule would honour a device index from the developer's shell.
    qunsetenv("KVSCOPE_DEVICE");
  }

  void buildsWithFourInspectorPanels() {
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
    QCOMPARE(tabs->count(), 4);
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
