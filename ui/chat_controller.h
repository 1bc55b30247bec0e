#pragma once
// ChatController: the GUI thread's owner of the conversation and of what the engine is
// doing. Widgets call its slots (send, stop, edit, …) and render from its state and
// signals; it asks EngineWorker for work through queued *Requested signals and applies
// the answers. Only it changes the conversation, so widgets never race the engine.
//
// Message indices are positions in conversation().messages (user and assistant only; the
// system prompt is conversation().systemPrompt). A reply in progress is the last
// message, with role "assistant"; replyIndex() says which one, -1 when idle.
//
// Turns: each request carries a new turn id; answers for any other id (a turn replaced
// by new chat, edit or another conversation) are ignored, so a late answer never lands
// in the wrong conversation. A failed turn keeps the user message and records the error
// (and any partial text) on its assistant message.
//
// Saved KV caches: with a store, leaving a conversation (new chat, another one, another
// model, quit) saves its compressed KV cache beside it, and opening one, or loading a
// model while one is open, restores it, so its next reply does not re-read it. A cache
// that cannot be restored (another model or policy, a damaged file) is reported with
// kvCacheNotice() and the next reply re-reads the conversation; the conversation
// itself is never touched.
//
// KV policy switches (setKvPolicy) are turns too: refused while a reply runs (stop it
// first; the Scheme panel disables Apply meanwhile), and no reply starts while one
// re-encodes. stop() cancels a re-encode, which keeps the old cache. The conversation is
// never touched: the engine re-reads the tokens it already holds.

#include <QObject>
#include <QStringList>

#include "ui/engine_types.h"
#include "ui/model_settings.h"

namespace kvscope::ui {

class ConversationStore;
class EngineWorker;

class ChatController : public QObject {
  Q_OBJECT

 public:
  // `worker` lives on the engine thread and outlives the controller. `store` (optional)
  // persists conversations: every finished or failed turn and every edit is saved.
  // `settings` (optional) supplies per-model sampling and records recent models.
  ChatController(EngineWorker* worker, ConversationStore* store = nullptr,
                 ModelSettings* settings = nullptr, QObject* parent = nullptr);

  const Conversation& conversation() const { return m_conversation; }
  bool isGenerating() const { return m_replyIndex >= 0; }
  // A setKvPolicy() re-encode is running.
  bool isChangingPolicy() const { return m_policyChanging; }
  int replyIndex() const { return m_replyIndex; }
  bool isLoading() const { return !m_loadingPath.isEmpty(); }
  bool hasModel() const { return !m_model.path.isEmpty(); }
  const ModelInfo& model() const { return m_model; }
  const SamplingSettings& sampling() const { return m_sampling; }
  const BackendSettings& backendSettings() const { return m_backend; }
  quint32 cachedTokens() const { return m_cachedTokens; }
  quint32 contextLimit() const { return m_model.contextLimit; }

  // The KV schemes this build knows ("f16", "q8_0", …), for policy choosers. A fixed
  // table in the engine, safe to read from the GUI thread.
  static QStringList kvSchemeNames();

 public slots:
  // Loads a model with backendSettings(). A file that fails its checks leaves the
  // current model loaded; past them the current one is released first (modelUnloaded).
  void loadModel(const QString& path);
  // setBackendSettings(settings), then loadModel(path): what the model picker asks.
  void loadModelWith(const QString& path, const kvscope::ui::BackendSettings& settings);
  void setBackendSettings(const kvscope::ui::BackendSettings& settings);
  // Asks for memoryEstimated() under `backend`; `deviceBytes` 0 lets the worker use the
  // memory of the device the backend would choose.
  void estimateMemory(const QString& path, const kvscope::ui::BackendSettings& backend,
                      quint64 deviceBytes = 0);

