#pragma once
// Records one step of GPU work (e.g. a whole forward pass) and submits it.
// Descriptor sets come from a pool that is reset at begin(); barriers are
// explicit (barrier() after a dispatch whose output the next one reads). With
// timing on, a timestamp follows every dispatch of every timingEvery-th step
// (timestamps serialise a step) and kernelTimes() reports that step's GPU
// time per kernel class.
//
// With submitEvery set, the step goes to the queue in parts: a barrier after
// that many dispatches ends the part's command buffer and submits it, so the
// device runs the first layers while the host records the rest (recording a
// 1B model's 210 dispatches took ~0.8 ms of a 3.7 ms step on an H200). Each
// later part starts with the barrier, which orders it after every earlier
// submission on the queue; submitAndWait() submits the last part and waits.
//
//   rec.begin();
//   rec.dispatch(rmsnorm, {x, w, y}, push, groups);
//   rec.barrier();
//   rec.dispatch(matvec, {w2, y, z}, push2, groups2);
//   KVS_TRY(rec.submitAndWait());

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpu/buffer.h"
#include "gpu/pipeline.h"

namespace kvscope::gpu {

// A binding: a whole buffer, or `bytes` from `offset` (offset must respect
// minStorageBufferOffsetAlignment).
struct BufferRange {
  BufferRange(const Buffer& b) : buffer(&b) {}  // NOLINT(google-explicit-constructor)
  BufferRange(const Buffer& b, size_t off, size_t len) : buffer(&b), offset(off), bytes(len) {}
  const Buffer* buffer;
  size_t offset = 0;
  size_t bytes = VK_WHOLE_SIZE;
};

struct KernelTime {
  std::string kernelClass;
  uint32_t dispatches = 0;
  double gpuMs = 0.0;
  // Roofline terms the dispatches declared (Recorder::traffic): bytes read
  // plus written and arithmetic operations; 0 where a dispatch declared none.
  uint64_t bytes = 0;
  uint64_t flops = 0;
};

struct RecorderOptions {
  uint32_t maxDispatches = 4096;      // per step
  uint32_t maxPageBindings = 16384;   // page-array descriptors per step
  bool timing = false;                // timestamps around every dispatch
  uint32_t timingEvery = 1;           // with timing: every Nth step is timed (the first is)
  // Dispatches per submitted part; 0: one part. A timed step is one part:
  // its timestamps would count an idle gap between parts to the next dispatch.
  uint32_t submitEvery = 0;
};

class Recorder {
 public:
  static Expected<std::unique_ptr<Recorder>> create(Context& ctx,
                                                    const RecorderOptions& options = {});
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  Status begin();
  void dispatch(const Pipeline& pipeline, std::initializer_list<BufferRange> buffers,
                const void* push, size_t pushBytes, uint32_t groupsX, uint32_t groupsY = 1,
                uint32_t groupsZ = 1) {
    dispatchPaged(pipeline, buffers, {}, push, pushBytes, groupsX, groupsY, groupsZ);
  }
  // With a page-array binding: `pages` fill its first slots and the rest
  // repeat pages[0] (every descriptor of an array must be valid).
  void dispatchPaged(const Pipeline& pipeline, std::initializer_list<BufferRange> buffers,
                     std::span<const Buffer* const> pages, const void* push, size_t pushBytes,
                     uint32_t groupsX, uint32_t groupsY = 1, uint32_t groupsZ = 1);
  template <typename Push>
  void dispatchPaged(const Pipeline& pipeline, std::initializer_list<BufferRange> buffers,
                     std::span<const Buffer* const> pages, const Push& push, uint32_t groupsX,
                     uint32_t groupsY = 1, uint32_t groupsZ = 1) {
    dispatchPaged(pipeline, buffers, pages, &push, sizeof(Push), groupsX, groupsY, groupsZ);
  }
  template <typename Push>
  void dispatch(const Pipeline& pipeline, std::initializer_list<BufferRange> buffers,
                const Push& push, uint32_t groupsX, uint32_t groupsY = 1, uint32_t groupsZ = 1) {
    dispatch(pipeline, buffers, &push, sizeof(Push), groupsX, groupsY, groupsZ);
  }
  // The memory traffic (bytes read + written, estimated from the shapes the
  // caller knows) and arithmetic operations of the dispatch recorded last,
  // for the roofline figures of kernelTimes(). Recorded with timing only.
  void traffic(uint64_t bytes, uint64_t flops = 0);
  // Makes all prior shader writes visible to later shader reads and writes.
  void barrier();
  // Records a buffer-to-buffer copy (with a barrier before and after).
  void copy(const Buffer& src, size_t srcOffset, const Buffer& dst, size_t dstOffset, size_t bytes);

  // Ends, submits, waits. Returns the first recording error, if any (then
  // after waiting for the parts already submitted).
  Status submitAndWait();
  // begin(), `record` (which records the step's dispatches), submitAndWait();
  // when `record` fails, waits for the parts already submitted before it
  // returns the error, so the caller may free what they use.
  Status step(const std::function<Status()>& record);

  uint32_t dispatchCount() const { return m_dispatches; }
  // Command buffers the last step was submitted in.
  uint32_t partCount() const { return m_part + 1; }
  bool timingEnabled() const { return m_queryPool != VK_NULL_HANDLE; }
  // Per kernel class, in first-seen order, for the last timed step.
  const std::vector<KernelTime>& kernelTimes() const { return m_times; }
  double lastGpuMs() const { return m_lastGpuMs; }

 private:
  explicit Recorder(Context& ctx) : m_ctx(ctx) {}
  void collectTimes();
  Status beginPart();
  void recordBarrier();
  // Ends the current part and submits it without waiting.
  Status submitPart();
  // Waits for the parts of an abandoned step that are on the queue.
  void drainParts();

  Context& m_ctx;
  RecorderOptions m_options;
  std::vector<VkCommandBuffer> m_parts;    // command buffers of a step's parts, reused
  uint32_t m_part = 0;                     // the part being recorded
  uint32_t m_partDispatches = 0;           // dispatches recorded in it
  bool m_partsPending = false;             // parts submitted and not yet waited for
  VkCommandBuffer m_cmd = VK_NULL_HANDLE;  // m_parts[m_part]
  VkDescriptorPool m_pool = VK_NULL_HANDLE;
  VkQueryPool m_queryPool = VK_NULL_HANDLE;
  VkFence m_fence = VK_NULL_HANDLE;
  bool m_recording = false;
  bool m_timedStep = false;  // the step being recorded writes timestamps
  uint64_t m_steps = 0;      // steps begun
  uint32_t m_dispatches = 0;
  std::vector<const Pipeline*> m_timedPipelines;  // dispatch i -> pipeline, for timing
  std::vector<std::pair<uint64_t, uint64_t>> m_timedTraffic;  // dispatch i -> (bytes, flops)
  std::vector<KernelTime> m_times;
  double m_lastGpuMs = 0.0;
  Status m_error;
};

}  // namespace kvscope::gpu
