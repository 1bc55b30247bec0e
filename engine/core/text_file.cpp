#include "core/text_file.h"

#include <fstream>
#include <sstream>

namespace kvscope {

Expected<std::string> readTextFile(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return makeError(ErrorCode::kNotFound, "'{}' does not exist", path.string());
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(ErrorCode::kIo, "cannot read '{}'", path.string());
  std::ostringstream text;
  // Streaming an empty file's buffer sets failbit with nothing wrong: skip it.
  if (in.peek() != std::ifstream::traits_type::eof()) text << in.rdbuf();
  if (in.bad()) return makeError(ErrorCode::kIo, "cannot read '{}'", path.string());
  return text.str();
}

}  // namespace kvscope
