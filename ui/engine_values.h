#pragma once
// The app's value types (engine_types.h) made from the engine's, and the
// engine's options made from the app's settings, so that EngineWorker mostly
// calls the engine and turns what it answers into signals.

#include <cstdint>
#include <string_view>

#include "gpu/device_info.h"
#include "model/model_file.h"
#include "runtime/session.h"
#include "ui/device_summary.h"
#include "ui/engine_types.h"

namespace kvscope::ui {

// The engine's UTF-8 text.
QString qstr(std::string_view s);

DeviceSummary summarizeDevice(const gpu::DeviceInfo& info);

// What the UI shows about the model `request` loaded into `session`.
ModelInfo modelInfo(const LoadRequest& request, const runtime::Session& session,
                    const model::ModelFile& file);
// The parts of ModelInfo that follow the KV policy (kvPolicy, kvBytesPerToken),
// after a switch.
void setKvFacts(ModelInfo& info, const runtime::Session& session);

// How a reply went, as the conversation keeps it.
ReplyStats replyStats(const runtime::GenerationResult& result);

// The sampler and reply length of `s`; maxTokens 0 becomes a quarter of the
// context, so a reply never fills it and the next message still fits.
runtime::GenerateOptions generateOptions(const SamplingSettings& s, uint32_t contextLimit);
// The chat format and enable_thinking of `s`.
runtime::Session::ChatSettings chatSettings(const SamplingSettings& s);

}  // namespace kvscope::ui
