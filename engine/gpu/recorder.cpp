#include "gpu/recorder.h"

#include <algorithm>
#include <cassert>

namespace kvscope::gpu {
namespace {
constexpr uint32_t kMaxBindingsPerDispatch = 8;
}

Expected<std::unique_ptr<Recorder>> Recorder::create(Context& ctx, const RecorderOptions& options) {
  std::unique_ptr<Recorder> rec(new Recorder(ctx));
  rec->m_options = options;
  rec->m_options.timingEvery = std::max(1u, options.timingEvery);
  VkDevice dev = ctx.device();

  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = ctx.commandPool();
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  KVS_VK(vkAllocateCommandBuffers(dev, &ai, &rec->m_cmd), "vkAllocateCommandBuffers");
  rec->m_parts.push_back(rec->m_cmd);

  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                            options.maxDispatches * kMaxBindingsPerDispatch + options.maxPageBindings};
  VkDescriptorPoolCreateInfo pci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pci.maxSets = options.maxDispatches;
  pci.poolSizeCount = 1;
  pci.pPoolSizes = &size;
  KVS_VK(vkCreateDescriptorPool(dev, &pci, nullptr, &rec->m_pool), "vkCreateDescriptorPool");

  if (options.timing && ctx.timestampPeriodNs() > 0) {
    VkQueryPoolCreateInfo qci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qci.queryCount = options.maxDispatches + 1;
    KVS_VK(vkCreateQueryPool(dev, &qci, nullptr, &rec->m_queryPool), "vkCreateQueryPool");
  }
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  KVS_VK(vkCreateFence(dev, &fci, nullptr, &rec->m_fence), "vkCreateFence");
  return rec;
}

Recorder::~Recorder() {
  drainParts();
  VkDevice dev = m_ctx.device();
  if (m_fence) vkDestroyFence(dev, m_fence, nullptr);
  if (m_queryPool) vkDestroyQueryPool(dev, m_queryPool, nullptr);
  if (m_pool) vkDestroyDescriptorPool(dev, m_pool, nullptr);
  if (!m_parts.empty()) {
    vkFreeCommandBuffers(dev, m_ctx.commandPool(), static_cast<uint32_t>(m_parts.size()),
                         m_parts.data());
  }
}

void Recorder::drainParts() {
  if (m_partsPending) vkQueueWaitIdle(m_ctx.queue());
  m_partsPending = false;
}

Status Recorder::begin() {
  // A recording abandoned after an error is dropped: the command buffer
  // reset below returns it to its initial state, once the parts it already
  // submitted have run.
  drainParts();
  m_recording = false;
  m_error = okStatus();
  m_dispatches = 0;
  m_timedPipelines.clear();
  m_timedTraffic.clear();
  KVS_VK(vkResetDescriptorPool(m_ctx.device(), m_pool, 0), "vkResetDescriptorPool");
  m_part = 0;
  m_timedStep = m_queryPool != VK_NULL_HANDLE && m_steps++ % m_options.timingEvery == 0;
  KVS_TRY(beginPart());
  if (m_timedStep) {
    vkCmdResetQueryPool(m_cmd, m_queryPool, 0, m_options.maxDispatches + 1);
    vkCmdWriteTimestamp(m_cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, m_queryPool, 0);
  }
  m_recording = true;
  return okStatus();
}

