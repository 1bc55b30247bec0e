#pragma once
// ModelSettings: what the app remembers about models between runs, in QSettings:
// sampling settings (and default system prompt) per model path, the backend settings,
// the recently loaded models, the folders the user added to model discovery, and the
// local server's port.
// GUI thread. Tests pass their own QSettings file.

#include <QSettings>
#include <QString>
#include <QStringList>
#include <memory>

#include "ui/engine_types.h"

namespace kvscope::ui {

class ModelSettings {
 public:
  static constexpr int kMaxRecent = 10;
  // The port OpenAI clients try first for a local server.
  static constexpr quint16 kDefaultServerPort = 8080;

  // `file` empty: the application's QSettings (organization and application names).
  explicit ModelSettings(const QString& file = {});

  // A model never configured gets the defaults of SamplingSettings.
  SamplingSettings sampling(const QString& modelPath) const;
  void setSampling(const QString& modelPath, const SamplingSettings& sampling);

  BackendSettings backendSettings() const;
  void setBackendSettings(const BackendSettings& settings);

  // Most recent first, at most kMaxRecent, no duplicates.
  QStringList recentModels() const;
  void addRecentModel(const QString& path);
  void removeRecentModel(const QString& path);

  QStringList userFolders() const;
  void addUserFolder(const QString& folder);
  void removeUserFolder(const QString& folder);

  // kDefaultServerPort until the user picks another.
  quint16 serverPort() const;
  void setServerPort(quint16 port);

  // Saved KV caches (ConversationStore::kvCachePath): the largest one kept for a
  // conversation and the most the folder may hold (the oldest go first).
  struct KvCacheLimits {
    quint64 maxFileBytes = quint64{512} << 20;
    quint64 maxFolderBytes = quint64{4} << 30;
  };
  KvCacheLimits kvCacheLimits() const;
  void setKvCacheLimits(const KvCacheLimits& limits);

 private:
  std::unique_ptr<QSettings> m_settings;
};

}  // namespace kvscope::ui
