#include "ui/model_picker.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QLocale>
#include <QPainter>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>
#include <algorithm>

#include "ui/theme.h"

namespace kvscope::ui {

// Weights and KV cache as one stacked bar against the device's memory.
class MemoryBar : public QWidget {
 public:
  explicit MemoryBar(QWidget* parent = nullptr) : QWidget(parent) { setFixedHeight(14); }

  void set(quint64 weights, quint64 kv, quint64 capacity) {
    m_weights = weights;
    m_kv = kv;
    m_capacity = capacity;
    update();
  }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const ThemeColors& c = themeColors();
    const QRectF track = QRectF(rect()).adjusted(0.5, 0.5, -0.5, -0.5);
    p.setPen(Qt::NoPen);
    p.setBrush(c.sunken);
    p.drawRoundedRect(track, 4, 4);
    const double scale = std::max<double>({1.0, double(m_capacity), double(m_weights + m_kv)});
    const double weightsWidth = track.width() * m_weights / scale;
    const double kvWidth = track.width() * m_kv / scale;
    const bool fits = m_capacity == 0 || m_weights + m_kv <= m_capacity;
    p.setClipRect(track);
    p.setBrush(fits ? c.accent : c.error);
    p.drawRect(QRectF(track.left(), track.top(), weightsWidth, track.height()));
    p.setBrush(fits ? c.values : c.error.lighter(130));
    p.drawRect(QRectF(track.left() + weightsWidth, track.top(), kvWidth, track.height()));
  }

 private:
  quint64 m_weights = 0;
  quint64 m_kv = 0;
  quint64 m_capacity = 0;
};

namespace {

constexpr int kPathRole = Qt::UserRole;
constexpr quint32 kDefaultContext = 4096;

QString stageText(LoadStage stage) {
  switch (stage) {
    case LoadStage::kReadingFile:
      return QObject::tr("Reading the model file…");
    case LoadStage::kLoadingTokenizer:
      return QObject::tr("Loading the tokenizer…");
    case LoadStage::kUploadingWeights:
      return QObject::tr("Uploading weights to the device…");
    case LoadStage::kReady:
      return QObject::tr("Ready");
  }
  return {};
}

// "1.24B", "494M", "260K".
QString parameterCount(const ModelEntry& entry) {
  const double n = static_cast<double>(entry.parameterCount);
  const QLocale locale;
  if (n >= 1e9) return locale.toString(n / 1e9, 'f', 2) + QLatin1Char('B');
  if (n >= 1e6) return locale.toString(n / 1e6, 'f', 0) + QLatin1Char('M');
  return locale.toString(n / 1e3, 'f', 0) + QLatin1Char('K');
}

QString entryLine(const ModelEntry& entry) {
  QStringList parts;
  if (entry.sizeBytes > 0) parts << formatBytes(entry.sizeBytes);
  if (!entry.quantization.isEmpty()) parts << entry.quantization;
  if (!entry.architecture.isEmpty()) parts << entry.architecture;
  if (entry.parameterCount > 0) parts << QObject::tr("%1 params").arg(parameterCount(entry));
  if (entry.contextLength > 0) parts << QObject::tr("%1 ctx").arg(entry.contextLength);
  return parts.join(QStringLiteral(" · "));
}

}  // namespace

