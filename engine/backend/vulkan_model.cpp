#include "backend/vulkan_model.h"

#include <atomic>
#include <map>
#include <mutex>
#include <unordered_set>
#include <utility>
#include <vector>

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
  // The attention kernels' scratch and prebuilt pipelines assume one query
  // head count (layers may differ in KV heads and head width).
  for (uint32_t l = 0; l < config.nLayer; ++l) {
    if (config.headsOf(l) != config.nHead) {
      return makeError(ErrorCode::kUnsupported,
                       "this {} model's layers differ in query heads ({} in layer {}, {} in "
                       "layer 0), which the Vulkan backend does not run; choose the CPU backend",
                       config.architecture, config.headsOf(l), l, config.nHead);
    }
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
  return uploadRows(t.type, static_cast<uint32_t>(t.shape[0]), static_cast<uint32_t>(t.shape[1]),
                    t.data);
}

// `raw`: whole GGUF rows of `cols` values (a stack's rows of every expert).
Expected<VulkanModel::Matrix> VulkanModel::uploadRows(gguf::TensorType type, uint32_t cols,
                                                      uint32_t rows, std::span<const uint8_t> raw) {
  Matrix m{.type = type, .rows = rows, .cols = cols};
  KVS_ASSIGN_OR_RETURN(auto bytes, gpu::WeightKernels::repack(type, cols, raw));
  KVS_ASSIGN_OR_RETURN(m.buffer, gpu::Buffer::create(*m_ctx, bytes.size()));
  KVS_TRY(m.buffer.upload(bytes.data(), bytes.size()));
  m_weightBytes += bytes.size();
  return m;
}

// {width, 2 ff, experts}: expert e's raw rows [0, ff) to the gate stack,
// [ff, 2 ff) to the up stack.
Status VulkanModel::uploadGateUp(const model::TensorView& t) {
  const auto cols = static_cast<uint32_t>(t.shape[0]);
  const uint64_t both = t.shape[1], experts = t.shape.size() > 2 ? t.shape[2] : 1;
  if (both % 2 != 0 || t.data.size() % (both * experts) != 0) {
    return makeError(ErrorCode::kInvalidArgument, "'{}' is not a stack of gate and up rows",
                     t.name);
  }
  const size_t half = static_cast<size_t>(t.data.size() / experts / 2);  // one expert's gate bytes
  std::vector<uint8_t> gate, up;
  gate.reserve(half * experts);
  up.reserve(half * experts);
  for (uint64_t e = 0; e < experts; ++e) {
    const auto rows = t.data.subspan(static_cast<size_t>(e) * 2 * half, 2 * half);
    gate.insert(gate.end(), rows.begin(), rows.begin() + static_cast<ptrdiff_t>(half));
    up.insert(up.end(), rows.begin() + static_cast<ptrdiff_t>(half), rows.end());
  }
  const auto ff = static_cast<uint32_t>(both / 2);
  GateUp split;
  KVS_ASSIGN_OR_RETURN(split.gate, uploadRows(t.type, cols, ff, gate));
  KVS_ASSIGN_OR_RETURN(split.up, uploadRows(t.type, cols, ff, up));
  m_gateUp.emplace(&t, std::move(split));
  return okStatus();
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
  std::unordered_set<const model::TensorView*> gateUp;
  for (const model::LayerWeights& l : m_bound.layers)
    if (l.gateUpExps) gateUp.insert(l.gateUpExps);
  Status status = okStatus();
  model::forEachWeight(m_bound, [&](const model::TensorView& t, model::WeightRole role) {
    if (!status.ok() || role == model::WeightRole::kEmbedding ||
        role == model::WeightRole::kRopeFactors)
      return;
    if (gateUp.contains(&t)) {
      status = uploadGateUp(t);
    } else if (role == model::WeightRole::kMatrix) {
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
