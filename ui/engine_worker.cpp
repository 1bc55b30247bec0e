#include "ui/engine_worker.h"

#include <QDir>
#include <QFileInfo>
#include <QThread>
#include <filesystem>
#include <new>

#include "kv/kv_policy.h"
#include "runtime/backend_factory.h"
#include "runtime/context_overflow.h"
#include "runtime/kv_cache_folder.h"
#include "runtime/memory_estimate.h"
#include "runtime/session.h"
#include "runtime/session_load.h"
#include "server/server.h"
#include "tokenizer/reasoning.h"
#include "ui/engine_values.h"
#include "ui/theme.h"

namespace kvscope::ui {
namespace {

using Clock = std::chrono::steady_clock;

QString userMessage(const Error& error) {
  // An empty message would leave the status bar blank, which reads as "still probing".
  if (error.message.empty()) return QStringLiteral("No usable Vulkan device was found.");
  return QString::fromStdString(error.message);
}

// A load error as the user reads it: what failed, the engine's reason, and for memory a
// way out.
QString loadErrorMessage(const QString& path, const Error& error) {
  QString message = QStringLiteral("Could not load %1: %2")
                        .arg(QFileInfo(path).fileName(), QString::fromStdString(error.message));
  if (error.code == ErrorCode::kOutOfMemory) {
    message += QStringLiteral(
        " Try a shorter context, a more compressed KV cache policy or the CPU backend.");
  }
  return message;
}

const QString kOutOfMemoryMessage =
    QStringLiteral("Out of memory. Try a shorter context or a more compressed KV cache policy.");

// The id the server lists the model under: its file or folder name.
QString servedModelId(const QString& path) {
  const QFileInfo file(path);
  return file.isDir() ? QDir(path).dirName() : file.fileName();
}

}  // namespace

// Turns the Session's callbacks (engine thread) into the worker's signals: text pieces
// coalesced, step reports thinned, and a stop requested before the Session started
// (which clears its flag on entry) re-applied at the first callback.
//
// The local server's requests go through one observer, restarted with a new turn id per
// request; their text goes to the client, not to replyText().
class EngineWorker::TurnObserver final : public runtime::Observer {
 public:
  TurnObserver(EngineWorker& worker, quint64 turnId, bool relayText = true)
      : m_worker(worker), m_turnId(turnId), m_relayText(relayText) {}

  quint64 turnId() const { return m_turnId; }
  // The next turn's reports carry `turnId`.
  void restart(quint64 turnId) {
    m_turnId = turnId;
    m_lastStep = {};
    m_sentIndexer = false;
  }

  void onToken(std::string_view text, int32_t) override {
    applyStop();
    if (!m_relayText) return;
    m_pending += text;
    m_streamed += text;
    if (Clock::now() - m_lastText >= kTokenInterval) flushText();
  }
  void onProgress(uint32_t done, uint32_t total) override {
    applyStop();
    emit m_worker.promptProgress(m_turnId, done, total);
  }
  void onStep(const runtime::StepStats& stats) override {
    m_worker.applyIndexerDiagnostic();
    if (Clock::now() - m_lastStep < kTelemetryInterval) return;
    m_lastStep = Clock::now();
    emit m_worker.stepReported({m_turnId, stats});
  }
  void onKv(const runtime::KvSnapshot& snapshot) override {
    emit m_worker.kvReported({m_turnId, snapshot});
  }
  void onIndexer(const runtime::IndexerSnapshot& snapshot) override {
    // The first report of a turn carries every token's text: the GUI may have
    // dropped reports of earlier turns (stale ids) or cleared its panel.
    if (!m_sentIndexer) m_worker.m_textSent.clear();
    m_sentIndexer = true;
    emit m_worker.indexerReported(m_worker.indexerReport(m_turnId, snapshot));
  }
  void onExperts(const backend::ExpertUsage& usage) override {
    emit m_worker.expertsReported({m_turnId, usage});
  }

  // Text the reply starts with that the model did not write (an opened think block).
  void prepend(const std::string& text) {
    m_opened = text;
    m_pending += text;
    m_streamed += text;
  }
  const std::string& opened() const { return m_opened; }

  void flushText() {
    if (m_pending.empty()) return;
    m_lastText = Clock::now();
    emit m_worker.replyText(m_turnId, qstr(m_pending));
    m_pending.clear();
  }
  const std::string& streamed() const { return m_streamed; }

 private:
  void applyStop() {
    if (m_worker.stopRequested(m_turnId)) m_worker.m_session->requestStop();
  }

