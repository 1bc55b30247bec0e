#include "gpu/kernels.h"

#include <algorithm>
#include <bit>
#include <thread>

#include "shaders/elementwise.h"
#include "shaders/moe.h"
#include "shaders/rope.h"
#include "shaders/rows.h"

namespace kvscope::gpu {
namespace {

// Workgroups of the row reductions, powers of two (reduce.glsl): a CPU device
// runs a workgroup as one thread's SIMD loop; a GPU waits on each load of a
// strided loop in turn, so it takes a row in few, wide steps.
constexpr uint32_t kReduceWg = 64;
constexpr uint32_t kGpuReduceWg = 512;
constexpr uint32_t kElementWg = 256;
constexpr uint32_t kRouteWg = 32;            // tokens per workgroup of moe_route
constexpr uint32_t kGroupsPerCpuThread = 3;  // few large groups: see header

struct KernelDesc {
  const char* shader;
  const char* kernelClass;
  uint32_t bindings;
  uint32_t pushBytes;
  uint32_t workgroup;  // a row reduction's (kReduceWg) widens on GPUs
};

constexpr KernelDesc kDescs[] = {
    {"convert_f32_to_f16", "convert", 2, sizeof(push::ElementwisePush), kElementWg},
    {"convert_f16_to_f32", "convert", 2, sizeof(push::ElementwisePush), kElementWg},
    {"rmsnorm", "norm", 3, sizeof(push::RowsPush), kReduceWg},
    {"softmax", "softmax", 2, sizeof(push::RowsPush), kReduceWg},
    {"rope", "rope", 2, sizeof(push::RopePush), kElementWg},
    {"moe_route", "moe", 3, sizeof(push::MoePush), kRouteWg},
    {"moe_group", "moe", 2, sizeof(push::MoePush), kRouteWg},
    {"moe_sum", "moe", 4, sizeof(push::MoePush), kElementWg},
};

}  // namespace

Kernels::Kernels(Context& ctx) : m_ctx(ctx) {
  if (ctx.info().type == DeviceType::kCpu)
    m_cpuThreads = std::max(1u, std::thread::hardware_concurrency());
}

Expected<uint32_t> Kernels::prepareAll() {
  for (int id = 0; id < kCount; ++id) KVS_TRY(get(static_cast<Id>(id)));
  return static_cast<uint32_t>(kCount);
}

Expected<const Pipeline*> Kernels::get(Id id) {
  if (!m_pipelines[id]) {
    const KernelDesc& d = kDescs[id];
    const auto& limits = m_ctx.limits();
    const uint32_t gpuReduceWg =
        std::min(kGpuReduceWg, std::bit_floor(std::min(limits.maxComputeWorkGroupInvocations,
                                                       limits.maxComputeWorkGroupSize[0])));
    const uint32_t workgroup =
        d.workgroup == kReduceWg && !m_cpuThreads ? gpuReduceWg : d.workgroup;
    KVS_ASSIGN_OR_RETURN(
        Pipeline p,
        Pipeline::create(m_ctx, {d.shader, d.bindings, d.pushBytes, {workgroup}, d.kernelClass}));
    m_pipelines[id] = std::move(p);
  }
  return &*m_pipelines[id];
}

uint32_t Kernels::rowGroups(uint32_t rows) const {
  const uint32_t cap = m_cpuThreads ? m_cpuThreads * kGroupsPerCpuThread
                                    : m_ctx.limits().maxComputeWorkGroupCount[0];
  return std::max(1u, std::min(rows, cap));
}

uint32_t Kernels::elementGroups(uint32_t n, uint32_t wg) const {
  const uint32_t needed = (n + wg - 1) / wg;
  const uint32_t cap = m_cpuThreads ? m_cpuThreads * kGroupsPerCpuThread
                                    : m_ctx.limits().maxComputeWorkGroupCount[0];
  return std::max(1u, std::min(needed, cap));
}

Status Kernels::convertF32ToF16(Recorder& rec, const Buffer& in, const Buffer& out, uint32_t n) {
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, get(kToF16));
  rec.dispatch(*p, {in, out}, push::ElementwisePush{n}, elementGroups((n + 1) / 2, kElementWg));
  rec.traffic(uint64_t{n} * 6);
  return okStatus();
}

