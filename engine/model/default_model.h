#pragma once
// The demo model kvscope ships and uses when the user names none: a small
// Llama trained for this project on stories (resources/models/README.md), so
// the app chats out of the box. Searched, in order: the installed data folder
// beside the executable (<prefix>/bin/../share/kvscope/models/), then the
// source tree the executable was built from.

#include <filesystem>
#include <string_view>

#include "core/error.h"

namespace kvscope::model {

inline constexpr std::string_view kDefaultModelFile = "kvscope-demo.gguf";

// The demo model's path; kNotFound, naming the places searched, when absent.
Expected<std::filesystem::path> findDefaultModel();

}  // namespace kvscope::model
