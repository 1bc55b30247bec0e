#pragma once
// The weight kernels of the forward pass, for weights kept on the device in
// their GGUF type: matvec (decode, one token) and matmul (prefill, n tokens).
//
//   matvec: y[rows]    = W[rows, cols] x[cols]
//   matmul: Y[n, rows] = X[n, cols] W[rows, cols]^T   (X, Y row-major float32)
//
//   expertMatvec, expertMatmul: y[p, rows] = W[ids[p]] x[p / share]
//                               (a stack of experts, pairs p of tokens x slots)
//
// Types: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q4_K,
// Q5_K, Q6_K, IQ4_XS (supportsType()); others are refused with kUnsupported.
// cols must be a whole number of blocks (32 for the 32-value types, 256 for
// the k-quants and IQ4_XS); float types take any cols (rows that are not
// whole 32-byte units take a slower element-wise path).
//
// Device layout of W, written once by repack():
//  - F32, F16, BF16: the raw GGUF rows (repack() copies them).
//  - quantized types: the same bits regrouped per row. Each row holds one
//    plane per block field, the field of every block of the row in block
//    order, each plane padded to 32 bytes:
//        Q8_0: qs[32] | d          Q4_K: qs[128] | d dmin scales[12]
//        Q4_0: qs[16] | d          Q5_K: qs[128] | qh[32] | d dmin scales[12]
//        Q6_K: ql[128] | qh[64] | scales[16] | d
//    so every shader load is aligned and as wide as the device allows.
//    rowBytes() is the row stride (for quantized types a multiple of 32), so
//    rows [r0, r1) of a tensor are the bytes [r0, r1) * rowBytes().
//    Measured on lavapipe (matvec, G MAC/s per core): Q8_0 raw blocks read as
//    words 2.4; planes with 16-byte loads 3.0; planes with 64-bit vector loads
//    of W and x 4.6. Q4_K (already 16-byte aligned raw): planes 4.0 vs raw 3.9,
//    matmul 7.1 vs 6.7; kept for one code path.
//
// Buffers are BufferRanges: several tensors may share a buffer. Every offset
// must be a multiple of minStorageBufferOffsetAlignment (kInvalidArgument
// otherwise); a binding covers exactly the bytes the kernel reads, so ranges
// may be VK_WHOLE_SIZE in buffers larger than maxStorageBufferRange. F16/BF16
// weights with an odd number of elements need 2 bytes of padding after them.
//
// Each call records one dispatch and no barrier. Pipelines are created on
// first use. Launch shapes: on CPU devices with 64-bit integers (lavapipe) an
// invocation owns several whole rows (and tokens), with no shared memory or
// barriers; on GPUs a workgroup splits each row and reduces with subgroup
// arithmetic when the device has it, else through shared memory.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "gguf/tensor_type.h"
#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace kvscope::gpu {

enum class WeightShape {
  kAuto,         // kCpu on CPU devices with shaderInt64, else the best GPU shape
  kCpu,          // whole rows per invocation, 64-bit loads (needs shaderInt64)
  kGpuSubgroup,  // rows split across a workgroup, subgroup reduction
  kGpuShared,    // rows split across a workgroup, shared-memory reduction
};
const char* weightShapeName(WeightShape shape);

// What a product folds into its store, in place of a separate kernel and
// its barrier, with that kernel's arithmetic (KVS_WEIGHT_* in
// shaders/weights.h); applied in this order.
struct Epilogue {
  const BufferRange* bias = nullptr;  // y = Wx + bias[row] (rows floats)
  bool accumulate = false;            // y = y + Wx (a residual add)
  bool siluGate = false;              // y = silu(y) * Wx (y holds the gate)
  bool geluGate = false;              // y = gelu(y) * Wx, GELU's tanh form
  bool swigluOaiGate = false;         // y = gpt-oss's clamped SwiGLU of (y, Wx)
};

// Which expert each expert product multiplies (shaders/weights.h): pair p =
// token * slots + slot reads expert ids[p] of a stack of `experts` and input
// row p / share (share = slots with sharedInput, else 1), and writes output
// row p. expertMatvec reads `ids`, expertMatmul `groups`.
struct ExpertRouting {
  const BufferRange* ids = nullptr;     // [tokens * slots] uint32, each below `experts`
  const BufferRange* groups = nullptr;  // Kernels::moeGroup's counts and pair lists
  uint32_t tokens = 0;
  uint32_t slots = 0;
  uint32_t experts = 0;
  bool sharedInput = false;  // one input row per token (gate, up), or per pair (down)
  uint32_t pairs() const { return tokens * slots; }
  uint32_t share() const { return sharedInput ? slots : 1; }
};