Status Kernels::convertF16ToF32(Recorder& rec, const Buffer& in, const Buffer& out, uint32_t n) {
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, get(kToF32));
  rec.dispatch(*p, {in, out}, push::ElementwisePush{n}, elementGroups(n, kElementWg));
  rec.traffic(uint64_t{n} * 6);
  return okStatus();
}

Status Kernels::rmsnorm(Recorder& rec, const Buffer& x, const Buffer& weight, const Buffer& y,
                        uint32_t n, uint32_t rows, float eps, bool accumulate) {
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, get(kRmsnorm));
  rec.dispatch(*p, {x, weight, y}, push::RowsPush{n, rows, eps, accumulate ? 1u : 0u},
               rowGroups(rows));
  rec.traffic((uint64_t{n} * rows * (accumulate ? 3 : 2) + n) * sizeof(float));
  return okStatus();
}

Status Kernels::softmax(Recorder& rec, const Buffer& x, const Buffer& y, uint32_t n, uint32_t rows,
                        float scale) {
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, get(kSoftmax));
  rec.dispatch(*p, {x, y}, push::RowsPush{n, rows, scale, 0u}, rowGroups(rows));
  rec.traffic(uint64_t{n} * rows * 2 * sizeof(float));
  return okStatus();
}

Status Kernels::rope(Recorder& rec, const Buffer& x, const Buffer& table, uint32_t n,
                     uint32_t heads, uint32_t headDim, uint32_t dims, bool neox, float tailScale) {
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, get(kRope));
  rec.dispatch(*p, {x, table}, push::RopePush{n, heads, headDim, dims, neox ? 1u : 0u, tailScale},
               elementGroups(n * heads * (dims / 2), kElementWg));
  // The rotated values in and out, and the angle table.
  rec.traffic((uint64_t{n} * heads * dims * 2 + uint64_t{n} * dims) * sizeof(float));
  return okStatus();
}

Status Kernels::moeRoute(Recorder& rec, const BufferRange& scores, const BufferRange& ids,
                         const BufferRange& weights, uint32_t n, uint32_t experts, uint32_t used,
                         bool softmaxFirst, float scale) {
  if (used == 0 || used > kMaxExpertsUsed || used > experts) {
    return makeError(ErrorCode::kInvalidArgument, "{} of {} experts per token (at most {})", used,
                     experts, kMaxExpertsUsed);
  }
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, get(kMoeRoute));
  rec.dispatch(*p, {scores, ids, weights},
               push::MoePush{n, experts, used, 0u, softmaxFirst ? 1u : 0u, scale},
               (n + kRouteWg - 1) / kRouteWg);
  rec.traffic((uint64_t{n} * experts + 2 * uint64_t{n} * used) * sizeof(float));
  return okStatus();
}

Status Kernels::moeGroup(Recorder& rec, const BufferRange& ids, const BufferRange& groups,
                         uint32_t n, uint32_t experts, uint32_t used) {
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, get(kMoeGroup));
  rec.dispatch(*p, {ids, groups}, push::MoePush{n, experts, used, 0u, 0u, 1.0f},
               (experts + kRouteWg - 1) / kRouteWg);
  rec.traffic((uint64_t{experts} * n * used + uint64_t{n} * used + experts) * sizeof(uint32_t));
  return okStatus();
}

Status Kernels::moeSum(Recorder& rec, const BufferRange& products, const BufferRange& weights,
                       const BufferRange& out, const BufferRange& residual, uint32_t n,
                       uint32_t used, uint32_t width) {
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, get(kMoeSum));
  rec.dispatch(*p, {products, weights, out, residual}, push::MoePush{n, 0u, used, width, 0u, 1.0f},
               elementGroups(n * width, kElementWg));
  rec.traffic((uint64_t{n} * used * (width + 1) + uint64_t{n} * width * 3) * sizeof(float));
  return okStatus();
}

}  // namespace kvscope::gpu
