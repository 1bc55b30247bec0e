#include "model/default_model.h"

#include <system_error>
#include <vector>

namespace kvscope::model {

Expected<std::filesystem::path> findDefaultModel() {
  std::vector<std::filesystem::path> candidates;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path() / "../share/kvscope/models" / kDefaultModelFile);
  candidates.push_back(std::filesystem::path(KVSCOPE_SOURCE_MODELS_DIR) / kDefaultModelFile);
  std::string searched;
  for (const auto& path : candidates) {
    if (std::filesystem::is_regular_file(path, ec)) return path.lexically_normal();
    searched += (searched.empty() ? "" : ", ") + path.lexically_normal().string();
  }
  return makeError(ErrorCode::kNotFound, "no model given and the demo model is not installed ({})",
                   searched);
}

}  // namespace kvscope::model
