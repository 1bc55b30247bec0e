#pragma once
// The demo model kvscope ships (model::findDefaultModel), opened for a test;
// null, with a test failure recorded, when it cannot be found or opened.
// Header-only: only the test binaries that link kvscope_model include it.

#include <memory>
#include <string_view>

#include <gtest/gtest.h>

#include "model/default_model.h"
#include "model/model_file.h"

namespace kvscope::test {

// A model in the demo model's folder (resources/models/ in the source tree),
// e.g. the recall model.
inline std::shared_ptr<const model::ModelFile> openBundledModel(std::string_view file) {
  auto demo = model::findDefaultModel();
  EXPECT_TRUE(demo.ok()) << demo.error().describe();
  if (!demo.ok()) return nullptr;
  auto m = model::ModelFile::open(demo->parent_path() / file);
  EXPECT_TRUE(m.ok()) << m.error().describe();
  if (!m.ok()) return nullptr;
  return std::shared_ptr<const model::ModelFile>(std::move(m).value());
}

inline std::shared_ptr<const model::ModelFile> openDemoModel() {
  return openBundledModel(model::kDefaultModelFile);
}

}  // namespace kvscope::test
