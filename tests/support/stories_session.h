#pragma once
// A Session on stories260K (../shared/models) with the CPU backend, for the
// runtime tests: `context` 0 keeps the trained context. Null, with a test
// failure recorded, when the model cannot be opened.
// Header-only: only the test binaries that link kvscope_runtime include it.

#include <memory>

#include <gtest/gtest.h>

#include "backend/cpu_backend.h"
#include "model/model_tokenizer.h"
#include "runtime/session.h"
#include "support/test_support.h"

namespace kvscope::test {

inline std::unique_ptr<runtime::Session> openStoriesSession(uint32_t context = 0) {
  auto file = model::ModelFile::open(sharedFile("models/stories260K.gguf"));
  EXPECT_TRUE(file.ok());
  if (!file.ok()) return nullptr;
  std::shared_ptr<const model::ModelFile> m(std::move(file).value());
  auto tok = model::loadTokenizer(*m);
  auto b = backend::CpuBackend::create(m, {.contextLimit = context});
  EXPECT_TRUE(tok.ok() && b.ok());
  if (!tok.ok() || !b.ok()) return nullptr;
  return std::make_unique<runtime::Session>(m, std::move(b).value(), std::move(tok).value());
}

}  // namespace kvscope::test
