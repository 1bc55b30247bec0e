#include "ui/conversation_store.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QRegularExpression>
#include <QSaveFile>

#include "core/paths.h"

namespace kvscope::ui {
namespace {

constexpr int kFormatVersion = 1;

struct StopName {
  StopReason reason;
  const char* name;
};
constexpr StopName kStopNames[] = {
    {StopReason::kNone, ""},
    {StopReason::kEndOfGeneration, "end_of_generation"},
    {StopReason::kMaxTokens, "max_tokens"},
    {StopReason::kStopRequested, "stopped"},
    {StopReason::kContextFull, "context_full"},
    {StopReason::kError, "error"},
};

QString stopName(StopReason reason) {
  for (const auto& s : kStopNames)
    if (s.reason == reason) return QString::fromLatin1(s.name);
  return {};
}

StopReason stopFromName(const QString& name) {
  for (const auto& s : kStopNames)
    if (name == QLatin1String(s.name)) return s.reason;
  return StopReason::kNone;
}

// Ids become file names: letters, digits, '-' and '_' only, so none escapes the folder.
bool validId(const QString& id) {
  static const QRegularExpression pattern(QStringLiteral("^[A-Za-z0-9_-]{1,100}$"));
  return pattern.match(id).hasMatch();
}

QString isoTime(const QDateTime& t) {
  return t.toUTC().toString(Qt::ISODateWithMs);
}

QDateTime timeFrom(const QJsonValue& v) {
  return QDateTime::fromString(v.toString(), Qt::ISODateWithMs);
}

QJsonObject statsJson(const ReplyStats& s) {
  return {
      {"promptTokens", qint64(s.promptTokens)},
      {"reusedTokens", qint64(s.reusedTokens)},
      {"generatedTokens", qint64(s.generatedTokens)},
      {"cachedTokens", qint64(s.cachedTokens)},
      {"contextLimit", qint64(s.contextLimit)},
      {"prefillMs", s.prefillMs},
      {"decodeMs", s.decodeMs},
      {"prefillTokensPerSecond", s.prefillTokensPerSecond},
      {"decodeTokensPerSecond", s.decodeTokensPerSecond},
      {"stop", stopName(s.stop)},
      // A string: JSON numbers are doubles and would round a 64-bit seed.
      {"seed", QString::number(s.seed)},
  };
}

ReplyStats statsFrom(const QJsonObject& o) {
  auto count = [&o](const char* key) { return static_cast<quint32>(o.value(key).toInteger()); };
  ReplyStats s;
  s.promptTokens = count("promptTokens");
  s.reusedTokens = count("reusedTokens");
  s.generatedTokens = count("generatedTokens");
  s.cachedTokens = count("cachedTokens");
  s.contextLimit = count("contextLimit");
  s.prefillMs = o.value("prefillMs").toDouble();
  s.decodeMs = o.value("decodeMs").toDouble();
  s.prefillTokensPerSecond = o.value("prefillTokensPerSecond").toDouble();
  s.decodeTokensPerSecond = o.value("decodeTokensPerSecond").toDouble();
  s.stop = stopFromName(o.value("stop").toString());
  s.seed = o.value("seed").toString().toULongLong();
  return s;
}

}  // namespace

ConversationStore::ConversationStore(QString directory, QObject* parent)
    : QObject(parent),
      m_directory(directory.isEmpty() ? defaultDirectory() : std::move(directory)) {}

QString ConversationStore::defaultDirectory() {
  auto data = paths::dataDir();
  if (!data.ok()) return {};
  return QDir(QString::fromStdString(data->string())).filePath(QStringLiteral("conversations"));
}

QString ConversationStore::filePath(const QString& id) const {
  return QDir(m_directory).filePath(id + QStringLiteral(".json"));
}

QJsonObject ConversationStore::toJson(const Conversation& c) {
  QJsonArray messages;
  for (const ChatMessage& m : c.messages) {
    QJsonObject o{{"role", m.role}, {"text", m.text}, {"time", isoTime(m.time)}};
    if (!m.error.isEmpty()) o.insert("error", m.error);
    if (m.leftOut) o.insert("leftOut", true);
    if (m.stats.valid()) o.insert("stats", statsJson(m.stats));
    messages.append(o);
  }
  return {
      {"version", kFormatVersion},
      {"id", c.id},
      {"title", c.title},
      {"systemPrompt", c.systemPrompt},
      {"modelPath", c.modelPath},
      {"created", isoTime(c.created)},
      {"updated", isoTime(c.updated)},
      {"messages", messages},
  };
}

Expected<Conversation> ConversationStore::fromJson(const QJsonObject& o) {
  const int version = o.value("version").toInt();
  if (version != kFormatVersion) {
    return makeError(ErrorCode::kBadFile,
                     "format version {} is not one kvscope reads (expected {})", version,
                     kFormatVersion);
  }
  if (!o.value("messages").isArray())
    return makeError(ErrorCode::kBadFile, "it has no \"messages\" list");
  Conversation c;
  c.id = o.value("id").toString();
  if (!validId(c.id)) return makeError(ErrorCode::kBadFile, "its id is missing or not valid");
  c.title = o.value("title").toString(ConversationStore::kUntitled);
  c.systemPrompt = o.value("systemPrompt").toString();
  c.modelPath = o.value("modelPath").toString();
  c.created = timeFrom(o.value("created"));
  c.updated = timeFrom(o.value("updated"));
  for (const QJsonValue& v : o.value("messages").toArray()) {
    const QJsonObject m = v.toObject();
    ChatMessage message;
    message.role = m.value("role").toString();
    if (message.role != QLatin1String("user") && message.role != QLatin1String("assistant")) {
      return makeError(ErrorCode::kBadFile, "message {} has role '{}' (expected user or assistant)",
                       c.messages.size(), message.role.toStdString());
    }
    message.text = m.value("text").toString();
    message.time = timeFrom(m.value("time"));
    message.error = m.value("error").toString();
    message.leftOut = m.value("leftOut").toBool();
    if (m.value("stats").isObject()) message.stats = statsFrom(m.value("stats").toObject());
    c.messages.append(message);
  }
  return c;
}

Expected<Conversation> ConversationStore::parse(const QByteArray& bytes) {
  QJsonParseError parseError;
  const QJsonDocument doc = QJsonDocument::fromJson(bytes, &parseError);
  if (!doc.isObject()) {
    return makeError(ErrorCode::kBadFile, "not a conversation file ({})",
                     parseError.error == QJsonParseError::NoError
                         ? std::string("not a JSON object")
                         : parseError.errorString().toStdString());
  }
  return fromJson(doc.object());
}

void ConversationStore::load() {
  m_conversations.clear();
  m_loadErrors.clear();
  const QDir dir(m_directory);
  const QStringList files =
      dir.entryList({QStringLiteral("*.json")}, QDir::Files | QDir::Readable, QDir::Name);
  for (const QString& name : files) {
    QFile file(dir.filePath(name));
    if (!file.open(QIODevice::ReadOnly)) {
      m_loadErrors << QStringLiteral("%1: %2").arg(name, file.errorString());
      continue;
    }
    auto conversation = parse(file.readAll());
    if (!conversation.ok()) {
      m_loadErrors << QStringLiteral("%1: %2").arg(
          name, QString::fromStdString(conversation.error().message));
      continue;
    }
    m_conversations.append(std::move(*conversation));
  }
  sortByRecency();
  emit changed();
}

const Conversation* ConversationStore::find(const QString& id) const {
  for (const Conversation& c : m_conversations)
    if (c.id == id) return &c;
  return nullptr;
}

bool ConversationStore::save(const Conversation& conversation) {
  auto fail = [this](const QString& message) {
    emit errorOccurred(QStringLiteral("Could not save the conversation: %1").arg(message));
    return false;
  };
  if (!validId(conversation.id)) return fail(QStringLiteral("its id is not valid"));
  if (m_directory.isEmpty() || !QDir().mkpath(m_directory))
    return fail(QStringLiteral("the folder '%1' cannot be created").arg(m_directory));
  QSaveFile file(filePath(conversation.id));
  if (!file.open(QIODevice::WriteOnly)) return fail(file.errorString());
  file.write(QJsonDocument(toJson(conversation)).toJson(QJsonDocument::Indented));
  if (!file.commit()) return fail(file.errorString());

  bool replaced = false;
  for (Conversation& c : m_conversations) {
    if (c.id == conversation.id) {
      c = conversation;
      replaced = true;
    }
  }
  if (!replaced) m_conversations.append(conversation);
  sortByRecency();
  emit changed();
  return true;
}

bool ConversationStore::remove(const QString& id) {
  if (!validId(id)) return false;
  QFile file(filePath(id));
  if (file.exists() && !file.remove()) {
    emit errorOccurred(
        QStringLiteral("Could not delete the conversation: %1").arg(file.errorString()));
    return false;
  }
  QFile::remove(kvCachePath(id));
  m_conversations.removeIf([&id](const Conversation& c) { return c.id == id; });
  emit changed();
  return true;
}

QString ConversationStore::kvCacheDirectory() const {
  return m_directory.isEmpty() ? QString() : m_directory + QStringLiteral("/kv-cache");
}

QString ConversationStore::kvCachePath(const QString& id) const {
  if (m_directory.isEmpty() || !validId(id)) return {};
  return kvCacheDirectory() + QLatin1Char('/') + id + QStringLiteral(".kvcache");
}

void ConversationStore::sortByRecency() {
  std::stable_sort(
      m_conversations.begin(), m_conversations.end(),
      [](const Conversation& a, const Conversation& b) { return a.updated > b.updated; });
}

}  // namespace kvscope::ui