  EngineWorker& m_worker;
  quint64 m_turnId;
  const bool m_relayText;
  std::string m_opened;            // prepend()ed
  std::string m_pending;           // text not yet emitted
  std::string m_streamed;          // all text so far
  Clock::time_point m_lastText{};  // the epoch: the first piece goes out at once
  Clock::time_point m_lastStep{};
  bool m_sentIndexer = false;
};

void registerEngineTypes() {
  qRegisterMetaType<DeviceSummary>();
  qRegisterMetaType<QList<DeviceSummary>>();
  qRegisterMetaType<BackendSettings>();
  qRegisterMetaType<LoadRequest>();
  qRegisterMetaType<LoadStage>();
  qRegisterMetaType<ModelInfo>();
  qRegisterMetaType<runtime::MemoryEstimate>();
  qRegisterMetaType<ModelEntry>();
  qRegisterMetaType<QList<ModelEntry>>();
  qRegisterMetaType<SamplingSettings>();
  qRegisterMetaType<StopReason>();
  qRegisterMetaType<ReplyStats>();
  qRegisterMetaType<ChatMessage>();
  qRegisterMetaType<Conversation>();
  qRegisterMetaType<TurnRequest>();
  qRegisterMetaType<ServeRequest>();
  qRegisterMetaType<ServedReport>();
  qRegisterMetaType<StepReport>();
  qRegisterMetaType<KvReport>();
  qRegisterMetaType<IndexerReport>();
  qRegisterMetaType<ExpertReport>();
}

EngineWorker::EngineWorker(DeviceLister lister, QObject* parent)
    : QObject(parent), m_listDevices(std::move(lister)) {
  if (!m_listDevices) m_listDevices = [] { return gpu::listDevices(); };
  registerEngineTypes();
}

// Posts the server's jobs to the worker's thread as queued calls: they run between the
// chat's turns, in the order posted. A job posted while no model is loaded has nothing to
// run on; the server was stopped before the model went, so its request is already
// answered. The server's slots are siblings of the chat's session (Session::sibling):
// served requests never touch the chat's cache, and keep the chat format serving
// started with.
class EngineWorker::Runner final : public server::SessionRunner {
 public:
  explicit Runner(EngineWorker& worker) : m_worker(worker) {}
  void post(std::function<void()> job) override {
    EngineWorker* worker = &m_worker;
    QMetaObject::invokeMethod(
        worker,
        [worker, job = std::move(job)] {
          if (worker->m_session) job();
        },
        Qt::QueuedConnection);
  }
  Expected<std::unique_ptr<runtime::Session>> makeSession() override {
    if (!m_worker.m_session) return makeError(ErrorCode::kInternal, "no model is loaded");
    KVS_ASSIGN_OR_RETURN(auto session, m_worker.m_session->sibling());
    session->setChatSettings(m_worker.m_servedChat);
    return session;
  }

