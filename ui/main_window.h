#pragma once
// MainWindow: the app's single window. Conversation list on the left, the chat column
// (model bar, conversation, composer) in the centre, the inspector dock on the right, the
// model, the local server and the Vulkan device in the status bar.
//
// It wires widgets to a ChatController, the GUI thread's owner of the conversation: the
// widgets' requests become controller calls, the controller's signals become widget
// updates. The controller alone talks to the EngineWorker (queued signals), so the GUI
// thread never waits on the engine. The window also owns the conversation store, the
// remembered model settings and model discovery.

#include <QList>
#include <QMainWindow>
#include <QPointer>
#include <memory>

#include "ui/device_summary.h"
#include "ui/engine_types.h"

class QAction;
class QLabel;
class QSplitter;
class QToolButton;

namespace kvscope::ui {

class ChatController;
class ChatView;
class Composer;
class ConversationList;
class ConversationStore;
class DeviceIndicator;
class EngineWorker;
class FidelityLab;
class InspectorDock;
class LocalServer;
class ModelDiscovery;
class ModelPicker;
class ModelSettings;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  // `worker` must live on another thread and outlive the window. The device probe and a
  // scan for models on disk start immediately; their answers arrive through the event
  // loop. Conversations are stored in ConversationStore::defaultDirectory().
  explicit MainWindow(EngineWorker* worker, QWidget* parent = nullptr);
  ~MainWindow() override;

  ChatController* controller() const { return m_controller; }
  ChatView* chatView() const { return m_chat; }
  Composer* composer() const { return m_composer; }
  InspectorDock* inspector() const { return m_inspector; }
  LocalServer* localServer() const { return m_server; }

 public slots:
  void openModelPicker();
  void openSettings();
  void chooseChatFormat(const QString& message);
  // "Compare schemes on this conversation": opens the FidelityLab (one per window) and
  // fetches the conversation's tokens; with `runNow` the comparison starts once they
  // arrive, with the lab's default policies.
  FidelityLab* openComparison(bool runNow = false);

 signals:
  void probeDevicesRequested();
  // The status bar shows the probe's outcome, success or error.
  void deviceProbeFinished();
  // A scan for models on disk finished and its results are shown.
  void modelsDiscovered();

 private slots:
  void showDevices(const QList<kvscope::ui::DeviceSummary>& devices, int chosen);
  void showDeviceError(const QString& message);
  void openModelFile();
  void openModelFolder();
  void showAbout();
  void chooseServerPort();
  void showServer();

 private:
  QWidget* buildChatColumn();
  void buildMenus();
  void buildStatusBar();
  void connectController();
  void connectWidgets();
  void discoverModels();
  void showModel(const ModelInfo& info);
  void refreshConversations();
  void renameConversation(const QString& id, const QString& title);
  void applyPolicy(const QString& policy);
  quint64 deviceBytes() const;

  ConversationStore* m_store;
  std::unique_ptr<ModelSettings> m_settings;
  ChatController* m_controller;
  ModelDiscovery* m_discovery;
  ConversationList* m_conversations;
  ChatView* m_chat;
  // The message a too-long conversation left unanswered: New Chat puts it in
  // the composer.
  QString m_unansweredMessage;
  Composer* m_composer;
  QSplitter* m_splitter;
  InspectorDock* m_inspector;
  LocalServer* m_server;
  QAction* m_serveAction = nullptr;
  QAction* m_copyUrlAction = nullptr;
  QLabel* m_serverStatus = nullptr;
  QToolButton* m_modelButton = nullptr;
  QToolButton* m_settingsButton = nullptr;
  QLabel* m_modelStatus = nullptr;
  DeviceIndicator* m_device = nullptr;
  QPointer<ModelPicker> m_picker;
  QPointer<FidelityLab> m_lab;
  bool m_runComparison = false;
  QList<ModelEntry> m_discovered;
  QList<DeviceSummary> m_devices;
  int m_chosenDevice = -1;
};

}  // namespace kvscope::ui
