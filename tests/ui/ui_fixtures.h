#pragma once
// Shared fixtures for UI tests, found as tests/support finds them: $KVSCOPE_SHARED, else
// the shared/ folder beside the repository (KVSCOPE_DEFAULT_SHARED).

#include <QDir>
#include <QFileInfo>
#include <QString>
#include <string>

#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "runtime/session.h"

namespace kvscope::ui::test {

inline QString sharedFile(const QString& relative) {
  QString dir = qEnvironmentVariable("KVSCOPE_SHARED");
  if (dir.isEmpty()) dir = QStringLiteral(KVSCOPE_DEFAULT_SHARED);
  return QDir(dir).filePath(relative);
}

inline QString storiesModel() {
  return sharedFile(QStringLiteral("models/stories260K.gguf"));
}

// The reply the engine gives to plain-completion `prompt` on stories260K (it has no chat
// template, so the chat prompt is the message text), greedy on the CPU backend, without
// any UI in between: the reference for replies the UI shows or serves.
inline std::string referenceReply(const QString& prompt, int maxTokens) {
  auto file = model::ModelFile::open(storiesModel().toStdString());
  if (!file.ok()) return "<no model>";
  std::shared_ptr<const model::ModelFile> model(std::move(*file));
  auto tokenizer = model::loadTokenizer(*model);
  auto backend = runtime::makeBackend(model, {.kind = "cpu"});
  runtime::Session session(model, std::move(*backend), std::move(*tokenizer));
  const std::vector<tokenizer::ChatMessage> messages{{"user", prompt.toStdString()}};
  const auto tokens = session.tokenizeChat(session.renderChat(messages).value());
  runtime::GenerateOptions options;
  options.maxTokens = static_cast<uint32_t>(maxTokens);
  options.sampler.temperature = 0.0f;
  auto result = session.generate(tokens, options);
  return result.ok() ? result->text : std::string("<engine error>");
}

}  // namespace kvscope::ui::test

// Skips the current test function when a shared fixture is absent.
#define KVS_REQUIRE_UI_FIXTURE(path)                                                  \
  do {                                                                                \
    if (!QFileInfo::exists(path))                                                     \
      QSKIP(qPrintable(QStringLiteral("fixture not found: %1 (set KVSCOPE_SHARED to " \
                                      "the shared/ folder)")                          \
                           .arg(path)));                                              \
  } while (0)
