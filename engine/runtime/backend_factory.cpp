#include "runtime/backend_factory.h"

#include "backend/cpu_backend.h"
#include "backend/vulkan_backend.h"

namespace kvscope::runtime {

Expected<std::unique_ptr<backend::Backend>> makeBackend(std::shared_ptr<const model::ModelFile> model,
                                                        const BackendChoice& choice) {
  if (!choice.kvPolicy.empty() && choice.kvPolicy != "k=f16,v=f16") {
    return makeError(ErrorCode::kInvalidArgument, "KV cache policy '{}' is not supported", choice.kvPolicy);
  }
  if (choice.kind == "cpu") {
    KVS_ASSIGN_OR_RETURN(auto b, backend::CpuBackend::create(model, {.contextLimit = choice.contextLimit,
                                                                     .threads = choice.threads}));
    return std::unique_ptr<backend::Backend>(std::move(b));
  }
  if (choice.kind == "vulkan") {
    KVS_ASSIGN_OR_RETURN(auto b, backend::VulkanBackend::create(model, {.contextLimit = choice.contextLimit,
                                                                        .device = choice.device,
                                                                        .timing = choice.timing}));
    return std::unique_ptr<backend::Backend>(std::move(b));
  }
  return makeError(ErrorCode::kInvalidArgument, "unknown backend '{}' (choose cpu or vulkan)", choice.kind);
}

}  // namespace kvscope::runtime
