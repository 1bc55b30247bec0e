// ModelPicker and SettingsDialog: the picker asks for a memory estimate of the selected
// model under the chosen settings, shows whether it fits the device, loads with exactly
// those settings and keeps a failure visible; the settings dialog returns what was
// entered and restores llama.cpp's defaults.
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QListWidget>
#include <QLocale>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QtTest>

#include "ui/kv_cache_dialog.h"
#include "ui/model_picker.h"
#include "ui/settings_dialog.h"
#include "ui/theme.h"

using namespace kvscope::ui;

namespace {

ModelEntry entry(const QString& path, const QString& name) {
  ModelEntry e;
  e.path = path;
  e.name = name;
  e.sizeBytes = 700u << 20;
  e.contextLength = 8192;
  return e;
}

DeviceSummary device(int index, const QString& name, quint64 bytes) {
  DeviceSummary d;
  d.index = index;
  d.name = name;
  d.deviceLocalBytes = bytes;
  return d;
}

}  // namespace

class DialogsTest : public QObject {
  Q_OBJECT

 private slots:
  void pickerEstimatesTheSelection() {
    ModelPicker picker;
    picker.setDevices({device(0, "CPU", 4ull << 30), device(1, "GPU", 8ull << 30)}, 1);
    QSignalSpy estimates(&picker, &ModelPicker::estimateRequested);
    picker.setModels({entry("/m/a.gguf", "A"), entry("/m/b.gguf", "B")});
    QCOMPARE(picker.selectedPath(), QStringLiteral("/m/a.gguf"));
    QTRY_VERIFY(!estimates.isEmpty());
    QCOMPARE(estimates.last().at(0).toString(), QStringLiteral("/m/a.gguf"));
    const auto settings = estimates.last().at(1).value<BackendSettings>();
    QCOMPARE(settings.kind, QStringLiteral("auto"));
    QCOMPARE(settings.device, 1);
    QCOMPARE(settings.contextLimit, quint32{4096});

    kvscope::runtime::MemoryEstimate estimate;
    estimate.weightBytes = 700u << 20;
    estimate.kvBytes = 512u << 20;
    estimate.contextLength = 4096;
    estimate.maxContextThatFits = 8192;
    auto* text = picker.findChild<QLabel*>(QStringLiteral("memoryEstimate"));
    picker.showEstimate(QStringLiteral("/m/b.gguf"), estimate);  // not the selection
    QVERIFY(!text->text().contains(QStringLiteral("Fits")));
    picker.showEstimate(QStringLiteral("/m/a.gguf"), estimate);
    QVERIFY2(text->text().contains(QStringLiteral("Fits in 8.00 GiB")), qPrintable(text->text()));
    QVERIFY(!text->text().contains(QStringLiteral("auto measures")));
    // Under auto its f16 measuring cache is part of the peak the sum states.
    estimate.transientBytes = 64u << 20;
    estimate.transient = kvscope::runtime::MemoryEstimate::Transient::kAutoMeasuring;
    picker.showEstimate(QStringLiteral("/m/a.gguf"), estimate);
    QVERIFY2(text->text().contains(
                 QStringLiteral("+ <b>%1</b> while auto measures in f16 = <b>%2</b>")
                     .arg(formatBytes(64u << 20), formatBytes((700u + 512u + 64u) << 20))),
             qPrintable(text->text()));
    // Under two_phase, the prefill's f16 rows.
    estimate.transient = kvscope::runtime::MemoryEstimate::Transient::kTwoPhase;
    picker.showEstimate(QStringLiteral("/m/a.gguf"), estimate);
    QVERIFY2(
        text->text().contains(QStringLiteral("+ <b>%1</b> of f16 rows until the first reply token")
                                  .arg(formatBytes(64u << 20))),
        qPrintable(text->text()));
    estimate.transient = kvscope::runtime::MemoryEstimate::Transient::kAutoMeasuring;
    estimate.kvBytes = 16ull << 30;
    picker.showEstimate(QStringLiteral("/m/a.gguf"), estimate);
    QVERIFY(text->text().contains(QStringLiteral("Needs more")));
  }

  // Past the trained context is allowed (typing 16384 gives 16384, not 1638), with a
  // warning in the estimate; within it there is no warning.
  void contextPastTheTrainedLengthIsWarned() {
    ModelPicker picker;
    picker.setModels({entry("/m/a.gguf", "A")});
    auto* context = picker.findChild<QSpinBox*>(QStringLiteral("contextLength"));
    context->clear();
    QTest::keyClicks(context, QStringLiteral("16384"));
    QCOMPARE(picker.settings().contextLimit, quint32{16384});
    auto* text = picker.findChild<QLabel*>(QStringLiteral("memoryEstimate"));
    kvscope::runtime::MemoryEstimate estimate;
    estimate.weightBytes = 700u << 20;
    estimate.kvBytes = 512u << 20;
    estimate.contextLength = 16384;
    picker.showEstimate(QStringLiteral("/m/a.gguf"), estimate);
    QVERIFY2(text->text().contains(QStringLiteral("Past the %1 tokens the model was trained")
                                       .arg(QLocale().toString(8192))),
             qPrintable(text->text()));
    estimate.contextLength = 8192;
    picker.showEstimate(QStringLiteral("/m/a.gguf"), estimate);
    QVERIFY(!text->text().contains(QStringLiteral("Past the")));
  }

