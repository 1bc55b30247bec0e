#pragma once
// ModelPicker: the dialog for choosing and loading a model. On the left, the models found
// on this computer (recent ones first) with Open File… and Add Folder…; on the right, the
// chosen model's details and its load settings — context length, KV policy, backend and
// Vulkan device — with a memory estimate that updates as they change (weights plus the KV
// cache at that context, against the device's memory, and the longest context that
// fits). Load shows the engine's progress; the dialog closes itself when the model is
// ready, and stays open with the reason when loading fails.
//
// It computes nothing itself: estimateRequested() and loadRequested() go to the
// controller, whose answers come back through the show* slots.

#include <QDialog>
#include <QList>
#include <QTimer>

#include "ui/device_summary.h"
#include "ui/engine_types.h"

class QComboBox;
class QLabel;
class QListWidget;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace kvscope::ui {

class MemoryBar;

class ModelPicker : public QDialog {
  Q_OBJECT

 public:
  explicit ModelPicker(QWidget* parent = nullptr);

  void setModels(const QList<ModelEntry>& models);
  void setDevices(const QList<DeviceSummary>& devices, int chosen);
  void setSettings(const BackendSettings& settings);
  void setAvailablePolicies(const QStringList& names, const QStringList& policies);
  // Selects the entry with `path`, adding it when it is not listed (a file chosen by hand).
  void selectPath(const QString& path);

  QString selectedPath() const;
  BackendSettings settings() const;

 public slots:
  void showEstimate(const QString& path, const kvscope::runtime::MemoryEstimate& estimate);
  void showEstimateError(const QString& path, const QString& message);
  void showLoadProgress(kvscope::ui::LoadStage stage, const QString& message);
  void showLoaded();
  void showLoadFailed(const QString& message);

 signals:
  void estimateRequested(const QString& path, const kvscope::ui::BackendSettings& settings);
  void loadRequested(const QString& path, const kvscope::ui::BackendSettings& settings);
  void addFolderRequested(const QString& folder);

 private:
  QWidget* buildList();
  QWidget* buildDetails();
  void selectionChanged();
  void requestEstimate();
  void openFile();
  void addFolder();
  void setBusy(bool busy);
  quint64 deviceBytes() const;
  // Vulkan on a device that is a CPU emulation (lavapipe) is chosen.
  bool emulatedDeviceChosen() const;

  QList<ModelEntry> m_models;
  QList<DeviceSummary> m_devices;
  QListWidget* m_list;
  QLabel* m_name;
  QLabel* m_details;
  QLabel* m_path;
  QSpinBox* m_context;
  QComboBox* m_policy;
  QComboBox* m_backend;
  QComboBox* m_device;
  MemoryBar* m_memory;
  QLabel* m_estimate;
  QLabel* m_status;
  QProgressBar* m_progress;
  QPushButton* m_load;
  quint32 m_trainedContext = 0;  // of the selected model; 0: unknown
  QTimer m_estimateDelay;  // spin-box typing asks once, not per keystroke
  bool m_busy = false;
};

}  // namespace kvscope::ui