 private:
  EngineWorker& m_worker;
};

EngineWorker::~EngineWorker() {
  // Before the Session goes: the server's last job may still be on this thread's queue.
  if (m_server) m_server->stop();
}

void EngineWorker::requestStop(quint64 turnId) {
  m_stopTurn.store(turnId);
  std::lock_guard lock(m_sessionMutex);
  if (m_session && turnId == m_runningTurn.load()) m_session->requestStop();
}

bool EngineWorker::stopRequested(quint64 turnId) const {
  const quint64 stop = m_stopTurn.load();
  return stop == turnId || stop == kAllTurns;
}

void EngineWorker::probeDevices() {
  auto devices = m_listDevices();
  if (!devices.ok()) {
    emit deviceError(userMessage(devices.error()));
    return;
  }
  auto chosen = gpu::chooseDevice(*devices);
  if (!chosen.ok()) {
    emit deviceError(userMessage(chosen.error()));
    return;
  }
  QList<DeviceSummary> summaries;
  int chosenPosition = -1;
  for (const auto& info : *devices) {
    if (info.index == *chosen) chosenPosition = static_cast<int>(summaries.size());
    summaries.append(summarizeDevice(info));
  }
  if (chosenPosition < 0) {
    emit deviceError(
        QStringLiteral("The engine chose Vulkan device %1, which it did not list.").arg(*chosen));
    return;
  }
  emit devicesReady(summaries, chosenPosition);
}

void EngineWorker::loadModel(const LoadRequest& request) {
  try {
    loadModelOrThrow(request);
  } catch (const std::bad_alloc&) {
    emit modelLoadFailed(
        request.path,
        loadErrorMessage(request.path, Error{ErrorCode::kOutOfMemory, "out of host memory."}));
  }
}

// runtime::checkLoad runs before the current model is released, so a bad file or too long
// a context leaves it usable; the backend is built after (startSession), so two models
// never hold device memory at once.
void EngineWorker::loadModelOrThrow(const LoadRequest& request) {
  const QString fileName = QFileInfo(request.path).fileName();
  bool cpu = false;  // known once checkLoad resolved the kind; read at kBuildingBackend
  const runtime::LoadProgress progress = [&](runtime::LoadStep step) {
    switch (step) {
      case runtime::LoadStep::kReadingFile:
        emit loadProgress(LoadStage::kReadingFile, QStringLiteral("Reading %1").arg(fileName));
        return;
      case runtime::LoadStep::kLoadingTokenizer:
        emit loadProgress(LoadStage::kLoadingTokenizer, QStringLiteral("Loading the tokenizer"));
        return;
      case runtime::LoadStep::kBuildingBackend:
        emit loadProgress(LoadStage::kUploadingWeights,
                          cpu ? QStringLiteral("Preparing weights for the CPU")
                              : QStringLiteral("Checking the Vulkan device (on first use) and "
                                               "uploading weights"));
        return;
    }
  };
  const auto fail = [&](const Error& error) {
    emit modelLoadFailed(request.path, loadErrorMessage(request.path, error));
  };
  // The settings hold the policy as the user wrote it; it is parsed here, once.
  auto policy = kv::KvPolicy::parse(request.backend.kvPolicy.toStdString());
  if (!policy.ok()) return fail(policy.error());
  runtime::BackendChoice choice{.kind = request.backend.kind.toStdString(),
                                .contextLimit = request.backend.contextLimit,
                                .device = request.backend.device,
                                .kvPolicy = std::move(policy).value()};
  auto checked = runtime::checkLoad(request.path.toStdString(), std::move(choice), progress);
  if (!checked.ok()) return fail(checked.error());
  cpu = checked->kind == "cpu";
  const std::shared_ptr<const model::ModelFile> file = checked->model;

  if (m_session) {
    endServing(QStringLiteral("another model is loading"));
    {
      std::lock_guard lock(m_sessionMutex);
      m_session.reset();
    }
    m_info = {};
    emit modelUnloaded();
  }
  std::string notice;
  auto session = runtime::startSession(std::move(checked).value(), &notice, progress);
  if (!session.ok()) return fail(session.error());
  m_info = modelInfo(request, **session, *file);
  m_info.backendNotice = QString::fromStdString(notice);
  {
    std::lock_guard lock(m_sessionMutex);
    m_session = std::move(session).value();
  }
  m_diagnostic = false;
  m_textSent.clear();
  m_cacheOwner.clear();
  emit loadProgress(LoadStage::kReady, QStringLiteral("%1 is ready").arg(m_info.name));
  emit modelLoaded(m_info);
}

void EngineWorker::unloadModel() {
  endServing(QStringLiteral("the model was unloaded"));
  {
    std::lock_guard lock(m_sessionMutex);
    m_session.reset();
  }
  m_info = {};
  emit modelUnloaded();
}

void EngineWorker::estimateMemory(const QString& path, const BackendSettings& backend,
                                  quint64 deviceBytes) {
  auto file = model::ModelFile::open(path.toStdString());
  if (!file.ok()) {
    emit memoryEstimateFailed(path, QString::fromStdString(file.error().message));
    return;
  }
  if (deviceBytes == 0 &&
      runtime::resolveBackendKind(backend.kind.toStdString(), backend.device) == "vulkan") {
    // The device the backend would pick; no limit when there is none to ask.
    auto devices = m_listDevices();
    if (devices.ok()) {
      auto chosen = gpu::chooseDevice(*devices, backend.device);
      for (const auto& d : *devices)
        if (chosen.ok() && d.index == *chosen) deviceBytes = d.deviceLocalBytes;
    }
  }
  auto policy = kv::KvPolicy::parse(backend.kvPolicy.toStdString());
  if (!policy.ok()) {
    emit memoryEstimateFailed(path, QString::fromStdString(policy.error().message));
    return;
  }
  auto estimate = runtime::estimateMemory(**file, backend.contextLimit, *policy, deviceBytes);
  if (!estimate.ok()) {
    emit memoryEstimateFailed(path, QString::fromStdString(estimate.error().message));
    return;
  }
  emit memoryEstimated(path, *estimate);
}

void EngineWorker::generate(const TurnRequest& request) {
  if (!m_session) {
    emit turnFailed(request.turnId, QStringLiteral("No model is loaded. Open a model first."), {});
    return;
  }
  m_runningTurn.store(request.turnId);
  TurnObserver observer(*this, request.turnId);
  try {
    runTurn(request, observer);
  } catch (const std::bad_alloc&) {
    emit turnFailed(request.turnId, kOutOfMemoryMessage, qstr(observer.streamed()));
  }
  m_runningTurn.store(0);
}

void EngineWorker::runTurn(const TurnRequest& request, TurnObserver& observer) {
  const quint64 id = request.turnId;
  std::vector<tokenizer::ChatMessage> messages;
  if (!request.systemPrompt.isEmpty())
    messages.push_back({"system", request.systemPrompt.toStdString()});
  for (const ChatMessage& m : request.messages)
    messages.push_back({m.role.toStdString(), m.text.toStdString()});
  m_session->setChatSettings(chatSettings(request.sampling));
  runtime::GenerateOptions options =
      generateOptions(request.sampling, m_session->backend().contextLimit());
  // A conversation longer than the context: the chosen policy leaves out old
  // messages (the GUI greys them), or the turn fails saying what to do.
  const runtime::ContextOverflow policy = request.sampling.contextOverflow;
  const uint32_t limit = m_session->backend().contextLimit();
  runtime::TurnStage failedAt = runtime::TurnStage::kContext;
  auto turn = runtime::prepareChatTurn(
      *m_session, {.messages = messages, .overflow = policy, .options = options}, &failedAt);
  if (!turn.ok() && failedAt == runtime::TurnStage::kTemplate) {
    // The template refused the conversation: the user chooses another renderer.
    const QString message = QString::fromStdString(turn.error().message);
    emit chatTemplateFailed(id, message);
    emit turnFailed(id, message, {});
    return;
  }
  if (auto valid = runtime::validate(options.sampler); !valid.ok()) {
    emit turnFailed(id, QString::fromStdString(valid.error().message), {});
    return;
  }
  if (!turn.ok()) {
    QString message = QString::fromStdString(turn.error().message);
    if (policy == runtime::ContextOverflow::kStop &&
        turn.error().code == ErrorCode::kInvalidArgument) {
      // The engine's message names CLI options; say it with the app's own
      // controls, and offer them (conversationTooLong) where leaving out old
      // turns would make it fit. Otherwise the last message alone is too long.
      const auto middle = runtime::ContextOverflow::kTruncateMiddle;
      auto leaving = runtime::prepareChatTurn(
          *m_session, {.messages = messages, .overflow = middle, .options = options});
      if (leaving.ok()) {
        message = tr("This conversation no longer fits the model's context of %1 tokens. Leave "
                     "out its oldest turns (System prompt & sampling › When the context is "
                     "full), or start a new chat.")
                      .arg(limit);
        emit conversationTooLong(id);
      } else {
        message = QString::fromStdString(leaving.error().message);
      }
    }
    emit turnFailed(id, message, {});
    return;
  }
  QList<int> leftOut;
  const int first = request.systemPrompt.isEmpty() ? 0 : 1;  // messages[0] is the system prompt
  for (size_t i : turn->fit.dropped) leftOut.append(static_cast<int>(i) - first);
  emit promptFitted(id, leftOut, turn->fit.prefill);
  if (stopRequested(id)) {
    // Stopped before it began: an empty reply, as if stopped at the first step.
    ReplyStats stats;
    stats.stop = StopReason::kStopRequested;
    stats.cachedTokens = static_cast<quint32>(m_session->history().size());
    stats.contextLimit = m_info.contextLimit;
    emit turnFinished(id, {}, stats);
    return;
  }
  applyIndexerDiagnostic();
  m_cacheOwner = request.conversationId;
  // A template whose generation prompt opens a think block (DeepSeek-R1's)
  // leaves the reply inside it: the reply shown and kept starts with the tag,
  // so the chat view sets the reasoning apart and the template, given the
  // reply back, finds the block's end.
  if (tokenizer::reasoningFormatOf(m_session->chatTemplate().source()) ==
          tokenizer::ReasoningFormat::kThinkTags &&
      tokenizer::promptOpensThinking(turn->fit.prompt.text))
    observer.prepend("<think>\n");
  auto result = m_session->generate(turn->fit.tokens, turn->options, &observer);
  observer.flushText();
  if (!result.ok()) {
    if (result.error().code == ErrorCode::kCancelled) {
      ReplyStats stats;
      stats.stop = StopReason::kStopRequested;
      stats.cachedTokens = static_cast<quint32>(m_session->history().size());
      stats.contextLimit = m_info.contextLimit;
      emit turnFinished(id, qstr(observer.streamed()), stats);
      return;
    }
    emit turnFailed(id, QString::fromStdString(result.error().message), qstr(observer.streamed()));
    return;
  }
  emit stepReported({id, result->stats});
  emit turnFinished(id, qstr(observer.opened() + result->text), replyStats(*result));
}

void EngineWorker::saveKvCache(const QString& conversationId, const QString& path,
                               quint64 maxFileBytes, quint64 maxFolderBytes) {
  if (!m_session || conversationId.isEmpty() || m_cacheOwner != conversationId ||
      m_session->history().empty()) {
    emit kvCacheNotSaved(conversationId, {});
    return;
  }
  auto saved = runtime::saveKvCacheTo(*m_session, path.toStdString(), maxFileBytes, maxFolderBytes);
  if (!saved.ok()) {
    emit kvCacheNotSaved(conversationId, qstr(saved.error().message));
    return;
  }
  switch (saved->outcome) {
    case runtime::KvCacheSave::Outcome::kTooLarge:
      emit kvCacheNotSaved(
          conversationId,
          QStringLiteral("its KV cache (%1) is larger than the %2 allowed per conversation")
              .arg(formatBytes(saved->cacheBytes), formatBytes(maxFileBytes)));
      return;
    case runtime::KvCacheSave::Outcome::kEvicted:
      emit kvCacheNotSaved(conversationId, QStringLiteral("the saved KV caches may take at most %1")
                                               .arg(formatBytes(maxFolderBytes)));
      return;
    case runtime::KvCacheSave::Outcome::kSaved:
      emit kvCacheSaved(conversationId, saved->fileBytes, saved->tokens,
                        static_cast<quint32>(saved->evicted));
      return;
  }
}

void EngineWorker::restoreKvCache(quint64 turnId, const QString& conversationId,
                                  const QString& path) {
  if (!m_session) return;
  if (m_cacheOwner == conversationId) {  // the cache holds this chat, its latest turns too
    emit kvCacheRestored(conversationId, static_cast<quint32>(m_session->history().size()),
                         false);
    return;
  }
  const std::filesystem::path file = path.toStdString();
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return;
  TurnObserver observer(*this, turnId);
  Status st = okStatus();
  try {
    st = runtime::restoreKvCacheFrom(*m_session, file, &observer);
  } catch (const std::bad_alloc&) {
    st = makeError(ErrorCode::kOutOfMemory, "out of memory");
  }
  if (!st.ok()) {
    if (m_session->history().empty()) m_cacheOwner.clear();  // emptied, then failed
    emit kvCacheRestoreFailed(conversationId, qstr(st.error().message));
    return;
  }
  m_cacheOwner = conversationId;
  emit kvCacheRestored(conversationId, static_cast<quint32>(m_session->history().size()), true);
}

IndexerReport EngineWorker::indexerReport(quint64 turnId, const runtime::IndexerSnapshot& s) {
  IndexerReport r{.turnId = turnId, .indexer = s};
  // Token texts for the panel's hover: those it has not been sent since the history
  // last changed under it.
  const std::vector<int32_t>& history = m_session->history();
  size_t same = 0;
  while (same < m_textSent.size() && same < history.size() && m_textSent[same] == history[same])
    ++same;
  r.tokensFrom = static_cast<quint32>(same);
  const tokenizer::Tokenizer& tok = m_session->tokenizer();
  for (size_t i = same; i < history.size(); ++i) {
    const tokenizer::TokenId id = history[i];
    r.tokenTexts.append(
        qstr(tok.decode(std::span(&id, 1), {.renderSpecial = true, .stripLeadingSpace = false})));
  }
  m_textSent = history;
  return r;
}

void EngineWorker::requestIndexerDiagnostic(bool on) {
  m_wantDiagnostic.store(on);
}

void EngineWorker::applyIndexerDiagnostic() {
  const bool want = m_wantDiagnostic.load();
  if (!m_session || want == m_diagnostic) return;
  if (m_session->setIndexerDiagnostic(want).ok()) m_diagnostic = want;
}

void EngineWorker::comparisonInput(quint64 requestId) {
  if (!m_session) {
    emit comparisonInputFailed(requestId,
                               QStringLiteral("No model is loaded. Open a model first."));
    return;
  }
  const std::vector<int32_t>& history = m_session->history();
  emit comparisonInputReady(requestId, m_info.path, QList<qint32>(history.begin(), history.end()));
}

void EngineWorker::setKvPolicy(quint64 turnId, const QString& policy) {
  if (!m_session) {
    emit kvPolicyFailed(turnId, QStringLiteral("No model is loaded. Open a model first."));
    return;
  }
  if (stopRequested(turnId)) {
    emit kvPolicyFailed(turnId, QStringLiteral("Stopped; the KV cache keeps its policy."));
    return;
  }
  // The policy is the text the user chose; it is parsed here, once.
  auto parsed = kv::KvPolicy::parse(policy.toStdString());
  Status status = parsed.ok() ? okStatus() : Status(parsed.takeError());
  m_runningTurn.store(turnId);
  TurnObserver observer(*this, turnId);
  try {
    if (status.ok()) status = m_session->setKvPolicy(*parsed, &observer);
  } catch (const std::bad_alloc&) {
    status = makeError(ErrorCode::kOutOfMemory, "out of memory");
  }
  m_runningTurn.store(0);
  if (!status.ok()) {
    const Error& e = status.error();
    QString message;
    if (e.code == ErrorCode::kCancelled)
      message = QStringLiteral("Stopped; the KV cache keeps its policy.");
    else if (e.code == ErrorCode::kOutOfMemory)
      message = kOutOfMemoryMessage;
    else
      message = QStringLiteral("Could not switch the KV cache policy: %1").arg(qstr(e.message));
    emit kvPolicyFailed(turnId, message);
    return;
  }
  setKvFacts(m_info, *m_session);
  emit kvPolicyChanged(turnId, m_info);
}

void EngineWorker::startServer(const ServeRequest& request) {
  endServing({});
  if (!m_session) {
    emit serverFailed(QStringLiteral("Load a model first: the server serves the loaded model."));
    return;
  }
  server::ServerOptions options;
  options.port = request.port;
  options.modelId = servedModelId(m_info.path).toStdString();
  // Each slot beside the chat holds a KV cache of its own (on a GPU over the
  // chat's device and weights, backend/vulkan_model.h).
  options.slotCount = 2;
  options.defaults = generateOptions(request.sampling, m_session->backend().contextLimit());
  options.contextOverflow = request.sampling.contextOverflow;
  m_servedChat = chatSettings(request.sampling);
  if (!m_runner) m_runner = std::make_unique<Runner>(*this);
  m_servedTurn = std::make_unique<TurnObserver>(*this, kServedTurnBit | ++m_servedCount,
                                                /*relayText=*/false);

  server::ServerHooks hooks;
  hooks.observer = m_servedTurn.get();
  hooks.onServed = [this](const server::ServedRequest& served) {
    const quint64 id = m_servedTurn->turnId();
    // A request cancelled before its prefill finished has no stats to show.
    if (served.stats.contextLimit != 0) emit stepReported({id, served.stats});
    ServedReport report;
    report.turnId = id;
    report.chat = served.kind == server::GenerationJob::Kind::kChat;
    report.promptTokens = served.stats.promptTokens;
    report.reusedTokens = served.stats.reusedTokens;
    report.generatedTokens = served.stats.generatedTokens;
    report.decodeTokensPerSecond = served.stats.decodeTokensPerSecond();
    report.cancelled = served.cancelled;
    emit requestServed(report);
    m_servedTurn->restart(kServedTurnBit | ++m_servedCount);
  };
  hooks.onActiveChanged = [this](size_t active) {
    emit serverActivity(static_cast<quint32>(active));
  };
  hooks.log = [this](std::string_view message) { emit serverNotice(qstr(message)); };

  auto http = std::make_unique<server::Server>(options, *m_runner, std::move(hooks));
  if (const Status started = http->start(); !started.ok()) {
    emit serverFailed(QStringLiteral("Could not serve on port %1: %2")
                          .arg(request.port)
                          .arg(qstr(started.error().message)));
    return;
  }
  m_server = std::move(http);
  emit serverStarted(qstr(m_server->baseUrl()), qstr(options.modelId));
}

void EngineWorker::stopServer() {
  endServing({});
}

void EngineWorker::endServing(const QString& reason) {
  if (!m_server) return;
  m_server->stop();
  m_server.reset();
  emit serverStopped(reason);
}

}  // namespace kvscope::ui
