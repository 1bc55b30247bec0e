#include "gpu/pipeline.h"

#include <string>
#include <utility>

#include "shaders/spirv_registry.h"

namespace kvscope::gpu {
namespace {

// The one substitution in force: {prefix, with}; empty when none.
std::pair<std::string, std::string>& substitution() {
  static std::pair<std::string, std::string> s;
  return s;
}

}  // namespace

std::span<const uint32_t> kernelCode(std::string_view shader) {
  const auto& [prefix, with] = substitution();
  if (prefix.empty() || !shader.starts_with(prefix)) return shaders::find(shader);
  return shaders::find(with + std::string(shader.substr(prefix.size())));
}

KernelSubstitution::KernelSubstitution(std::string_view prefix, std::string_view with) {
  substitution() = {std::string(prefix), std::string(with)};
}

KernelSubstitution::~KernelSubstitution() {
  substitution() = {};
}

Expected<Pipeline> Pipeline::create(Context& ctx, const PipelineDesc& desc) {
  auto code = kernelCode(desc.shader);
  if (code.empty())
    return makeError(ErrorCode::kInternal, "no embedded shader named '{}'", desc.shader);
  if (desc.pushBytes > ctx.limits().maxPushConstantsSize) {
    return makeError(ErrorCode::kUnsupported,
                     "shader {} needs {} bytes of push constants; device allows {}", desc.shader,
                     desc.pushBytes, ctx.limits().maxPushConstantsSize);
  }
  Pipeline p;
  p.m_device = ctx.device();
  p.m_bindings = desc.bindings;
  p.m_pageArray = desc.pageArray;
  p.m_pushBytes = desc.pushBytes;
  p.m_name = desc.shader;
  p.m_kernelClass = desc.kernelClass.empty() ? p.m_name : std::string(desc.kernelClass);

  std::vector<VkDescriptorSetLayoutBinding> binds(desc.bindings);
  for (uint32_t i = 0; i < desc.bindings; ++i) {
    binds[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  }
  if (desc.pageArray) {
    binds.push_back({desc.bindings, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, desc.pageArray,
                     VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
  }
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dl.bindingCount = static_cast<uint32_t>(binds.size());
  dl.pBindings = binds.data();
  KVS_VK(vkCreateDescriptorSetLayout(ctx.device(), &dl, nullptr, &p.m_setLayout),
         "vkCreateDescriptorSetLayout");

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, desc.pushBytes};
  VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &p.m_setLayout;
  pl.pushConstantRangeCount = desc.pushBytes ? 1 : 0;
  pl.pPushConstantRanges = &range;
  KVS_VK(vkCreatePipelineLayout(ctx.device(), &pl, nullptr, &p.m_layout), "vkCreatePipelineLayout");

  VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  sm.codeSize = code.size_bytes();
  sm.pCode = code.data();
  VkShaderModule module = VK_NULL_HANDLE;
  KVS_VK(vkCreateShaderModule(ctx.device(), &sm, nullptr, &module), "vkCreateShaderModule");

  std::vector<VkSpecializationMapEntry> entries(desc.specConstants.size());
  for (uint32_t i = 0; i < entries.size(); ++i) {
    entries[i] = {i, static_cast<uint32_t>(i * sizeof(uint32_t)), sizeof(uint32_t)};
  }
  VkSpecializationInfo spec{static_cast<uint32_t>(entries.size()), entries.data(),
                            desc.specConstants.size() * sizeof(uint32_t),
                            desc.specConstants.data()};
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = entries.empty() ? nullptr : &spec;
  ci.layout = p.m_layout;
  VkResult r =
      vkCreateComputePipelines(ctx.device(), ctx.pipelineCache(), 1, &ci, nullptr, &p.m_pipeline);
  vkDestroyShaderModule(ctx.device(), module, nullptr);
  KVS_VK(r, "vkCreateComputePipelines");
  ctx.markPipelineCacheDirty();
  return p;
}

Pipeline::~Pipeline() {
  release();
}

Pipeline::Pipeline(Pipeline&& other) noexcept {
  *this = std::move(other);
}

Pipeline& Pipeline::operator=(Pipeline&& other) noexcept {
  if (this != &other) {
    release();
    m_device = std::exchange(other.m_device, VK_NULL_HANDLE);
    m_pipeline = std::exchange(other.m_pipeline, VK_NULL_HANDLE);
    m_layout = std::exchange(other.m_layout, VK_NULL_HANDLE);
    m_setLayout = std::exchange(other.m_setLayout, VK_NULL_HANDLE);
    m_bindings = other.m_bindings;
    m_pageArray = other.m_pageArray;
    m_pushBytes = other.m_pushBytes;
    m_name = std::move(other.m_name);
    m_kernelClass = std::move(other.m_kernelClass);
  }
  return *this;
}

void Pipeline::release() {
  if (!m_device) return;
  if (m_pipeline) vkDestroyPipeline(m_device, m_pipeline, nullptr);
  if (m_layout) vkDestroyPipelineLayout(m_device, m_layout, nullptr);
  if (m_setLayout) vkDestroyDescriptorSetLayout(m_device, m_setLayout, nullptr);
  m_device = VK_NULL_HANDLE;
}

}  // namespace kvscope::gpu