  // Re-encodes the loaded model's KV cache under `policy` ("k=q8_0,v=turbo3", "" for
  // f16): policyChanging(), policyProgress() while the history is read again, then
  // policyChanged() (model() and backendSettings() carry the new policy, remembered for
  // later loads) or policyFailed() (nothing changed). Refused (errorOccurred) while a
  // reply runs, while loading, without a model, or while another switch runs.
  void setKvPolicy(const QString& policy);

  // Asks the worker for the loaded model's path and the tokens its cache holds:
  // comparisonInputReady() or comparisonInputFailed() (no model). For SchemeComparison.
  void requestComparisonInput();

  // Saves the open conversation's KV cache and waits until it is written (at quit;
  // stops any reply first).
  void saveKvCacheNow();

  // Appends a user message and starts the reply. Refused (errorOccurred) while a reply
  // runs, without a model, or for blank text.
  void send(const QString& text);
  // Stops the reply in progress; its partial text is kept (stop reason kStopRequested).
  // During a KV policy switch, cancels it (policyFailed; the old cache stays).
  void stop();
  // Drops the last assistant reply and answers the last user message again.
  void regenerate();
  // Replaces user message `index`, drops every message after it, and answers it.
  void editMessage(int index, const QString& text);

  // Starts an empty conversation (the current one stays in the store).
  void newChat();
  void openConversation(const QString& id);
  void deleteConversation(const QString& id);
  void setSystemPrompt(const QString& prompt);
  // Applies to the next reply and is remembered for the loaded model.
  void setSampling(const kvscope::ui::SamplingSettings& sampling);
  // The indexer's diagnostic mode (captured attention mass); takes effect at the next step.
  void setIndexerDiagnostic(bool on);

 signals:
  // To the worker (queued).
  void loadModelRequested(const kvscope::ui::LoadRequest& request);
  void generateRequested(const kvscope::ui::TurnRequest& request);
  void estimateMemoryRequested(const QString& path, const kvscope::ui::BackendSettings& backend,
                               quint64 deviceBytes);
  void setKvPolicyRequested(quint64 turnId, const QString& policy);
  void comparisonInputRequested(quint64 requestId);
  void saveKvCacheRequested(const QString& conversationId, const QString& path,
                            quint64 maxFileBytes, quint64 maxFolderBytes);
  void restoreKvCacheRequested(quint64 turnId, const QString& conversationId,
                               const QString& path);
  void comparisonInputReady(const QString& modelPath, const QList<qint32>& tokens);
  void comparisonInputFailed(const QString& message);

  // Model state.
  void modelLoading(const QString& path);
  void loadProgress(kvscope::ui::LoadStage stage, const QString& message);
  void modelLoaded(const kvscope::ui::ModelInfo& info);
  void modelLoadFailed(const QString& path, const QString& message);
  // The previous model was released (a new load passed its file checks); hasModel() is
  // false until modelLoaded().
  void modelUnloaded();
  void memoryEstimated(const QString& path, const kvscope::runtime::MemoryEstimate& estimate);
  void memoryEstimateFailed(const QString& path, const QString& message);
  void samplingChanged(const kvscope::ui::SamplingSettings& sampling);

  // KV policy switch: started, history re-encoded `done` of `total` tokens, finished
  // (kvReported() of the new cache comes first), or failed with the old policy kept.
  void policyChanging(const QString& policy);
  void policyProgress(quint32 done, quint32 total);
  void policyChanged(const QString& policy);
  void policyFailed(const QString& message);

