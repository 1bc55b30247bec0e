#pragma once
// MainWindow: the app's single window. Chat column (conversation list, conversation,
// composer) in the centre, the inspector dock on the right, the Vulkan device in the
// status bar. It talks to the engine only through the EngineWorker given to it: queued
// *Requested signals out, value-type results in, so the GUI thread never waits on it.

#include <QList>
#include <QMainWindow>

#include "ui/device_summary.h"

class QLabel;
class QSplitter;

namespace kvscope::ui {

class ChatView;
class Composer;
class ConversationList;
class DeviceIndicator;
class EngineWorker;
class InspectorDock;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  // `worker` must live on another thread and outlive the window. The device probe is
  // requested immediately; its answer arrives through the event loop.
  explicit MainWindow(EngineWorker* worker, QWidget* parent = nullptr);

 signals:
  void probeDevicesRequested();
  // The status bar shows the probe's outcome, success or error.
  void deviceProbeFinished();

 private slots:
  void showDevices(const QList<kvscope::ui::DeviceSummary>& devices, int chosen);
  void showDeviceError(const QString& message);
  void openModelFile();
  void openModelFolder();
  void showAbout();

 private:
  void buildMenus();
  void buildStatusBar();
  void reportModelChoice(const QString& path);

  ConversationList* m_conversations;
  ChatView* m_chat;
  Composer* m_composer;
  QSplitter* m_splitter;
  InspectorDock* m_inspector;
  QLabel* m_modelStatus = nullptr;
  DeviceIndicator* m_device = nullptr;
};

}  // namespace kvscope::ui