Status Recorder::beginPart() {
  if (m_part == m_parts.size()) {
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = m_ctx.commandPool();
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    KVS_VK(vkAllocateCommandBuffers(m_ctx.device(), &ai, &cmd), "vkAllocateCommandBuffers");
    m_parts.push_back(cmd);
  }
  m_cmd = m_parts[m_part];
  m_partDispatches = 0;
  KVS_VK(vkResetCommandBuffer(m_cmd, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  KVS_VK(vkBeginCommandBuffer(m_cmd, &bi), "vkBeginCommandBuffer");
  return okStatus();
}

Status Recorder::submitPart() {
  KVS_VK(vkEndCommandBuffer(m_cmd), "vkEndCommandBuffer");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &m_cmd;
  KVS_VK(vkQueueSubmit(m_ctx.queue(), 1, &si, VK_NULL_HANDLE), "vkQueueSubmit");
  m_partsPending = true;
  ++m_part;
  return beginPart();
}

void Recorder::dispatchPaged(const Pipeline& pipeline, std::initializer_list<BufferRange> buffers,
                             std::span<const Buffer* const> pages, const void* push, size_t pushBytes,
                             uint32_t groupsX, uint32_t groupsY, uint32_t groupsZ) {
  assert(m_recording);
  assert(buffers.size() == pipeline.bindings() && "binding count must match the pipeline");
  assert((pipeline.pageArray() == 0) == pages.empty() && pages.size() <= pipeline.pageArray());
  assert(pushBytes == pipeline.pushBytes() && "push-constant size must match the pipeline");
  if (!m_error.ok()) return;
  if (m_dispatches >= m_options.maxDispatches) {
    m_error =
        makeError(ErrorCode::kInternal, "step exceeds {} dispatches", m_options.maxDispatches);
    return;
  }
  VkDescriptorSetLayout layout = pipeline.setLayout();
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = m_pool;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  if (VkResult r = vkAllocateDescriptorSets(m_ctx.device(), &ai, &set); r != VK_SUCCESS) {
    m_error = vkError(r, "vkAllocateDescriptorSets");
    return;
  }
  VkDescriptorBufferInfo infos[kMaxBindingsPerDispatch];
  VkWriteDescriptorSet writes[kMaxBindingsPerDispatch + 1];
  uint32_t i = 0;
  for (const BufferRange& b : buffers) {
    infos[i] = {b.buffer->handle(), b.offset, b.bytes};
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
    ++i;
  }
  std::vector<VkDescriptorBufferInfo> pageInfos;
  if (pipeline.pageArray()) {
    pageInfos.resize(pipeline.pageArray());
    for (size_t p = 0; p < pageInfos.size(); ++p) {
      pageInfos[p] = {(p < pages.size() ? pages[p] : pages[0])->handle(), 0, VK_WHOLE_SIZE};
    }
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = pipeline.pageArray();
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = pageInfos.data();
    ++i;
  }
  vkUpdateDescriptorSets(m_ctx.device(), i, writes, 0, nullptr);
  vkCmdBindPipeline(m_cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle());
  vkCmdBindDescriptorSets(m_cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout(), 0, 1, &set, 0,
                          nullptr);
  if (pushBytes) {
    vkCmdPushConstants(m_cmd, pipeline.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       static_cast<uint32_t>(pushBytes), push);
  }
  vkCmdDispatch(m_cmd, groupsX, groupsY, groupsZ);
  ++m_dispatches;
  ++m_partDispatches;
  if (m_timedStep) {
    vkCmdWriteTimestamp(m_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, m_queryPool, m_dispatches);
    m_timedPipelines.push_back(&pipeline);
    m_timedTraffic.emplace_back(0, 0);
  }
}

void Recorder::traffic(uint64_t bytes, uint64_t flops) {
  if (!m_timedTraffic.empty() && m_timedTraffic.size() == m_dispatches)
    m_timedTraffic.back() = {bytes, flops};
}

void Recorder::barrier() {
  // After a recording error nothing more is recorded: the command buffer may
  // have ended or gone to the queue when a part failed to submit.
  if (!m_error.ok()) return;
  // A part ends at a barrier, which then opens the next part.
  if (m_options.submitEvery != 0 && !m_timedStep && m_partDispatches >= m_options.submitEvery) {
    if (Status s = submitPart(); !s.ok()) {
      m_error = s;
      return;
    }
  }
  recordBarrier();
}

void Recorder::recordBarrier() {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  // A copy may also write what a shader wrote (the indexer's dense heads).
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(m_cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                       &mb, 0, nullptr, 0, nullptr);
}

void Recorder::copy(const Buffer& src, size_t srcOffset, const Buffer& dst, size_t dstOffset,
                    size_t bytes) {
  if (!m_error.ok()) return;
  barrier();
  if (!m_error.ok()) return;
  VkBufferCopy region{srcOffset, dstOffset, bytes};
  vkCmdCopyBuffer(m_cmd, src.handle(), dst.handle(), 1, &region);
  barrier();
}

Status Recorder::submitAndWait() {
  assert(m_recording);
  m_recording = false;
  if (!m_error.ok()) {  // nothing more is recorded or submitted; begin() resets
    drainParts();
    return m_error;
  }
  // Make every write visible to the host (mapped readback of unified memory).
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(m_cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  if (VkResult r = vkEndCommandBuffer(m_cmd); r != VK_SUCCESS) {
    drainParts();
    return vkError(r, "vkEndCommandBuffer");
  }
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &m_cmd;
  if (VkResult r = vkQueueSubmit(m_ctx.queue(), 1, &si, m_fence); r != VK_SUCCESS) {
    drainParts();
    return vkError(r, "vkQueueSubmit");
  }
  VkResult r = vkWaitForFences(m_ctx.device(), 1, &m_fence, VK_TRUE, UINT64_MAX);
  vkResetFences(m_ctx.device(), 1, &m_fence);
  if (r == VK_SUCCESS) m_partsPending = false;  // the last part ran after the others
  KVS_VK(r, "vkWaitForFences");
  if (m_timedStep) collectTimes();
  return okStatus();
}

Status Recorder::step(const std::function<Status()>& record) {
  KVS_TRY(begin());
  if (Status s = record(); !s.ok()) {
    m_recording = false;
    drainParts();
    return s;
  }
  return submitAndWait();
}

void Recorder::collectTimes() {
  m_times.clear();
  m_lastGpuMs = 0.0;
  if (m_dispatches == 0) return;
  std::vector<uint64_t> stamps(m_dispatches + 1);
  if (vkGetQueryPoolResults(m_ctx.device(), m_queryPool, 0, m_dispatches + 1,
                            stamps.size() * sizeof(uint64_t), stamps.data(), sizeof(uint64_t),
                            VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS) {
    return;
  }
  const uint32_t bits = m_ctx.timestampValidBits();
  const uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
  const double nsPerTick = m_ctx.timestampPeriodNs();
  for (uint32_t i = 0; i < m_dispatches; ++i) {
    const uint64_t delta = ((stamps[i + 1] & mask) - (stamps[i] & mask)) & mask;
    const double ms = static_cast<double>(delta) * nsPerTick * 1e-6;
    const std::string& cls = m_timedPipelines[i]->kernelClass();
    auto it = std::find_if(m_times.begin(), m_times.end(),
                           [&](const KernelTime& t) { return t.kernelClass == cls; });
    if (it == m_times.end()) it = m_times.insert(m_times.end(), KernelTime{cls, 0, 0.0});
    it->dispatches += 1;
    it->gpuMs += ms;
    it->bytes += m_timedTraffic[i].first;
    it->flops += m_timedTraffic[i].second;
    m_lastGpuMs += ms;
  }
}

}  // namespace kvscope::gpu