  // Conversation state. conversationReset(): the whole conversation changed (new chat,
  // opened, truncated by an edit or regenerate): re-render it from conversation().
  void conversationReset();
  void messageAdded(int index);
  // Streaming: `piece` was appended to message `index` (already in conversation()).
  void replyText(int index, const QString& piece);
  void replyFinished(int index, const kvscope::ui::ReplyStats& stats);
  void replyFailed(int index, const QString& message);
  // The model's chat template could not render the conversation; the window
  // offers the built-in format or plain completion (then regenerate()).
  void chatTemplateFailed(const QString& message);
  // After replyFailed, when the reply failed because the conversation no
  // longer fits the context under the "stop" overflow setting: the window
  // offers a new chat (with the unanswered message in the composer) or
  // leaving out the oldest turns (then regenerate()).
  void conversationTooLong(const QString& unansweredMessage);
  void generatingChanged(bool generating);
  void promptProgress(quint32 done, quint32 total);
  void contextUsageChanged(quint32 cachedTokens, quint32 contextLimit);
  // The context overflow policy changed which messages the model sees: those
  // at `indices` are left out (ChatMessage::leftOut), and this turn prefills
  // `prefill` tokens.
  void messagesLeftOut(const QList<int>& indices, quint32 prefill);
  // What happened to a saved KV cache, for the status bar: restored from disk,
  // not used, not saved, or older caches removed to stay within the folder's
  // limit.
  void kvCacheNotice(const QString& message);
  // The open conversation's `tokens` are cached again (restored from disk, or
  // still held by the engine).
  void kvCacheRestored(quint32 tokens);
  // The stored conversations changed (one added, retitled or deleted).
  void conversationsChanged();

  // Telemetry, forwarded from the worker (~10 Hz and at the end of each reply), for the
  // chat's turns and the local server's requests.
  void stepReported(const kvscope::ui::StepReport& report);
  void kvReported(const kvscope::ui::KvReport& report);
  void indexerReported(const kvscope::ui::IndexerReport& report);
  void expertsReported(const kvscope::ui::ExpertReport& report);

  // Something the user asked for could not be done (no model, reply running, store
  // failure); show it, nothing was changed.
  void errorOccurred(const QString& message);

 private slots:
  void onModelLoaded(const kvscope::ui::ModelInfo& info);
  void onModelLoadFailed(const QString& path, const QString& message);
  void onModelUnloaded();
  void onPromptProgress(quint64 turnId, quint32 done, quint32 total);
  void onReplyText(quint64 turnId, const QString& piece);
  void onPromptFitted(quint64 turnId, const QList<int>& leftOut, quint32 prefill);
  void onStep(const kvscope::ui::StepReport& report);
  void onKv(const kvscope::ui::KvReport& report);
  void onIndexer(const kvscope::ui::IndexerReport& report);
  void onExperts(const kvscope::ui::ExpertReport& report);
  void onTurnFinished(quint64 turnId, const QString& text, const kvscope::ui::ReplyStats& stats);
  void onTurnFailed(quint64 turnId, const QString& message, const QString& partialText);
  void onKvPolicyChanged(quint64 turnId, const kvscope::ui::ModelInfo& info);
  void onKvPolicyFailed(quint64 turnId, const QString& message);

 private:
  bool followsTurn(quint64 turnId) const;
  bool canStartTurn();
  void startReply();
  void endReply();
  void abandonReply();
  void save();
  // Asks the worker to save / restore the open conversation's KV cache.
  void saveKvCache();
  void restoreKvCache();
  // Where the open conversation's cache is saved; empty when there is nothing to
  // save or restore (no store, no model, no messages).
  QString kvCachePath() const;
  ModelSettings::KvCacheLimits kvCacheLimits() const;

  EngineWorker* m_worker;
  ConversationStore* m_store;
  ModelSettings* m_settings;
  Conversation m_conversation;
  ModelInfo m_model;
  QString m_loadingPath;
  BackendSettings m_backend;
  BackendSettings m_loadedBackend;  // what the loaded model was loaded with
  SamplingSettings m_sampling;
  quint64 m_turnId = 0;       // the turn whose answers are applied
  QString m_templateFailure;  // the chat template's error for the failing turn
  bool m_tooLong = false;     // the failing turn's conversation did not fit
  quint64 m_comparisonId = 0;
  int m_replyIndex = -1;
  bool m_policyChanging = false;
  QString m_requestedPolicy;  // of the switch in progress
  quint32 m_cachedTokens = 0;
  QList<int> m_requestIndices;  // the conversation index of each message the turn sent
};

}  // namespace kvscope::ui
