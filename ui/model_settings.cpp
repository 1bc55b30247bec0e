#include "ui/model_settings.h"

#include <QCryptographicHash>

namespace kvscope::ui {
namespace {

// QSettings keys cannot hold '/' or '\' safely, and paths are long: a model's group is
// the hash of its path.
QString modelGroup(const QString& path) {
  const QByteArray hash = QCryptographicHash::hash(path.toUtf8(), QCryptographicHash::Sha1);
  return QStringLiteral("models/") + QString::fromLatin1(hash.toHex());
}

}  // namespace

ModelSettings::ModelSettings(const QString& file)
    : m_settings(file.isEmpty() ? std::make_unique<QSettings>()
                                : std::make_unique<QSettings>(file, QSettings::IniFormat)) {}

SamplingSettings ModelSettings::sampling(const QString& modelPath) const {
  const SamplingSettings d;
  SamplingSettings s;
  QSettings& q = *m_settings;
  q.beginGroup(modelGroup(modelPath));
  s.temperature = q.value("temperature", d.temperature).toDouble();
  s.topK = q.value("topK", d.topK).toInt();
  s.topP = q.value("topP", d.topP).toDouble();
  s.minP = q.value("minP", d.minP).toDouble();
  s.repeatPenalty = q.value("repeatPenalty", d.repeatPenalty).toDouble();
  s.repeatLastN = q.value("repeatLastN", d.repeatLastN).toInt();
  s.maxTokens = q.value("maxTokens", d.maxTokens).toInt();
  s.seed = q.value("seed", d.seed).toLongLong();
  s.systemPrompt = q.value("systemPrompt", d.systemPrompt).toString();
  // Stored by name; a name this version does not know reads as the default.
  s.chatRenderer = tokenizer::parseChatRenderer(q.value("chatRenderer").toString().toStdString())
                       .value_or(d.chatRenderer);
  const QString thinking = q.value("thinking").toString();
  if (thinking == QStringLiteral("on") || thinking == QStringLiteral("off"))
    s.thinking = thinking == QStringLiteral("on");
  auto overflow =
      runtime::parseContextOverflow(q.value("contextOverflow").toString().toStdString());
  s.contextOverflow = overflow.ok() ? *overflow : d.contextOverflow;
  q.endGroup();
  return s;
}

void ModelSettings::setSampling(const QString& modelPath, const SamplingSettings& s) {
  QSettings& q = *m_settings;
  q.beginGroup(modelGroup(modelPath));
  q.setValue("path", modelPath);
  q.setValue("temperature", s.temperature);
  q.setValue("topK", s.topK);
  q.setValue("topP", s.topP);
  q.setValue("minP", s.minP);
  q.setValue("repeatPenalty", s.repeatPenalty);
  q.setValue("repeatLastN", s.repeatLastN);
  q.setValue("maxTokens", s.maxTokens);
  q.setValue("seed", s.seed);
  q.setValue("systemPrompt", s.systemPrompt);
  q.setValue("chatRenderer", QString::fromUtf8(tokenizer::chatRendererName(s.chatRenderer)));
  q.setValue("thinking", !s.thinking   ? QStringLiteral("default")
                         : *s.thinking ? QStringLiteral("on")
                                       : QStringLiteral("off"));
  q.setValue("contextOverflow", QString::fromUtf8(runtime::contextOverflowName(s.contextOverflow)));
  q.endGroup();
}

BackendSettings ModelSettings::backendSettings() const {
  const BackendSettings d;
  BackendSettings b;
  QSettings& q = *m_settings;
  b.kind = q.value("backend/kind", d.kind).toString();
  b.device = q.value("backend/device", d.device).toInt();
  b.contextLimit = q.value("backend/contextLimit", d.contextLimit).toUInt();
  b.kvPolicy = q.value("backend/kvPolicy", d.kvPolicy).toString();
  return b;
}

void ModelSettings::setBackendSettings(const BackendSettings& b) {
  QSettings& q = *m_settings;
  q.setValue("backend/kind", b.kind);
  q.setValue("backend/device", b.device);
  q.setValue("backend/contextLimit", b.contextLimit);
  q.setValue("backend/kvPolicy", b.kvPolicy);
}

QStringList ModelSettings::recentModels() const {
  return m_settings->value("recentModels").toStringList();
}

void ModelSettings::addRecentModel(const QString& path) {
  QStringList recent = recentModels();
  recent.removeAll(path);
  recent.prepend(path);
  while (recent.size() > kMaxRecent) recent.removeLast();
  m_settings->setValue("recentModels", recent);
}

void ModelSettings::removeRecentModel(const QString& path) {
  QStringList recent = recentModels();
  recent.removeAll(path);
  m_settings->setValue("recentModels", recent);
}

QStringList ModelSettings::userFolders() const {
  return m_settings->value("modelFolders").toStringList();
}

void ModelSettings::addUserFolder(const QString& folder) {
  QStringList folders = userFolders();
  if (folders.contains(folder)) return;
  folders.append(folder);
  m_settings->setValue("modelFolders", folders);
}

void ModelSettings::removeUserFolder(const QString& folder) {
  QStringList folders = userFolders();
  folders.removeAll(folder);
  m_settings->setValue("modelFolders", folders);
}

quint16 ModelSettings::serverPort() const {
  bool ok = false;
  const uint port = m_settings->value("server/port").toUInt(&ok);
  return ok && port > 0 && port <= 65535 ? static_cast<quint16>(port) : kDefaultServerPort;
}

void ModelSettings::setServerPort(quint16 port) {
  m_settings->setValue("server/port", port);
}

ModelSettings::KvCacheLimits ModelSettings::kvCacheLimits() const {
  const KvCacheLimits d;
  KvCacheLimits l;
  l.maxFileBytes = m_settings->value("kvCache/maxFileBytes", d.maxFileBytes).toULongLong();
  l.maxFolderBytes = m_settings->value("kvCache/maxFolderBytes", d.maxFolderBytes).toULongLong();
  return l;
}

void ModelSettings::setKvCacheLimits(const KvCacheLimits& limits) {
  m_settings->setValue("kvCache/maxFileBytes", limits.maxFileBytes);
  m_settings->setValue("kvCache/maxFolderBytes", limits.maxFolderBytes);
}

}  // namespace kvscope::ui
