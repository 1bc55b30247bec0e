#include "ui/engine_values.h"

#include <QFileInfo>
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "kv/kv_index.h"
#include "model/default_model.h"

namespace kvscope::ui {

QString qstr(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

namespace {

QString kindName(gpu::DeviceType type) {
  switch (type) {
    case gpu::DeviceType::kDiscrete:
      return QStringLiteral("Discrete GPU");
    case gpu::DeviceType::kIntegrated:
      return QStringLiteral("Integrated GPU");
    case gpu::DeviceType::kVirtual:
      return QStringLiteral("Virtual GPU");
    case gpu::DeviceType::kCpu:
      return QStringLiteral("CPU");
    case gpu::DeviceType::kOther:
      break;
  }
  return QStringLiteral("Other device");
}

}  // namespace

DeviceSummary summarizeDevice(const gpu::DeviceInfo& info) {
  DeviceSummary s;
  s.index = info.index;
  s.name = QString::fromStdString(info.name);
  s.kind = kindName(info.type);
  s.apiVersion = QString::fromStdString(info.apiVersion);
  s.driverInfo = QString::fromStdString(info.driverInfo);
  s.deviceLocalBytes = info.deviceLocalBytes;
  s.cpuEmulated = info.type == gpu::DeviceType::kCpu;
  return s;
}

namespace {

StopReason stopReason(runtime::StopReason reason) {
  switch (reason) {
    case runtime::StopReason::kEndOfGeneration:
      return StopReason::kEndOfGeneration;
    case runtime::StopReason::kMaxTokens:
      return StopReason::kMaxTokens;
    case runtime::StopReason::kStopRequested:
      return StopReason::kStopRequested;
    case runtime::StopReason::kContextFull:
      return StopReason::kContextFull;
  }
  return StopReason::kNone;
}

}  // namespace

ReplyStats replyStats(const runtime::GenerationResult& result) {
  const runtime::StepStats& s = result.stats;
  ReplyStats r;
  r.promptTokens = s.promptTokens;
  r.reusedTokens = s.reusedTokens;
  r.generatedTokens = s.generatedTokens;
  r.cachedTokens = s.cachedTokens;
  r.contextLimit = s.contextLimit;
  r.prefillMs = s.prefillMs;
  r.decodeMs = s.decodeMs;
  r.prefillTokensPerSecond = s.prefillTokensPerSecond();
  r.decodeTokensPerSecond = s.decodeTokensPerSecond();
  r.stop = stopReason(result.stop);
  r.seed = result.seed;
  r.contextShifts = s.contextShifts;
  r.shiftedTokens = s.shiftedTokens;
  return r;
}

runtime::GenerateOptions generateOptions(const SamplingSettings& s, uint32_t contextLimit) {
  runtime::GenerateOptions o;
  o.maxTokens = s.maxTokens > 0 ? static_cast<uint32_t>(s.maxTokens)
                                : std::max<uint32_t>(1, contextLimit / 4);
  o.sampler.temperature = static_cast<float>(s.temperature);
  o.sampler.topK = s.topK;
  o.sampler.topP = static_cast<float>(s.topP);
  o.sampler.minP = static_cast<float>(s.minP);
  o.sampler.repeatPenalty = static_cast<float>(s.repeatPenalty);
  o.sampler.repeatLastN = s.repeatLastN;
  if (s.seed >= 0) o.sampler.seed = static_cast<uint64_t>(s.seed);
  return o;
}

runtime::Session::ChatSettings chatSettings(const SamplingSettings& s) {
  runtime::Session::ChatSettings chat;
  chat.renderer = s.chatRenderer;
  chat.enableThinking = s.thinking;
  return chat;
}

namespace {

// "k=f16,v=f16" when every layer uses the same pair, else the per-layer list.
QString policyText(const runtime::KvSnapshot& s) {
  QStringList layers;
  for (const auto& l : s.layers)
    layers << QStringLiteral("k=%1,v=%2").arg(qstr(l.keyScheme), qstr(l.valueScheme));
  layers.removeDuplicates();
  return layers.join(QStringLiteral("; "));
}

}  // namespace

void setKvFacts(ModelInfo& info, const runtime::Session& session) {
  const kv::IndexerOptions indexer = session.backend().indexer();
  const kv::KvLayout* layout = session.backend().kvLayout();
  // What one more token adds: a sliding-window layer's ring does not grow,
  // and only global layers have a sidecar.
  const double sidecar =
      layout ? kv::KvIndex::sidecarBytesPerToken(layout->geometry(), indexer) : 0.0;
  info.kvBytesPerToken =
      (layout ? layout->tokenBytes() : 0) + static_cast<quint64>(std::ceil(sidecar));
  // An auto policy is shown as chosen ("auto"); what it picked per layer
  // arrives with the KV reports.
  const kv::KvPolicy& policy = session.kvPolicy();
  if (policy.autoBits) {
    kv::KvPolicy chosen;  // auto and its seed; the attention items follow
    chosen.autoBits = policy.autoBits;
    chosen.seed = policy.seed;
    info.kvPolicy = qstr(chosen.toString());
  } else {
    info.kvPolicy = policyText(runtime::snapshotKv(session.backend()));
  }
  info.kvPolicy += qstr(indexer.policyItems());
}

ModelInfo modelInfo(const LoadRequest& request, const runtime::Session& session,
                    const model::ModelFile& file) {
  const model::ModelConfig& c = session.config();
  ModelInfo info;
  info.path = request.path;
  info.loadedWith = request.backend;
  info.name = c.name.empty() ? QFileInfo(request.path).completeBaseName() : qstr(c.name);
  info.architecture = qstr(c.architecture);
  info.format = file.format() == model::ModelFormat::kGguf ? QStringLiteral("GGUF")
                                                           : QStringLiteral("Hugging Face");
  info.backend = qstr(session.backend().name());
  const tokenizer::ChatTemplate& chat = session.chatTemplate();
  if (chat.empty()) {
    info.chatTemplate = QStringLiteral("none");
    info.templateWarning = qstr(tokenizer::missingTemplateWarning(session.tokenizer()));
  } else {
    // The model's own Jinja template renders chats; the family is what the
    // built-in renderer would use instead.
    info.chatTemplate = QStringLiteral("Jinja (%1)").arg(qstr(chat.familyName()));
    if (chat.parseError()) info.templateWarning = qstr(chat.parseError()->message);
  }
  info.templateReadsThinking = chat.readsThinking();
  if (chat.family() != tokenizer::ChatFamily::kNone &&
      chat.family() != tokenizer::ChatFamily::kUnknown) {
    info.builtinFormat = qstr(chat.familyName());
  }
  info.kvLayers = c.kvLayers();
  info.nVocab = c.nVocab;
  info.nExpert = c.nExpert;
  info.trainedContext = c.contextLength;
  if (auto demo = model::findDefaultModel(); demo.ok()) {
    std::error_code ec;
    info.demo = std::filesystem::equivalent(*demo, request.path.toStdString(), ec);
  }
  info.contextLimit = session.backend().contextLimit();
  info.weightBytes = file.weightBytes();
  setKvFacts(info, session);
  return info;
}

}  // namespace kvscope::ui
