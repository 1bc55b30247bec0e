#pragma once
// The value types that cross between the engine thread (EngineWorker) and the GUI thread
// (ChatController, widgets). Plain data (Qt containers, and the runtime's own value
// types for the engine's reports): copied through queued signals, never pointing into
// engine state, so a widget can keep one as long as it likes. registerEngineTypes()
// (engine_worker.h) registers every one with QMetaType.
//
// Sizes are bytes, times milliseconds, token counts are the engine's (prompt tokens
// include the chat template's markup).

#include <optional>

#include <QDateTime>
#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>

#include "kv/kv_policy.h"
#include "runtime/context_overflow.h"
#include "runtime/memory_estimate.h"
#include "runtime/observer.h"
#include "tokenizer/chat_template.h"

namespace kvscope::ui {

// ---- Models -----------------------------------------------------------------------------

// Which engine runs a model and how large its cache may grow.
struct BackendSettings {
  // "auto": Vulkan on a GPU, the CPU backend where the only Vulkan device is a
  // CPU (lavapipe), see runtime::resolveBackendKind; or "vulkan" / "cpu".
  QString kind = QStringLiteral("auto");
  int device = -1;           // Vulkan device index (-1: automatic)
  quint32 contextLimit = 0;  // tokens; 0: the model's trained context
  // "k=q8_0,v=turbo4,…" (kv/kv_policy.h); empty: f16. The default is the
  // K-safe compressed policy: softmax amplifies K error, V is cheap.
  QString kvPolicy = QString::fromStdString(kv::defaultKvPolicy().toString());
  bool operator==(const BackendSettings&) const = default;
};

// A request to load a model; `path` is a .gguf file or a Hugging Face folder.
struct LoadRequest {
  QString path;
  BackendSettings backend;
};

enum class LoadStage {
  kReadingFile,       // opening and validating the GGUF / safetensors headers
  kLoadingTokenizer,  // vocabulary and chat template
  kUploadingWeights,  // building the backend: weights to the device, cache allocated
  kReady,             // the model answers; modelLoaded() follows
};

// What the UI shows about the loaded model (status bar, inspector, model picker).
struct ModelInfo {
  QString path;
  bool demo = false;           // kvscope's own 0.9M-parameter demo model (resources/models)
  BackendSettings loadedWith;  // the settings of the load that produced this model
  QString name;                // general.name, else the file or folder name
  QString architecture;        // "llama", "qwen2", …
  QString format;              // "GGUF" or "Hugging Face"
  QString backend;             // "cpu" or "vulkan"
  QString chatTemplate;     // "none", or "Jinja (FAMILY)": the model's own template renders chats
  QString templateWarning;  // non-empty when the template does not parse or is missing
  bool templateReadsThinking = false;  // the Thinking setting applies
  QString builtinFormat;  // the family the built-in renderer would use; empty when none
  QString backendNotice;  // non-empty when the backend is not the one asked for, and why
  quint32 kvLayers = 0;   // layers whose K/V rows the cache holds (not Gemma 4's KV-shared ones)
  quint32 nVocab = 0;
  quint32 nExpert = 0;  // mixture of experts: experts per layer (0: dense)
  quint32 trainedContext = 0;
  quint32 contextLimit = 0;     // what this session allows
  quint64 weightBytes = 0;      // tensors as stored
  // What one more token adds under the active KV policy (a ring does not grow).
  quint64 kvBytesPerToken = 0;
  QString kvPolicy;             // the active policy, "k=f16,v=f16" by default
};

// Where discovery found a model.
enum class ModelSource { kHuggingFace, kLmStudio, kGpt4All, kModelsFolder, kUserFolder, kRecent };

// One model found on disk. Architecture and parameter count come from the GGUF header or
// config.json when cheaply readable; empty / 0 otherwise.
struct ModelEntry {
  QString path;  // .gguf file or Hugging Face snapshot folder
  QString name;  // "TinyLlama-1.1B-Chat Q4_K_M", repo name, or file name
  ModelSource source = ModelSource::kModelsFolder;
  bool isFolder = false;  // Hugging Face folder (safetensors) rather than a .gguf file
  QString architecture;
  quint64 parameterCount = 0;
  quint64 sizeBytes = 0;      // on disk (all shards of a folder)
  quint32 contextLength = 0;  // trained context when readable
  QString quantization;       // "Q4_K_M", "F16", … when readable
  QDateTime modified;
};

// ---- Sampling ---------------------------------------------------------------------------

// Per-model generation settings (stored by ModelSettings). Defaults are llama.cpp's.
struct SamplingSettings {
  double temperature = 0.8;
  int topK = 40;
  double topP = 0.95;
  double minP = 0.05;
  double repeatPenalty = 1.0;
  int repeatLastN = 64;
  // The longest reply; 0 (the default): a quarter of the context, so a reply
  // never fills the context and the next message still fits.
  int maxTokens = 0;
  qint64 seed = -1;  // -1: a fresh random seed each reply
  QString systemPrompt;
  // How chats render (tokenizer/chat_template.h): the model's Jinja template,
  // kvscope's built-in format for its family, or plain completion; and
  // enable_thinking for templates that read it (unset: the template's default).
  tokenizer::ChatRenderer chatRenderer = tokenizer::ChatRenderer::kTemplate;
  std::optional<bool> thinking;
  // A conversation longer than the context (runtime/context_overflow.h). The
  // default never dead-ends a chat, and keeps the first exchange (where people
  // state what they want) as well as the newest turns; a reply past the end
  // shifts the context.
  runtime::ContextOverflow contextOverflow = runtime::ContextOverflow::kTruncateMiddle;
  bool operator==(const SamplingSettings&) const = default;
};

// ---- Conversation -----------------------------------------------------------------------

enum class StopReason { kNone, kEndOfGeneration, kMaxTokens, kStopRequested, kContextFull, kError };

// How one reply went. Filled when the reply ends (and for the final stats of a failed one).
struct ReplyStats {
  quint32 promptTokens = 0;  // tokens in the rendered prompt
  quint32 reusedTokens = 0;  // of which came from the cache (prefix reuse)
  quint32 generatedTokens = 0;
  quint32 cachedTokens = 0;  // in the cache after the reply
  quint32 contextLimit = 0;
  double prefillMs = 0.0;
  double decodeMs = 0.0;
  double prefillTokensPerSecond = 0.0;
  double decodeTokensPerSecond = 0.0;
  StopReason stop = StopReason::kNone;
  quint64 seed = 0;  // the sampler's seed, to reproduce the reply
  quint32 contextShifts = 0;  // StepReport's
  quint32 shiftedTokens = 0;
  bool valid() const { return stop != StopReason::kNone; }
};

// One message. Assistant messages carry their stats; a failed turn keeps the user
// message and records the error on the (possibly partial) assistant reply.
struct ChatMessage {
  QString role;  // "system", "user" or "assistant"
  QString text;
  ReplyStats stats;  // assistant only
  QString error;     // assistant only: why the reply failed; empty when it did not
  QDateTime time;
  // Left out of the last prompt by the context overflow policy: still shown
  // (greyed), no longer seen by the model.
  bool leftOut = false;
};

struct Conversation {
  QString id;     // file stem in the store; stable across renames
  QString title;  // the first user message, shortened; "New chat" until there is one
  QString systemPrompt;
  QString modelPath;
  QDateTime created;
  QDateTime updated;
  QList<ChatMessage> messages;  // user/assistant, in order (the system prompt is separate)
};

// One chat turn for the engine: the whole conversation to render with the template.
struct TurnRequest {
  quint64 turnId = 0;  // echoed in every answer so late answers of an old turn are ignored
  QString conversationId;  // whose conversation the cache then holds (saved KV caches)
  QString systemPrompt;
  QList<ChatMessage> messages;  // ends with the user message to answer
  SamplingSettings sampling;
};

// ---- The local server ---------------------------------------------------------------------

// Starts the app's OpenAI-compatible server on loopback for the loaded model.
struct ServeRequest {
  quint16 port = 8080;  // 0: any free port
  // The defaults for what a request leaves out (sampler, max tokens), and the
  // chat format and Thinking setting its messages are rendered with.
  SamplingSettings sampling;
};

// One request the server answered. Its step, KV and indexer reports carried
// `turnId`, a served turn (EngineWorker::isServedTurn).
struct ServedReport {
  quint64 turnId = 0;
  bool chat = true;  // false: /v1/completions
  quint32 promptTokens = 0;
  quint32 reusedTokens = 0;  // of promptTokens, found in the cache
  quint32 generatedTokens = 0;
  double decodeTokensPerSecond = 0.0;
  bool cancelled = false;  // the client left before the end
};

// ---- Live telemetry ---------------------------------------------------------------------

// The engine's own reports (runtime/observer.h), each with the turn that
// produced it: the GUI reads the runtime's value types as they are.

// One decode step (forwarded at most ~10 times a second, and once at the end of a reply).
struct StepReport {
  quint64 turnId = 0;
  runtime::StepStats stats;
};

// The KV cache at one moment (at most ~10 Hz during a reply, and at the end of each).
struct KvReport {
  quint64 turnId = 0;
  runtime::KvSnapshot kv;
};

// What the sparse-attention indexer did in the last decode step (at most ~10 Hz during a
// reply, and once at its end), while it is on.
struct IndexerReport {
  quint64 turnId = 0;
  runtime::IndexerSnapshot indexer;  // indexer.step.layers empty: no indexed step yet
  // The text of tokens [tokensFrom, tokensFrom + tokenTexts.size()): only what the
  // receiver does not have yet (tokens before tokensFrom are unchanged since the last
  // report).
  quint32 tokensFrom = 0;
  QStringList tokenTexts;
};

// Which experts a mixture-of-experts model's routers picked (same cadence as KvReport).
struct ExpertReport {
  quint64 turnId = 0;
  backend::ExpertUsage usage;
};

}  // namespace kvscope::ui