  // Without a GPU, Vulkan is offered as the CPU emulation it is, with a warning.
  void aCpuEmulatedDeviceIsNotOfferedAsTheGpu() {
    ModelPicker picker;
    DeviceSummary lavapipe;
    lavapipe.index = 0;
    lavapipe.name = QStringLiteral("llvmpipe (LLVM 15.0.6, 256 bits)");
    lavapipe.kind = QStringLiteral("CPU");
    lavapipe.cpuEmulated = true;
    picker.setDevices({lavapipe}, 0);
    auto* backend = picker.findChild<QComboBox*>(QStringLiteral("backendKind"));
    const int vulkan = backend->findData(QStringLiteral("vulkan"));
    QVERIFY(!backend->itemText(vulkan).contains(QStringLiteral("GPU")));
    QVERIFY(backend->itemText(vulkan).contains(QStringLiteral("CPU emulation")));
    auto* device = picker.findChild<QComboBox*>(QStringLiteral("devicePicker"));
    QVERIFY(device->itemText(0).contains(QStringLiteral("CPU-emulated")));
    picker.setModels({entry("/m/a.gguf", "A")});
    backend->setCurrentIndex(vulkan);
    kvscope::runtime::MemoryEstimate estimate;
    estimate.contextLength = 4096;
    picker.showEstimate(QStringLiteral("/m/a.gguf"), estimate);
    auto* text = picker.findChild<QLabel*>(QStringLiteral("memoryEstimate"));
    QVERIFY2(text->text().contains(QStringLiteral("emulates a GPU on the CPU")),
             qPrintable(text->text()));
    // A real GPU keeps the usual labels.
    DeviceSummary gpu = lavapipe;
    gpu.name = QStringLiteral("NVIDIA H100");
    gpu.cpuEmulated = false;
    picker.setDevices({gpu}, 0);
    QCOMPARE(backend->itemText(vulkan), QStringLiteral("Vulkan (GPU)"));
  }

  void loadSendsTheChosenSettingsAndShowsFailures() {
    ModelPicker picker;
    picker.setAvailablePolicies({"f16", "Balanced"}, {"", "k=q8_0,v=q4_0"});
    picker.setModels({entry("/m/a.gguf", "A")});
    picker.findChild<QComboBox*>(QStringLiteral("kvPolicy"))->setCurrentIndex(1);
    picker.findChild<QComboBox*>(QStringLiteral("backendKind"))->setCurrentIndex(2);  // CPU
    QSignalSpy loads(&picker, &ModelPicker::loadRequested);
    auto* load = picker.findChild<QPushButton*>(QStringLiteral("loadModelButton"));
    QTest::mouseClick(load, Qt::LeftButton);
    QCOMPARE(loads.count(), 1);
    QCOMPARE(loads.at(0).at(0).toString(), QStringLiteral("/m/a.gguf"));
    const auto settings = loads.at(0).at(1).value<BackendSettings>();
    QCOMPARE(settings.kind, QStringLiteral("cpu"));
    QCOMPARE(settings.kvPolicy, QStringLiteral("k=q8_0,v=q4_0"));
    QVERIFY(!load->isEnabled());  // one load at a time

    picker.showLoadFailed(QStringLiteral("unsupported architecture 'mamba'"));
    QVERIFY(load->isEnabled());
    QCOMPARE(picker.findChild<QLabel*>(QStringLiteral("loadStatus"))->text(),
             QStringLiteral("unsupported architecture 'mamba'"));
    picker.showLoaded();
    QCOMPARE(picker.result(), int(QDialog::Accepted));
  }

  void handPickedFileJoinsTheList() {
    ModelPicker picker;
    picker.setModels({entry("/m/a.gguf", "A")});
    picker.selectPath(QStringLiteral("/elsewhere/c.gguf"));
    QCOMPARE(picker.selectedPath(), QStringLiteral("/elsewhere/c.gguf"));
    QCOMPARE(picker.findChild<QListWidget*>(QStringLiteral("modelList"))->count(), 2);
  }