ModelPicker::ModelPicker(QWidget* parent)
    : QDialog(parent),
      m_list(new QListWidget),
      m_name(new QLabel),
      m_details(new QLabel),
      m_path(new QLabel),
      m_context(new QSpinBox),
      m_policy(new QComboBox),
      m_backend(new QComboBox),
      m_device(new QComboBox),
      m_memory(new MemoryBar),
      m_estimate(new QLabel),
      m_status(new QLabel),
      m_progress(new QProgressBar),
      m_load(new QPushButton(tr("Load Model"))) {
  setObjectName(QStringLiteral("modelPicker"));
  setWindowTitle(tr("Choose a Model"));
  resize(860, 540);

  auto* splitter = new QSplitter(Qt::Horizontal);
  splitter->setChildrenCollapsible(false);
  splitter->addWidget(buildList());
  splitter->addWidget(buildDetails());
  splitter->setSizes({380, 480});

  auto* cancel = new QPushButton(tr("Cancel"));
  cancel->setProperty("role", "secondary");
  m_load->setObjectName(QStringLiteral("loadModelButton"));
  m_load->setProperty("role", "primary");
  m_load->setDefault(true);
  m_status->setObjectName(QStringLiteral("loadStatus"));
  m_status->setWordWrap(true);
  m_progress->setRange(0, 0);
  m_progress->setTextVisible(false);
  m_progress->setMaximumWidth(160);
  m_progress->hide();
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_status, 1);
  buttons->addWidget(m_progress);
  buttons->addWidget(cancel);
  buttons->addWidget(m_load);

  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(16, 16, 16, 16);
  column->setSpacing(12);
  column->addWidget(splitter, 1);
  column->addLayout(buttons);

  m_estimateDelay.setSingleShot(true);
  m_estimateDelay.setInterval(250);
  connect(&m_estimateDelay, &QTimer::timeout, this, &ModelPicker::requestEstimate);
  connect(cancel, &QPushButton::clicked, this, &QDialog::reject);
  connect(m_load, &QPushButton::clicked, this, [this] {
    if (selectedPath().isEmpty()) return;
    setBusy(true);
    m_status->setText(tr("Loading…"));
    emit loadRequested(selectedPath(), settings());
  });
  setBusy(false);
}

QWidget* ModelPicker::buildList() {
  auto* panel = new QWidget;
  auto* heading = new QLabel(tr("MODELS ON THIS COMPUTER"));
  heading->setProperty("role", "section");
  m_list->setObjectName(QStringLiteral("modelList"));
  m_list->setIconSize({20, 20});
  m_list->setSpacing(2);
  m_list->setWordWrap(true);
  connect(m_list, &QListWidget::currentRowChanged, this, &ModelPicker::selectionChanged);
  connect(m_list, &QListWidget::itemDoubleClicked, m_load, &QPushButton::click);

  auto* openFile = new QPushButton(themeIcon(QStringLiteral("file")), tr("Open File…"));
  openFile->setProperty("role", "secondary");
  auto* addFolder = new QPushButton(themeIcon(QStringLiteral("folder")), tr("Add Folder…"));
  addFolder->setProperty("role", "secondary");
  addFolder->setToolTip(tr("Also look for models in a folder of your choice"));
  connect(openFile, &QPushButton::clicked, this, &ModelPicker::openFile);
  connect(addFolder, &QPushButton::clicked, this, &ModelPicker::addFolder);
  auto* row = new QHBoxLayout;
  row->addWidget(openFile);
  row->addWidget(addFolder);
  row->addStretch(1);

  auto* column = new QVBoxLayout(panel);
  column->setContentsMargins(0, 0, 8, 0);
  column->addWidget(heading);
  column->addWidget(m_list, 1);
  column->addLayout(row);
  return panel;
}