// The GPU shapes' matvec launch: invocations per workgroup (a power of two)
// and the rows each workgroup computes; bench-kernels sweeps them. A product
// runs it within the device's limits (the workgroup rounded down to a power
// of two they allow, at least one row).
struct MatvecLaunch {
  uint32_t workgroup = 64;
  uint32_t rows = 4;
};

// The launch for rows of `cols` values: 4 rows per workgroup, one invocation
// per 64 columns (32-256). Measured on an NVIDIA H200 against the former
// fixed 64 invocations x 2 rows (bench-kernels --matvec-wg --matvec-rows,
// docs/RESULTS.md "Real GPUs"): on Llama-3.2-1B's shapes Q8_0 is faster on
// every one (the 128256x2048 output 1.6x, 8192x2048 1.5x), Q4_K on the
// large ones (output 1.5x) and up to 7% slower on 2048x2048 and 2048x8192.
MatvecLaunch matvecLaunchFor(uint32_t cols);

class WeightKernels {
 public:
  // `launch` fixes the GPU matvec launch; by default each product takes
  // matvecLaunchFor(cols).
  explicit WeightKernels(Context& ctx, WeightShape shape = WeightShape::kAuto,
                         std::optional<MatvecLaunch> launch = std::nullopt);

  static bool supportsType(gguf::TensorType type);
  // Device bytes of one row of `cols` values; nullopt when the type is not
  // supported or cols is not a whole number of blocks.
  static std::optional<uint64_t> rowBytes(gguf::TensorType type, uint32_t cols);
  // The device copy of `raw` (whole GGUF rows of `cols` values of `type`).
  static Expected<std::vector<uint8_t>> repack(gguf::TensorType type, uint32_t cols,
                                               std::span<const uint8_t> raw);

  // The launch shape this instance uses (kAuto resolved).
  WeightShape shape() const { return m_shape; }
  // The GPU matvec launch that runs rows of `cols` values: the fixed or the
  // per-shape one, within the device's limits.
  MatvecLaunch matvecLaunch(uint32_t cols) const;

  Status matvec(Recorder& rec, gguf::TensorType type, const BufferRange& w, const BufferRange& x,
                const BufferRange& y, uint32_t rows, uint32_t cols, const Epilogue& epilogue = {});
  // n == 1 records matvec.
  Status matmul(Recorder& rec, gguf::TensorType type, const BufferRange& w, const BufferRange& x,
                const BufferRange& y, uint32_t n, uint32_t rows, uint32_t cols,
                const Epilogue& epilogue = {});
  // `w`: the repacked stack (rows * experts rows, as a 3-D expert tensor
  // uploads); a bias is the stack's {rows, experts} one. expertMatvec: one
  // workgroup row per pair, reading only its expert's rows (a decode step's
  // cost is the chosen experts'). expertMatmul: one workgroup row per expert,
  // over the pairs that chose it, each expert's weights read once per tile of
  // its tokens (a prefill); needs `groups` written by Kernels::moeGroup.
  Status expertMatvec(Recorder& rec, gguf::TensorType type, const BufferRange& w,
                      const BufferRange& x, const BufferRange& y, uint32_t rows, uint32_t cols,
                      const ExpertRouting& routing, const Epilogue& epilogue = {});
  Status expertMatmul(Recorder& rec, gguf::TensorType type, const BufferRange& w,
                      const BufferRange& x, const BufferRange& y, uint32_t rows, uint32_t cols,
                      const ExpertRouting& routing, const Epilogue& epilogue = {});

 private:
  enum Kernel { kMatvec, kMatmul, kExpertMatvec, kExpertMatmul };

  Expected<const Pipeline*> pipeline(size_t typeIndex, Kernel kernel, uint32_t epilogue,
                                     const MatvecLaunch& launch);
  Status record(Recorder& rec, gguf::TensorType type, Kernel kernel, const BufferRange& w,
                const BufferRange& x, const BufferRange& y, uint32_t n, uint32_t rows,
                uint32_t cols, const Epilogue& epilogue, const ExpertRouting* routing = nullptr);
  Expected<BufferRange> bind(const BufferRange& range, uint64_t bytes, const char* what) const;
  uint32_t groups(uint64_t tasks, uint32_t perGroup) const;

  Context& m_ctx;
  WeightShape m_shape;
  std::optional<MatvecLaunch> m_launch;
  uint32_t m_cpuThreads = 0;  // >0 for the kCpu shape: the device's worker threads
  // By type, kernel, epilogue (KVS_WEIGHT_* flags) and, for the GPU matvec,
  // the launch's workgroup and rows (0, 0 elsewhere).
  std::map<std::tuple<size_t, Kernel, uint32_t, uint32_t, uint32_t>, Pipeline> m_pipelines;
};

}  // namespace kvscope::gpu
