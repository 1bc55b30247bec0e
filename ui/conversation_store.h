#pragma once
// ConversationStore: conversations on disk, one JSON file per conversation named by its
// id, in $XDG_DATA_HOME/kvscope/conversations (engine paths::dataDir; tests point
// XDG_DATA_HOME or the constructor at a temporary folder). Writes are atomic (QSaveFile:
// a reader or a crash never sees half a file). load() reads every file; a corrupt or
// unreadable one is listed in loadErrors() and skipped, the others still load. GUI
// thread: files are small and written once per turn. Each conversation's compressed KV
// cache is saved beside it, in the kv-cache subfolder, by the engine thread.
//
// File format (version 1):
//   {"version": 1, "id", "title", "systemPrompt", "modelPath", "created", "updated",
//    "messages": [{"role", "text", "time", "error"?, "stats"?: {...}}]}
// Times are ISO 8601 UTC; stats keys are ReplyStats' field names, "stop" a name such as
// "end_of_generation".

#include <QJsonObject>
#include <QList>
#include <QObject>
#include <QString>
#include <QStringList>

#include "core/error.h"
#include "ui/engine_types.h"

namespace kvscope::ui {

class ConversationStore : public QObject {
  Q_OBJECT

 public:
  static inline const QString kUntitled = QStringLiteral("New chat");

  // `directory` empty: defaultDirectory(). Nothing is read until load().
  explicit ConversationStore(QString directory = {}, QObject* parent = nullptr);

  // $XDG_DATA_HOME/kvscope/conversations, or empty when it cannot be created.
  static QString defaultDirectory();
  const QString& directory() const { return m_directory; }

  // Reads every *.json in directory(); replaces what was loaded before. Emits changed().
  void load();
  // Most recently updated first.
  const QList<Conversation>& conversations() const { return m_conversations; }
  const Conversation* find(const QString& id) const;
  // One line per file that could not be read ("name.json: reason").
  const QStringList& loadErrors() const { return m_loadErrors; }

  // Writes the conversation (replacing the file of the same id) and updates the list.
  // A failure emits errorOccurred() and returns false; the list is left unchanged.
  bool save(const Conversation& conversation);
  // Removes the conversation and its saved KV cache.
  bool remove(const QString& id);
  // The folder of the saved KV caches, directory()/kv-cache, and where
  // conversation `id`'s is saved in it, ID.kvcache (runtime/kv_file.h); empty
  // without a directory or for an invalid id.
  QString kvCacheDirectory() const;
  QString kvCachePath(const QString& id) const;

  // JSON form, exposed for tests and export.
  static QJsonObject toJson(const Conversation& conversation);
  static Expected<Conversation> fromJson(const QJsonObject& object);
  // A conversation file's bytes as load() reads them; kBadFile saying what is wrong.
  static Expected<Conversation> parse(const QByteArray& bytes);

 signals:
  void changed();
  void errorOccurred(const QString& message);

 private:
  QString filePath(const QString& id) const;
  void sortByRecency();

  QString m_directory;
  QList<Conversation> m_conversations;
  QStringList m_loadErrors;
};

}  // namespace kvscope::ui
