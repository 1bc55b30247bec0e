#pragma once
// Reads a whole file the user named (a template, a text to evaluate) as bytes.

#include <filesystem>
#include <string>

#include "core/error.h"

namespace kvscope {

// kNotFound when the file does not exist, kIo when it cannot be read.
Expected<std::string> readTextFile(const std::filesystem::path& path);

}  // namespace kvscope