  void settingsRoundTrip() {
    SamplingSettings sampling;
    sampling.temperature = 0.3;
    sampling.topK = 20;
    sampling.maxTokens = 128;
    sampling.seed = 7;
    SettingsDialog dialog(QStringLiteral("TinyLlama"), QStringLiteral("Be brief."), sampling);
    QCOMPARE(dialog.sampling(), sampling);
    QCOMPARE(dialog.systemPrompt(), QStringLiteral("Be brief."));
    dialog.findChild<QDoubleSpinBox*>(QStringLiteral("temperature"))->setValue(1.1);
    dialog.findChild<QPlainTextEdit*>(QStringLiteral("systemPromptEdit"))
        ->setPlainText(QStringLiteral("  Answer in French.  "));
    QCOMPARE(dialog.sampling().temperature, 1.1);
    QCOMPARE(dialog.systemPrompt(), QStringLiteral("Answer in French."));
    auto* buttons = dialog.findChild<QDialogButtonBox*>();
    QTest::mouseClick(buttons->button(QDialogButtonBox::RestoreDefaults), Qt::LeftButton);
    QCOMPARE(dialog.sampling(), SamplingSettings{});
  }

  // The chat-format choices follow what the model's template offers, and a
  // choice the model does not offer falls back to its own template.
  void chatFormatChoices() {
    SamplingSettings sampling;
    sampling.chatRenderer = kvscope::tokenizer::ChatRenderer::kBuiltin;
    sampling.thinking = false;
    SettingsDialog gemma(QStringLiteral("gemma"), {}, sampling, {QStringLiteral("gemma"), false});
    auto* renderer = gemma.findChild<QComboBox*>(QStringLiteral("chatRenderer"));
    QCOMPARE(renderer->count(), 3);
    QCOMPARE(gemma.sampling().chatRenderer, kvscope::tokenizer::ChatRenderer::kBuiltin);
    QVERIFY(!gemma.findChild<QComboBox*>(QStringLiteral("thinking"))->isEnabled());
    renderer->setCurrentIndex(renderer->findData(int(kvscope::tokenizer::ChatRenderer::kPlain)));
    QCOMPARE(gemma.sampling().chatRenderer, kvscope::tokenizer::ChatRenderer::kPlain);

    SettingsDialog odd(QStringLiteral("odd"), {}, sampling, {QString(), true});
    QCOMPARE(odd.findChild<QComboBox*>(QStringLiteral("chatRenderer"))->count(), 2);
    QCOMPARE(odd.sampling().chatRenderer, kvscope::tokenizer::ChatRenderer::kTemplate);
    auto* thinking = odd.findChild<QComboBox*>(QStringLiteral("thinking"));
    QVERIFY(thinking->isEnabled());
    QCOMPARE(odd.sampling().thinking, std::optional<bool>(false));
  }

  // The saved-cache limits come back as the user set them, the folder's size
  // is shown, and Remove All empties it of caches (and only of caches).
  void kvCacheLimitsAndRemoveAll() {
    QTemporaryDir dir;
    const QString folder = dir.filePath(QStringLiteral("kv-cache"));
    QDir().mkpath(folder);
    for (const QString& name : {QStringLiteral("a.kvcache"), QStringLiteral("b.kvcache"),
                                QStringLiteral("notes.txt")}) {
      QFile f(folder + QLatin1Char('/') + name);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QByteArray(3 << 20, 'x'));
    }
    KvCacheDialog dialog(folder, {quint64{256} << 20, quint64{2} << 30});
    auto* perChat = dialog.findChild<QSpinBox*>(QStringLiteral("kvCachePerChat"));
    auto* total = dialog.findChild<QSpinBox*>(QStringLiteral("kvCacheFolder"));
    auto* usage = dialog.findChild<QLabel*>(QStringLiteral("kvCacheUsage"));
    QVERIFY(perChat && total && usage);
    QCOMPARE(perChat->value(), 256);
    QCOMPARE(total->value(), 2048);
    QCOMPARE(usage->text(), QStringLiteral("6.00 MiB"));
    perChat->setValue(100);
    total->setValue(1000);
    QCOMPARE(dialog.limits().maxFileBytes, quint64{100} << 20);
    QCOMPARE(dialog.limits().maxFolderBytes, quint64{1000} << 20);

    QPushButton* removeAll = nullptr;
    for (auto* b : dialog.findChildren<QPushButton*>())
      if (b->text().startsWith(QStringLiteral("Remove All"))) removeAll = b;
    QVERIFY(removeAll);
    removeAll->click();
    QVERIFY(!QFile::exists(folder + QStringLiteral("/a.kvcache")));
    QVERIFY(!QFile::exists(folder + QStringLiteral("/b.kvcache")));
    QVERIFY(QFile::exists(folder + QStringLiteral("/notes.txt")));
    QCOMPARE(usage->text(), QStringLiteral("0 B"));
  }
};

QTEST_MAIN(DialogsTest)
#include "dialogs_test.moc"
