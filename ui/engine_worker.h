#pragma once
// EngineWorker: the only object in ui/ that calls the engine. It lives on its own thread
// (EngineThread owns it) and is driven by queued *Requested signals connected to its
// slots; every answer leaves as a signal carrying value types (engine_types.h), so the
// GUI thread never blocks on the engine and never shares engine state. The engine is not
// thread-safe: serializing all calls on this one thread is what makes it safe to use.
//
// The one exception is requestStop(): a stop queued behind a running generation would
// only arrive after it ended, so it is a plain method any thread may call. It flips
// atomic flags (the worker's and the Session's) and touches nothing else.
//
// The local server (startServer) serves the loaded Session over HTTP: its requests run as
// jobs queued on this thread between chat turns, so they never interleave with a turn.
// Their step, KV and indexer reports carry served turn ids (isServedTurn), so the
// inspector follows them like chat turns. The server stops before the model it serves
// is released (a load or unload), with serverStopped().
//
// Streaming: tokens are coalesced into pieces at most every kTokenInterval, step and KV
// reports at most every kTelemetryInterval; the last piece and a final step and KV
// report are always sent before turnFinished()/turnFailed().

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <QList>
#include <QObject>
#include <QString>

#include "gpu/device_info.h"
#include "ui/device_summary.h"
#include "ui/engine_types.h"

#include "runtime/session.h"

namespace kvscope::server {
class Server;
}

namespace kvscope::ui {

// Registers the value types that cross the worker/GUI boundary. Idempotent.
void registerEngineTypes();

class EngineWorker : public QObject {
  Q_OBJECT

 public:
  static constexpr std::chrono::milliseconds kTokenInterval{33};
  static constexpr std::chrono::milliseconds kTelemetryInterval{100};
  // requestStop(kAllTurns) stops whatever runs and every turn still queued.
  static constexpr quint64 kAllTurns = ~quint64{0};
  // Turn ids with this bit set are the local server's requests; the chat's own
  // turns count up from 1 and never reach it.
  static constexpr quint64 kServedTurnBit = quint64{1} << 62;
  static bool isServedTurn(quint64 turnId) {
    return turnId != kAllTurns && (turnId & kServedTurnBit) != 0;
  }

  // How devices are enumerated. The default asks the Vulkan loader; tests pass their own
  // list so they do not depend on the drivers of the machine they run on.
  using DeviceLister = std::function<Expected<std::vector<gpu::DeviceInfo>>()>;

  explicit EngineWorker(DeviceLister lister = {}, QObject* parent = nullptr);
  ~EngineWorker() override;

  // Thread-safe: stops turn `turnId` (prefill or decode) as soon as the engine checks,
  // or before it starts when it is still queued. Stopping a turn that already ended, or
  // another turn, does nothing.
  void requestStop(quint64 turnId);
  // Thread-safe like requestStop(): the indexer's diagnostic mode (dense scores too, so
  // each IndexerReport carries the attention mass the selection captured). Applied at the
  // next decode step, so it can change while a reply streams; kept across policy switches.
  void requestIndexerDiagnostic(bool on);

 public slots:
  // Answers with devicesReady() or deviceError(), never both.
  void probeDevices();

  // Loads a model, replacing the current one only once the new one is ready (a failed
  // load keeps the old model usable). Emits loadProgress() stages, then modelLoaded() or
  // modelLoadFailed().
  void loadModel(const kvscope::ui::LoadRequest& request);
  // Frees the model and its cache; emits modelUnloaded().
  void unloadModel();

  // Answers memoryEstimated() or memoryEstimateFailed(). `deviceBytes` is the memory to
  // fit (0: the chosen device's, or no limit when there is no device information).
  void estimateMemory(const QString& path, const kvscope::ui::BackendSettings& backend,
                      quint64 deviceBytes);

