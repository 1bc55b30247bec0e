#pragma once
// Model discovery: finds models already on disk where the common tools keep them, so the
// model picker can offer them without a file dialog:
//   - Hugging Face cache: <hub>/models--ORG--NAME/snapshots/<rev>/ (the newest revision):
//     the folder itself when it holds config.json and *.safetensors, and any *.gguf in it;
//     <hub> is $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub;
//   - LM Studio: ~/.lmstudio/models and ~/.cache/lm-studio/models (*.gguf);
//   - GPT4All: ~/.local/share/nomic.ai/GPT4All (*.gguf);
//   - ~/models and the user's own folders (*.gguf and Hugging Face folders);
//   - the recently loaded models (listed first).
// Each model appears once (the first place it was found). GGUF headers are read for the
// architecture, name, parameter count, context and dominant tensor type; config.json for
// folders. Split GGUF files are listed by their first part. Reading headers takes tens
// of milliseconds per file, so ModelDiscovery runs the scan on its own thread.

#include <QList>
#include <QObject>
#include <QString>
#include <QStringList>

#include "ui/engine_types.h"

class QThread;

namespace kvscope::ui {

struct DiscoveryPlaces {
  QString home;        // the user's home folder
  QString hfHubCache;  // the Hugging Face hub cache folder
  QStringList userFolders;
  QStringList recentModels;  // paths, most recent first
};

// Places from the environment ($HOME, $HF_HUB_CACHE, $HF_HOME) plus the given lists.
DiscoveryPlaces defaultPlaces(const QStringList& userFolders, const QStringList& recentModels);

// Scans every place; blocking (call it off the GUI thread).
QList<ModelEntry> discoverModels(const DiscoveryPlaces& places);
// One model: a .gguf file or a Hugging Face folder. Unreadable headers leave the
// header-derived fields empty; the entry is still listed (loading it explains why).
ModelEntry describeModel(const QString& path, ModelSource source);

class ModelDiscovery : public QObject {
  Q_OBJECT

 public:
  explicit ModelDiscovery(QObject* parent = nullptr);
  ~ModelDiscovery() override;  // waits for a scan in progress

  bool isRunning() const { return m_thread != nullptr; }

 public slots:
  // Starts a scan; ignored while one runs. Answers finished() on this object's thread.
  void start(const kvscope::ui::DiscoveryPlaces& places);

 signals:
  void finished(const QList<kvscope::ui::ModelEntry>& models);

 private:
  QThread* m_thread = nullptr;
};

}  // namespace kvscope::ui

Q_DECLARE_METATYPE(kvscope::ui::DiscoveryPlaces)