QWidget* ModelPicker::buildDetails() {
  auto* panel = new QFrame;
  panel->setProperty("role", "card");
  m_name->setFont(scaledFont(1.3, true));
  m_name->setWordWrap(true);
  m_details->setProperty("role", "muted");
  m_details->setWordWrap(true);
  m_path->setProperty("role", "caption");
  m_path->setWordWrap(true);
  m_path->setTextInteractionFlags(Qt::TextSelectableByMouse);

  m_context->setObjectName(QStringLiteral("contextLength"));
  m_context->setRange(128, 1 << 20);
  m_context->setSingleStep(1024);
  m_context->setValue(kDefaultContext);
  m_context->setSuffix(tr(" tokens"));
  m_context->setGroupSeparatorShown(true);
  m_policy->setObjectName(QStringLiteral("kvPolicy"));
  m_policy->setEditable(true);
  m_policy->setToolTip(tr("A KV policy such as k=q8_0,v=turbo3,boundary=2"));
  m_backend->setObjectName(QStringLiteral("backendKind"));
  m_backend->addItem(tr("Automatic (GPU if present, else CPU)"), QStringLiteral("auto"));
  m_backend->addItem(tr("Vulkan (GPU)"), QStringLiteral("vulkan"));
  m_backend->addItem(tr("CPU"), QStringLiteral("cpu"));
  m_device->setObjectName(QStringLiteral("devicePicker"));
  m_device->addItem(tr("Automatic"), -1);
  setAvailablePolicies({tr("f16 (uncompressed)")}, {QString()});

  auto* form = new QFormLayout;
  form->setLabelAlignment(Qt::AlignRight);
  form->setHorizontalSpacing(12);
  form->setVerticalSpacing(8);
  form->addRow(tr("Context"), m_context);
  form->addRow(tr("KV cache"), m_policy);
  form->addRow(tr("Backend"), m_backend);
  form->addRow(tr("Device"), m_device);

  auto* memoryHeading = new QLabel(tr("MEMORY"));
  memoryHeading->setProperty("role", "section");
  m_estimate->setObjectName(QStringLiteral("memoryEstimate"));
  m_estimate->setWordWrap(true);
  m_estimate->setTextFormat(Qt::RichText);

  auto* column = new QVBoxLayout(panel);
  column->setContentsMargins(16, 14, 16, 14);
  column->setSpacing(8);
  column->addWidget(m_name);
  column->addWidget(m_details);
  column->addWidget(m_path);
  column->addSpacing(8);
  column->addLayout(form);
  column->addSpacing(8);
  column->addWidget(memoryHeading);
  column->addWidget(m_memory);
  column->addWidget(m_estimate);
  column->addStretch(1);

  const auto changed = [this] { m_estimateDelay.start(); };
  connect(m_context, &QSpinBox::valueChanged, this, changed);
  connect(m_policy, &QComboBox::currentTextChanged, this, changed);
  connect(m_backend, &QComboBox::currentIndexChanged, this, [this, changed] {
    m_device->setEnabled(m_backend->currentData().toString() != QStringLiteral("cpu"));
    changed();
  });
  connect(m_device, &QComboBox::currentIndexChanged, this, changed);
  return panel;
}

void ModelPicker::setModels(const QList<ModelEntry>& models) {
  const QString selected = selectedPath();
  m_models = models;
  m_list->clear();
  for (const ModelEntry& entry : models) {
    auto* item = new QListWidgetItem(
        themeIcon(entry.isFolder ? QStringLiteral("folder") : QStringLiteral("model"),
                  themeColors().muted),
        QStringLiteral("%1\n%2").arg(entry.name, entryLine(entry)), m_list);
    item->setData(kPathRole, entry.path);
    item->setToolTip(entry.path);
  }
  if (models.isEmpty()) {
    auto* item = new QListWidgetItem(tr("No models found yet.\nOpen a file or add a folder."));
    item->setFlags(Qt::NoItemFlags);
    m_list->addItem(item);
  }
  if (!selected.isEmpty())
    selectPath(selected);
  else if (!models.isEmpty())
    m_list->setCurrentRow(0);
  selectionChanged();
}

void ModelPicker::setDevices(const QList<DeviceSummary>& devices, int chosen) {
  m_devices = devices;
  m_device->clear();
  bool anyGpu = false;
  for (int i = 0; i < devices.size(); ++i) {
    const DeviceSummary& device = devices.at(i);
    anyGpu |= !device.cpuEmulated;
    QString label = device.name;
    if (device.cpuEmulated) label += tr(" · CPU-emulated, no GPU");
    if (device.deviceLocalBytes > 0)
      label += QStringLiteral(" · %1").arg(formatBytes(device.deviceLocalBytes));
    m_device->addItem(label, device.index);
    m_device->setItemData(i, device.detailText(), Qt::ToolTipRole);
  }
  if (chosen >= 0 && chosen < devices.size()) m_device->setCurrentIndex(chosen);
  // Without a GPU, Vulkan runs on a CPU emulation: offered for testing, not as the GPU.
  const int vulkan = m_backend->findData(QStringLiteral("vulkan"));
  m_backend->setItemText(vulkan, anyGpu ? tr("Vulkan (GPU)")
                                        : tr("Vulkan on CPU emulation (testing; much slower)"));
  m_backend->setItemText(m_backend->findData(QStringLiteral("auto")),
                         anyGpu ? tr("Automatic (GPU if present, else CPU)")
                                : tr("Automatic (CPU: this computer has no GPU)"));
}