  // Runs one chat turn: renders request.messages with the model's chat template (the
  // system prompt first), reuses the cached prefix, streams the reply. Answers
  // turnFinished() or turnFailed() (exactly one, carrying request.turnId).
  void generate(const kvscope::ui::TurnRequest& request);

  // Re-encodes the KV cache under `policy` (kv::KvPolicy text, "" for f16) by running the
  // token history again with progress (promptProgress(turnId, …)); the history and so
  // the conversation stay. `turnId` is a turn like a reply's: requestStop(turnId) cancels
  // the re-encode and keeps the old cache. Queued behind any running turn, so it never
  // interleaves with a reply. Answers kvPolicyChanged() (after a kvReported() of the new
  // cache) or kvPolicyFailed(); on failure the old policy and cache stay.
  void setKvPolicy(quint64 turnId, const QString& policy);

  // The loaded model's file and every token its cache holds, for comparing KV policies
  // on this conversation away from this thread (SchemeComparison): answers
  // comparisonInputReady() or comparisonInputFailed(). Queued behind any running turn.
  void comparisonInput(quint64 requestId);

  // Saves the KV cache to `path` (runtime/kv_file.h) when it holds conversation
  // `conversationId` (its last turn ran here, or it was restored from that
  // conversation's file) and is at most `maxFileBytes`; then removes the oldest
  // caches of `path`'s folder until it holds at most `maxFolderBytes`. Answers
  // kvCacheSaved() or kvCacheNotSaved().
  void saveKvCache(const QString& conversationId, const QString& path, quint64 maxFileBytes,
                   quint64 maxFolderBytes);
  // Restores the KV cache of conversation `conversationId` from `path` without
  // prefill: kvCacheRestored(), or kvCacheRestoreFailed() with the reason and
  // the cache as it was (a damaged file is removed; one made for another model
  // or policy is kept); nothing when there is no file. When the cache already
  // holds that conversation, kvCacheRestored() without reading the file. The
  // restored cache's kvReported() carries `turnId`.
  void restoreKvCache(quint64 turnId, const QString& conversationId, const QString& path);

  // Serves the loaded model on 127.0.0.1 (server/server.h): answers serverStarted() or
  // serverFailed() (no model, port in use). A server already running is stopped first.
  void startServer(const kvscope::ui::ServeRequest& request);
  // Stops serving (running requests are cancelled): serverStopped("") when it ran.
  void stopServer();

 signals:
  // `chosen` indexes `devices` (not the engine's enumeration index).
  void devicesReady(const QList<kvscope::ui::DeviceSummary>& devices, int chosen);
  void deviceError(const QString& message);

  void loadProgress(kvscope::ui::LoadStage stage, const QString& message);
  void modelLoaded(const kvscope::ui::ModelInfo& info);
  void modelLoadFailed(const QString& path, const QString& message);
  void modelUnloaded();

  void memoryEstimated(const QString& path, const kvscope::runtime::MemoryEstimate& estimate);
  void memoryEstimateFailed(const QString& path, const QString& message);

  // Prompt processing: `done` of `total` new (not reused) prompt tokens, or of the
  // history a setKvPolicy() turn re-encodes.
  void promptProgress(quint64 turnId, quint32 done, quint32 total);
  // The next piece of the reply (one or more tokens of complete UTF-8 text).
  void replyText(quint64 turnId, const QString& piece);
  void stepReported(const kvscope::ui::StepReport& report);
  void kvReported(const kvscope::ui::KvReport& report);
  void indexerReported(const kvscope::ui::IndexerReport& report);
  void expertsReported(const kvscope::ui::ExpertReport& report);
  // `text` is the whole reply: the concatenation of every replyText() piece.
  void turnFinished(quint64 turnId, const QString& text, const kvscope::ui::ReplyStats& stats);
  // The turn failed; `partialText` is what was streamed before the failure.
  void turnFailed(quint64 turnId, const QString& message, const QString& partialText);
  // Before the prompt is processed: the indices of request.messages the context
  // overflow policy left out (empty when all fit), and the tokens the turn
  // prefills (what the cache could not reuse).
  void promptFitted(quint64 turnId, const QList<int>& leftOut, quint32 prefill);
  // Before turnFailed when the model's chat template could not render the
  // conversation (it raised or does not parse).
  void chatTemplateFailed(quint64 turnId, const QString& message);
  // Before turnFailed when the conversation no longer fits the context and
  // the overflow setting is "stop": a new chat or leaving out the oldest
  // turns would answer it.
  void conversationTooLong(quint64 turnId);

