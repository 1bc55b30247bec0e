#include "backend/vulkan_model.h"

#include <atomic>
#include <map>
#include <mutex>
#include <utility>

#include "backend/cpu_matmul.h"
#include "gguf/dequant.h"
#include "model/description.h"

namespace kvscope::backend {
namespace {

// Products run on WeightKernels' types; embedding rows are looked up on the
// host (gguf::dequantize) and vectors are widened to float32 at upload.
bool vulkanDecodes(gguf::TensorType type, model::WeightRole role) {
  if (role != model::WeightRole::kMatrix) return gguf::canDequantize(type);
  return gpu::WeightKernels::supportsType(type);
}

// The live models, by file and options. An entry whose model is gone is
// replaced by the next shared() of that key.
struct Registry {
  std::mutex mutex;
  std::map<std::pair<const model::ModelFile*, std::pair<int, bool>>, std::weak_ptr<VulkanModel>>
      live;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::atomic<uint64_t> g_created{0};

}  // namespace

Status VulkanModel::checkWeightTypes(const model::ModelFile& model) {
  KVS_ASSIGN_OR_RETURN(const model::ModelWeights bound, model::bindWeights(model.config(), model));
  return checkRuns(model.config(), bound);
}

Status VulkanModel::checkRuns(const model::ModelConfig& config, const model::ModelWeights& bound) {
  // shaders/moe_route.comp keeps a token's picks in registers.
  constexpr uint32_t kMaxExpertsUsed = gpu::Kernels::kMaxExpertsUsed;
  if (config.nExpertUsed > kMaxExpertsUsed) {
    return makeError(ErrorCode::kUnsupported,
                     "{} routes each token to {} experts; the Vulkan backend runs at most {}; "
                     "choose the CPU backend",
                     config.architecture, config.nExpertUsed, kMaxExpertsUsed);
  }
  // Gemma 4's own ops (an unweighted norm, per-layer inputs, KV-shared
  // layers, logit soft-capping) have no kernels here yet.
  if (config.architecture == "gemma4") {
    return makeError(ErrorCode::kUnsupported,
                     "the Vulkan backend does not run gemma4 models yet (its unweighted V norm, "
                     "per-layer inputs, KV-shared layers and logit soft-cap have no kernels); "
                     "choose the CPU backend");
  }
  // gpu::KvPageLayout and the attention kernels take one head count and
  // width for every layer.
  if (!config.uniformAttention()) {
    return makeError(ErrorCode::kUnsupported,
                     "this {} model's layers differ in attention heads or head width, which the "
                     "Vulkan backend does not run yet; choose the CPU backend",
                     config.architecture);
  }
  return model::checkWeightTypes(bound, "Vulkan", vulkanDecodes);
}

uint64_t VulkanModel::created() {
  return g_created.load();
}

VulkanModel::~VulkanModel() = default;

Expected<std::shared_ptr<VulkanModel>> VulkanModel::shared(
    std::shared_ptr<const model::ModelFile> model, const VulkanModelOptions& options) {
  Registry& r = registry();
  // Held while a new model uploads, so two callers never upload one model twice.
  std::lock_guard lock(r.mutex);
  const auto key = std::make_pair(model.get(), std::make_pair(options.device, options.validation));
  if (auto it = r.live.find(key); it != r.live.end()) {
    if (std::shared_ptr<VulkanModel> live = it->second.lock()) return live;
  }
  std::erase_if(r.live, [](const auto& entry) { return entry.second.expired(); });

  std::shared_ptr<VulkanModel> m(new VulkanModel());
  const model::ModelConfig& c = model->config();
  KVS_ASSIGN_OR_RETURN(m->m_bound, model::bindWeights(c, *model));
  KVS_TRY(checkRuns(c, m->m_bound));
  gpu::ContextOptions co;
  co.device = options.device;
  co.validation = options.validation;
  KVS_ASSIGN_OR_RETURN(m->m_ctx, gpu::Context::create(co));
  m->m_model = std::move(model);
  m->m_kernels = std::make_unique<gpu::Kernels>(*m->m_ctx);
  m->m_weightKernels = std::make_unique<gpu::WeightKernels>(*m->m_ctx);
  m->m_attention = std::make_unique<gpu::AttentionKernels>(*m->m_ctx);
  KVS_TRY(m->upload());
  ++g_created;
  r.live[key] = m;
  return m;
}

Expected<VulkanModel::Matrix> VulkanModel::uploadMatrix(const model::TensorView& t) {
  Matrix m;
  m.type = t.type;
  m.cols = static_cast<uint32_t>(t.shape[0]);
  m.rows = static_cast<uint32_t>(t.shape[1]);
  KVS_ASSIGN_OR_RETURN(auto bytes, gpu::WeightKernels::repack(t.type, m.cols, t.data));
  KVS_ASSIGN_OR_RETURN(m.buffer, gpu::Buffer::create(*m_ctx, bytes.size()));
  KVS_TRY(m.buffer.upload(bytes.data(), bytes.size()));
  m_weightBytes += bytes.size();
  return m;
}

Expected<gpu::Buffer> VulkanModel::uploadVector(const model::TensorView& t) {
  const std::vector<float> v = cpu::dequantizeVector(t);
  KVS_ASSIGN_OR_RETURN(auto buf, gpu::Buffer::create(*m_ctx, v.size() * sizeof(float)));
  KVS_TRY(buf.upload(std::span<const float>(v)));
  m_weightBytes += v.size() * sizeof(float);
  return buf;
}

// Matrices and vectors go to the device; embedding rows and RoPE factors are
// read on the host.
Status VulkanModel::upload() {
  Status status = okStatus();
  model::forEachWeight(m_bound, [&](const model::TensorView& t, model::WeightRole role) {
    if (!status.ok() || role == model::WeightRole::kEmbedding ||
        role == model::WeightRole::kRopeFactors)
      return;
    if (role == model::WeightRole::kMatrix) {
      auto m = uploadMatrix(t);
      if (!m.ok()) status = m.error();
      else m_matrices.emplace(&t, std::move(m).value());
    } else {
      auto v = uploadVector(t);
      if (!v.ok()) status = v.error();
      else m_vectors.emplace(&t, std::move(v).value());
    }
  });
  return status;
}

}  // namespace kvscope::backend
