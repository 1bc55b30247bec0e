#pragma once
// A random-weight model (model/synthetic_model.h) written to a temporary file,
// opened, and the file removed again (the mapping stays valid): for tests
// that need a model of a given shape, type or context length.

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "model/model_file.h"
#include "model/synthetic_model.h"

namespace kvscope::test {

// Null (with a test failure) when the model cannot be written or opened.
inline std::shared_ptr<const model::ModelFile> openSyntheticModel(
    const model::SyntheticModelSpec& spec, const std::string& name) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("kvscope-" + name + "-" + std::to_string(::getpid()) + ".gguf");
  const Status written = model::writeSyntheticModel(spec, path);
  EXPECT_TRUE(written.ok()) << written.error().describe();
  if (!written.ok()) return nullptr;
  auto file = model::ModelFile::open(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(file.ok()) << file.error().describe();
  if (!file.ok()) return nullptr;
  return std::shared_ptr<const model::ModelFile>(std::move(file).value());
}

// A small qwen3moe-shaped spec: 2 layers of width 64, 4 heads of 16 over 2
// KV heads, 8 experts of width 32, 2 per token, a 300-token vocabulary.
inline model::SyntheticModelSpec smallMoeSpec() {
  model::SyntheticModelSpec spec;
  spec.architecture = "qwen3moe";
  spec.nEmbd = 64;
  spec.nFf = 128;
  spec.nHead = 4;
  spec.nHeadKv = 2;
  spec.headDim = 16;
  spec.nVocab = 300;
  spec.contextLength = 128;
  spec.nExpert = 8;
  spec.nExpertUsed = 2;
  spec.nFfExp = 32;
  return spec;
}

}  // namespace kvscope::test
