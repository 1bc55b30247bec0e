#include "gpu/kernels.h"

#include <algorithm>
#include <bit>
#include <thread>

#include "gpu/loop_limit.h"
#include "shaders/activation.h"
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
    {"activation", "activation", 2, sizeof(push::ActivationPush), kElementWg},
    {"moe_route", "moe", 3, sizeof(push::MoePush), kRouteWg},
    {"moe_group", "moe", 2, sizeof(push::MoePush), kRouteWg},
    {"moe_sum", "moe", 6, sizeof(push::MoePush), kElementWg},
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

uint32_t Kernels::rowGroups(uint32_t rows, uint32_t n, uint32_t passes) const {
  const uint32_t cap = m_cpuThreads ? m_cpuThreads * kGroupsPerCpuThread
                                    : m_ctx.limits().maxComputeWorkGroupCount[0];
  // A row costs an invocation `passes` strided walks over its n values and
  // the reductions' halving loops (a loop limit is a CPU device's, where the
  // workgroup is kReduceWg).
  const uint64_t perRow = uint64_t{passes} * ((n + kReduceWg - 1) / kReduceWg) + 16;
  return groupsWithinLoopLimit(rows, perRow, std::max(1u, std::min(rows, cap)),
                               m_ctx.info().loopIterationLimit,
                               m_ctx.limits().maxComputeWorkGroupCount[0]);
}

uint32_t Kernels::elementGroups(uint32_t n, uint32_t wg, uint32_t perElement) const {
  const uint32_t needed = (n + wg - 1) / wg;
  const uint32_t cap = m_cpuThreads ? m_cpuThreads * kGroupsPerCpuThread
                                    : m_ctx.limits().maxComputeWorkGroupCount[0];
  // An invocation takes an element per round.
  return groupsWithinLoopLimit(needed, perElement + 1, std::max(1u, std::min(needed, cap)),
                               m_ctx.info().loopIterationLimit,
                               m_ctx.limits().maxComputeWorkGroupCount[0]);
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

Status Kernels::rmsnorm(Recorder& rec, const Buffer& x, const Buffer* weight, const Buffer& y,
                        uint32_t n, uint32_t rows, float eps, bool accumulate) {
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, get(kRmsnorm));
  // Without a weight, x stands in for the binding the shader does not read.
  rec.dispatch(*p, {x, weight ? *weight : x, y},
               push::RowsPush{n, rows, eps, accumulate ? 1u : 0u, weight ? 0u : 1u},
               rowGroups(rows, n, 2));
  rec.traffic((uint64_t{n} * rows * (accumulate ? 3 : 2) + (weight ? n : 0)) * sizeof(float));
  return okStatus();
}

Status Kernels::activation(Recorder& rec, const Buffer& x, const Buffer& other, uint32_t n,
                           uint32_t op, float param, uint32_t width, uint32_t upWidth,
                           uint32_t upFirst) {
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, get(kActivation));
  rec.dispatch(*p, {x, other}, push::ActivationPush{n, op, param, width, upWidth, upFirst},
               elementGroups(n, kElementWg));
  // x in and out, and the other operand's n values read (add: also written).
  rec.traffic(uint64_t{n} * (op == KVS_ACT_SCALE || op == KVS_ACT_SOFTCAP ? 2 : 3) * sizeof(float));
  return okStatus();
}

Status Kernels::scale(Recorder& rec, const Buffer& x, uint32_t n, float s) {
  return activation(rec, x, x, n, KVS_ACT_SCALE, s);
}

Status Kernels::add(Recorder& rec, const Buffer& x, const Buffer& out, uint32_t n) {
  return activation(rec, x, out, n, KVS_ACT_ADD, 0.0f);
}

Status Kernels::softCap(Recorder& rec, const Buffer& x, uint32_t n, float cap) {
  if (!(cap > 0.0f))
    return makeError(ErrorCode::kInvalidArgument, "a soft-cap of {} (it must be positive)", cap);
  return activation(rec, x, x, n, KVS_ACT_SOFTCAP, cap);
}

Status Kernels::gatedMul(Recorder& rec, Gate gate, const Buffer& x, const Buffer& up, uint32_t rows,
                         uint32_t width, uint32_t upWidth, uint32_t upFirst) {
  if (width == 0 || upFirst + width > upWidth) {
    return makeError(ErrorCode::kInvalidArgument,
                     "a gated product of {} values with columns [{}, {}) of {}", width, upFirst,
                     upFirst + width, upWidth);
  }
  const uint32_t op = gate == Gate::kSilu   ? KVS_ACT_SILU_GATE
                      : gate == Gate::kGelu ? KVS_ACT_GELU_GATE
                                            : KVS_ACT_SWIGLU_OAI_GATE;
  return activation(rec, x, up, rows * width, op, 0.0f, width, upWidth, upFirst);
}

Status Kernels::softmax(Recorder& rec, const Buffer& x, const Buffer& y, uint32_t n, uint32_t rows,
                        float scale) {
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, get(kSoftmax));
  rec.dispatch(*p, {x, y}, push::RowsPush{n, rows, scale, 0u}, rowGroups(rows, n, 3));
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
               push::MoePush{n, experts, used, 0u, softmaxFirst ? 1u : 0u, scale, 0u, 0u},
               (n + kRouteWg - 1) / kRouteWg);
  rec.traffic((uint64_t{n} * experts + 2 * uint64_t{n} * used) * sizeof(float));
  return okStatus();
}

Status Kernels::moeGroup(Recorder& rec, const BufferRange& ids, const BufferRange& groups,
                         uint32_t n, uint32_t experts, uint32_t used) {
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, get(kMoeGroup));
  rec.dispatch(*p, {ids, groups}, push::MoePush{n, experts, used, 0u, 0u, 1.0f, 0u, 0u},
               (experts + kRouteWg - 1) / kRouteWg);
  rec.traffic((uint64_t{experts} * n * used + uint64_t{n} * used + experts) * sizeof(uint32_t));
  return okStatus();
}

Status Kernels::moeSum(Recorder& rec, const BufferRange& products, const BufferRange& weights,
                       const BufferRange& out, const BufferRange* residual, uint32_t n,
                       uint32_t used, uint32_t width, ExpertScale expertScale) {
  if (expertScale.scale && !expertScale.ids)
    return makeError(ErrorCode::kInvalidArgument, "expert scales without the picks");
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, get(kMoeSum));
  // Bindings the push constants leave unread still need a buffer: `out` stands in.
  const push::MoePush push{
      n, 0u, used, width, 0u, 1.0f, residual ? 1u : 0u, expertScale.scale ? 1u : 0u};
  rec.dispatch(
      *p,
      {products, weights, out, residual ? *residual : out, expertScale.ids ? *expertScale.ids : out,
       expertScale.scale ? *expertScale.scale : out},
      push, elementGroups(n * width, kElementWg, used));
  rec.traffic((uint64_t{n} * used * (width + 1) + uint64_t{n} * width * (residual ? 3 : 1)) *
              sizeof(float));
  return okStatus();
}

}  // namespace kvscope::gpu