  // `info` carries the new policy (kvPolicy, kvBytesPerToken).
  void kvPolicyChanged(quint64 turnId, const kvscope::ui::ModelInfo& info);
  void kvPolicyFailed(quint64 turnId, const QString& message);

  void comparisonInputReady(quint64 requestId, const QString& modelPath,
                            const QList<qint32>& tokens);
  void comparisonInputFailed(quint64 requestId, const QString& message);

  void kvCacheSaved(const QString& conversationId, quint64 bytes, quint32 tokens,
                    quint32 evicted);
  // `reason` empty: there was nothing of this conversation to save.
  void kvCacheNotSaved(const QString& conversationId, const QString& reason);
  // `fromDisk` false: the cache already held the conversation (nothing read).
  void kvCacheRestored(const QString& conversationId, quint32 tokens, bool fromDisk);
  void kvCacheRestoreFailed(const QString& conversationId, const QString& message);

  // `url` is the base clients use ("http://127.0.0.1:8080/v1").
  void serverStarted(const QString& url, const QString& modelId);
  void serverFailed(const QString& message);
  // `reason` is empty when stopServer() asked for it.
  void serverStopped(const QString& reason);
  // Requests waiting or running changed (emitted from the server's threads).
  void serverActivity(quint32 active);
  void requestServed(const kvscope::ui::ServedReport& report);
  // Something the server's operator should know, such as a chat template it
  // does not recognise (from any thread).
  void serverNotice(const QString& message);

 private:
  class TurnObserver;
  friend class TurnObserver;

  void loadModelOrThrow(const LoadRequest& request);
  void runTurn(const TurnRequest& request, TurnObserver& observer);
  bool stopRequested(quint64 turnId) const;
  // Brings the session's diagnostic mode to the one requested (engine thread).
  void applyIndexerDiagnostic();
  IndexerReport indexerReport(quint64 turnId, const runtime::IndexerSnapshot& snapshot);
  // Stops the server, if one runs, with serverStopped(reason).
  void endServing(const QString& reason);

  DeviceLister m_listDevices;
  std::unique_ptr<runtime::Session> m_session;
  ModelInfo m_info;
  std::atomic<bool> m_wantDiagnostic{false};
  bool m_diagnostic = false;        // what the session runs with
  std::vector<int32_t> m_textSent;  // the tokens whose text went out in indexer reports
  QString m_cacheOwner;  // the conversation the cache holds ("": none known)
  // Guards the m_session pointer against requestStop() from other threads while a load
  // replaces it; the engine calls themselves need no lock (one thread).
  std::mutex m_sessionMutex;
  std::atomic<quint64> m_stopTurn{0};     // the turn a stop was requested for (0: none)
  std::atomic<quint64> m_runningTurn{0};  // the turn generate() is running (0: none)

  // The local server: it posts its jobs through m_runner onto this thread, and
  // m_servedTurn turns each one's reports into signals.
  class Runner;
  std::unique_ptr<Runner> m_runner;
  runtime::Session::ChatSettings m_servedChat;  // applied before each served job
  std::unique_ptr<TurnObserver> m_servedTurn;
  quint64 m_servedCount = 0;
  std::unique_ptr<server::Server> m_server;  // last: stopped before the members above go
};

}  // namespace kvscope::ui
