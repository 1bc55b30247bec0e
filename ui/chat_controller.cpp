#include "ui/chat_controller.h"

#include <QThread>
#include <QUuid>

#include <utility>

#include "kv/kv_scheme.h"

#include "ui/conversation_store.h"
#include "ui/engine_worker.h"
#include "ui/model_settings.h"

namespace kvscope::ui {
namespace {

constexpr int kTitleLength = 60;

const QString kUser = QStringLiteral("user");
const QString kAssistant = QStringLiteral("assistant");

// The first line of the first user message, shortened at a word boundary.
QString titleFrom(const QString& text) {
  QString line = text.trimmed().section(QLatin1Char('\n'), 0, 0).simplified();
  if (line.size() <= kTitleLength) return line;
  line.truncate(kTitleLength);
  const qsizetype space = line.lastIndexOf(QLatin1Char(' '));
  if (space > kTitleLength / 2) line.truncate(space);
  return line + QStringLiteral("…");
}

Conversation emptyConversation(const QString& systemPrompt, const QString& modelPath) {
  Conversation c;
  c.id = QUuid::createUuid().toString(QUuid::WithoutBraces);
  c.title = ConversationStore::kUntitled;
  c.systemPrompt = systemPrompt;
  c.modelPath = modelPath;
  c.created = c.updated = QDateTime::currentDateTimeUtc();
  return c;
}

}  // namespace

ChatController::ChatController(EngineWorker* worker, ConversationStore* store,
                               ModelSettings* settings, QObject* parent)
    : QObject(parent), m_worker(worker), m_store(store), m_settings(settings) {
  registerEngineTypes();
  if (m_settings) m_backend = m_settings->backendSettings();
  m_conversation = emptyConversation({}, {});

  connect(this, &ChatController::loadModelRequested, worker, &EngineWorker::loadModel);
  connect(this, &ChatController::generateRequested, worker, &EngineWorker::generate);
  connect(this, &ChatController::estimateMemoryRequested, worker, &EngineWorker::estimateMemory);
  connect(this, &ChatController::setKvPolicyRequested, worker, &EngineWorker::setKvPolicy);
  connect(this, &ChatController::comparisonInputRequested, worker, &EngineWorker::comparisonInput);
  connect(worker, &EngineWorker::comparisonInputReady, this,
          [this](quint64, const QString& path, const QList<qint32>& tokens) {
            emit comparisonInputReady(path, tokens);
          });
  connect(worker, &EngineWorker::comparisonInputFailed, this,
          [this](quint64, const QString& message) { emit comparisonInputFailed(message); });

  connect(worker, &EngineWorker::loadProgress, this, &ChatController::loadProgress);
  connect(worker, &EngineWorker::modelLoaded, this, &ChatController::onModelLoaded);
  connect(worker, &EngineWorker::modelLoadFailed, this, &ChatController::onModelLoadFailed);
  connect(worker, &EngineWorker::modelUnloaded, this, &ChatController::onModelUnloaded);
  connect(worker, &EngineWorker::memoryEstimated, this, &ChatController::memoryEstimated);
  connect(worker, &EngineWorker::memoryEstimateFailed, this, &ChatController::memoryEstimateFailed);
  connect(worker, &EngineWorker::promptProgress, this, &ChatController::onPromptProgress);
  connect(worker, &EngineWorker::replyText, this, &ChatController::onReplyText);
  connect(worker, &EngineWorker::stepReported, this, &ChatController::onStep);
  connect(worker, &EngineWorker::kvReported, this, &ChatController::onKv);
  connect(worker, &EngineWorker::indexerReported, this, &ChatController::onIndexer);
  connect(worker, &EngineWorker::expertsReported, this, &ChatController::onExperts);
  connect(worker, &EngineWorker::turnFinished, this, &ChatController::onTurnFinished);
  connect(worker, &EngineWorker::turnFailed, this, &ChatController::onTurnFailed);
  connect(worker, &EngineWorker::chatTemplateFailed, this,
          [this](quint64 turnId, const QString& message) {
            if (turnId == m_turnId) m_templateFailure = message;
          });
  connect(worker, &EngineWorker::conversationTooLong, this, [this](quint64 turnId) {
    if (turnId == m_turnId) m_tooLong = true;
  });
  connect(worker, &EngineWorker::promptFitted, this, &ChatController::onPromptFitted);
  connect(worker, &EngineWorker::kvPolicyChanged, this, &ChatController::onKvPolicyChanged);
  connect(worker, &EngineWorker::kvPolicyFailed, this, &ChatController::onKvPolicyFailed);
  connect(this, &ChatController::saveKvCacheRequested, worker, &EngineWorker::saveKvCache);
  connect(this, &ChatController::restoreKvCacheRequested, worker, &EngineWorker::restoreKvCache);
  connect(worker, &EngineWorker::kvCacheRestored, this,
          [this](const QString& id, quint32 tokens, bool fromDisk) {
            if (id != m_conversation.id || isGenerating()) return;
            m_cachedTokens = tokens;
            emit contextUsageChanged(m_cachedTokens, m_model.contextLimit);
            emit kvCacheRestored(tokens);
            if (fromDisk) {
              emit kvCacheNotice(QStringLiteral("Restored this chat's KV cache from disk (%1 "
                                                "tokens): the next reply does not re-read it.")
                                     .arg(tokens));
            }
          });
  connect(worker, &EngineWorker::kvCacheRestoreFailed, this,
          [this](const QString& id, const QString& message) {
            if (id != m_conversation.id) return;
            emit kvCacheNotice(QStringLiteral("This chat's saved KV cache was not used (%1). "
                                              "The next reply re-reads the conversation.")
                                   .arg(message));
          });
  connect(worker, &EngineWorker::kvCacheNotSaved, this,
          [this](const QString&, const QString& reason) {
            if (!reason.isEmpty())
              emit kvCacheNotice(QStringLiteral("The KV cache was not saved: %1.").arg(reason));
          });
  connect(worker, &EngineWorker::kvCacheSaved, this,
          [this](const QString&, quint64, quint32, quint32 evicted) {
            if (evicted > 0) {
              emit kvCacheNotice(
                  QStringLiteral("%1 older saved KV caches were removed to stay within the "
                                 "limit (Chat › Saved KV Caches…).")
                      .arg(evicted));
            }
          });
  if (m_store) {
    connect(m_store, &ConversationStore::changed, this, &ChatController::conversationsChanged);
    connect(m_store, &ConversationStore::errorOccurred, this, &ChatController::errorOccurred);
  }
}

void ChatController::loadModel(const QString& path) {
  stop();
  saveKvCache();  // queued before the load, so it runs while the model is still there
  m_loadingPath = path;
  emit modelLoading(path);
  emit loadModelRequested({path, m_backend});
}

void ChatController::setBackendSettings(const BackendSettings& settings) {
  m_backend = settings;
  if (m_settings) m_settings->setBackendSettings(settings);
}

void ChatController::loadModelWith(const QString& path, const BackendSettings& settings) {
  setBackendSettings(settings);
  loadModel(path);
}

void ChatController::estimateMemory(const QString& path, const BackendSettings& backend,
                                    quint64 deviceBytes) {
  emit estimateMemoryRequested(path, backend, deviceBytes);
}

QStringList ChatController::kvSchemeNames() {
  QStringList names;
  for (std::string_view name : kv::schemeNames())
    names << QString::fromLatin1(name.data(), static_cast<qsizetype>(name.size()));
  return names;
}

bool ChatController::canStartTurn() {
  QString refusal;
  if (isGenerating()) {
    refusal = QStringLiteral("A reply is still being written; stop it first.");
  } else if (isChangingPolicy()) {
    refusal = QStringLiteral("The KV cache is being re-encoded; wait for it or stop it.");
  } else if (!hasModel()) {
    refusal = isLoading() ? QStringLiteral("The model is still loading.")
                          : QStringLiteral("No model is loaded. Open a model first.");
  }
  if (refusal.isEmpty()) return true;
  emit errorOccurred(refusal);
  return false;
}

void ChatController::send(const QString& text) {
  if (text.trimmed().isEmpty() || !canStartTurn()) return;
  ChatMessage message;
  message.role = kUser;
  message.text = text;
  message.time = QDateTime::currentDateTimeUtc();
  if (m_conversation.title == ConversationStore::kUntitled) m_conversation.title = titleFrom(text);
  m_conversation.messages.append(message);
  emit messageAdded(static_cast<int>(m_conversation.messages.size() - 1));
  startReply();
}

void ChatController::stop() {
  if (isGenerating() || isChangingPolicy()) m_worker->requestStop(m_turnId);
}

void ChatController::requestComparisonInput() {
  emit comparisonInputRequested(++m_comparisonId);
}

void ChatController::setKvPolicy(const QString& policy) {
  if (!canStartTurn()) return;
  m_policyChanging = true;
  m_requestedPolicy = policy.trimmed();
  emit policyChanging(m_requestedPolicy);
  emit setKvPolicyRequested(++m_turnId, m_requestedPolicy);
}

void ChatController::regenerate() {
  if (!canStartTurn()) return;
  auto& messages = m_conversation.messages;
  if (!messages.isEmpty() && messages.last().role == kAssistant) messages.removeLast();
  if (messages.isEmpty() || messages.last().role != kUser) {
    emit errorOccurred(QStringLiteral("There is no message to answer again."));
    return;
  }
  emit conversationReset();
  startReply();
}

void ChatController::editMessage(int index, const QString& text) {
  if (!canStartTurn()) return;
  auto& messages = m_conversation.messages;
  if (index < 0 || index >= messages.size() || messages[index].role != kUser) {
    emit errorOccurred(QStringLiteral("Only your own messages can be edited."));
    return;
  }
  if (text.trimmed().isEmpty()) {
    emit errorOccurred(QStringLiteral("An edited message cannot be empty."));
    return;
  }
  messages[index].text = text;
  messages[index].time = QDateTime::currentDateTimeUtc();
  messages.resize(index + 1);
  if (index == 0) m_conversation.title = titleFrom(text);
  emit conversationReset();
  startReply();
}

void ChatController::startReply() {
  m_conversation.modelPath = m_model.path;
  m_templateFailure.clear();  // what an earlier turn's failure left
  m_tooLong = false;
  TurnRequest request;
  request.turnId = ++m_turnId;
  request.conversationId = m_conversation.id;
  request.systemPrompt = m_conversation.systemPrompt;
  request.sampling = m_sampling;
  // Replies that failed before writing anything are not part of what the model saw.
  m_requestIndices.clear();
  for (qsizetype i = 0; i < m_conversation.messages.size(); ++i) {
    const ChatMessage& m = m_conversation.messages[i];
    if (m.role != kUser && m.text.isEmpty()) continue;
    request.messages.append(m);
    m_requestIndices.append(static_cast<int>(i));
  }

  ChatMessage reply;
  reply.role = kAssistant;
  reply.time = QDateTime::currentDateTimeUtc();
  m_conversation.messages.append(reply);
  m_replyIndex = static_cast<int>(m_conversation.messages.size() - 1);
  save();
  emit messageAdded(m_replyIndex);
  emit generatingChanged(true);
  emit generateRequested(request);
}

// Ends the reply in progress on this side; the worker's late answers for its turn are
// ignored from now on.
void ChatController::endReply() {
  m_replyIndex = -1;
  ++m_turnId;
  m_conversation.updated = QDateTime::currentDateTimeUtc();
  save();
  emit generatingChanged(false);
}

void ChatController::newChat() {
  abandonReply();
  saveKvCache();
  m_conversation = emptyConversation(m_sampling.systemPrompt, m_model.path);
  emit conversationReset();
}

void ChatController::openConversation(const QString& id) {
  if (!m_store) return;
  const Conversation* found = m_store->find(id);
  if (!found) {
    emit errorOccurred(QStringLiteral("That conversation no longer exists."));
    return;
  }
  abandonReply();
  const bool other = id != m_conversation.id;  // the open chat already holds its cache
  if (other) saveKvCache();
  m_conversation = *found;
  emit conversationReset();
  if (other) restoreKvCache();
}

void ChatController::deleteConversation(const QString& id) {
  if (!m_store) return;
  if (id == m_conversation.id) {
    abandonReply();
    m_conversation = emptyConversation(m_sampling.systemPrompt, m_model.path);
    emit conversationReset();
  }
  m_store->remove(id);
}

// Leaving a conversation while its reply runs: stop the engine and keep what was
// written, marked as stopped.
void ChatController::abandonReply() {
  if (!isGenerating()) return;
  m_worker->requestStop(m_turnId);
  m_conversation.messages[m_replyIndex].stats.stop = StopReason::kStopRequested;
  endReply();
}

void ChatController::setSystemPrompt(const QString& prompt) {
  m_conversation.systemPrompt = prompt;
  save();
}

void ChatController::setSampling(const SamplingSettings& sampling) {
  m_sampling = sampling;
  if (m_settings && hasModel()) m_settings->setSampling(m_model.path, sampling);
  emit samplingChanged(m_sampling);
}

void ChatController::save() {
  if (!m_store || m_conversation.messages.isEmpty()) return;
  m_store->save(m_conversation);
}

QString ChatController::kvCachePath() const {
  if (!m_store || !hasModel() || m_conversation.messages.isEmpty()) return {};
  return m_store->kvCachePath(m_conversation.id);
}

ModelSettings::KvCacheLimits ChatController::kvCacheLimits() const {
  return m_settings ? m_settings->kvCacheLimits() : ModelSettings::KvCacheLimits{};
}

void ChatController::saveKvCache() {
  const QString path = kvCachePath();
  if (path.isEmpty()) return;
  const ModelSettings::KvCacheLimits limits = kvCacheLimits();
  emit saveKvCacheRequested(m_conversation.id, path, limits.maxFileBytes, limits.maxFolderBytes);
}

void ChatController::restoreKvCache() {
  // Not while a reply or a re-encode runs: their answers follow m_turnId.
  const QString path = kvCachePath();
  if (path.isEmpty() || isGenerating() || isChangingPolicy()) return;
  // A turn of its own, so the inspector follows the restored cache's KV report.
  emit restoreKvCacheRequested(++m_turnId, m_conversation.id, path);
}

void ChatController::saveKvCacheNow() {
  abandonReply();
  if (m_policyChanging) stop();  // a re-encode would hold the save back
  // A load in progress queued the save of this chat before it.
  const QString path = kvCachePath();
  if (path.isEmpty() || isLoading()) return;
  const ModelSettings::KvCacheLimits limits = kvCacheLimits();
  const auto save = [&] {
    m_worker->saveKvCache(m_conversation.id, path, limits.maxFileBytes, limits.maxFolderBytes);
  };
  if (m_worker->thread() == QThread::currentThread()) {
    save();
  } else {
    QMetaObject::invokeMethod(m_worker, save, Qt::BlockingQueuedConnection);
  }
}

void ChatController::onModelLoaded(const ModelInfo& info) {
  m_model = info;
  m_loadingPath.clear();
  m_loadedBackend = info.loadedWith;
  m_cachedTokens = 0;
  if (m_settings) {
    m_settings->addRecentModel(info.path);
    m_sampling = m_settings->sampling(info.path);
    emit samplingChanged(m_sampling);
  }
  if (m_conversation.messages.isEmpty()) {
    m_conversation.systemPrompt = m_sampling.systemPrompt;
    m_conversation.modelPath = info.path;
  }
  // Before modelLoaded: a reply its receivers start must come after the restore.
  restoreKvCache();
  emit modelLoaded(info);
  emit contextUsageChanged(m_cachedTokens, info.contextLimit);
}

void ChatController::onModelLoadFailed(const QString& path, const QString& message) {
  if (path == m_loadingPath) m_loadingPath.clear();
  // The worker releases the old model only after the new file checked out and its
  // context was found to fit; a failure past that point leaves no model. A model still
  // loaded keeps the settings it runs with.
  if (hasModel() && m_backend != m_loadedBackend) setBackendSettings(m_loadedBackend);
  emit modelLoadFailed(path, message);
}

void ChatController::onModelUnloaded() {
  m_model = {};
  m_policyChanging = false;
  m_cachedTokens = 0;
  emit modelUnloaded();
  emit contextUsageChanged(0, 0);
}

void ChatController::onPromptProgress(quint64 turnId, quint32 done, quint32 total) {
  if (turnId != m_turnId) return;
  if (isChangingPolicy())
    emit policyProgress(done, total);
  else
    emit promptProgress(done, total);
}

void ChatController::onPromptFitted(quint64 turnId, const QList<int>& leftOut, quint32 prefill) {
  if (turnId != m_turnId || !isGenerating()) return;
  QList<int> indices;
  for (int i : leftOut)
    if (i >= 0 && i < m_requestIndices.size()) indices.append(m_requestIndices[i]);
  bool changed = false;
  for (qsizetype i = 0; i < m_conversation.messages.size(); ++i) {
    const bool out = indices.contains(static_cast<int>(i));
    changed |= m_conversation.messages[i].leftOut != out;
    m_conversation.messages[i].leftOut = out;
  }
  if (changed) emit messagesLeftOut(indices, prefill);
}

void ChatController::onReplyText(quint64 turnId, const QString& piece) {
  if (turnId != m_turnId || !isGenerating()) return;
  m_conversation.messages[m_replyIndex].text += piece;
  emit replyText(m_replyIndex, piece);
}

// Only the chat's own turns: the local server's requests run in slots of their own
// (server/session_slots.h), so their reports describe caches that are not this chat's;
// the status bar's server entry shows them.
bool ChatController::followsTurn(quint64 turnId) const {
  return turnId == m_turnId;
}

void ChatController::onStep(const StepReport& report) {
  if (!followsTurn(report.turnId)) return;
  m_cachedTokens = report.stats.cachedTokens;
  emit contextUsageChanged(m_cachedTokens, report.stats.contextLimit);
  emit stepReported(report);
}

void ChatController::onKv(const KvReport& report) {
  if (followsTurn(report.turnId)) emit kvReported(report);
}

void ChatController::onIndexer(const IndexerReport& report) {
  if (followsTurn(report.turnId)) emit indexerReported(report);
}

void ChatController::onExperts(const ExpertReport& report) {
  if (followsTurn(report.turnId)) emit expertsReported(report);
}

void ChatController::setIndexerDiagnostic(bool on) {
  m_worker->requestIndexerDiagnostic(on);
}

void ChatController::onTurnFinished(quint64 turnId, const QString& text, const ReplyStats& stats) {
  if (turnId != m_turnId || !isGenerating()) return;
  const int index = m_replyIndex;
  ChatMessage& reply = m_conversation.messages[index];
  // The pieces already streamed add up to `text`; take the worker's copy as the record.
  reply.text = text;
  reply.stats = stats;
  m_cachedTokens = stats.cachedTokens;
  endReply();
  emit contextUsageChanged(m_cachedTokens, m_model.contextLimit);
  emit replyFinished(index, stats);
}

void ChatController::onTurnFailed(quint64 turnId, const QString& message,
                                  const QString& partialText) {
  if (turnId != m_turnId || !isGenerating()) return;
  const int index = m_replyIndex;
  ChatMessage& reply = m_conversation.messages[index];
  reply.text = partialText;
  reply.error = message;
  reply.stats.stop = StopReason::kError;
  endReply();
  emit replyFailed(index, message);
  if (!m_templateFailure.isEmpty()) emit chatTemplateFailed(std::exchange(m_templateFailure, {}));
  if (std::exchange(m_tooLong, false) && index > 0)
    emit conversationTooLong(m_conversation.messages[index - 1].text);
}

void ChatController::onKvPolicyChanged(quint64 turnId, const ModelInfo& info) {
  if (turnId != m_turnId || !isChangingPolicy()) return;
  m_policyChanging = false;
  ++m_turnId;
  m_model = info;
  m_backend.kvPolicy = m_requestedPolicy;
  m_loadedBackend.kvPolicy = m_requestedPolicy;
  if (m_settings) m_settings->setBackendSettings(m_backend);
  emit policyChanged(m_requestedPolicy);
}

void ChatController::onKvPolicyFailed(quint64 turnId, const QString& message) {
  if (turnId != m_turnId || !isChangingPolicy()) return;
  m_policyChanging = false;
  ++m_turnId;
  emit policyFailed(message);
}

}  // namespace kvscope::ui