bool ModelPicker::emulatedDeviceChosen() const {
  if (m_backend->currentData().toString() != QStringLiteral("vulkan")) return false;
  const int index = m_device->currentIndex();
  if (index >= 0 && index < m_devices.size()) return m_devices.at(index).cpuEmulated;
  return !m_devices.isEmpty() && m_devices.first().cpuEmulated;
}

void ModelPicker::setSettings(const BackendSettings& settings) {
  m_backend->setCurrentIndex(qMax(0, m_backend->findData(settings.kind)));
  if (settings.device >= 0) m_device->setCurrentIndex(qMax(0, m_device->findData(settings.device)));
  if (settings.contextLimit > 0) m_context->setValue(static_cast<int>(settings.contextLimit));
  const int policy = m_policy->findData(settings.kvPolicy);
  if (policy >= 0)
    m_policy->setCurrentIndex(policy);
  else
    m_policy->setCurrentText(settings.kvPolicy);
}

void ModelPicker::setAvailablePolicies(const QStringList& names, const QStringList& policies) {
  m_policy->clear();
  for (int i = 0; i < names.size() && i < policies.size(); ++i)
    m_policy->addItem(names.at(i), policies.at(i));
}

void ModelPicker::selectPath(const QString& path) {
  for (int row = 0; row < m_list->count(); ++row) {
    if (m_list->item(row)->data(kPathRole).toString() == path) {
      m_list->setCurrentRow(row);
      return;
    }
  }
  ModelEntry entry;
  entry.path = path;
  entry.name = QFileInfo(path).fileName();
  entry.isFolder = QFileInfo(path).isDir();
  entry.source = ModelSource::kUserFolder;
  QList<ModelEntry> models = m_models;
  models.prepend(entry);
  m_list->setCurrentRow(-1);
  setModels(models);
  m_list->setCurrentRow(0);
}

QString ModelPicker::selectedPath() const {
  QListWidgetItem* item = m_list->currentItem();
  return item ? item->data(kPathRole).toString() : QString();
}

BackendSettings ModelPicker::settings() const {
  BackendSettings s;
  s.kind = m_backend->currentData().toString();
  s.device = m_device->currentData().isValid() ? m_device->currentData().toInt() : -1;
  s.contextLimit = static_cast<quint32>(m_context->value());
  // A preset carries its policy as data; typed text is a policy string as written.
  const int index = m_policy->findText(m_policy->currentText());
  s.kvPolicy =
      index >= 0 ? m_policy->itemData(index).toString() : m_policy->currentText().trimmed();
  return s;
}

quint64 ModelPicker::deviceBytes() const {
  const int index = m_device->currentIndex();
  if (m_backend->currentData().toString() == QStringLiteral("cpu")) return 0;
  return index >= 0 && index < m_devices.size() ? m_devices.at(index).deviceLocalBytes : 0;
}

void ModelPicker::selectionChanged() {
  const QString path = selectedPath();
  const ModelEntry* entry = nullptr;
  for (const ModelEntry& model : m_models)
    if (model.path == path) entry = &model;
  m_name->setText(entry ? entry->name : tr("No model selected"));
  m_details->setText(entry ? entryLine(*entry) : QString());
  m_path->setText(path);
  // Any length the device holds may be asked for; past the trained context the
  // estimate below says so.
  m_trainedContext = entry ? entry->contextLength : 0;
  m_context->setToolTip(m_trainedContext > 0
                            ? tr("The model was trained for %1 tokens").arg(m_trainedContext)
                            : QString());
  m_estimate->setText(path.isEmpty() ? QString() : tr("Estimating…"));
  m_memory->set(0, 0, 0);
  setBusy(m_busy);
  if (!path.isEmpty()) m_estimateDelay.start(0);
}

void ModelPicker::requestEstimate() {
  if (!selectedPath().isEmpty()) emit estimateRequested(selectedPath(), settings());
}

