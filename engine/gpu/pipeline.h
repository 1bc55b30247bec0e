#pragma once
// A compute pipeline built from an embedded SPIR-V variant.
//
// Binding convention shared by every shader: set 0, bindings 0..N-1 are
// storage buffers in the order the dispatch lists them; binding N, when
// pageArray > 0, is an array of pageArray storage buffers (the pages of a KV
// cache, indexed with a dynamically uniform index); one push-constant block at
// offset 0; specialization constant id i takes specConstants[i] (id 0 is the
// workgroup size by convention, `local_size_x_id = 0`).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/context.h"

namespace kvscope::gpu {

// ceil(a / b): workgroups for a items at b per group, tiles of b rows, ...
inline uint32_t ceilDiv(uint64_t a, uint64_t b) {
  return static_cast<uint32_t>((a + b - 1) / b);
}

// The SPIR-V a pipeline named `shader` is built from: the embedded variant of
// that name, unless a KernelSubstitution stands in for it. Empty when none.
std::span<const uint32_t> kernelCode(std::string_view shader);

// A test seam: while one lives, a pipeline whose name starts with `prefix` is
// built from the variant named with `with` in its place (e.g. "weight_matvec_
// q8_0_" -> "weight_matvec_q4_0_": the Q4_0 decode-step kernels, in every
// launch shape, stand in for the Q8_0 ones — a deliberately wrong kernel with the same
// bindings), so tests can show that device vetting (runtime/device_vetting.h)
// catches a kernel that computes the wrong thing. One at a time, one thread.
class KernelSubstitution {
 public:
  KernelSubstitution(std::string_view prefix, std::string_view with);
  ~KernelSubstitution();
  KernelSubstitution(const KernelSubstitution&) = delete;
  KernelSubstitution& operator=(const KernelSubstitution&) = delete;
};

struct PipelineDesc {
  std::string_view shader;              // variant name in shaders/shaders.cmake
  uint32_t bindings = 1;                // storage buffers
  uint32_t pushBytes = 0;               // size of the push-constant struct
  std::vector<uint32_t> specConstants;  // values for ids 0..n-1
  std::string_view kernelClass;         // label for GPU time accounting ("matvec")
  uint32_t pageArray = 0;               // size of the page-array binding (0: none)
};

class Pipeline {
 public:
  Pipeline() = default;
  static Expected<Pipeline> create(Context& ctx, const PipelineDesc& desc);
  ~Pipeline();
  Pipeline(Pipeline&& other) noexcept;
  Pipeline& operator=(Pipeline&& other) noexcept;
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  VkPipeline handle() const { return m_pipeline; }
  VkPipelineLayout layout() const { return m_layout; }
  VkDescriptorSetLayout setLayout() const { return m_setLayout; }
  uint32_t bindings() const { return m_bindings; }
  uint32_t pageArray() const { return m_pageArray; }
  uint32_t pushBytes() const { return m_pushBytes; }
  const std::string& name() const { return m_name; }
  const std::string& kernelClass() const { return m_kernelClass; }

 private:
  void release();

  VkDevice m_device = VK_NULL_HANDLE;
  VkPipeline m_pipeline = VK_NULL_HANDLE;
  VkPipelineLayout m_layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout m_setLayout = VK_NULL_HANDLE;
  uint32_t m_bindings = 0;
  uint32_t m_pageArray = 0;
  uint32_t m_pushBytes = 0;
  std::string m_name;
  std::string m_kernelClass;
};

}  // namespace kvscope::gpu
