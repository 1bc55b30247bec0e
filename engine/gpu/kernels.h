#pragma once
// Typed entry points for the primitive kernels: each records one dispatch
// (no barrier; callers add barrier() where a later dispatch reads the output).
// Pipelines are created on first use, so a program pays only for the kernels
// it runs; the pipeline cache makes later starts cheap.
//
// Launch shape: on CPU devices (lavapipe) a dispatch costs ~15 us plus ~3 us
// per workgroup, so row kernels launch a few large workgroups per core that
// loop over rows; on GPUs they launch one workgroup per row.

#include <array>
#include <cstdint>
#include <optional>

#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace kvscope::gpu {

// Gemma 4's per-expert output scales for Kernels::moeSum: [experts] floats,
// and the picks that say whose scale multiplies each product.
struct ExpertScale {
  const BufferRange* scale = nullptr;
  const BufferRange* ids = nullptr;
};

class Kernels {
 public:
  explicit Kernels(Context& ctx);

  // Creates every pipeline now (instead of on first use); returns how many.
  Expected<uint32_t> prepareAll();

  Status convertF32ToF16(Recorder& rec, const Buffer& in, const Buffer& out, uint32_t n);
  Status convertF16ToF32(Recorder& rec, const Buffer& in, const Buffer& out, uint32_t n);
  // y = rmsnorm(x) * weight per row of n values (a null weight: none); with
  // `accumulate`, y += that.
  Status rmsnorm(Recorder& rec, const Buffer& x, const Buffer* weight, const Buffer& y, uint32_t n,
                 uint32_t rows, float eps, bool accumulate = false);
  // Element-wise ops over the first n values of x (shaders/activation.h):
  // x *= s; out += x; x = cap * tanh(x / cap).
  Status scale(Recorder& rec, const Buffer& x, uint32_t n, float s);
  Status add(Recorder& rec, const Buffer& x, const Buffer& out, uint32_t n);
  Status softCap(Recorder& rec, const Buffer& x, uint32_t n, float cap);
  // The gated product of rows: x[t, i] = gate(x[t, i], up[t, upFirst + i])
  // for `rows` rows of `width` values of x and `upWidth` of up.
  enum class Gate { kSilu, kGelu, kSwigluOai };
  Status gatedMul(Recorder& rec, Gate gate, const Buffer& x, const Buffer& up, uint32_t rows,
                  uint32_t width, uint32_t upWidth, uint32_t upFirst);
  Status softmax(Recorder& rec, const Buffer& x, const Buffer& y, uint32_t n, uint32_t rows,
                 float scale);
  // RoPE in place on n tokens x heads rows of headDim floats; `table` holds
  // (cos, sin) pairs [n][dims/2] (cpu::ropeTable), so angles match the CPU;
  // the values past `dims` are multiplied by tailScale.
  Status rope(Recorder& rec, const Buffer& x, const Buffer& table, uint32_t n, uint32_t heads,
              uint32_t headDim, uint32_t dims, bool neox, float tailScale = 1.0f);

  // Mixture-of-experts routing: `scores` [n, experts] (the router's output)
  // -> each token's `used` experts in pick order, `ids` [n, used] (uint32),
  // and their weights [n, used] (shaders/moe_route.comp). At most
  // kMaxExpertsUsed per token (kInvalidArgument beyond).
  Status moeRoute(Recorder& rec, const BufferRange& scores, const BufferRange& ids,
                  const BufferRange& weights, uint32_t n, uint32_t experts, uint32_t used,
                  bool softmaxFirst, float scale);
  // The pairs of `ids` [n, used] grouped by expert, for
  // WeightKernels::expertMatmul: `groups` holds [experts] counts, then
  // [experts][n] pair lists in increasing order (shaders/moe_group.comp).
  Status moeGroup(Recorder& rec, const BufferRange& ids, const BufferRange& groups, uint32_t n,
                  uint32_t experts, uint32_t used);
  // out[t] = sum over slots k of weights[t, k] * products[t, k] (products
  // [n, used, width]); with `expertScale` ([experts] floats, and then `ids`),
  // each product times its expert's scale first; with `residual`,
  // residual[t] += out[t].
  Status moeSum(Recorder& rec, const BufferRange& products, const BufferRange& weights,
                const BufferRange& out, const BufferRange* residual, uint32_t n, uint32_t used,
                uint32_t width, ExpertScale expertScale = {});

  static constexpr uint32_t kMaxExpertsUsed = 64;  // moe_route.comp's kMaxUsed

  // Workgroups for a kernel that loops over `rows` independent rows of n
  // values, making `passes` passes over each (rmsnorm 2, softmax 3).
  uint32_t rowGroups(uint32_t rows, uint32_t n, uint32_t passes) const;
  // Workgroups for an element-wise kernel over n values with `wg` invocations
  // each, an element costing `perElement` loop iterations of its own.
  uint32_t elementGroups(uint32_t n, uint32_t wg, uint32_t perElement = 0) const;

 private:
  enum Id {
    kToF16,
    kToF32,
    kRmsnorm,
    kSoftmax,
    kRope,
    kActivation,
    kMoeRoute,
    kMoeGroup,
    kMoeSum,
    kCount
  };
  Status activation(Recorder& rec, const Buffer& x, const Buffer& other, uint32_t n, uint32_t op,
                    float param, uint32_t width = 1, uint32_t upWidth = 0, uint32_t upFirst = 0);
  Expected<const Pipeline*> get(Id id);

  Context& m_ctx;
  uint32_t m_cpuThreads = 0;  // >0 on CPU devices: the device's worker threads
  std::array<std::optional<Pipeline>, kCount> m_pipelines;
};

}  // namespace kvscope::gpu