void ModelPicker::showEstimate(const QString& path, const runtime::MemoryEstimate& estimate) {
  if (path != selectedPath()) return;
  const quint64 capacity = deviceBytes();
  // Under auto the f16 cache it measures with sits beside the compressed one
  // while it settles, under two_phase the prefill's f16 cache while the first
  // decode step encodes it: part of the peak, so of the bar's KV share too.
  m_memory->set(estimate.weightBytes, estimate.kvBytes + estimate.transientBytes, capacity);
  const QLocale locale;
  QString text = tr("Weights <b>%1</b> + KV cache <b>%2</b> at %3 tokens")
                     .arg(formatBytes(estimate.weightBytes), formatBytes(estimate.kvBytes),
                          locale.toString(estimate.contextLength));
  if (estimate.transientBytes > 0) {
    const bool twoPhase = estimate.transient == runtime::MemoryEstimate::Transient::kTwoPhase;
    text += (twoPhase ? tr(" + <b>%1</b> of f16 rows until the first reply token")
                      : tr(" + <b>%1</b> while auto measures in f16"))
                .arg(formatBytes(estimate.transientBytes));
  }
  text += tr(" = <b>%1</b>").arg(formatBytes(estimate.totalBytes()));
  text +=
      QStringLiteral("<br>") + tr("%1 of KV per token").arg(formatBytes(estimate.kvBytesPerToken));
  if (capacity > 0) {
    const bool fits = estimate.totalBytes() <= capacity;
    const QString color = (fits ? themeColors().ok : themeColors().error).name();
    text += QStringLiteral("<br><span style=\"color:%1\">%2</span>")
                .arg(color, fits ? tr("Fits in %1 of device memory; up to %2 tokens of context.")
                                       .arg(formatBytes(capacity),
                                            locale.toString(estimate.maxContextThatFits))
                                 : tr("Needs more than the device's %1; try a shorter context or "
                                      "a smaller KV policy.")
                                       .arg(formatBytes(capacity)));
  }
  const auto warn = [&text](const QString& warning) {
    text += QStringLiteral("<br><span style=\"color:%1\">%2</span>")
                .arg(themeColors().warning.name(), warning);
  };
  if (emulatedDeviceChosen()) {
    warn(tr("This Vulkan device emulates a GPU on the CPU: the CPU backend runs this model "
            "many times faster (docs/RESULTS.md)."));
  }
  if (m_trainedContext > 0 && estimate.contextLength > m_trainedContext) {
    warn(tr("Past the %1 tokens the model was trained for: replies that reach further may "
            "lose coherence.")
             .arg(locale.toString(m_trainedContext)));
  }
  m_estimate->setText(text);
}

void ModelPicker::showEstimateError(const QString& path, const QString& message) {
  if (path != selectedPath()) return;
  m_memory->set(0, 0, 0);
  m_estimate->setText(QStringLiteral("<span style=\"color:%1\">%2</span>")
                          .arg(themeColors().error.name(), message.toHtmlEscaped()));
}

void ModelPicker::showLoadProgress(LoadStage stage, const QString& message) {
  setBusy(stage != LoadStage::kReady);
  m_status->setStyleSheet(QString());
  m_status->setText(message.isEmpty() ? stageText(stage) : message);
}

void ModelPicker::showLoaded() {
  setBusy(false);
  accept();
}

void ModelPicker::showLoadFailed(const QString& message) {
  setBusy(false);
  m_status->setStyleSheet(QStringLiteral("color: %1;").arg(themeColors().error.name()));
  m_status->setText(message);
}

void ModelPicker::openFile() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open Model"), QString(),
                                                    tr("GGUF models (*.gguf);;All files (*)"));
  if (!path.isEmpty()) selectPath(path);
}

void ModelPicker::addFolder() {
  const QString folder = QFileDialog::getExistingDirectory(this, tr("Add a Folder of Models"));
  if (!folder.isEmpty()) emit addFolderRequested(folder);
}

void ModelPicker::setBusy(bool busy) {
  m_busy = busy;
  m_progress->setVisible(busy);
  m_load->setEnabled(!busy && !selectedPath().isEmpty());
}

}  // namespace kvscope::ui
