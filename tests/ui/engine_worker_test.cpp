// EngineWorker on its EngineThread: calls run on the engine thread, never the GUI
// thread, and results come back as value types through queued signals.
#include <QThread>
#include <QtTest>

#include "fake_devices.h"
#include "ui/engine_thread.h"
#include "ui/engine_worker.h"

using namespace kvscope;
using kvscope::ui::DeviceSummary;
using kvscope::ui::EngineThread;
using kvscope::ui::EngineWorker;

class EngineWorkerTest : public QObject {
  Q_OBJECT

  struct Answer {
    int count = 0;
    QList<DeviceSummary> devices;
    int chosen = -1;
    QString error;
  };

  // Receives the worker's signals on this (GUI) thread, as the window does.
  void collect(EngineWorker* worker, Answer& answer) {
    connect(worker, &EngineWorker::devicesReady, this,
            [&answer](const QList<DeviceSummary>& devices, int chosen) {
              ++answer.count;
              answer.devices = devices;
              answer.chosen = chosen;
            });
    connect(worker, &EngineWorker::deviceError, this, [&answer](const QString& message) {
      ++answer.count;
      answer.error = message;
    });
  }

 private slots:
  void initTestCase() { qunsetenv("KVSCOPE_DEVICE"); }

  void probeRunsOnTheEngineThread() {
    std::atomic<QThread*> probedOn = nullptr;
    EngineThread engine([&probedOn] {
      probedOn = QThread::currentThread();
      return Expected<std::vector<gpu::DeviceInfo>>(ui::test::fakeDevices());
    });
    Answer answer;
    collect(engine.worker(), answer);
    QMetaObject::invokeMethod(engine.worker(), &EngineWorker::probeDevices, Qt::QueuedConnection);
    QTRY_COMPARE(answer.count, 1);
    QCOMPARE(probedOn.load(), engine.worker()->thread());
    QVERIFY(probedOn.load() != QThread::currentThread());
  }

  void devicesReadyCarriesSummaries() {
    EngineThread engine(ui::test::fakeDevices);
    Answer answer;
    collect(engine.worker(), answer);
    QMetaObject::invokeMethod(engine.worker(), &EngineWorker::probeDevices, Qt::QueuedConnection);
    QTRY_COMPARE(answer.count, 1);
    QVERIFY(answer.error.isEmpty());
    QCOMPARE(answer.devices.size(), 2);
    QCOMPARE(answer.chosen, 1);
    const DeviceSummary& cpu = answer.devices.at(0);
    QCOMPARE(cpu.index, 0);
    QCOMPARE(cpu.name, QStringLiteral("llvmpipe (LLVM 15.0.6, 256 bits)"));
    QCOMPARE(cpu.statusText(),
             QStringLiteral("llvmpipe (LLVM 15.0.6, 256 bits) · CPU · Vulkan 1.3.230"));
    QCOMPARE(answer.devices.at(1).deviceLocalBytes, quint64{8} << 30);
  }

  void listerErrorBecomesDeviceError() {
    EngineThread engine([]() -> Expected<std::vector<gpu::DeviceInfo>> {
      return Error{ErrorCode::kDevice, "No Vulkan device: install mesa-vulkan-drivers"};
    });
    Answer answer;
    collect(engine.worker(), answer);
    QMetaObject::invokeMethod(engine.worker(), &EngineWorker::probeDevices, Qt::QueuedConnection);
    QTRY_COMPARE(answer.count, 1);
    QCOMPARE(answer.error, QStringLiteral("No Vulkan device: install mesa-vulkan-drivers"));
    QVERIFY(answer.devices.isEmpty());
  }

  void emptyErrorMessageIsNeverShownBlank() {
    EngineThread engine([]() -> Expected<std::vector<gpu::DeviceInfo>> {
      return Error{ErrorCode::kDevice, ""};
    });
    Answer answer;
    collect(engine.worker(), answer);
    QMetaObject::invokeMethod(engine.worker(), &EngineWorker::probeDevices, Qt::QueuedConnection);
    QTRY_COMPARE(answer.count, 1);
    QVERIFY(!answer.error.isEmpty());
  }
};

QTEST_MAIN(EngineWorkerTest)
#include "engine_worker_test.moc"