Q_DECLARE_METATYPE(kvscope::ui::BackendSettings)
Q_DECLARE_METATYPE(kvscope::ui::LoadRequest)
Q_DECLARE_METATYPE(kvscope::ui::LoadStage)
Q_DECLARE_METATYPE(kvscope::ui::ModelInfo)
Q_DECLARE_METATYPE(kvscope::runtime::MemoryEstimate)
Q_DECLARE_METATYPE(kvscope::ui::ModelEntry)
Q_DECLARE_METATYPE(kvscope::ui::SamplingSettings)
Q_DECLARE_METATYPE(kvscope::ui::StopReason)
Q_DECLARE_METATYPE(kvscope::ui::ReplyStats)
Q_DECLARE_METATYPE(kvscope::ui::ChatMessage)
Q_DECLARE_METATYPE(kvscope::ui::Conversation)
Q_DECLARE_METATYPE(kvscope::ui::TurnRequest)
Q_DECLARE_METATYPE(kvscope::ui::ServeRequest)
Q_DECLARE_METATYPE(kvscope::ui::ServedReport)
Q_DECLARE_METATYPE(kvscope::ui::StepReport)
Q_DECLARE_METATYPE(kvscope::ui::KvReport)
Q_DECLARE_METATYPE(kvscope::ui::IndexerReport)
Q_DECLARE_METATYPE(kvscope::ui::ExpertReport)
