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
  std::ostringstream text;
  if (!in || !(text << in.rdbuf()) || in.bad()) {
    // An empty file makes operator<< set failbit with nothing read: not an error.
    if (in && std::filesystem::file_size(path, ec) == 0) return std::string();
    return makeError(ErrorCode::kIo, "cannot read '{}'", path.string());
  }
  return text.str();
}

}  // namespace kvscope
