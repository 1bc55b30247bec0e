#pragma once
// What a loaded model holds on a Vulkan device once, whatever caches run on
// it: the device (gpu::Context), the kernels and their pipelines, and the
// weights, uploaded in their GGUF types (repacked per row for wide loads,
// gpu/weight_kernels.h). Every VulkanBackend of the same ModelFile on the same
// device shares one (shared()): a KV policy switch, `auto` settling, a server
// slot or a restored chat builds a new cache and a new command buffer, never a
// second device or a second copy of the weights.
//
// Backends that share a VulkanModel must be used from one thread at a time
// (they share the device's queue, command pool and pipeline maps); the app's
// engine worker and the CLI's runner each drive theirs from one thread.

#include <memory>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "gpu/attention_kernels.h"
#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/kernels.h"
#include "gpu/weight_kernels.h"
#include "model/model_file.h"
#include "model/model_weights.h"

namespace kvscope::backend {

struct VulkanModelOptions {
  int device = -1;          // -1: $KVSCOPE_DEVICE, then the best device
  bool validation = false;  // Khronos validation (tests)
  bool operator==(const VulkanModelOptions&) const = default;
};

class VulkanModel {
 public:
  struct Matrix {
    gguf::TensorType type = gguf::TensorType::kF32;
    uint32_t rows = 0, cols = 0;  // output rows, input columns
    gpu::Buffer buffer;
  };

  // The live VulkanModel of `model` with these options, or a new one (which
  // opens the device and uploads every weight). Errors: a weight type the
  // device has no kernel for, no such device, out of device memory.
  static Expected<std::shared_ptr<VulkanModel>> shared(
      std::shared_ptr<const model::ModelFile> model, const VulkanModelOptions& options);
  // Binds `model`'s weights and checks that the Vulkan backend runs them
  // (checkRuns), as shared() does before opening a device.
  static Status checkWeightTypes(const model::ModelFile& model);
  // kUnsupported for what the Vulkan kernels do not run: more than 64 experts
  // per token, layers of different query head counts, weight types they do
  // not decode (model::checkWeightTypes).
  static Status checkRuns(const model::ModelConfig& config, const model::ModelWeights& bound);
  // How many VulkanModels were created, that is devices opened and weights
  // uploaded, in this process (tests count them).
  static uint64_t created();

  ~VulkanModel();
  VulkanModel(const VulkanModel&) = delete;
  VulkanModel& operator=(const VulkanModel&) = delete;

  const model::ModelConfig& config() const { return m_model->config(); }
  const model::ModelWeights& bound() const { return m_bound; }
  gpu::Context& context() const { return *m_ctx; }
  gpu::Kernels& kernels() const { return *m_kernels; }
  gpu::WeightKernels& weightKernels() const { return *m_weightKernels; }
  gpu::AttentionKernels& attention() const { return *m_attention; }

  // The device copy of a bound matrix or vector (float32) of bound().
  const Matrix& matrix(const model::TensorView& t) const { return m_matrices.at(&t); }
  // A fused expert stack of gate and up rows (Gemma 4's ffn_gate_up_exps:
  // each expert's ff gate rows, then its ff up rows) as two stacks, so the
  // expert kernels read each half as they read a separate gate and up.
  struct GateUp {
    Matrix gate, up;
  };
  const GateUp& gateUp(const model::TensorView& t) const { return m_gateUp.at(&t); }
  const gpu::Buffer& vector(const model::TensorView& t) const { return m_vectors.at(&t); }
  uint64_t weightBytes() const { return m_weightBytes; }

 private:
  VulkanModel() = default;
  Status upload();
  Expected<Matrix> uploadMatrix(const model::TensorView& t);
  Expected<Matrix> uploadRows(gguf::TensorType type, uint32_t cols, uint32_t rows,
                              std::span<const uint8_t> raw);
  Status uploadGateUp(const model::TensorView& t);
  Expected<gpu::Buffer> uploadVector(const model::TensorView& t);

  // Declared first, destroyed last: every buffer and pipeline below is the device's.
  std::unique_ptr<gpu::Context> m_ctx;
  std::shared_ptr<const model::ModelFile> m_model;
  model::ModelWeights m_bound;
  std::unique_ptr<gpu::Kernels> m_kernels;
  std::unique_ptr<gpu::WeightKernels> m_weightKernels;
  std::unique_ptr<gpu::AttentionKernels> m_attention;
  std::unordered_map<const model::TensorView*, Matrix> m_matrices;
  std::unordered_map<const model::TensorView*, GateUp> m_gateUp;
  std::unordered_map<const model::TensorView*, gpu::Buffer> m_vectors;
  uint64_t m_weightBytes = 0;
};

}  // namespace kvscope::backend
